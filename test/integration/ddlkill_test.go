//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDDLKillInsideTransaction: a source transaction holds rows, an ADD
// COLUMN, rows of the new shape and a CREATE INDEX. run is killed with
// SIGKILL after each statement it sends in turn (killpoint), a fresh run
// each time, until one finishes: among the kills, right after each of the
// two captured statements ran in the open target transaction. After the
// last run the target is the source (schema and rows; history has no key,
// so a row applied twice would show), and the statements ran once (a
// second ADD COLUMN would have failed).
func TestDDLKillInsideTransaction(t *testing.T) {
	e := newEnv(t, histSchema, "ddl = \"capture\"\n")
	e.mustPgsync("bootstrap")
	e.srcExec("UPDATE accounts SET balance = 1 WHERE id = 1")
	e.srcTx(
		"INSERT INTO history SELECT g % 100 + 1, 1 FROM generate_series(1, 500) g",
		"ALTER TABLE history ADD COLUMN note text NOT NULL DEFAULT 'x'",
		"INSERT INTO history SELECT g % 100 + 1, 2, 'y' FROM generate_series(1, 500) g",
		"CREATE INDEX history_account ON history (account)",
		"UPDATE accounts SET balance = balance + 1",
	)
	e.srcExec("INSERT INTO history VALUES (1, 3, 'z')")

	stmtLog := filepath.Join(t.TempDir(), "statements")
	args := []string{"-c", e.cfgPath, "run", "--until-caught-up"}
	killedAfterDDL := 0
	for k := 1; ; k++ {
		if k > 300 {
			t.Fatal("run still killed after 300 statements: it does not finish")
		}
		_ = os.Remove(stmtLog)
		r := runPgsyncEnv(t, []string{fmt.Sprintf("PGSYNC_KILL_AFTER_STATEMENT=%d", k), "PGSYNC_STATEMENT_LOG=" + stmtLog}, args...)
		if r.code == 0 {
			break
		}
		if r.code != -9 {
			t.Fatalf("run killed after statement %d: exit %d, want SIGKILL\n%s", k, r.code, r.stderr)
		}
		stmts := readStatements(t, stmtLog)
		// The captured statement runs with the source's search_path set
		// first (ddl.TargetSQL).
		if strings.HasPrefix(stmts[len(stmts)-1], "SELECT pg_catalog.set_config('pgsync.saved_search_path'") {
			killedAfterDDL++
			t.Logf("killed after statement %d, a captured DDL", k)
		}
	}
	if killedAfterDDL != 2 {
		t.Fatalf("run was killed right after a captured statement %d times, want 2 (ADD COLUMN, CREATE INDEX): the premise of the test is false", killedAfterDDL)
	}
	e.assertSameApp()
	if got := queryOne[string](t, e.tgt, "SELECT count(*) FILTER (WHERE note = 'x') || ' ' || count(*) FILTER (WHERE note = 'y') || ' ' || count(*) FROM history"); got != "500 500 1001" {
		t.Errorf("history on the target: %s (at the default, of the new shape, all), want 500 500 1001", got)
	}
}
