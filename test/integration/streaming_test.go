//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Streamed transactions (issue 18): a source of PostgreSQL 14+ sends a
// transaction larger than logical_decoding_work_mem while it runs, and run
// spools it until its Stream Commit.

// lowDecodingMemory sets the source's logical_decoding_work_mem to its
// minimum, 64kB, for the test: every transaction of more than a few hundred
// rows is then streamed. Walsenders started afterwards read it.
func lowDecodingMemory(t *testing.T) {
	t.Helper()
	set := func(sql string) error {
		admin, err := mustConnectErr(adminURL(sourcePort))
		if err != nil {
			return err
		}
		defer admin.Close(context.Background())
		for _, s := range []string{sql, "SELECT pg_reload_conf()"} {
			if _, err := admin.Exec(context.Background(), s); err != nil {
				return err
			}
		}
		return nil
	}
	if err := set("ALTER SYSTEM SET logical_decoding_work_mem = '64kB'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set("ALTER SYSTEM RESET logical_decoding_work_mem"); err != nil {
			t.Errorf("reset logical_decoding_work_mem: %v", err)
		}
	})
}

// arrivalTriggers makes the target at url record, in audit.arrival, the
// order in which rows of the given tables arrive (ENABLE ALWAYS triggers
// fire for replicated rows): the order of commits on the target.
func arrivalTriggers(t *testing.T, url string, tables ...string) {
	t.Helper()
	c := mustConnect(t, url)
	defer c.Close(context.Background())
	sqls := []string{
		"CREATE SCHEMA audit",
		"CREATE TABLE audit.arrival (seq bigserial PRIMARY KEY, what text)",
		`CREATE FUNCTION audit.note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO audit.arrival (what) VALUES (TG_TABLE_NAME || ' ' || NEW.id); RETURN NEW; END $$`,
	}
	for _, tbl := range tables {
		sqls = append(sqls,
			fmt.Sprintf("CREATE TRIGGER %s_arrival AFTER INSERT ON %s FOR EACH ROW EXECUTE FUNCTION audit.note()", tbl, tbl),
			fmt.Sprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER %s_arrival", tbl, tbl))
	}
	for _, sql := range sqls {
		if _, err := c.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

func arrivals(t *testing.T, url string) string {
	c := mustConnect(t, url)
	defer c.Close(context.Background())
	return queryOne[string](t, c, "SELECT coalesce(string_agg(what, ',' ORDER BY seq), '') FROM audit.arrival")
}

// openTxn begins a transaction on a connection of its own to the source.
func openTxn(t *testing.T, url string) pgx.Tx {
	t.Helper()
	c := mustConnect(t, url)
	t.Cleanup(func() { c.Close(context.Background()) })
	tx, err := c.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func txExec(t *testing.T, tx pgx.Tx, sqls ...string) {
	t.Helper()
	for _, sql := range sqls {
		if _, err := tx.Exec(context.Background(), sql); err != nil {
			t.Fatalf("source: %v\n%s", err, sql)
		}
	}
}

var spoolBytesRE = regexp.MustCompile(`spool_bytes=(\d+)`)

// spooled reports whether run's log shows bytes written to a spool.
func spooled(log string) bool {
	for _, m := range spoolBytesRE.FindAllStringSubmatch(log, -1) {
		if n, _ := strconv.ParseInt(m[1], 10, 64); n > 0 {
			return true
		}
	}
	return false
}

// streamedTxns is how many transactions the source streamed from a slot.
func streamedTxns(t *testing.T, e *env, slot string) int64 {
	return queryOne[int64](t, e.src, "SELECT coalesce((SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = $1), 0)", slot)
}

// spoolFiles lists the spool files of the job's run (under the same
// TMPDIR as the test).
func spoolFiles(e *env) []string {
	files, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgsync-"+e.job+"-spool", "*.spool"))
	return files
}

// whileRunning polls cond like eventually, and fails at once, with run's
// log, when run exits meanwhile; on a timeout it shows the log too.
func whileRunning(t *testing.T, bg *background, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case <-bg.done:
			t.Fatalf("run exited while waiting for %s:\n%s", what, bg.stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; run's log:\n%s", timeout, what, bg.stderr.String())
		}
	}
}

// TestStreamedTransactionArrivesWhole streams a 300,000-row transaction
// while small transactions commit before and after its COMMIT, in both
// modes of tuning.apply_streamed: run spools it while it is open and, by
// default, applies it as it arrives in a target transaction of its own
// (its rows are written, invisible, before the source commits), or applies
// the spool at its commit; either way the target commits it in the
// source's commit order.
func TestStreamedTransactionArrivesWhole(t *testing.T) {
	for _, mode := range []string{"as-received", "at-commit"} {
		t.Run(mode, func(t *testing.T) { streamedArrivesWhole(t, mode) })
	}
}

func streamedArrivesWhole(t *testing.T, mode string) {
	e := newEnv(t, `CREATE TABLE bulk (id int PRIMARY KEY, pad text);
CREATE TABLE small (id int PRIMARY KEY, note text);
CREATE TABLE marker (id int PRIMARY KEY);`, fmt.Sprintf("[tuning]\napply_streamed = %q\n", mode))
	lowDecodingMemory(t)
	e.mustPgsync("bootstrap")
	arrivalTriggers(t, e.tgtURL, "small", "marker")
	bg := e.start("run", "--log-every", "1s")

	big := openTxn(t, e.srcURL)
	txExec(t, big, "INSERT INTO bulk SELECT g, repeat('x', 100) FROM generate_series(1, 300000) g")
	for i := 1; i <= 5; i++ {
		e.srcExec("INSERT INTO small VALUES ($1, 'while the big one is open')", i)
	}
	whileRunning(t, bg, 2*time.Minute, "run to spool the open transaction", func() bool { return spooled(bg.stderr.String()) })
	whileRunning(t, bg, 30*time.Second, "the small transactions to arrive", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM small") == 5
	})
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM bulk"); n != 0 {
		t.Fatalf("%d rows of an open source transaction on the target", n)
	}
	// Rows written and not committed: a target session other than this
	// test's holds the table's ROW EXCLUSIVE lock while the source's
	// transaction is still open.
	writing := func() bool {
		return queryOne[bool](t, e.tgt, `SELECT EXISTS (SELECT FROM pg_locks l WHERE l.relation = 'bulk'::regclass
  AND l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid())`)
	}
	if mode == "as-received" {
		whileRunning(t, bg, time.Minute, "a target session to write the open transaction's rows", writing)
	} else if writing() {
		t.Fatal("apply_streamed = at-commit: a target session writes the rows of a transaction the source has not committed")
	}
	txExec(t, big, "INSERT INTO marker VALUES (1)")
	if err := big.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 6; i <= 10; i++ {
		e.srcExec("INSERT INTO small VALUES ($1, 'after')", i)
	}
	whileRunning(t, bg, 3*time.Minute, "every row to arrive", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM bulk") == 300000 && queryOne[int](t, e.tgt, "SELECT count(*) FROM small") == 10
	})
	sigtermWithin(t, bg, 10*time.Second)
	e.mustVerify()

	want := "small 1,small 2,small 3,small 4,small 5,marker 1,small 6,small 7,small 8,small 9,small 10"
	if got := arrivals(t, e.tgtURL); got != want {
		t.Errorf("commit order on the target:\n%s\nwant the source's:\n%s", got, want)
	}
	log := bg.stderr.String()
	if !regexp.MustCompile(`msg="streamed transaction applied" xid=\d+ commit_lsn=\S+ rows=300001 spool_bytes=[1-9]`).MatchString(log) {
		t.Errorf("the log does not show the streamed commit of 300,001 rows:\n%s", log)
	}
	if early := strings.Contains(log, "as_received=true"); early != (mode == "as-received") {
		t.Errorf("apply_streamed = %s, and the log says as_received=true: %v\n%s", mode, early, log)
	}
	if n := streamedTxns(t, e, "pgsync_"+e.job); n == 0 {
		t.Error("pg_stat_replication_slots counts no streamed transaction for the slot")
	}
	if files := spoolFiles(e); len(files) != 0 {
		t.Errorf("spool files left after run stopped: %v", files)
	}
}

