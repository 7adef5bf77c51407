-- Flyway V23: next year's partition, created as a partition.
CREATE TABLE measurements_2026 PARTITION OF measurements FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
INSERT INTO measurements (id, at, value) SELECT g, DATE '2026-01-01' + g, g FROM generate_series(1, 40) g;
