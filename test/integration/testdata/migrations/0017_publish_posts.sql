-- A data migration (Django RunPython's UPDATE).
UPDATE posts SET state = 'PUBLISHED', updated_at = '2024-07-01 00:00:00' WHERE id % 3 = 0;