// TestStreamedAbortsApplyNothing streams a transaction one of whose
// savepoints (with one nested in it) is rolled back, and a whole
// transaction rolled back: nothing of the aborted parts reaches the target.
func TestStreamedAbortsApplyNothing(t *testing.T) {
	e := newEnv(t, `CREATE TABLE t (id int PRIMARY KEY, v text);
INSERT INTO t SELECT g, 'before' FROM generate_series(1, 1000) g;
CREATE TABLE marker (id int PRIMARY KEY);`, "")
	lowDecodingMemory(t)
	e.mustPgsync("bootstrap")
	bg := e.start("run", "--log-every", "1s")

	e.srcExec(`BEGIN;
INSERT INTO t SELECT g, 'keep 1' FROM generate_series(1001, 50000) g;
SAVEPOINT s1;
INSERT INTO t SELECT g, 'gone 1' FROM generate_series(50001, 100000) g;
UPDATE t SET v = 'gone update' WHERE id <= 1000;
SAVEPOINT s2;
INSERT INTO t SELECT g, 'gone 2' FROM generate_series(100001, 120000) g;
DELETE FROM t WHERE id <= 500;
ROLLBACK TO SAVEPOINT s1;
INSERT INTO t SELECT g, 'keep 2' FROM generate_series(120001, 150000) g;
SAVEPOINT s3;
INSERT INTO t SELECT g, 'keep 3' FROM generate_series(150001, 160000) g;
RELEASE SAVEPOINT s3;
SAVEPOINT s4;
INSERT INTO t SELECT g, 'gone 4' FROM generate_series(160001, 170000) g;
ROLLBACK TO SAVEPOINT s4;
UPDATE t SET v = 'kept update' WHERE id <= 100;
COMMIT`)
	e.srcExec(`BEGIN;
INSERT INTO t SELECT g, 'gone whole' FROM generate_series(200001, 260000) g;
UPDATE t SET v = 'gone whole update' WHERE id <= 1000;
ROLLBACK`)
	e.srcExec("INSERT INTO marker VALUES (1)")
	whileRunning(t, bg, 3*time.Minute, "the marker after both", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM marker") == 1
	})
	sigtermWithin(t, bg, 10*time.Second)
	e.mustVerify()
	if got := queryOne[string](t, e.tgt, "SELECT string_agg(v || ':' || n, ',' ORDER BY v) FROM (SELECT v, count(*) n FROM t GROUP BY v) c"); got != "before:900,keep 1:49000,keep 2:30000,keep 3:10000,kept update:100" {
		t.Errorf("target rows by value: %s", got)
	}
	log := bg.stderr.String()
	if !strings.Contains(log, `msg="streamed transaction applied"`) {
		t.Errorf("the log does not show the streamed commit:\n%s", log)
	}
	if n := streamedTxns(t, e, "pgsync_"+e.job); n < 2 {
		t.Errorf("the source streamed %d transactions, want both", n)
	}
}

