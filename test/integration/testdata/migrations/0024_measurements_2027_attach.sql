-- Flyway V24: a partition loaded on its own, then attached (the pattern
-- that avoids the long lock of creating it as a partition).
CREATE TABLE measurements_2027 (LIKE measurements INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE measurements_2027 ADD CONSTRAINT measurements_2027_at CHECK (at >= DATE '2027-01-01' AND at < DATE '2028-01-01');
INSERT INTO measurements_2027 (id, at, value) SELECT g, DATE '2027-01-01' + g, g FROM generate_series(1, 30) g;
ALTER TABLE measurements ATTACH PARTITION measurements_2027 FOR VALUES FROM ('2027-01-01') TO ('2028-01-01');
