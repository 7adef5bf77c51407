\set a random(1, 100000)
\set b random(1, 100000)
\set d random(1, 50)
BEGIN;
UPDATE accounts SET balance = balance - :d WHERE id = :a;
UPDATE accounts SET balance = balance + :d WHERE id = :b;
INSERT INTO ledger (acct, delta) VALUES (:a, -:d), (:b, :d);
INSERT INTO events VALUES ('transfer', :d, 'same'), ('transfer', :d, 'same');
END;