// TestRunKill9WhileStreamedTransactionSpooled kills run while a streamed
// transaction is still open on the source and being spooled, then again
// while its replay is being applied: the transaction arrives once, whole.
func TestRunKill9WhileStreamedTransactionSpooled(t *testing.T) {
	e := newEnv(t, `CREATE TABLE bulk (id int PRIMARY KEY, pad text);
CREATE TABLE dup (a int, b text);
ALTER TABLE dup REPLICA IDENTITY FULL;
CREATE TABLE small (id int PRIMARY KEY, note text);`, "")
	lowDecodingMemory(t)
	e.mustPgsync("bootstrap")
	bg := e.start("run", "--log-every", "1s")

	big := openTxn(t, e.srcURL)
	txExec(t, big, "INSERT INTO dup SELECT 1, 'same' FROM generate_series(1, 1000)",
		"INSERT INTO bulk SELECT g, repeat('x', 100) FROM generate_series(1, 300000) g")
	e.srcExec("INSERT INTO small VALUES (1, 'during')")
	whileRunning(t, bg, 2*time.Minute, "run to spool the open transaction", func() bool { return spooled(bg.stderr.String()) })
	bg.kill9(t)
	if len(spoolFiles(e)) == 0 {
		t.Log("the killed run left no spool file (nothing to clear)")
	}
	txExec(t, big, "INSERT INTO small VALUES (2, 'in the big one')")
	if err := big.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.srcExec("INSERT INTO small VALUES (3, 'after')")

	// The next session receives the transaction again from its start; kill
	// it too while the target applies the replay.
	bg = e.start("run")
	whileRunning(t, bg, 2*time.Minute, "the replay to be applied in part", func() bool {
		return queryOne[int](t, e.tgt, `SELECT count(*) FROM pg_stat_activity
WHERE query LIKE 'COPY "public"."bulk"%' OR query LIKE 'INSERT INTO "public"."bulk"%'`) > 0
	})
	bg.kill9(t)
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM bulk"); n != 0 && n != 300000 {
		t.Fatalf("target shows %d rows of a 300,000-row source transaction", n)
	}
	r := e.catchUp()
	if files := spoolFiles(e); len(files) != 0 {
		t.Errorf("spool files left after run stopped: %v", files)
	}
	e.mustVerify()
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM dup"); n != 1000 {
		t.Errorf("dup rows = %d, want 1000\n%s", n, r.stderr)
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM small"); n != 3 {
		t.Errorf("small rows = %d, want 3", n)
	}
}

