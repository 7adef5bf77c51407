\set id random(1, 20000)
BEGIN;
UPDATE s2.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s2.items (id, qty, note) VALUES (nextval('s2.ids'), 1, 'new');
DELETE FROM s2.items WHERE id = (SELECT min(id) FROM s2.items WHERE id > :id);
END;
