//go:build versions

package versions

import (
	"strings"
	"testing"
	"time"

	"github.com/pgsync/pgsync/test/fixture"
)

// TestSourceCommands runs every command that reads the source against the
// oldest source major of the pairs, into Debian's 15: the matrix's move
// does not call status, verify, sequences, add-tables or teardown, and a
// catalog column or function the old version lacks is an ERROR in its
// log even when pgsync gets over it (issue 32: 12 lacks wal_status,
// safe_wal_size and max_slot_wal_keep_size). A partition created after
// bootstrap is added by add-tables, as check's advice for a partitioned
// table says.
func TestSourceCommands(t *testing.T) {
	oldest := pairs[0].src
	for _, p := range pairs {
		oldest = min(oldest, p.src)
	}
	if oldest > debianPgDump {
		t.Skipf("the oldest source, %d, is newer than pg_dump %d: the matrix's prepared-target path covers it", oldest, debianPgDump)
	}
	src, tgt := startPair(t, pair{oldest, 15}, basePort+4, basePort+5)
	cfg := writeConfig(t, src, tgt)
	s := connect(t, src.url)

	if r := pgsync(t, 2*time.Minute, cfg, "check"); r.code != 0 {
		t.Fatalf("check: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mustPgsync(t, 5*time.Minute, cfg, "bootstrap")
	run := startRun(t, cfg)
	for i := 1; i <= 20; i++ {
		for _, sql := range fixture.ERPWrite(i) {
			exec1(t, s, "the application's writes", sql)
		}
	}
	run.awaitConfirmed(t, s, 2*time.Minute, "the target to apply the writes")

	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"verify"}, {"verify"}, {"sequences", "--dry-run"}, {"sequences"}} {
		mustPgsync(t, 2*time.Minute, cfg, args...)
	}

	// A partition created after bootstrap: job.tables (production.*)
	// matches it, and add-tables publishes and copies it while run runs.
	exec1(t, s, "a partition created after bootstrap", `CREATE TABLE production.readings_2027 PARTITION OF production.readings FOR VALUES FROM ('2027-01-01') TO ('2028-01-01');
INSERT INTO production.readings SELECT s, '2027-01-01'::date + d, s * d FROM generate_series(1, 5) s, generate_series(0, 9) d`)
	add := mustPgsync(t, 5*time.Minute, cfg, "add-tables")
	if !strings.Contains(add.stdout+add.stderr, "production.readings_2027") {
		t.Errorf("add-tables does not name production.readings_2027:\n%s\n%s", add.stdout, add.stderr)
	}
	exec1(t, s, "rows of the added partition", `INSERT INTO production.readings SELECT s, '2027-06-01'::date + d, s FROM generate_series(1, 5) s, generate_series(0, 9) d;
UPDATE production.readings SET value = -value WHERE at = '2027-01-02'`)
	run.awaitConfirmed(t, s, 2*time.Minute, "the target to apply the added partition's rows")
	if r := mustPgsync(t, 2*time.Minute, cfg, "verify", "--table", "production.readings_2027"); !strings.Contains(r.stdout, "production.readings_2027") {
		t.Errorf("verify --table production.readings_2027 does not name it:\n%s", r.stdout)
	}
	g := connect(t, tgt.url)
	if n := queryOne[int64](t, g, "SELECT count(*) FROM production.readings_2027"); n != 100 {
		t.Errorf("production.readings_2027 has %d rows on the target, want 100", n)
	}

	run.stop(t)
	mustPgsync(t, 2*time.Minute, cfg, "teardown")
	if left := queryOne[int](t, s, "SELECT (SELECT count(*) FROM pg_replication_slots) + (SELECT count(*) FROM pg_publication)"); left != 0 {
		t.Errorf("teardown left %d slot(s) and publication(s) on the source", left)
	}
	checkServerLog(t, src)
}