// TestStreamingMatchesNativeSubscription runs the same streamed workload
// into a native subscription with streaming = on and into pgsync: the same
// rows, committed in the same order.
func TestStreamingMatchesNativeSubscription(t *testing.T) {
	e := newEnv(t, `CREATE TABLE bulk (id int PRIMARY KEY, pad text);
INSERT INTO bulk SELECT g, 'initial' FROM generate_series(1, 20000) g;
CREATE TABLE small (id int PRIMARY KEY, note text);
CREATE TABLE marker (id int PRIMARY KEY);
CREATE TABLE nokey (a int, b text);
ALTER TABLE nokey REPLICA IDENTITY FULL;`, "")
	lowDecodingMemory(t)
	native := newNativeSubscriber(e, "") // the source's schema
	e.dumpSchema(e.db)
	native.subscribe(e, "bulk, small, marker, nokey", "streaming = on")
	e.mustPgsync("bootstrap")
	arrivalTriggers(t, e.tgtURL, "small", "marker")
	arrivalTriggers(t, native.url, "small", "marker")
	bg := e.start("run")

	// A streamed transaction with a savepoint rolled back, updates and
	// deletes, open while small transactions commit; one rolled back
	// whole; and one more committed after.
	e.srcExec("INSERT INTO small VALUES (1, 'before')")
	big := openTxn(t, e.srcURL)
	txExec(t, big,
		"INSERT INTO bulk SELECT g, 'big ' || g FROM generate_series(20001, 100000) g",
		"INSERT INTO nokey SELECT g % 3, 'dup' FROM generate_series(1, 3000) g")
	e.srcExec("INSERT INTO small VALUES (2, 'during')")
	txExec(t, big,
		"SAVEPOINT a",
		"UPDATE bulk SET pad = 'rolled back' WHERE id <= 20000",
		"INSERT INTO bulk SELECT g, 'rolled back' FROM generate_series(100001, 120000) g",
		"ROLLBACK TO SAVEPOINT a",
		"UPDATE bulk SET pad = 'updated' WHERE id % 10 = 0",
		"DELETE FROM bulk WHERE id % 7 = 0",
		"DELETE FROM nokey WHERE ctid IN (SELECT ctid FROM nokey WHERE a = 1 LIMIT 10)")
	e.srcExec("INSERT INTO small VALUES (3, 'during')")
	txExec(t, big, "INSERT INTO marker VALUES (1)")
	if err := big.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.srcExec("INSERT INTO small VALUES (4, 'after')")
	e.srcExec(`BEGIN; INSERT INTO bulk SELECT g, 'aborted' FROM generate_series(200001, 240000) g; DELETE FROM small; ROLLBACK`)
	e.srcExec(`BEGIN; INSERT INTO marker VALUES (2); UPDATE bulk SET pad = 'last' WHERE id % 3 = 0; COMMIT`)
	e.srcExec("INSERT INTO small VALUES (5, 'after')")

	head := queryOne[string](t, e.src, "SELECT pg_current_wal_lsn()::text")
	whileRunning(t, bg, 3*time.Minute, "both targets to reach "+head, func() bool {
		var pgsyncAt, nativeAt string
		row := e.src.QueryRow(context.Background(), `SELECT
  coalesce((SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1), '0/0'),
  coalesce((SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $2), '0/0')`, "pgsync_"+e.job, native.sub)
		if err := row.Scan(&pgsyncAt, &nativeAt); err != nil {
			t.Fatal(err)
		}
		return !lsnLess(pgsyncAt, head) && !lsnLess(nativeAt, head)
	})
	sigtermWithin(t, bg, 10*time.Second)
	if log := bg.stderr.String(); strings.Contains(log, "level=ERROR") || strings.Contains(log, "reconnecting") {
		t.Errorf("run reported errors:\n%s", log)
	}
	e.mustVerify()
	native.sameAsNative(e, "bulk", "small", "marker", "nokey")
	if got, want := arrivals(t, e.tgtURL), arrivals(t, native.url); got != want {
		t.Errorf("commit order: pgsync %s, native %s", got, want)
	}
	for _, slot := range []string{"pgsync_" + e.job, native.sub} {
		if n := streamedTxns(t, e, slot); n == 0 {
			t.Errorf("slot %s: the source streamed no transaction", slot)
		}
	}
}

