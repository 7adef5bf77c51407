//go:build versions

package versions

import (
	"strings"
	"testing"
	"time"
)

// TestDowngrade15To13 (issue 32, point 3): a move to an older major either
// works or check refuses naming the exact objects the target cannot hold,
// and never asks for a role the target's version cannot have
// (pg_database_owner, which owns public on 15 and does not exist on 13).
// The ERP fixture moves 15 -> 13 whole; three objects of 15 that 13 lacks
// (a multirange column, lz4 compression, UNIQUE NULLS NOT DISTINCT) are
// refused by check (with the entries that depend on them: their grants
// and keys), and by bootstrap before it writes anything.
func TestDowngrade15To13(t *testing.T) {
	p := pair{15, 13}
	t.Run("works", func(t *testing.T) {
		res := movePair(t, p, basePort+2, basePort+3)
		if !t.Failed() {
			t.Logf("15 -> 13: bootstrap %.1f s, catch-up %.1f s, write gap %.3f s", res.BootstrapSeconds, res.CatchupSeconds, res.WriteGapSeconds)
			recordResult(t, res)
		}
	})
	t.Run("refused", func(t *testing.T) {
		src, tgt := startPair(t, p, basePort+2, basePort+3)
		s := connect(t, src.url)
		exec1(t, s, "objects of 15", `CREATE TABLE sales.ranges (id int PRIMARY KEY, r int4multirange);
CREATE TABLE sales.notes (id int PRIMARY KEY, v text COMPRESSION lz4);
CREATE TABLE sales.codes (id int PRIMARY KEY, code text, UNIQUE NULLS NOT DISTINCT (code));`)
		cfg := writeConfig(t, src, tgt)
		r := pgsync(t, 2*time.Minute, cfg, "check")
		for _, want := range []string{"FAIL  older target", "PostgreSQL 13 cannot hold",
			`table sales.ranges: type "int4multirange" does not exist`, "table sales.notes: syntax error", "constraint sales.codes codes_code_key: syntax error"} {
			if r.code != 1 || !strings.Contains(r.stdout, want) {
				t.Errorf("check: exit %d, want 1 and %q\n%s\n%s", r.code, want, r.stdout, r.stderr)
			}
		}
		if strings.Contains(r.stdout+r.stderr, "pg_database_owner") {
			t.Errorf("check asks for pg_database_owner, which PostgreSQL 13 cannot have:\n%s", r.stdout)
		}
		b := pgsync(t, 2*time.Minute, cfg, "bootstrap")
		if b.code == 0 || !strings.Contains(b.stderr, "older target") {
			t.Errorf("bootstrap: exit %d, want a refusal on the older target\n%s\n%s", b.code, b.stdout, b.stderr)
		}
		g := connect(t, tgt.url)
		if n := queryOne[int](t, g, "SELECT count(*) FROM pg_class WHERE relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace, 'pg_toast'::regnamespace)"); n != 0 {
			t.Errorf("the refused bootstrap left %d relations on the target", n)
		}
	})
}
