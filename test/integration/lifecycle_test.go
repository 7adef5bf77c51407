//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// setTables rewrites job.tables in the test's configuration file.
func (e *env) setTables(patterns string) {
	e.t.Helper()
	cfg, err := os.ReadFile(e.cfgPath)
	if err != nil {
		e.t.Fatal(err)
	}
	lines := strings.Split(string(cfg), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "tables = ") {
			lines[i] = "tables = " + patterns
		}
	}
	if err := os.WriteFile(e.cfgPath, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// recorded returns what the target records of the job: its progress state
// and its pgsync.tables rows, as one string ("" when nothing).
func (e *env) recorded() string {
	e.t.Helper()
	if !queryOne[bool](e.t, e.tgt, "SELECT to_regclass('pgsync.tables') IS NOT NULL") {
		return ""
	}
	return queryOne[string](e.t, e.tgt, `SELECT concat_ws('|', (SELECT state FROM pgsync.progress WHERE job = $1),
  (SELECT string_agg(schema_name || '.' || table_name || '=' || state, ',' ORDER BY 1) FROM pgsync.tables WHERE job = $1))`, e.job)
}

// TestRefusedBootstrapRecordsNothing: a bootstrap refused for a target
// table holding rows of its own records nothing, so the same bootstrap
// run again refuses again and never empties the table (it did: the first
// run wrote "copying" before its checks, and the rerun took that for an
// interrupted copy of its own).
func TestRefusedBootstrapRecordsNothing(t *testing.T) {
	e := newEnv(t, `CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a SELECT g, 'src' FROM generate_series(1, 50) g;
CREATE TABLE b (id int PRIMARY KEY, v text); INSERT INTO b SELECT g, 'src' FROM generate_series(1, 50) g;`, "")
	e.tgtExec(`CREATE TABLE b (id int PRIMARY KEY, v text); INSERT INTO b SELECT g, 'mine' FROM generate_series(1, 5) g`)
	for i := 0; i < 2; i++ {
		r := e.pgsync("bootstrap")
		if r.code != 1 || !strings.Contains(r.stderr, "public.b: not empty") || !strings.Contains(r.stderr, "nothing was recorded") {
			t.Fatalf("bootstrap %d: exit %d\n%s", i+1, r.code, r.stderr)
		}
		if got := e.recorded(); got != "" {
			t.Fatalf("a refused bootstrap recorded %q", got)
		}
		if n := queryOne[int](t, e.src, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", "pgsync_"+e.job); n != 0 {
			t.Fatal("a refused bootstrap created the slot")
		}
		if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM b WHERE v = 'mine'"); n != 5 {
			t.Fatalf("after bootstrap %d the target's own rows of b are %d, want 5", i+1, n)
		}
	}
	// The documented way out: --force replaces b's rows.
	e.mustPgsync("bootstrap", "--force")
	e.mustVerify()
}

