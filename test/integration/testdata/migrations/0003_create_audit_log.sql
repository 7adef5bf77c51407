-- Flyway V3: a table a later migration drops again.
CREATE TABLE audit_log (id serial PRIMARY KEY, entity text NOT NULL, entity_id bigint NOT NULL, action varchar(10) NOT NULL CHECK (action IN ('insert', 'update', 'delete')));
CREATE INDEX audit_log_entity ON audit_log (entity, entity_id);
INSERT INTO audit_log (entity, entity_id, action) SELECT 'account', g, 'insert' FROM generate_series(1, 20) g;
