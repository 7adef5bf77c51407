\set id random(1, 20000)
BEGIN;
UPDATE s11.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s11.items (id, qty, note) VALUES (nextval('s11.ids'), 1, 'new');
DELETE FROM s11.items WHERE id = (SELECT min(id) FROM s11.items WHERE id > :id);
END;
