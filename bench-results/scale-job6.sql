\set id random(1, 20000)
BEGIN;
UPDATE s6.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s6.items (id, qty, note) VALUES (nextval('s6.ids'), 1, 'new');
DELETE FROM s6.items WHERE id = (SELECT min(id) FROM s6.items WHERE id > :id);
END;
