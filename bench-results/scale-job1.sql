\set id random(1, 20000)
BEGIN;
UPDATE s1.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s1.items (id, qty, note) VALUES (nextval('s1.ids'), 1, 'new');
DELETE FROM s1.items WHERE id = (SELECT min(id) FROM s1.items WHERE id > :id);
END;
