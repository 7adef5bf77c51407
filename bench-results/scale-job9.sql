\set id random(1, 20000)
BEGIN;
UPDATE s9.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s9.items (id, qty, note) VALUES (nextval('s9.ids'), 1, 'new');
DELETE FROM s9.items WHERE id = (SELECT min(id) FROM s9.items WHERE id > :id);
END;