// TestRefusedAddTablesLeavesRunFree: add-tables refused for a table whose
// target copy holds rows records nothing, and run does not wait for it
// (it waited forever: the table was marked copying before the check).
// An add abandoned half-way is undone by taking the table out of
// job.tables: run stops waiting at once, and the next add-tables removes
// it from the publication.
func TestRefusedAddTablesLeavesRunFree(t *testing.T) {
	e := newEnv(t, `CREATE TABLE a (id int PRIMARY KEY, v int);
INSERT INTO a SELECT g, 0 FROM generate_series(1, 100) g;
CREATE TABLE b (id int PRIMARY KEY, v int); INSERT INTO b SELECT g, 0 FROM generate_series(1, 100) g;
CREATE TABLE c (id int PRIMARY KEY, pad text); INSERT INTO c SELECT g, repeat('c', 300) FROM generate_series(1, 600000) g;`, "")
	e.setTables(`["public.a"]`)
	e.mustPgsync("bootstrap")
	e.tgtExec(`CREATE TABLE b (id int PRIMARY KEY, v int); INSERT INTO b VALUES (1, 42)`)

	e.setTables(`["public.a", "public.b"]`)
	r := e.pgsync("add-tables")
	if r.code != 1 || !strings.Contains(r.stderr, "public.b: not empty") {
		t.Fatalf("add-tables into a non-empty b: exit %d\n%s", r.code, r.stderr)
	}
	if got := e.recorded(); got != "ready|public.a=ready" {
		t.Fatalf("a refused add-tables recorded %q, want what the bootstrap recorded alone", got)
	}
	if n := queryOne[int](t, e.src, "SELECT count(*) FROM pg_publication_tables WHERE pubname = $1 AND tablename = 'b'", "pgsync_"+e.job); n != 0 {
		t.Fatal("a refused add-tables published b")
	}
	e.srcExec("UPDATE a SET v = v + 1; UPDATE b SET v = v + 1")
	e.setTables(`["public.a"]`)
	r = e.catchUp()
	if strings.Contains(r.stderr, "paused") {
		t.Errorf("run paused for a table that was never added:\n%s", r.stderr)
	}
	if n := queryOne[int](t, e.tgt, "SELECT v FROM b WHERE id = 1"); n != 42 {
		t.Errorf("the target's own row of b was changed to %d", n)
	}

	// An add killed during its copy, then abandoned.
	e.setTables(`["public.a", "public.c"]`)
	bg := e.start("add-tables")
	eventually(t, 60*time.Second, "add-tables to copy c", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'COPY%FROM STDIN%'") > 0
	})
	bg.kill9(t)
	if got := e.recorded(); !strings.Contains(got, "public.c=copying") {
		t.Fatalf("after add-tables was killed during its copy: %q", got)
	}
	e.srcExec("UPDATE a SET v = v + 1; UPDATE c SET pad = 'changed' WHERE id = 1")
	e.setTables(`["public.a"]`)
	r = e.catchUp()
	if strings.Contains(r.stderr, "paused") {
		t.Errorf("run paused for an abandoned add:\n%s", r.stderr)
	}
	r = e.mustPgsync("add-tables")
	if !strings.Contains(r.stdout, "removed from the job") || !strings.Contains(r.stdout, "public.c") {
		t.Errorf("add-tables did not remove the abandoned c:\n%s", r.stdout)
	}
	if n := queryOne[int](t, e.src, "SELECT count(*) FROM pg_publication_tables WHERE pubname = $1 AND tablename = 'c'", "pgsync_"+e.job); n != 0 {
		t.Error("the abandoned c is still published")
	}
	if got := e.recorded(); !strings.Contains(got, "public.c=removed") {
		t.Errorf("recorded after the removal: %q", got)
	}
	e.mustVerify() // a only

	// Named again, c is added whole: its partial copy is pgsync's own.
	e.setTables(`["public.a", "public.c"]`)
	e.mustPgsync("add-tables")
	e.srcExec("UPDATE c SET pad = 'again' WHERE id = 2")
	e.catchUp()
	e.mustVerify()
}

