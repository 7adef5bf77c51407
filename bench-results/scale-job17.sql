\set id random(1, 20000)
BEGIN;
UPDATE s17.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s17.items (id, qty, note) VALUES (nextval('s17.ids'), 1, 'new');
DELETE FROM s17.items WHERE id = (SELECT min(id) FROM s17.items WHERE id > :id);
END;
