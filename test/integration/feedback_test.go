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

func TestIdleRunReportsOnlyChangedPositions(t *testing.T) {
	e := newEnv(t, "CREATE TABLE f (id int PRIMARY KEY);", "")
	e.mustPgsync("bootstrap")
	e.start("run")
	e.srcExec("INSERT INTO f SELECT generate_series(1, 100)")
	eventually(t, 30*time.Second, "the insert to be applied and acknowledged", func() bool {
		applied := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job)
		confirmed, reply := slotFeedback(t, e)
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM f") == 100 && !lsnLess(confirmed, applied) && reply != ""
	})
	time.Sleep(time.Second)

	// Over 6 idle seconds, every status update must carry a new position,
	// except a reply to the server's own ping (every wal_sender_timeout/2).
	lastConfirmed, lastReply := slotFeedback(t, e)
	unchangedReports := 0
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		confirmed, reply := slotFeedback(t, e)
		if reply != lastReply && confirmed == lastConfirmed {
			unchangedReports++
		}
		lastConfirmed, lastReply = confirmed, reply
	}
	if unchangedReports > 1 {
		t.Errorf("pgsync repeated an unchanged position %d times in 6 idle seconds", unchangedReports)
	}
}

func TestIdleSlotAdvancesOverUnpublishedWAL(t *testing.T) {
	e := newEnv(t, "CREATE TABLE published (id int PRIMARY KEY);", "")
	e.mustPgsync("bootstrap")
	e.start("run")
	e.srcExec("CREATE TABLE unpublished (id int, pad text)")
	e.srcExec("INSERT INTO unpublished SELECT g, repeat('u', 100) FROM generate_series(1, 50000) g")
	head := queryOne[string](t, e.src, "SELECT pg_current_wal_lsn()::text")
	eventually(t, 10*time.Second, "confirmed_flush_lsn to reach the WAL head "+head, func() bool {
		confirmed, _ := slotFeedback(t, e)
		return !lsnLess(confirmed, head)
	})
	// Nothing was applied for it: the progress row is where bootstrap left it
	// or behind the slot, never ahead.
	applied := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job)
	if lsnLess(head, applied) {
		t.Errorf("progress %s is beyond the WAL head %s", applied, head)
	}
}

// TestLongApplyKeepsWalsenderAlive holds the target's table locked for
// longer than wal_sender_timeout (30s) while a backlog larger than
// max_inflight_bytes waits: the reader is blocked on the full queue and must
// still keep the replication connection alive.
func TestLongApplyKeepsWalsenderAlive(t *testing.T) {
	e := newEnv(t, "CREATE TABLE slow (id int PRIMARY KEY, pad text);", "[tuning]\nmax_inflight_bytes = \"64KiB\"\nmax_batch_bytes = \"16KiB\"\n")
	e.mustPgsync("bootstrap")
	e.srcExec("INSERT INTO slow SELECT g, repeat('s', 200) FROM generate_series(1, 20000) g")

	locker := mustConnect(t, e.tgtURL)
	defer locker.Close(t.Context())
	if _, err := locker.Exec(t.Context(), "BEGIN; LOCK TABLE slow IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	bg := e.start("run", "--until-caught-up")
	time.Sleep(40 * time.Second)
	if _, err := locker.Exec(t.Context(), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if code := bg.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("run exit %d\n%s", code, bg.stderr.String())
	}
	if log := bg.stderr.String(); strings.Contains(log, "reconnecting") {
		t.Errorf("the replication connection was lost during the long apply:\n%s", log)
	}
	e.mustVerify()
}
