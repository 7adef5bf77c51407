-- Django: UniqueConstraint(Lower('email')), an expression index.
CREATE UNIQUE INDEX "users_email_lower_uniq" ON "users" ((LOWER("email")));