// TestStreamedLargeValues streams a transaction of values larger than a
// read chunk (640 kB) and than the size after which run collects garbage
// (a 20 MB text), one of them in a subtransaction rolled back: they are
// spooled and read back whole, the rolled back one skipped. PostgreSQL
// 15.18 often sends that one without its Stream Abort (it spilled the
// subtransaction's TOAST chunks to disk before streaming it), and a native
// subscription with streaming = on applies it; run asks the source's commit
// log (replication/streamed.go).
func TestStreamedLargeValues(t *testing.T) {
	e := newEnv(t, `CREATE TABLE lv (id int PRIMARY KEY, b bytea, t text);`, "")
	lowDecodingMemory(t)
	e.mustPgsync("bootstrap")
	bg := e.start("run")
	e.srcExec(`BEGIN;
INSERT INTO lv SELECT g, decode(string_agg(md5(g::text || i::text), ''), 'hex'), NULL
FROM generate_series(1, 3) g, generate_series(1, 40000) i GROUP BY g;
SAVEPOINT s;
INSERT INTO lv SELECT 4, NULL, string_agg(md5(i::text), '') FROM generate_series(1, 650000) i;
ROLLBACK TO SAVEPOINT s;
INSERT INTO lv SELECT 5, NULL, string_agg(md5((i + 1)::text), '') FROM generate_series(1, 650000) i;
UPDATE lv SET b = b || '\xdeadbeef'::bytea WHERE id = 1;
INSERT INTO lv SELECT 100 + g, NULL, 'small' FROM generate_series(1, 1000) g;
COMMIT`)
	whileRunning(t, bg, 2*time.Minute, "the transaction to arrive", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM lv") == 1004
	})
	sigtermWithin(t, bg, 10*time.Second)
	e.mustVerify()
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM lv WHERE id = 4"); n != 0 {
		t.Error("the value of the rolled back subtransaction was applied")
	}
	log := bg.stderr.String()
	if !strings.Contains(log, `msg="streamed transaction applied"`) {
		t.Errorf("the transaction was not streamed:\n%s", log)
	}
	if strings.Contains(log, "without their Stream Abort") {
		t.Log("the source sent the rolled back subtransaction without its Stream Abort; run skipped it")
	}
}

// TestStreamedApplyGivesWayToLockWait: a trigger on the target (ENABLE
// ALWAYS, as an application's summary table keeps a count) makes the
// streamed transaction's target session hold a row that the main session
// then needs for a transaction the source committed earlier. The server
// cannot see that wait (it goes through pgsync: the streamed session can
// only commit after the main one), so run's lock watch ends the streamed
// session; the transaction is applied at its commit from its spool, and
// the count is what the rows are.
func TestStreamedApplyGivesWayToLockWait(t *testing.T) {
	e := newEnv(t, `CREATE TABLE bulk (id int PRIMARY KEY, pad text);`, "")
	lowDecodingMemory(t)
	e.mustPgsync("bootstrap")
	for _, sql := range []string{
		"CREATE TABLE bulk_count (n bigint NOT NULL)",
		"INSERT INTO bulk_count VALUES (0)",
		`CREATE FUNCTION count_bulk() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN UPDATE bulk_count SET n = n + 1; RETURN NEW; END $$`,
		"CREATE TRIGGER bulk_count AFTER INSERT ON bulk FOR EACH ROW EXECUTE FUNCTION count_bulk()",
		"ALTER TABLE bulk ENABLE ALWAYS TRIGGER bulk_count",
	} {
		e.tgtExec(sql)
	}
	bg := e.start("run", "--log-every", "1s")

	big := openTxn(t, e.srcURL)
	txExec(t, big, "INSERT INTO bulk SELECT g, repeat('x', 100) FROM generate_series(1, 3000) g")
	whileRunning(t, bg, time.Minute, "the streamed transaction's session to hold the count's row", func() bool {
		return queryOne[bool](t, e.tgt, `SELECT EXISTS (SELECT FROM pg_locks l WHERE l.relation = 'bulk_count'::regclass
  AND l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid())`)
	})
	e.srcExec("INSERT INTO bulk VALUES (100000, 'committed first')")
	whileRunning(t, bg, time.Minute, "the transaction committed first to arrive", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM bulk") == 1
	})
	txExec(t, big, "INSERT INTO bulk VALUES (100001, 'last of the big one')")
	if err := big.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	whileRunning(t, bg, time.Minute, "every row to arrive", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM bulk") == 3002
	})
	sigtermWithin(t, bg, 10*time.Second)
	e.mustVerify()
	if n := queryOne[int64](t, e.tgt, "SELECT n FROM bulk_count"); n != 3002 {
		t.Errorf("the trigger counted %d rows, want 3002", n)
	}
	log := bg.stderr.String()
	for _, want := range []string{
		"the main target session waits for a lock the streamed transaction's session holds",
		`msg="streamed transaction: not applied as it arrives"`,
		`msg="streamed transaction applied" xid=`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("run's log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "as_received=true") {
		t.Errorf("the transaction was committed as received despite the lock wait:\n%s", log)
	}
}
