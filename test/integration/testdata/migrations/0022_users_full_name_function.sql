-- Flyway V22: a SQL function used by reports.
CREATE FUNCTION user_label(u users) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT u.name || ' <' || u.email || '>' $$;
