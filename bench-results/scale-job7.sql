\set id random(1, 20000)
BEGIN;
UPDATE s7.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s7.items (id, qty, note) VALUES (nextval('s7.ids'), 1, 'new');
DELETE FROM s7.items WHERE id = (SELECT min(id) FROM s7.items WHERE id > :id);
END;
