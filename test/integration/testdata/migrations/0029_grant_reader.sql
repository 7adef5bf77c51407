-- Flyway V29: the reporting role reads the view and the posts.
GRANT SELECT ON "active_accounts", "posts" TO pgsync_hist_reader;
