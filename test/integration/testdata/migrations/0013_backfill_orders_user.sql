-- pgsync-test: each statement on its own
-- Rails: a backfill job, batches of 500 of the rows not done yet.
UPDATE orders SET user_id = account % 60 + 1 WHERE id IN (SELECT id FROM orders WHERE user_id IS NULL ORDER BY id LIMIT 500);
UPDATE orders SET user_id = account % 60 + 1 WHERE id IN (SELECT id FROM orders WHERE user_id IS NULL ORDER BY id LIMIT 500);
UPDATE orders SET user_id = account % 60 + 1 WHERE id IN (SELECT id FROM orders WHERE user_id IS NULL ORDER BY id LIMIT 500);
