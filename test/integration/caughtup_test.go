//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestCaughtUpWhileSourceWALEndsInsideARecord: the WAL writer writes whole
// pages, so while a transaction is open on the source its last record can
// straddle pg_current_wal_lsn(), and nothing flushes the record's end
// while the source is otherwise idle (until the background writer's next
// running-transactions record, up to 15 s later). The walsender passes
// only flushed records, so a wait for that position used to last until
// then: CI saw run --until-caught-up take 13.8 s with nothing to apply.
// run --until-caught-up and cutover must end at once in that state. Three
// rounds: one could meet the bound by the background writer's timing.
func TestCaughtUpWhileSourceWALEndsInsideARecord(t *testing.T) {
	e := newEnv(t, `CREATE TABLE t (id int PRIMARY KEY, v text);
INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g;`, "")
	e.mustPgsync("bootstrap")
	e.mustPgsync("run", "--until-caught-up")
	ctx := context.Background()

	const bound = 5 * time.Second
	// openRecord leaves a transaction open on the source whose last record,
	// longer than a page, the WAL writer has written only in part; end
	// rolls it back.
	openRecord := func(round int) (end func()) {
		t.Helper()
		hold := mustConnect(t, e.srcURL)
		tx, err := hold.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(true, 'pgsync-test', repeat('x', 3 * 8192))`); err != nil {
			t.Fatal(err)
		}
		var state string
		eventually(t, 5*time.Second, "the WAL writer writes the open transaction's record in part", func() bool {
			state = queryOne[string](t, e.src, `SELECT format('%s %s %s', pg_current_wal_lsn(), pg_current_wal_insert_lsn(),
	pg_current_wal_lsn() < pg_current_wal_insert_lsn() AND (pg_current_wal_lsn() - '0/0'::pg_lsn) % 8192 = 0)`)
			return strings.HasSuffix(state, " t")
		})
		t.Logf("round %d: source written to, inserted to, inside a record: %s", round, state)
		return func() {
			_ = tx.Rollback(ctx)
			hold.Close(ctx)
		}
	}

	for round := 1; round <= 2; round++ {
		end := openRecord(round)
		r := e.mustPgsync("run", "--until-caught-up")
		end()
		if r.elapsed > bound {
			t.Fatalf("round %d: run --until-caught-up took %s with the source idle (bound %s)\n%s", round, r.elapsed, bound, r.stderr)
		}
	}

	bg := e.start("run")
	e.srcExec(`INSERT INTO t VALUES (101, 'v101')`)
	eventually(t, 20*time.Second, "run applies the insert", func() bool {
		return queryOne[int](t, e.tgt, `SELECT count(*)::int FROM t`) == 101
	})
	end := openRecord(3)
	r := e.mustPgsync("cutover", "--timeout", "60s")
	end()
	if r.elapsed > bound {
		t.Fatalf("round 3: cutover took %s with the source idle (bound %s)\n%s", r.elapsed, bound, r.stderr)
	}
	bg.kill9(t)
}
