//go:build integration

package integration

import (
	"strings"
	"testing"
	"time"
)

// slotFeedback reads what the source last heard from pgsync's walsender.
func slotFeedback(t *testing.T, e *env) (confirmed, replyTime string) {
	t.Helper()
	row := e.src.QueryRow(t.Context(), `
SELECT s.confirmed_flush_lsn::text, coalesce(r.reply_time::text, '')
FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
WHERE s.slot_name = $1`, "pgsync_"+e.job)
	if err := row.Scan(&confirmed, &replyTime); err != nil {
		t.Fatal(err)
	}
	return confirmed, replyTime
}

// TestFeedbackOnlyWhenPositionsChange checks both halves of the feedback
// rule: a status update reaches the source promptly when the applied
// position moves, and none is sent while nothing changes.
func TestFeedbackOnlyWhenPositionsChange(t *testing.T) {
	// Parallel tests run after every other test, together: no cluster
	// restart can come in the middle of this one's timing.
	t.Parallel()
	e := newEnv(t, "CREATE TABLE f (id int PRIMARY KEY);", "")
	e.mustPgsync("bootstrap")
	e.start("run")
	eventually(t, 30*time.Second, "the walsender to start", func() bool {
		_, reply := slotFeedback(t, e)
		return reply != ""
	})
	for round := 0; round < 3; round++ {
		// A change: its position must be acknowledged within 3 s, far
		// sooner than the walsender's own ping (wal_sender_timeout/2 = 15 s).
		before, _ := slotFeedback(t, e)
		e.srcExec("INSERT INTO f SELECT g FROM generate_series($1::int, $1::int + 99) g", round*100)
		changedAt := time.Now()
		eventually(t, 3*time.Second, "the new position to be acknowledged", func() bool {
			applied := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job)
			confirmed, _ := slotFeedback(t, e)
			return lsnLess(before, applied) && !lsnLess(confirmed, applied)
		})
		t.Logf("round %d: acknowledged %s after the commit", round, time.Since(changedAt).Round(time.Millisecond))

		// Idle: over 5 s (less than the 15 s after which the walsender
		// pings), no status update may repeat an unchanged position.
		time.Sleep(500 * time.Millisecond)
		lastConfirmed, lastReply := slotFeedback(t, e)
		unchangedReports := 0
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			confirmed, reply := slotFeedback(t, e)
			if reply != lastReply && confirmed == lastConfirmed {
				unchangedReports++
			}
			lastConfirmed, lastReply = confirmed, reply
		}
		if unchangedReports != 0 {
			t.Errorf("round %d: pgsync sent %d status updates with an unchanged position in 5 idle seconds", round, unchangedReports)
		}
	}
}

func TestIdleSlotAdvancesOverUnpublishedWAL(t *testing.T) {
	e := newEnv(t, "CREATE TABLE published (id int PRIMARY KEY);", "")
	e.mustPgsync("bootstrap")
	bootstrapped := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job)
	e.start("run")
	e.srcExec("CREATE TABLE unpublished (id int, pad text)")
	e.srcExec("INSERT INTO unpublished SELECT g, repeat('u', 100) FROM generate_series(1, 50000) g")
	head := queryOne[string](t, e.src, "SELECT pg_current_wal_lsn()::text")
	eventually(t, 10*time.Second, "confirmed_flush_lsn to reach the WAL head "+head, func() bool {
		confirmed, _ := slotFeedback(t, e)
		return !lsnLess(confirmed, head)
	})
	// The slot moved on without anything applied: the progress row is
	// still where bootstrap left it, and the target saw no transaction.
	if applied := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job); applied != bootstrapped {
		t.Errorf("progress moved from %s to %s although no published change was made", bootstrapped, applied)
	}
}

// TestStalledTargetKeepsWalsenderAlive holds the target's table locked for
// 45 s, longer than wal_sender_timeout (30 s), while a backlog of 200,000
// small DELETE messages waits: the queue fills by message count long before
// max_inflight_bytes, and the reader must still keep the replication
// connection alive. The walsender never changes, and the slot never
// acknowledges more than the target holds.
func TestStalledTargetKeepsWalsenderAlive(t *testing.T) {
	t.Parallel() // 45 s of waiting, beside TestFeedbackOnlyWhenPositionsChange
	e := newEnv(t, "CREATE TABLE slow (id int PRIMARY KEY); INSERT INTO slow SELECT generate_series(1, 200000);", "")
	e.mustPgsync("bootstrap")
	e.srcExec("DELETE FROM slow")

	locker := mustConnect(t, e.tgtURL)
	defer locker.Close(t.Context())
	if _, err := locker.Exec(t.Context(), "BEGIN; LOCK TABLE slow IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	bg := e.start("run", "--until-caught-up")
	slotPID := func() int {
		return queryOne[int](t, e.src, "SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1", "pgsync_"+e.job)
	}
	eventually(t, 20*time.Second, "the walsender to start", func() bool { return slotPID() != 0 })
	pid := slotPID()
	for end := time.Now().Add(45 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		if now := slotPID(); now != pid {
			t.Fatalf("the walsender changed from PID %d to %d during the stall\n%s", pid, now, bg.stderr.String())
		}
		applied := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job)
		confirmed, _ := slotFeedback(t, e)
		if lsnLess(applied, confirmed) {
			t.Fatalf("during the stall the slot acknowledged %s, past the target's progress %s", confirmed, applied)
		}
	}
	if _, err := locker.Exec(t.Context(), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if code := bg.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("run exit %d\n%s", code, bg.stderr.String())
	}
	if log := bg.stderr.String(); strings.Contains(log, "reconnecting") {
		t.Errorf("the replication connection was lost during the stall:\n%s", log)
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM slow"); n != 0 {
		t.Errorf("%d rows left on the target after the DELETE", n)
	}
	e.mustVerify()
}
