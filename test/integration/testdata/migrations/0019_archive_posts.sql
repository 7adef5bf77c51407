-- The next deployment uses the new value at once.
UPDATE posts SET state = 'ARCHIVED' WHERE id % 5 = 0;
INSERT INTO posts (user_id, title, content, created_at, updated_at, state) VALUES (1, 'Archived at birth', 'x', '2024-08-01', '2024-08-01', 'ARCHIVED');
