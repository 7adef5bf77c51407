\set id random(1, 20000)
BEGIN;
UPDATE s13.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s13.items (id, qty, note) VALUES (nextval('s13.ids'), 1, 'new');
DELETE FROM s13.items WHERE id = (SELECT min(id) FROM s13.items WHERE id > :id);
END;
