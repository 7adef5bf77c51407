//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
)

// TestStopsExactlyAtFailingTransactionInGroup: a backlog of source
// transactions is applied in groups (several source transactions in one
// target transaction); one in the middle fails on the target (a CHECK the
// target alone has). run stops exactly there (issue 23): every
// transaction before it is committed, with the progress row at the end of
// the last of them, and nothing of it or after it. A rerun stops at the
// same place and changes nothing. The fix and a rerun then go on.
func TestStopsExactlyAtFailingTransactionInGroup(t *testing.T) {
	e := newEnv(t, "CREATE TABLE g (id int PRIMARY KEY, v int NOT NULL)", "")
	e.mustPgsync("bootstrap")
	e.tgtExec("ALTER TABLE g ADD CONSTRAINT g_small CHECK (v < 100)")
	for i := 1; i <= 30; i++ {
		e.srcExec(fmt.Sprintf("INSERT INTO g VALUES (%d, %d)", i, i))
	}
	e.srcExec("INSERT INTO g VALUES (31, 500)") // fails on the target
	for i := 32; i <= 40; i++ {
		e.srcExec(fmt.Sprintf("INSERT INTO g VALUES (%d, %d)", i, i))
	}
	for round := 1; round <= 2; round++ {
		r := e.pgsync("run", "--until-caught-up")
		if r.code == 0 || !strings.Contains(r.stderr, "g_small") {
			t.Fatalf("round %d: run: exit %d, want a failure naming the constraint\n%s", round, r.code, r.stderr)
		}
		if got := queryOne[string](t, e.tgt, "SELECT count(*) || ' rows, ids ' || coalesce(min(id)::text, '') || '-' || coalesce(max(id)::text, '') FROM g"); got != "30 rows, ids 1-30" {
			t.Fatalf("round %d: the target has %s, want every transaction before the failing one (30 rows, ids 1-30)\n%s", round, got, r.stderr)
		}
	}
	// The position recorded is the end of the 30th transaction: what the
	// target has is what it says it has (a restart resumes there).
	e.tgtExec("ALTER TABLE g DROP CONSTRAINT g_small")
	e.catchUp()
	e.mustVerify()
}
