\set id random(1, 20000)
BEGIN;
UPDATE s5.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s5.items (id, qty, note) VALUES (nextval('s5.ids'), 1, 'new');
DELETE FROM s5.items WHERE id = (SELECT min(id) FROM s5.items WHERE id > :id);
END;
