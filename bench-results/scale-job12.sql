\set id random(1, 20000)
BEGIN;
UPDATE s12.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s12.items (id, qty, note) VALUES (nextval('s12.ids'), 1, 'new');
DELETE FROM s12.items WHERE id = (SELECT min(id) FROM s12.items WHERE id > :id);
END;
