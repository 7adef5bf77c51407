//go:build integration

package integration

import (
	"strings"
	"testing"
)

// The table path of job.ddl = "capture" (issue 31, point 1): a source
// older than PostgreSQL 14 gets each captured statement as a row of
// pgsync.ddl, in the job's publication, not as a message. These tests
// force it on the suite's source (PGSYNC_DDL_TABLE_PATH=1); test/versions
// runs it on a real PostgreSQL 13.

// TestDDLTablePathApplied: with the table path forced, bootstrap publishes
// pgsync.ddl and run takes no message; an ADD COLUMN between two inserts of
// one transaction, a CREATE INDEX, a RENAME COLUMN with writes after it and
// a table created with writes to it are applied in order; the target gets
// no pgsync.ddl and is identical (verify); teardown removes the table.
func TestDDLTablePathApplied(t *testing.T) {
	t.Setenv("PGSYNC_DDL_TABLE_PATH", "1")
	e := newEnv(t, ddlCaptureSchema, "ddl = \"capture\"\n")
	e.mustPgsync("bootstrap")
	if n := queryOne[int](t, e.src, "SELECT count(*) FROM pg_publication_tables WHERE pubname = $1 AND schemaname = 'pgsync' AND tablename = 'ddl'", "pgsync_"+e.job); n != 1 {
		t.Fatalf("pgsync.ddl is not in the job's publication after bootstrap")
	}
	if queryOne[bool](t, e.src, "SELECT prosrc LIKE '%pg_logical_emit_message%' FROM pg_proc WHERE proname = 'ddl_capture_'||$1", e.job) {
		t.Error("the capture function emits messages on the table path")
	}
	run := e.start("run")
	e.srcTx(
		"INSERT INTO items VALUES (51, 51)",
		"ALTER TABLE items ADD COLUMN note text NOT NULL DEFAULT 'x'",
		"INSERT INTO items VALUES (52, 52, 'y')",
	)
	e.srcExec("CREATE INDEX items_v ON items (v)")
	e.srcExec("ALTER TABLE items RENAME COLUMN v TO w")
	e.srcExec("INSERT INTO items (id, w, note) VALUES (53, 53, 'z')")
	e.srcTx(
		"CREATE TABLE fresh (id int PRIMARY KEY, a text)",
		"INSERT INTO fresh SELECT g, 'a' || g FROM generate_series(1, 10) g",
	)
	e.srcExec("UPDATE fresh SET a = 'b' WHERE id = 3")
	// An operator's cleanup of the table is no statement and no data.
	e.srcExec("DELETE FROM pgsync.ddl WHERE seq = (SELECT min(seq) FROM pgsync.ddl)")
	e.srcExec("INSERT INTO items (id, w) VALUES (54, 54)") // the last write

	e.awaitCapturedDDL(run)
	if queryOne[bool](t, e.tgt, "SELECT to_regclass('pgsync.ddl') IS NOT NULL") {
		t.Error("the target has a table pgsync.ddl")
	}
	if got := queryOne[string](t, e.tgt, "SELECT string_agg(id || ':' || w || ':' || note, ',' ORDER BY id) FROM items WHERE id IN (1, 51, 52, 53)"); got != "1:1:x,51:51:x,52:52:y,53:53:z" {
		t.Errorf("items on the target: %s", got)
	}
	if got := queryOne[string](t, e.tgt, "SELECT string_agg(id || a, ',' ORDER BY id) FROM fresh"); got != "1a1,2a2,3b,4a4,5a5,6a6,7a7,8a8,9a9,10a10" {
		t.Errorf("fresh on the target: %s", got)
	}
	r := e.pgsync("verify")
	if r.code != 0 || !strings.Contains(r.stdout, "identical") {
		t.Errorf("verify: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "pgsync.ddl") {
		t.Errorf("verify counts pgsync.ddl as a table of the job:\n%s", r.stdout)
	}

	e.mustPgsync("teardown")
	if queryOne[bool](t, e.src, "SELECT to_regnamespace('pgsync') IS NOT NULL") {
		t.Error("schema pgsync (pgsync.ddl) left on the source after teardown")
	}
}

// TestDDLTablePathRejectedStops: on the table path, a captured statement
// the target rejects stops run at its transaction as a message's does: one
// line naming the statement, the target's error and run --skip-ddl at the
// row's position; nothing of the transaction applied; the skip goes on.
func TestDDLTablePathRejectedStops(t *testing.T) {
	t.Setenv("PGSYNC_DDL_TABLE_PATH", "1")
	e := newEnv(t, ddlCaptureSchema+"CREATE TABLE other (id int PRIMARY KEY);", "ddl = \"capture\"\n")
	e.mustPgsync("bootstrap")
	e.catchUp()
	e.tgtExec("CREATE INDEX taken ON other (id)")
	e.srcTx(
		"INSERT INTO items VALUES (61, 61)",
		"CREATE INDEX taken ON items (v)",
		"INSERT INTO items VALUES (62, 62)",
	)
	r := e.pgsync("run", "--until-caught-up")
	if r.code != 1 {
		t.Fatalf("run: exit %d, want 1\n%s", r.code, r.stderr)
	}
	m := ddlStop.FindStringSubmatch(r.stderr)
	if m == nil || !strings.Contains(r.stderr, "CREATE INDEX taken ON items (v)") || !strings.Contains(r.stderr, "already exists") ||
		!strings.Contains(r.stderr, "pgsync run --skip-ddl "+m[1]) {
		t.Fatalf("the error does not name the statement, the target's error and the fix:\n%s", r.stderr)
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM items WHERE id IN (61, 62)"); n != 0 {
		t.Errorf("%d rows of the refused transaction on the target", n)
	}
	e.tgtExec("ALTER INDEX taken RENAME TO other_id")
	e.tgtExec("CREATE INDEX taken ON items (v)")
	e.mustPgsync("run", "--until-caught-up", "--skip-ddl", m[1])
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM items WHERE id IN (61, 62)"); n != 2 {
		t.Errorf("%d of the 2 rows of the skipped statement's transaction on the target", n)
	}
	e.mustVerify()
}
