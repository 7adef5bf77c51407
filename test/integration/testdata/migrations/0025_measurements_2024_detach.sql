-- Flyway V25: last year's partition detached, then renamed for archiving.
ALTER TABLE measurements DETACH PARTITION measurements_2024;
ALTER TABLE measurements_2024 RENAME TO measurements_2024_archive;
