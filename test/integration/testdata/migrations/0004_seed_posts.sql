-- pgsync-test: each statement on its own
-- Rails: seeds run outside a migration's transaction, a batch at a time.
INSERT INTO posts (user_id, title, body, legacy_slug, created_at, updated_at) SELECT g % 60 + 1, 'Post ' || g, 'Body ' || g, 'post-' || g, '2024-05-01 10:00:00'::timestamp + g * interval '1 hour', '2024-05-01 10:00:00'::timestamp + g * interval '1 hour' FROM generate_series(1, 100) g;
INSERT INTO posts (user_id, title, body, legacy_slug, created_at, updated_at) SELECT g % 60 + 1, 'Post ' || g, NULL, NULL, '2024-06-01 10:00:00', '2024-06-01 10:00:00' FROM generate_series(101, 150) g;
