\set id random(1, 20000)
BEGIN;
UPDATE s16.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s16.items (id, qty, note) VALUES (nextval('s16.ids'), 1, 'new');
DELETE FROM s16.items WHERE id = (SELECT min(id) FROM s16.items WHERE id > :id);
END;
