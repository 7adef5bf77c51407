//go:build integration

package integration

import (
	"context"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestRunRowCheckFailureCommitsNothing makes one source transaction update
// a row the target lacks while many small transactions stream before and
// after it, applied with many in flight. Each run must stop at that
// transaction without committing it or anything after it, and without
// acknowledging it to the source; the operator's repair lets it continue.
func TestRunRowCheckFailureCommitsNothing(t *testing.T) {
	e := newEnv(t, `CREATE TABLE d (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO d SELECT g, 0 FROM generate_series(1, 1000) g;
CREATE TABLE seq_log (seq int PRIMARY KEY, at timestamptz DEFAULT now());`, "")
	e.mustPgsync("bootstrap")
	e.tgtExec("DELETE FROM d WHERE id = 777")

	// A backlog of small transactions, then a live writer: the bad
	// transaction comes in the middle of the live load.
	e.srcExec(`DO $$ BEGIN FOR i IN 1..2000 LOOP
  INSERT INTO seq_log (seq) VALUES (i); UPDATE d SET v = v + 1 WHERE id = 1 + i % 500; COMMIT;
END LOOP; END $$`)
	bg := e.start("run")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seq := 2000
	var badSeq int
	var beforeBad string
	badAt := time.Now().Add(2 * time.Second)
	w := startWriter(ctx, t, e.srcURL, func(ctx context.Context, tx pgx.Tx, rnd *rand.Rand) error {
		seq++
		if badSeq == 0 && time.Now().After(badAt) {
			// Everything committed before this point ends at or before
			// beforeBad; the bad transaction's commit ends after it.
			if err := tx.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&beforeBad); err != nil {
				return err
			}
			badSeq = seq
			if _, err := tx.Exec(ctx, "UPDATE d SET v = -1 WHERE id = 777"); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO seq_log (seq) VALUES ($1)", seq); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE d SET v = v + 1 WHERE id = $1", 1+rnd.Intn(500))
		return err
	})
	if code := bg.wait(t, 90*time.Second); code != 1 {
		t.Fatalf("run on a diverged target: exit %d, want 1\n%s", code, bg.stderr.String())
	}
	time.Sleep(2 * time.Second) // keep writing after the failure
	cancel()
	w.wait(t)
	if badSeq == 0 {
		t.Fatal("the writer never reached the bad transaction")
	}
	if log := bg.stderr.String(); !strings.Contains(log, "UPDATE on public.d") || !strings.Contains(log, "diverged") {
		t.Errorf("the error does not name the statement and the divergence:\n%s", log)
	}
	check := func(round int) {
		t.Helper()
		if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM seq_log WHERE seq >= $1", badSeq); n != 0 {
			t.Errorf("round %d: %d transactions from the failing one (seq %d) on were committed on the target", round, n, badSeq)
		}
		if v := queryOne[int](t, e.tgt, "SELECT count(*) FROM d WHERE v = -1"); v != 0 {
			t.Errorf("round %d: the failing UPDATE left %d rows on the target", round, v)
		}
		progress := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job)
		if lsnLess(beforeBad, progress) {
			t.Errorf("round %d: progress %s is past the failing transaction (which commits after %s)", round, progress, beforeBad)
		}
		confirmed, _ := slotFeedback(t, e)
		if lsnLess(beforeBad, confirmed) {
			t.Errorf("round %d: the slot acknowledged %s, past the failing transaction (after %s)", round, confirmed, beforeBad)
		}
		if lsnLess(progress, confirmed) {
			t.Errorf("round %d: the slot acknowledged %s, past the target's progress %s", round, confirmed, progress)
		}
		// Everything before the failing transaction may be there or not
		// (its group was rolled back), but no gap: the applied prefix is
		// contiguous.
		if gap := queryOne[int](t, e.tgt, "SELECT count(*) - coalesce(max(seq), 0) FROM seq_log"); gap != 0 {
			t.Errorf("round %d: seq_log on the target is not a contiguous prefix (count - max = %d)", round, gap)
		}
	}
	check(0)
	// Each retry stops at the same transaction, and again commits nothing.
	for round := 1; round <= 3; round++ {
		r := e.pgsync("run", "--until-caught-up")
		if r.code != 1 || !strings.Contains(r.stderr, "diverged") {
			t.Fatalf("round %d: exit %d\n%s", round, r.code, r.stderr)
		}
		check(round)
	}
	// The operator repairs the row; pgsync continues where it stopped.
	e.tgtExec("INSERT INTO d SELECT id, v FROM (VALUES (777, 0)) AS r(id, v)")
	e.catchUp()
	e.mustVerify()
}
