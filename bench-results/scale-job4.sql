\set id random(1, 20000)
BEGIN;
UPDATE s4.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s4.items (id, qty, note) VALUES (nextval('s4.ids'), 1, 'new');
DELETE FROM s4.items WHERE id = (SELECT min(id) FROM s4.items WHERE id > :id);
END;
