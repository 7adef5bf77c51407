//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDDLConcurrentStatements: the statements that cannot run in a
// transaction block (Django's AddIndexConcurrently, Rails' algorithm:
// :concurrently, DROP INDEX CONCURRENTLY, DETACH PARTITION CONCURRENTLY;
// REINDEX fires event triggers from PostgreSQL 17 only), each between two writes of its table, run on
// the target on their own, in order. run is killed with SIGKILL right
// after each of them ran, before the commit that records it, a fresh run
// each time, then runs to the end. After the last run the target is the
// source (schema and rows), and no statement ran twice (a second CREATE
// INDEX or DROP INDEX would have stopped run).
func TestDDLConcurrentStatements(t *testing.T) {
	e := newEnv(t, histSchema+"\n"+histUsers, "ddl = \"capture\"\n")
	e.mustPgsync("bootstrap")
	concurrent := []string{
		"CREATE UNIQUE INDEX CONCURRENTLY users_email_lower_uniq ON users ((lower(email)))",
		"CREATE INDEX CONCURRENTLY history_account ON history (account)",
		"DROP INDEX CONCURRENTLY history_account",
		"ALTER TABLE measurements DETACH PARTITION measurements_2024 CONCURRENTLY",
	}
	e.srcExec("INSERT INTO users (email, name) VALUES ('a@example.com', 'a')")
	for i, st := range concurrent {
		e.srcExec(st)
		e.srcExec(fmt.Sprintf("INSERT INTO users (email, name) VALUES ('c%d@example.com', 'c%d')", i, i))
		e.srcExec(fmt.Sprintf("INSERT INTO history VALUES (%d, %d)", i+1, i))
		e.srcExec(fmt.Sprintf("UPDATE accounts SET balance = balance + 1 WHERE id = %d", i+1))
	}
	e.srcExec("INSERT INTO measurements_2024 VALUES (1000, '2024-03-01', 1)")

	stmtLog := filepath.Join(t.TempDir(), "statements")
	args := []string{"-c", e.cfgPath, "run", "--until-caught-up"}
	var logs strings.Builder
	for _, st := range concurrent {
		_ = os.Remove(stmtLog)
		r := runPgsyncEnv(t, []string{"PGSYNC_KILL_AFTER_TEXT=" + st, "PGSYNC_STATEMENT_LOG=" + stmtLog}, args...)
		logs.WriteString(r.stderr)
		if stmts := readStatements(t, stmtLog); r.code != -9 || stmts[len(stmts)-1] != st {
			t.Fatalf("run to be killed right after %q: exit %d, last statement %q\n%s", st, r.code, stmts[len(stmts)-1], r.stderr)
		}
	}
	r := e.mustPgsync("run", "--until-caught-up")
	logs.WriteString(r.stderr)
	for _, want := range []string{"on its own", "found applied on the target already"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no run said %q:\n%s", want, logs.String())
		}
	}
	e.assertSameApp()
	if got := queryOne[string](t, e.tgt, "SELECT string_agg(name, ',' ORDER BY id) FROM users WHERE id > 20"); got != "a,c0,c1,c2,c3" {
		t.Errorf("users written around the statements on the target: %s, want a,c0,c1,c2,c3", got)
	}
}

// TestDDLConcurrentIndexCut: an index that a cut CREATE INDEX CONCURRENTLY
// left invalid on the target (made so here by hand, as a backend that
// died in the build leaves it) is dropped and built again by the next run.
func TestDDLConcurrentIndexCut(t *testing.T) {
	e := newEnv(t, histUsers, "ddl = \"capture\"\n")
	e.mustPgsync("bootstrap")
	e.srcExec("CREATE UNIQUE INDEX CONCURRENTLY users_email_uniq ON users (email)")
	e.tgtExec("CREATE UNIQUE INDEX users_email_uniq ON users (email)")
	e.tgtExec("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'users_email_uniq'::regclass")
	e.srcExec("INSERT INTO users (email, name) VALUES ('b@example.com', 'b')")
	r := e.mustPgsync("run", "--until-caught-up")
	if !strings.Contains(r.stderr, "DROP INDEX CONCURRENTLY") {
		t.Errorf("run did not say it dropped the invalid index:\n%s", r.stderr)
	}
	if !queryOne[bool](t, e.tgt, "SELECT indisvalid FROM pg_index WHERE indexrelid = 'users_email_uniq'::regclass") {
		t.Error("users_email_uniq is still invalid on the target")
	}
	e.assertSameApp()
}

// TestDDLOutsideJobLogged: DDL on objects outside the job's schemas (the
// job selects public.*) is not run on the target; run names each such
// statement in an INFO line, and applies the job's own writes around it.
func TestDDLOutsideJobLogged(t *testing.T) {
	e := newEnv(t, histUsers, "ddl = \"capture\"\n")
	e.srcExec("CREATE SCHEMA reporting")
	e.mustPgsync("bootstrap")
	outside := []string{
		"CREATE TABLE reporting.daily (day date PRIMARY KEY, n int)",
		"ALTER TABLE reporting.daily ADD COLUMN m int",
		"CREATE INDEX daily_n ON reporting.daily (n)",
		"DROP INDEX reporting.daily_n",
	}
	for i, st := range outside {
		e.srcExec(st)
		e.srcExec(fmt.Sprintf("INSERT INTO users (email, name) VALUES ('o%d@example.com', 'o%d')", i, i))
	}
	e.srcExec("CREATE TEMP TABLE scratch (x int)")
	r := e.mustPgsync("run", "--until-caught-up")
	for _, st := range outside {
		if !strings.Contains(r.stderr, `msg="DDL on objects outside the job's schemas ignored"`) || !strings.Contains(r.stderr, `statement="`+st+`"`) {
			t.Errorf("run's log does not name %q as ignored:\n%s", st, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "scratch") || strings.Contains(r.stderr, "level=ERROR") {
		t.Errorf("run logged a temporary table or an error:\n%s", r.stderr)
	}
	if queryOne[bool](t, e.tgt, "SELECT to_regclass('reporting.daily') IS NOT NULL") {
		t.Errorf("table reporting.daily exists on the target")
	}
	if got := queryOne[string](t, e.tgt, "SELECT string_agg(name, ',' ORDER BY id) FROM users WHERE id > 20"); got != "o0,o1,o2,o3" {
		t.Errorf("users written around the statements on the target: %s, want o0,o1,o2,o3", got)
	}
}
