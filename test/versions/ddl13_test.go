//go:build versions

package versions

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestDDLCapture13 (issue 31, point 1): a PostgreSQL 13 source, whose
// pgoutput sends no logical decoding message, captures through the table
// path: check says so, bootstrap publishes pgsync.ddl, and an ADD COLUMN
// between two inserts of one transaction, a CREATE INDEX, a RENAME COLUMN
// with writes after it and a table created with writes to it reach a
// PostgreSQL 15 target in order; verify finds the sides identical, and
// teardown leaves nothing of pgsync on the source.
func TestDDLCapture13(t *testing.T) {
	src, tgt := startPair(t, pair{13, 15}, basePort+4, basePort+5)
	s, g := connect(t, src.url), connect(t, tgt.url)
	exec1(t, s, "a table of the job", "CREATE TABLE sales.ddlt (id int PRIMARY KEY, v int NOT NULL); INSERT INTO sales.ddlt SELECT g, g FROM generate_series(1, 10) g")
	cfg := writeConfig(t, src, tgt)
	appendConfig(t, cfg, "ddl = \"capture\"\n")

	r := pgsync(t, 2*time.Minute, cfg, "check")
	if !regexp.MustCompile(`OK\s+ddl capture`).MatchString(r.stdout) || !strings.Contains(r.stdout, "pgsync.ddl") {
		t.Fatalf("check does not say ddl capture OK through pgsync.ddl: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mustPgsync(t, 10*time.Minute, cfg, "bootstrap")
	if n := queryOne[int](t, s, "SELECT count(*) FROM pg_publication_tables WHERE pubname = 'pgsync_upgrade' AND schemaname = 'pgsync' AND tablename = 'ddl'"); n != 1 {
		t.Fatal("pgsync.ddl is not in the job's publication after bootstrap")
	}

	// Each statement sent on its own, as a migration tool does: a string
	// holding DDL and DML together is refused by design.
	srcTx(t, s, "INSERT INTO sales.ddlt VALUES (11, 11)",
		"ALTER TABLE sales.ddlt ADD COLUMN note text NOT NULL DEFAULT 'x'",
		"INSERT INTO sales.ddlt VALUES (12, 12, 'y')")
	exec1(t, s, "CREATE INDEX", "CREATE INDEX ddlt_v ON sales.ddlt (v)")
	exec1(t, s, "RENAME COLUMN", "ALTER TABLE sales.ddlt RENAME COLUMN v TO w")
	exec1(t, s, "a write after the rename", "INSERT INTO sales.ddlt (id, w, note) VALUES (13, 13, 'z')")
	srcTx(t, s, "CREATE TABLE sales.fresh (id int PRIMARY KEY, a text)",
		"INSERT INTO sales.fresh SELECT g, 'a' || g FROM generate_series(1, 5) g")
	exec1(t, s, "a write to the new table", "UPDATE sales.fresh SET a = 'b' WHERE id = 3")

	run := mustPgsync(t, 5*time.Minute, cfg, "run", "--until-caught-up")
	for _, want := range []string{"ADD COLUMN note", "CREATE INDEX ddlt_v", "RENAME COLUMN v TO w", "CREATE TABLE sales.fresh"} {
		if !strings.Contains(run.stderr, want) {
			t.Errorf("run's log does not name the applied statement %q:\n%s", want, run.stderr)
		}
	}
	if got := queryOne[string](t, g, "SELECT string_agg(id || ':' || w || ':' || note, ',' ORDER BY id) FROM sales.ddlt WHERE id IN (1, 11, 12, 13)"); got != "1:1:x,11:11:x,12:12:y,13:13:z" {
		t.Errorf("sales.ddlt on the target: %s", got)
	}
	if !queryOne[bool](t, g, "SELECT to_regclass('sales.ddlt_v') IS NOT NULL") {
		t.Error("index ddlt_v is missing on the target")
	}
	if got := queryOne[string](t, g, "SELECT string_agg(id || a, ',' ORDER BY id) FROM sales.fresh"); got != "1a1,2a2,3b,4a4,5a5" {
		t.Errorf("sales.fresh on the target: %s", got)
	}
	if queryOne[bool](t, g, "SELECT to_regclass('pgsync.ddl') IS NOT NULL") {
		t.Error("the target has a table pgsync.ddl")
	}
	if v := pgsync(t, 5*time.Minute, cfg, "verify"); v.code != 0 || !strings.Contains(v.stdout, "identical") {
		t.Errorf("verify: exit %d\n%s\n%s", v.code, v.stdout, v.stderr)
	}
	mustPgsync(t, 2*time.Minute, cfg, "teardown")
	if queryOne[bool](t, s, "SELECT to_regnamespace('pgsync') IS NOT NULL") {
		t.Error("schema pgsync left on the source after teardown")
	}
}

// appendConfig appends lines to the configuration at cfg, whose last
// section is [job].
func appendConfig(t *testing.T, cfg, lines string) {
	t.Helper()
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(lines); err != nil {
		t.Fatal(err)
	}
}

// srcTx runs stmts on c in one transaction, each sent on its own.
func srcTx(t *testing.T, c *pgx.Conn, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, sql := range stmts {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
