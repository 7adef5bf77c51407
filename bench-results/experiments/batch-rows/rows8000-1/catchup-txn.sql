\set lo (:client_id * 50000) + 1
\set u random(:lo, :lo + 50000 - 10 - 1)
BEGIN;
INSERT INTO bench_b SELECT nextval('bench_ids'), 'customer-new', g, g * 1.5, now(), repeat('n', 64) FROM generate_series(1, 100) g;
UPDATE bench_a SET qty = qty + 1, created = now() WHERE id BETWEEN :u AND :u + 10 - 1;
DELETE FROM bench_b WHERE id IN (SELECT id FROM bench_b WHERE id >= :lo AND id < :lo + 50000 ORDER BY id LIMIT 5);
END;
