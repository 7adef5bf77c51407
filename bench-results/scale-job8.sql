\set id random(1, 20000)
BEGIN;
UPDATE s8.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s8.items (id, qty, note) VALUES (nextval('s8.ids'), 1, 'new');
DELETE FROM s8.items WHERE id = (SELECT min(id) FROM s8.items WHERE id > :id);
END;