// TestBootstrapResumesAfterKill: a bootstrap killed during its copy is
// resumed: the tables whose copy committed are kept, the rest copied under
// a new snapshot, and run applies every change exactly once, including
// changes made during and after the interrupted copy.
func TestBootstrapResumesAfterKill(t *testing.T) {
	var sql strings.Builder
	for i := 1; i <= 6; i++ {
		rows := 100000
		if i == 6 {
			rows = 600000 // the largest, copied first
		}
		fmt.Fprintf(&sql, "CREATE TABLE t%d (id int PRIMARY KEY, v int, pad text); INSERT INTO t%d SELECT g, 0, repeat('x', 100) FROM generate_series(1, %d) g;\n", i, i, rows)
	}
	e := newEnv(t, sql.String(), "[tuning]\nmax_parallel_copies = 1\n")
	bg := e.start("bootstrap")
	// The big table is copied first (largest first, one stream): kill as
	// soon as it is recorded copied, before the small ones are.
	eventually(t, 90*time.Second, "t6 copied", func() bool {
		return strings.Contains(e.recorded(), "public.t6=ready")
	})
	e.srcExec("UPDATE t6 SET v = 1 WHERE id <= 10; UPDATE t1 SET v = 1 WHERE id <= 10")
	bg.kill9(t)
	before := e.recorded()
	if !strings.HasPrefix(before, "copying") {
		t.Fatalf("recorded after the kill: %q", before)
	}
	e.srcExec("UPDATE t6 SET v = 2 WHERE id <= 5; UPDATE t2 SET v = 2 WHERE id <= 5")
	r := e.mustPgsync("bootstrap")
	if !strings.Contains(r.stdout, "resumed an interrupted bootstrap") || !strings.Contains(r.stdout, "public.t6") {
		t.Errorf("the rerun did not resume keeping t6:\n%s\n%s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "table=public.t6 ") {
		t.Errorf("the rerun copied t6 again:\n%s", r.stderr)
	}
	e.srcExec("UPDATE t6 SET v = 3 WHERE id = 1; UPDATE t3 SET v = 3 WHERE id = 1")
	e.catchUp()
	e.mustVerify()
}

// TestCutoverLocksAllRolesOrNone: a role that cannot be locked leaves
// every role as it was, and the report says so.
func TestCutoverLocksAllRolesOrNone(t *testing.T) {
	e := newEnv(t, `CREATE TABLE o (id int PRIMARY KEY); INSERT INTO o VALUES (1);`, "")
	role := "app_" + e.db
	e.srcExec("DROP ROLE IF EXISTS " + role + "; CREATE ROLE " + role + " LOGIN")
	t.Cleanup(func() {
		admin := mustConnect(t, adminURL(sourcePort))
		defer admin.Close(context.Background())
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
	})
	e.mustPgsync("bootstrap")
	r := e.pgsync("cutover", "--lock-source", role+",no_such_role_"+e.db, "--timeout", "5s")
	if r.code != 1 || !strings.Contains(r.stderr, "no role was locked") {
		t.Fatalf("cutover with a missing role: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := queryOne[int](t, e.src, `SELECT count(*) FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
WHERE r.rolname = $1 AND 'default_transaction_read_only=on' = ANY (s.setconfig)`, role); n != 0 {
		t.Fatal("the first role stayed locked although the second could not be")
	}
	// run is not running: the wait times out (locking the role writes WAL
	// that nobody applies), and the error and the report both name the
	// locked role and the undo.
	r = e.pgsync("cutover", "--lock-source", role, "--timeout", "1s")
	if r.code != 1 || !strings.Contains(r.stderr, "stays read-only for role(s) "+role) || !strings.Contains(r.stderr, "--unlock-source "+role) ||
		!strings.Contains(r.stdout, "source locked:   "+role) {
		t.Fatalf("cutover that timed out after the lock: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	e.mustPgsync("cutover", "--unlock-source", role)
	if n := queryOne[int](t, e.src, `SELECT count(*) FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = $1`, role); n != 0 {
		t.Fatal("--unlock-source left the role locked")
	}
}

// TestBootstrapSaysWhatItWaitsFor: creating the slot waits for every
// source transaction with an xid; bootstrap says so within 10 s, naming
// the session, and finishes once it ends.
func TestBootstrapSaysWhatItWaitsFor(t *testing.T) {
	e := newEnv(t, `CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE other (id int);`, "")
	e.setTables(`["public.a"]`)
	ctx := context.Background()
	holder := mustConnect(t, e.srcURL)
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, "SET application_name = 'long_report'"); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO other VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	pid := queryOne[int](t, holder, "SELECT pg_backend_pid()")
	bg := e.start("bootstrap")
	began := time.Now()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(bg.stderr.String(), "creating the slot waits") {
		if time.Now().After(deadline) {
			t.Fatalf("bootstrap did not say what it waits for within 20 s:\n%s", bg.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if waited := time.Since(began); waited > 15*time.Second {
		t.Errorf("the first notice came after %s", waited)
	}
	log := bg.stderr.String()
	if !strings.Contains(log, fmt.Sprintf("pid %d", pid)) || !strings.Contains(log, "long_report") || !strings.Contains(log, "pg_terminate_backend") {
		t.Errorf("the notice does not name the session and the way out:\n%s", log)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if code := bg.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("bootstrap: exit %d\n%s", code, bg.stderr.String())
	}
}

// TestBootstrapFailedCheckRecordsNothing: bootstrap runs its checks beside
// the read-only plan, pg_dump's schema included (bootstrap into an empty
// target). A failed check is what it reports, with its fix, and nothing is
// recorded or created on either server; the same bootstrap with the check
// fixed then runs.
func TestBootstrapFailedCheckRecordsNothing(t *testing.T) {
	e := newEnv(t, `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, 'v' FROM generate_series(1, 100) g;`, "")
	role := "norepl_" + e.db
	e.srcExec(`CREATE ROLE ` + role + ` LOGIN`)
	e.srcExec(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ` + role)
	t.Cleanup(func() {
		_, _ = e.src.Exec(context.Background(), `DROP OWNED BY `+role)
		_, _ = e.src.Exec(context.Background(), `DROP ROLE `+role)
	})
	good, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(good), "postgres://postgres@127.0.0.1:"+sourcePort, "postgres://"+role+"@127.0.0.1:"+sourcePort, 1)
	if bad == string(good) {
		t.Fatal("the source url was not rewritten")
	}
	if err := os.WriteFile(e.cfgPath, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.pgsync("bootstrap")
	if r.code != 1 || !strings.Contains(r.stderr, "REPLICATION") || !strings.Contains(r.stderr, "ALTER ROLE") {
		t.Fatalf("bootstrap by a user without REPLICATION: exit %d, want 1 naming the check and its fix\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "built-in creator") {
		t.Errorf("the refused bootstrap says it would do without pg_dump: a cancelled plan is not a reason\n%s", r.stderr)
	}
	if got := e.recorded(); got != "" {
		t.Fatalf("a bootstrap refused by its checks recorded %q", got)
	}
	if e.slotExists() {
		t.Fatal("a bootstrap refused by its checks created the slot")
	}
	if queryOne[bool](t, e.src, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", "pgsync_"+e.job) {
		t.Fatal("a bootstrap refused by its checks created the publication")
	}
	if queryOne[bool](t, e.tgt, "SELECT to_regclass('public.t') IS NOT NULL") {
		t.Fatal("a bootstrap refused by its checks created the target table")
	}
	if err := os.WriteFile(e.cfgPath, good, 0o600); err != nil {
		t.Fatal(err)
	}
	// The role is granted SELECT on the source's table: the schema that
	// pg_dump restores names it, and the target lacks it (issue 22).
	r = e.pgsync("bootstrap")
	if r.code != 1 || !strings.Contains(r.stderr, "roles:") || !strings.Contains(r.stderr, role) || !strings.Contains(r.stderr, "pg_dumpall --roles-only --no-role-passwords") {
		t.Fatalf("bootstrap into a target without role %s: exit %d, want 1 naming the role and the fix\n%s", role, r.code, r.stderr)
	}
	if got := e.recorded(); got != "" || e.slotExists() || queryOne[bool](t, e.tgt, "SELECT to_regclass('public.t') IS NOT NULL") {
		t.Fatalf("a bootstrap refused for a missing role recorded %q, or made the slot or the table", got)
	}
	e.tgtExec(`CREATE ROLE ` + role)
	t.Cleanup(func() {
		_, _ = e.tgt.Exec(context.Background(), `DROP OWNED BY `+role)
		_, _ = e.tgt.Exec(context.Background(), `DROP ROLE `+role)
	})
	e.mustPgsync("bootstrap")
	e.mustVerify()
	if !queryOne[bool](t, e.tgt, "SELECT has_table_privilege($1, 'public.t', 'SELECT')", role) {
		t.Error("the role's grant did not reach the target")
	}
}
