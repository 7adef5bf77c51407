//go:build integration

package integration

import (
	"crypto/md5"
	"encoding/hex"
	"strings"
	"testing"
)

// TestLongInsertRunsAreCopied: a run of 256 or more INSERTs on one table is
// applied as COPY FROM STDIN inside the target transaction. In one source
// transaction: 300 inserts (a COPY), the delete of one of those keys, 300
// inserts that bring the key back (a second COPY), then an UPDATE of rows
// whose out-of-line TOAST value the source sends as unchanged. Values with
// backslashes, tabs, newlines, empty strings and NULLs go through COPY's
// escaping. A statement trigger on the target records which statements
// wrote, so the test knows COPY was used.
func TestLongInsertRunsAreCopied(t *testing.T) {
	e := newEnv(t, `CREATE TABLE cr (id int PRIMARY KEY, n int NOT NULL, note text, big text);
ALTER TABLE cr ALTER COLUMN big SET STORAGE EXTERNAL;`, "")
	e.mustPgsync("bootstrap")
	e.tgtExec(`CREATE TABLE writes (op text, query text);
CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO writes VALUES (TG_OP, split_part(current_query(), ' ', 1)); RETURN NULL; END $$;
CREATE TRIGGER log_write AFTER INSERT ON cr FOR EACH STATEMENT EXECUTE FUNCTION log_write();
ALTER TABLE cr ENABLE ALWAYS TRIGGER log_write;`)

	e.srcExec(`BEGIN;
INSERT INTO cr SELECT g, 0,
  CASE g % 5 WHEN 0 THEN NULL WHEN 1 THEN '' WHEN 2 THEN E'back\\slash\ttab' WHEN 3 THEN E'new\nline\rreturn' ELSE '\N' END,
  repeat(md5(g::text), 100) FROM generate_series(1, 300) g;
DELETE FROM cr WHERE id = 150;
INSERT INTO cr SELECT g, 1, 'again', repeat(md5(g::text), 100) FROM generate_series(300 + 1, 300 + 299) g;
INSERT INTO cr VALUES (150, 2, 'back', repeat('z', 3200));
UPDATE cr SET n = n + 10 WHERE id <= 10 OR id = 150;
COMMIT;`)
	// The last INSERT joined the second run: 300 rows.
	e.catchUp()
	e.mustVerify()

	if got := queryOne[string](t, e.tgt, "SELECT string_agg(query, ',' ORDER BY query) FROM writes"); got != "COPY,COPY" {
		t.Errorf("statements that inserted into cr on the target: %s, want COPY,COPY", got)
	}
	if got := queryOne[string](t, e.tgt, "SELECT n || '/' || note || '/' || md5(big) FROM cr WHERE id = 150"); got != "12/back/"+md5Hex(strings.Repeat("z", 3200)) {
		t.Errorf("row 150 on the target: %s", got)
	}
	if bad := queryOne[int](t, e.tgt, "SELECT count(*) FROM cr WHERE id <= 10 AND (n <> 10 OR big IS DISTINCT FROM repeat(md5(id::text), 100))"); bad != 0 {
		t.Errorf("%d updated rows lost their unchanged TOAST value or the update", bad)
	}
	if got := queryOne[string](t, e.tgt, "SELECT coalesce(note, 'NULL') FROM cr WHERE id = 3"); got != "new\nline\rreturn" {
		t.Errorf("note of row 3 = %q", got)
	}
	if got := queryOne[string](t, e.tgt, "SELECT note FROM cr WHERE id = 4"); got != `\N` {
		t.Errorf(`note of row 4 = %q, want the two characters \N`, got)
	}
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
