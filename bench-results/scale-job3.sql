\set id random(1, 20000)
BEGIN;
UPDATE s3.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s3.items (id, qty, note) VALUES (nextval('s3.ids'), 1, 'new');
DELETE FROM s3.items WHERE id = (SELECT min(id) FROM s3.items WHERE id > :id);
END;
