\set id random(1, 20000)
BEGIN;
UPDATE s15.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s15.items (id, qty, note) VALUES (nextval('s15.ids'), 1, 'new');
DELETE FROM s15.items WHERE id = (SELECT min(id) FROM s15.items WHERE id > :id);
END;
