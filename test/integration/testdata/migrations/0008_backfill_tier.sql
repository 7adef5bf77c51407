-- pgsync-test: each statement on its own
-- Rails: in_batches.update_all, each batch its own transaction.
UPDATE accounts SET tier = id % 3 WHERE id BETWEEN 1 AND 25;
UPDATE accounts SET tier = id % 3 WHERE id BETWEEN 26 AND 50;
UPDATE accounts SET tier = id % 3 WHERE id BETWEEN 51 AND 75;
UPDATE accounts SET tier = id % 3 WHERE id BETWEEN 76 AND 100;
