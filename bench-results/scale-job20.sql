\set id random(1, 20000)
BEGIN;
UPDATE s20.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s20.items (id, qty, note) VALUES (nextval('s20.ids'), 1, 'new');
DELETE FROM s20.items WHERE id = (SELECT min(id) FROM s20.items WHERE id > :id);
END;
