-- pgsync-test: each statement on its own
-- Django: AddIndexConcurrently of UniqueConstraint(Lower("email")) in a
-- non-atomic migration, an expression index built without blocking writes.
CREATE UNIQUE INDEX CONCURRENTLY "users_email_lower_uniq" ON "users" ((LOWER("email")));
