\set id random(1, 20000)
BEGIN;
UPDATE s10.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s10.items (id, qty, note) VALUES (nextval('s10.ids'), 1, 'new');
DELETE FROM s10.items WHERE id = (SELECT min(id) FROM s10.items WHERE id > :id);
END;
