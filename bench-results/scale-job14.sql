\set id random(1, 20000)
BEGIN;
UPDATE s14.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s14.items (id, qty, note) VALUES (nextval('s14.ids'), 1, 'new');
DELETE FROM s14.items WHERE id = (SELECT min(id) FROM s14.items WHERE id > :id);
END;
