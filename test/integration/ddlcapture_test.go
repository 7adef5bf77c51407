//go:build integration

package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// job.ddl = "capture" (issue 31): the source's DDL, captured by pgsync's
// event triggers, is applied on the target at its place in its
// transaction.

const ddlCaptureSchema = `
CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO items SELECT g, g FROM generate_series(1, 50) g;`

// srcTx runs stmts on the source in one transaction, each sent on its
// own (as an application's migration tool does), so that each DDL is
// captured as its own statement.
func (e *env) srcTx(stmts ...string) {
	e.t.Helper()
	ctx := context.Background()
	tx, err := e.src.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			e.t.Fatalf("source: %v\n%s", err, s)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		e.t.Fatal(err)
	}
}

// TestDDLCaptureApplied: during run, an ADD COLUMN with a default between
// two inserts of the same table in one transaction, a CREATE INDEX, a
// RENAME COLUMN with writes after it, and a table created in the job's
// schema with writes to it (published from its first row by the trigger)
// are applied in order; the target ends identical, with the index; check
// says capture is possible; teardown removes the capture.
func TestDDLCaptureApplied(t *testing.T) {
	e := newEnv(t, ddlCaptureSchema, "ddl = \"capture\"\n")
	r := e.pgsync("check")
	if !regexp.MustCompile(`OK\s+ddl capture`).MatchString(r.stdout) {
		t.Errorf("check does not say ddl capture OK:\n%s\n%s", r.stdout, r.stderr)
	}
	e.mustPgsync("bootstrap")
	if n := queryOne[int](t, e.src, "SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'pgsync_ddl_%'"); n != 3 {
		t.Fatalf("event triggers on the source after bootstrap: %d, want 3", n)
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
	e.srcExec("UPDATE items SET w = w + 1000 WHERE id <= 5")
	e.srcTx(
		"CREATE TABLE fresh (id int PRIMARY KEY, a text)",
		"INSERT INTO fresh SELECT g, 'a' || g FROM generate_series(1, 10) g",
	)
	e.srcExec("UPDATE fresh SET a = 'b' WHERE id = 3")
	e.srcExec("DELETE FROM fresh WHERE id = 4")
	e.srcExec("INSERT INTO items (id, w) VALUES (54, 54)") // the last write

	e.awaitCapturedDDL(run)
	if got := queryOne[string](t, e.tgt, "SELECT string_agg(id || ':' || w || ':' || note, ',' ORDER BY id) FROM items WHERE id IN (1, 51, 52, 53)"); got != "1:1001:x,51:51:x,52:52:y,53:53:z" {
		t.Errorf("items on the target: %s", got)
	}
	if got := queryOne[string](t, e.tgt, "SELECT string_agg(id || a, ',' ORDER BY id) FROM fresh"); got != "1a1,2a2,3b,5a5,6a6,7a7,8a8,9a9,10a10" {
		t.Errorf("fresh on the target: %s", got)
	}
	e.mustVerify()

	e.mustPgsync("teardown")
	if n := queryOne[int](t, e.src, "SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'pgsync_ddl_%'"); n != 0 {
		t.Errorf("event triggers left on the source after teardown: %d", n)
	}
	if queryOne[bool](t, e.src, "SELECT to_regnamespace('pgsync') IS NOT NULL") {
		t.Error("schema pgsync left on the source after teardown")
	}
}

// ddlStop finds the message LSN in the one-line error of a captured
// statement the target refused.
var ddlStop = regexp.MustCompile(`DDL at ([0-9A-F]+/[0-9A-F]+) \(source transaction committing at ([0-9A-F]+/[0-9A-F]+)\) not applied: `)

// TestDDLCaptureRejectedStops: a captured statement the target rejects
// stops run at its transaction, with nothing of it applied and the
// position before it, on one line naming the statement, the target's
// error and the fix; running it by hand and then run --skip-ddl goes on,
// and the skip is in the ledger.
func TestDDLCaptureRejectedStops(t *testing.T) {
	e := newEnv(t, ddlCaptureSchema+"CREATE TABLE other (id int PRIMARY KEY);", "ddl = \"capture\"\n")
	e.mustPgsync("bootstrap")
	e.catchUp()
	// The target has an index of that name already: the CREATE INDEX fails there.
	e.tgtExec("CREATE INDEX taken ON other (id)")
	e.srcExec("INSERT INTO items VALUES (60, 60)") // a transaction before it, applied
	e.srcTx(
		"INSERT INTO items VALUES (61, 61)",
		"CREATE INDEX taken ON items (v)",
		"INSERT INTO items VALUES (62, 62)",
	)
	before := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job)
	r := e.pgsync("run", "--until-caught-up")
	if r.code != 1 {
		t.Fatalf("run: exit %d, want 1\n%s", r.code, r.stderr)
	}
	line := lastErrorLine(r.stderr)
	m := ddlStop.FindStringSubmatch(line)
	if m == nil || !strings.Contains(line, "CREATE INDEX taken ON items (v)") || !strings.Contains(line, "already exists") ||
		!strings.Contains(line, "pgsync run --skip-ddl "+m[1]) {
		t.Fatalf("the error does not name the statement, the target's error and the fix on one line:\n%s", r.stderr)
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM items WHERE id IN (61, 62)"); n != 0 {
		t.Errorf("%d rows of the refused transaction on the target", n)
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM items WHERE id = 60"); n != 1 {
		t.Error("the transaction before the refused one is not applied")
	}
	at := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job)
	if !lsnLess(at, m[2]) || lsnLess(at, before) {
		t.Errorf("progress at %s (was %s), want before the refused transaction at %s", at, before, m[2])
	}

	// The documented way on: what the statement meant, by hand, then skip it.
	e.tgtExec("ALTER INDEX taken RENAME TO other_id")
	e.tgtExec("CREATE INDEX taken ON items (v)")
	r = e.mustPgsync("run", "--until-caught-up", "--skip-ddl", m[1])
	if !strings.Contains(r.stderr, "captured DDL skipped") {
		t.Errorf("run does not say it skipped the statement:\n%s", r.stderr)
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM items WHERE id IN (61, 62)"); n != 2 {
		t.Errorf("%d of the 2 rows of the skipped statement's transaction on the target", n)
	}
	if got := queryOne[string](t, e.tgt, "SELECT string_agg(lsn::text, ',') FROM pgsync.ddl_skips WHERE job = $1", e.job); got != m[1] {
		t.Errorf("pgsync.ddl_skips: %s, want %s", got, m[1])
	}
	e.mustVerify()
}

