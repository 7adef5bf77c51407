\set id random(1, 20000)
BEGIN;
UPDATE s18.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s18.items (id, qty, note) VALUES (nextval('s18.ids'), 1, 'new');
DELETE FROM s18.items WHERE id = (SELECT min(id) FROM s18.items WHERE id > :id);
END;
