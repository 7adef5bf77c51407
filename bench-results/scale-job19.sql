\set id random(1, 20000)
BEGIN;
UPDATE s19.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s19.items (id, qty, note) VALUES (nextval('s19.ids'), 1, 'new');
DELETE FROM s19.items WHERE id = (SELECT min(id) FROM s19.items WHERE id > :id);
END;