// TestDDLCaptureStreamedTransaction: a transaction large enough for the
// source to stream it while it runs, with an ADD COLUMN between its rows,
// is applied at its commit from its spool (not as it arrives), the
// statement at its place: the rows after it have the new column.
func TestDDLCaptureStreamedTransaction(t *testing.T) {
	e := newEnv(t, ddlCaptureSchema, "ddl = \"capture\"\n")
	lowDecodingMemory(t)
	e.mustPgsync("bootstrap")
	run := e.start("run")
	e.srcTx(
		"INSERT INTO items SELECT g, g FROM generate_series(1001, 20000) g",
		"ALTER TABLE items ADD COLUMN extra int NOT NULL DEFAULT 7",
		"INSERT INTO items SELECT g, g, g FROM generate_series(20001, 40000) g",
	)
	e.srcExec("INSERT INTO items VALUES (40001, 1, 1)") // the last write
	eventually(t, 2*time.Minute, "the last write on the target", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM items WHERE id = 40001") == 1
	})
	run.kill9(t)
	log := run.stderr.String()
	if !strings.Contains(log, "holds DDL") || !strings.Contains(log, "ADD COLUMN extra") {
		t.Errorf("run's log does not show the streamed transaction given to its spool for its DDL:\n%s", log)
	}
	if got := queryOne[string](t, e.tgt, "SELECT count(*) FILTER (WHERE extra = 7) || ' ' || count(*) FILTER (WHERE extra = id) FROM items"); got != "19050 20001" {
		t.Errorf("items.extra on the target: %s rows at the default and at their id, want 19050 20001", got)
	}
	e.mustVerify()
}

// awaitCapturedDDL waits until the captured statements' scenario's last
// write (items 54) is on the target, stops run, and checks that run logged
// no error, named each applied statement and built index items_v.
func (e *env) awaitCapturedDDL(run *background) {
	t := e.t
	t.Helper()
	eventually(t, 60*time.Second, "the last write on the target", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM items WHERE id = 54") == 1
	})
	run.kill9(t)
	log := run.stderr.String()
	if strings.Contains(log, "level=ERROR") {
		t.Errorf("run logged an error:\n%s", log)
	}
	for _, want := range []string{"ADD COLUMN note", "CREATE INDEX items_v", "RENAME COLUMN v TO w", "CREATE TABLE fresh"} {
		if !strings.Contains(log, want) {
			t.Errorf("run's log does not name the applied statement %q:\n%s", want, log)
		}
	}
	if !queryOne[bool](t, e.tgt, "SELECT to_regclass('public.items_v') IS NOT NULL") {
		t.Error("index items_v is missing on the target")
	}
}
