-- Flyway V21: a function and the trigger that calls it.
CREATE OR REPLACE FUNCTION posts_trim_title() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.title := btrim(NEW.title);
  RETURN NEW;
END;
$$;
CREATE TRIGGER posts_trim_title BEFORE INSERT OR UPDATE OF title ON posts FOR EACH ROW EXECUTE FUNCTION posts_trim_title();
UPDATE posts SET title = '  Padded ' || id || '  ' WHERE id <= 10;
