//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestRunAppliesEveryKindOfChange(t *testing.T) {
	e := newEnv(t, typesDDL+multiTableDDL+`
CREATE TABLE parent (id int PRIMARY KEY);
CREATE TABLE child (id int PRIMARY KEY, parent int REFERENCES parent);
CREATE TABLE counter (id serial PRIMARY KEY, v text);
INSERT INTO parent VALUES (1), (2); INSERT INTO child VALUES (1, 1);
INSERT INTO counter (v) VALUES ('a'), ('b');`, "")
	e.mustPgsync("bootstrap")
	// The target gets the same foreign key, so that CASCADE means something.
	e.tgtExec("ALTER TABLE child ADD FOREIGN KEY (parent) REFERENCES parent")

	steps := []struct{ name, sql string }{
		{"insert", "INSERT INTO orders VALUES (1, 100001, 5.00, 'new'), (2, 100002, NULL, NULL)"},
		{"insert every type", `INSERT INTO all_types (i2, i4, i8, num, f4, f8, t, b, by, d, ts, tstz, iv, u, js, jsb, arr_i, ip, mac, m, bt, vb, tsv)
			SELECT i2, i4, i8, num, f4, f8, t || ' copy', b, by, d, ts, tstz, iv, u, js, jsb, arr_i, ip, mac, m, bt, vb, tsv FROM all_types WHERE id <= 4`},
		{"update", "UPDATE orders SET amount = amount * 2, note = 'doubled' WHERE id % 10 = 0"},
		{"update to null", "UPDATE orders SET note = NULL WHERE id % 10 = 1"},
		{"update primary key", "UPDATE orders SET id = id + 500000 WHERE id BETWEEN 100 AND 120"},
		{"update leaving toast unchanged", "UPDATE all_types SET status = 'touched' WHERE big IS NOT NULL AND length(big) > 100000"},
		{"update toast", "UPDATE all_types SET big = big || 'tail' WHERE t = 'toast 2'"},
		{"delete", "DELETE FROM orders WHERE id % 10 = 5"},
		{"full identity update one duplicate", "UPDATE events SET kind = 'dup' WHERE ctid = (SELECT ctid FROM events WHERE kind = 'dup' LIMIT 1)"},
		{"full identity delete one of duplicates", "DELETE FROM events WHERE ctid = (SELECT ctid FROM events WHERE kind = 'dup' LIMIT 1)"},
		{"full identity insert duplicates", "INSERT INTO events VALUES ('dup', '{\"x\":1}', '2024-01-01'), ('n', NULL, NULL), ('n', NULL, NULL)"},
		{"full identity update with nulls and json", "UPDATE events SET at = '2025-01-01' WHERE ctid = (SELECT ctid FROM events WHERE kind = 'n' LIMIT 1)"},
		{"quoted names", `UPDATE sales."Mixed Case" SET "Value" = 'changed' WHERE "Id" < 10`},
		{"truncate several tables", "TRUNCATE orders, events"},
		{"refill after truncate", "INSERT INTO orders SELECT 1, g, g, 'refill' FROM generate_series(1, 1000) g"},
		{"truncate cascade", "TRUNCATE parent CASCADE"},
		{"truncate restart identity", "TRUNCATE counter RESTART IDENTITY"},
		{"insert after restart", "INSERT INTO counter (v) VALUES ('after')"},
		{"multi-statement transaction", "BEGIN; INSERT INTO parent VALUES (7); INSERT INTO child VALUES (7, 7); UPDATE child SET id = 8 WHERE id = 7; DELETE FROM parent WHERE id = 1; COMMIT"},
	}
	for _, s := range steps {
		e.srcExec(s.sql)
	}
	e.catchUp()
	e.mustVerify()

	// The unchanged TOAST values were kept, not overwritten with NULL.
	// (three md5 toasts and the random one, all over 100 kB)
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM all_types WHERE status = 'touched' AND big IS NOT NULL AND length(big) > 100000"); n != 4 {
		t.Errorf("rows with kept TOAST values after update = %d, want 4", n)
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM counter"); n != 1 {
		t.Errorf("counter rows after TRUNCATE RESTART IDENTITY and one insert = %d, want 1", n)
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM child"); n != 1 {
		t.Errorf("child rows after cascade and refill = %d, want 1", n)
	}
}

func TestRunSchemaChangeStopsWithClearError(t *testing.T) {
	e := newEnv(t, "CREATE TABLE s (id int PRIMARY KEY, a text); INSERT INTO s VALUES (1, 'x');", "")
	e.mustPgsync("bootstrap")
	e.srcExec("INSERT INTO s VALUES (2, 'y')")
	e.catchUp()
	before := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job)

	e.srcExec("ALTER TABLE s ADD COLUMN extra numeric(8,2)")
	e.srcExec("INSERT INTO s VALUES (3, 'z', 1.5)")
	r := e.pgsync("run", "--until-caught-up")
	if r.code != 1 {
		t.Fatalf("run after a source column was added: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"public.s", "extra", "numeric(8,2)", "ADD COLUMN"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("error does not name %q: %s", want, r.stderr)
		}
	}
	if after := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job); after != before {
		t.Errorf("progress moved from %s to %s on a failed apply", before, after)
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM s WHERE id = 3"); n != 0 {
		t.Errorf("the row after the schema change was applied without its column")
	}
	// The operator follows the message; pgsync resumes where it stopped.
	e.tgtExec("ALTER TABLE s ADD COLUMN extra numeric(8,2)")
	e.catchUp()
	e.mustVerify()

	// A dropped source column leaves an extra (nullable) target column.
	e.srcExec("ALTER TABLE s DROP COLUMN a")
	e.srcExec("INSERT INTO s VALUES (4, 2.5)")
	e.catchUp()
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM s WHERE id = 4 AND a IS NULL AND extra = 2.5"); n != 1 {
		t.Errorf("insert after a dropped source column not applied")
	}
}

func TestRunDivergedTargetStops(t *testing.T) {
	e := newEnv(t, "CREATE TABLE d (id int PRIMARY KEY, v int); INSERT INTO d SELECT g, g FROM generate_series(1, 10) g;", "")
	e.mustPgsync("bootstrap")
	e.tgtExec("DELETE FROM d WHERE id = 5")
	e.srcExec("UPDATE d SET v = 0 WHERE id = 5")
	r := e.pgsync("run", "--until-caught-up")
	if r.code != 1 || !strings.Contains(r.stderr, "UPDATE on public.d") || !strings.Contains(r.stderr, "diverged") {
		t.Fatalf("update of a row missing on the target: exit %d\n%s", r.code, r.stderr)
	}
}

// TestRunKill9MidStreamIsExactlyOnce kills pgsync with SIGKILL several times
// while writers commit small transactions, some into a table without a key
// where a duplicate would show, then checks that the target equals the
// source.
func TestRunKill9MidStreamIsExactlyOnce(t *testing.T) {
	e := newEnv(t, `CREATE TABLE acct (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO acct SELECT g, 1000 FROM generate_series(1, 50000) g;
CREATE TABLE ledger (id bigserial PRIMARY KEY, acct int, delta bigint);
CREATE TABLE nokey (w int, n int, note text);
ALTER TABLE nokey REPLICA IDENTITY FULL;`, "[tuning]\nmax_batch_rows = 50\n")
	e.mustPgsync("bootstrap")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	transfers := startTransfers(ctx, t, e.srcURL)
	seq := 0
	appends := startWriter(ctx, t, e.srcURL, func(ctx context.Context, tx pgx.Tx, rnd *rand.Rand) error {
		seq++
		_, err := tx.Exec(ctx, "INSERT INTO nokey SELECT 1, $1, 'same' FROM generate_series(1, 3)", seq%5)
		return err
	})
	rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
	for i := 0; i < 5; i++ {
		bg := e.start("run")
		time.Sleep(time.Duration(300+rnd.Intn(1200)) * time.Millisecond)
		bg.kill9(t)
	}
	cancel()
	if transfers.wait(t) == 0 || appends.wait(t) == 0 {
		t.Fatal("writers committed nothing")
	}
	e.catchUp()
	e.mustVerify()
	if sum := queryOne[int64](t, e.tgt, "SELECT sum(balance) FROM acct"); sum != 50000*1000 {
		t.Errorf("target balance sum = %d, want %d", sum, 50000*1000)
	}
}

func TestRunKill9InsideLargeTransaction(t *testing.T) {
	e := newEnv(t, "CREATE TABLE bulk (id int PRIMARY KEY, pad text); CREATE TABLE dup (a int, b text); ALTER TABLE dup REPLICA IDENTITY FULL;", "")
	e.mustPgsync("bootstrap")
	e.srcExec("BEGIN; INSERT INTO bulk SELECT g, repeat('x', 100) FROM generate_series(1, 300000) g; INSERT INTO dup SELECT 1, 'same' FROM generate_series(1, 1000); COMMIT")
	bg := e.start("run")
	// Kill once the target has started on the transaction: its rows go as
	// COPY runs (INSERT statements for a short remainder).
	eventually(t, 60*time.Second, "the large transaction to be applied in part", func() bool {
		return queryOne[int](t, e.tgt, `SELECT count(*) FROM pg_stat_activity
WHERE query LIKE 'COPY "public"."bulk"%' OR query LIKE 'INSERT INTO "public"."bulk"%'`) > 0
	})
	bg.kill9(t)
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM bulk"); n != 0 {
		t.Fatalf("target shows %d rows of an unfinished source transaction", n)
	}
	e.catchUp()
	e.mustVerify()
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM dup"); n != 1000 {
		t.Errorf("dup rows = %d, want 1000", n)
	}
}

func TestRunSurvivesSourceRestart(t *testing.T) { testRunSurvivesRestart(t, "source") }

func TestRunSurvivesTargetRestart(t *testing.T) { testRunSurvivesRestart(t, "target") }

// testRunSurvivesRestart restarts one cluster while pgsync run applies a
// stream of transfers: pgsync reconnects, resumes from the target's
// position, and the target ends equal to the source.
func testRunSurvivesRestart(t *testing.T, cluster string) {
	e := newEnv(t, `CREATE TABLE acct (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO acct SELECT g, 1000 FROM generate_series(1, 50000) g;
CREATE TABLE ledger (id bigserial PRIMARY KEY, acct int, delta bigint);`, "")
	e.mustPgsync("bootstrap")
	bg := e.start("run")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := startTransfers(ctx, t, e.srcURL)
	time.Sleep(time.Second)
	if out, err := localPGRestart(cluster, "fast"); err != nil {
		t.Fatalf("restart %s: %v\n%s", cluster, err, out)
	}
	if cluster == "source" {
		e.src.Close(context.Background())
		e.src = mustConnect(t, e.srcURL)
	} else {
		e.tgt.Close(context.Background())
		e.tgt = mustConnect(t, e.tgtURL)
	}
	time.Sleep(3 * time.Second)
	cancel()
	if w.wait(t) == 0 {
		t.Fatal("the writer committed nothing")
	}
	eventually(t, 60*time.Second, "pgsync to reconnect", func() bool { return strings.Contains(bg.stderr.String(), "msg=reconnected") })
	_ = bg.cmd.Process.Signal(syscall.SIGTERM)
	if code := bg.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("pgsync run exit %d after SIGTERM\n%s", code, bg.stderr.String())
	}
	e.catchUp()
	e.mustVerify()
}

func TestRunStopsCleanlyOnSignal(t *testing.T) {
	e := newEnv(t, "CREATE TABLE q (id int PRIMARY KEY, v text);", "")
	e.mustPgsync("bootstrap")
	bg := e.start("run")
	for i := 0; i < 50; i++ {
		e.srcExec("INSERT INTO q VALUES ($1, 'v')", i)
	}
	eventually(t, 30*time.Second, "rows to arrive", func() bool { return queryOne[int](t, e.tgt, "SELECT count(*) FROM q") == 50 })
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		began := time.Now()
		_ = bg.cmd.Process.Signal(sig)
		if code := bg.wait(t, 10*time.Second); code != 0 {
			t.Fatalf("exit %d after %v\n%s", code, sig, bg.stderr.String())
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Errorf("stopping on %v took %s", sig, d)
		}
		if !strings.Contains(bg.stderr.String(), "msg=stopped") {
			t.Errorf("no stop line in the log:\n%s", bg.stderr.String())
		}
		// The final position reached the source.
		applied := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job)
		confirmed := queryOne[string](t, e.src, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", "pgsync_"+e.job)
		if lsnLess(confirmed, applied) {
			t.Errorf("after %v the slot is at %s, the target at %s", sig, confirmed, applied)
		}
		if sig == syscall.SIGINT {
			bg = e.start("run")
			e.srcExec("INSERT INTO q VALUES (1000, 'after restart')")
			eventually(t, 30*time.Second, "row after restart", func() bool { return queryOne[int](t, e.tgt, "SELECT count(*) FROM q") == 51 })
		}
	}
}

func TestStatusJSON(t *testing.T) {
	e := newEnv(t, "CREATE TABLE st (id int PRIMARY KEY);", "")
	r := e.mustPgsync("status", "--json")
	var before map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &before); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	if before["state"] != "not bootstrapped" || before["slot_exists"] != false {
		t.Errorf("status before bootstrap: %s", r.stdout)
	}
	e.mustPgsync("bootstrap")
	e.srcExec("INSERT INTO st SELECT generate_series(1, 1000)")
	var st map[string]any
	r = e.mustPgsync("status", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	for _, k := range []string{"job", "slot", "slot_active", "confirmed_flush_lsn", "applied_lsn", "source_wal_lsn", "lag_bytes", "retained_wal_bytes"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status --json lacks key %q: %s", k, r.stdout)
		}
	}
	if st["job"] != e.job || st["slot"] != "pgsync_"+e.job || st["slot_active"] != false {
		t.Errorf("status: %s", r.stdout)
	}
	if lag, _ := st["lag_bytes"].(float64); lag <= 0 {
		t.Errorf("lag_bytes = %v before run, want > 0", st["lag_bytes"])
	}
	e.catchUp()
	r = e.mustPgsync("status", "--json")
	st = nil
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json after run: %v\n%s", err, r.stdout)
	}
	if applied, _ := st["applied_lsn"].(string); applied == "" {
		t.Errorf("status after run has no applied_lsn: %s", r.stdout)
	}
	if confirmed, _ := st["confirmed_flush_lsn"].(string); confirmed == "" {
		t.Errorf("status after run has no confirmed_flush_lsn: %s", r.stdout)
	}
	// Caught up: only WAL written since (checkpoints, autovacuum) may lag.
	if lag, _ := st["lag_bytes"].(float64); lag >= 64<<10 {
		t.Errorf("lag_bytes = %v after catching up with an idle source, want under 64 KiB: %s", st["lag_bytes"], r.stdout)
	}
	r = e.mustPgsync("status")
	if !strings.Contains(r.stdout, "applied_lsn:") || !strings.Contains(r.stdout, "lag_bytes:") {
		t.Errorf("status text: %s", r.stdout)
	}
}

// lsnLess compares two LSNs in text form.
func lsnLess(a, b string) bool {
	var ah, al, bh, bl uint64
	fmt.Sscanf(a, "%X/%X", &ah, &al)
	fmt.Sscanf(b, "%X/%X", &bh, &bl)
	return ah<<32|al < bh<<32|bl
}

// TestRunBatchedChangesKeepOrder drives the multi-row statements with
// patterns that break a naive batching: a row updated twice in a row, a key
// deleted and inserted again, composite keys, unchanged TOAST in the middle
// of a run of updates.
func TestRunBatchedChangesKeepOrder(t *testing.T) {
	e := newEnv(t, `CREATE TABLE c (id int PRIMARY KEY, n int, big text);
CREATE TABLE ck (a int, b text, v int, PRIMARY KEY (a, b));
INSERT INTO c SELECT g, 0, CASE WHEN g % 10 = 0 THEN repeat(md5(g::text), 5000) END FROM generate_series(1, 1000) g;
INSERT INTO ck SELECT g % 10, 'k' || g, 0 FROM generate_series(1, 500) g;`, "")
	e.mustPgsync("bootstrap")
	e.srcExec(`DO $$ BEGIN
  FOR i IN 1..5 LOOP
    UPDATE c SET n = n + 1 WHERE id <= 300;             -- many rows, each once per statement
    UPDATE c SET n = n * 2 WHERE id = 7;                -- the same row again
    UPDATE c SET n = n + 10 WHERE id = 7;
    DELETE FROM c WHERE id BETWEEN 500 AND 520;
    INSERT INTO c SELECT g, i, 'again' FROM generate_series(500, 520) g;  -- same keys back
    UPDATE ck SET v = v + i WHERE a = i;
    DELETE FROM ck WHERE a = i AND b LIKE 'k1%';
    UPDATE c SET n = -n WHERE id % 10 = 0;              -- rows with TOAST left unchanged
  END LOOP;
END $$`)
	e.catchUp()
	e.mustVerify()
}

// TestRunLargeValues applies values above the sizes where pgsync changes
// how it carries them (a message larger than a reader chunk is applied from
// the connection's buffer; a bytea over 64 KiB goes to the target in
// binary): inserts, updates of the large value and of another column, a
// large bytea in a REPLICA IDENTITY FULL row, and an unchanged TOAST value beside a changed
// large one.
func TestRunLargeValues(t *testing.T) {
	e := newEnv(t, `CREATE TABLE lv (id int PRIMARY KEY, b bytea, t text, n int);
CREATE TABLE lk (k bytea, v text); ALTER TABLE lk REPLICA IDENTITY FULL;`, "")
	e.mustPgsync("bootstrap")
	bg := e.start("run")
	e.srcExec(`INSERT INTO lv SELECT g, decode(string_agg(md5(g::text || i::text), ''), 'hex'), NULL, 0
FROM generate_series(1, 3) g, generate_series(1, 40000) i GROUP BY g`) // 640 KB bytea each
	e.srcExec(`INSERT INTO lv SELECT 10, '\x', string_agg(md5(i::text), ''), 0 FROM generate_series(1, 20000) i`) // 640 KB text
	e.srcExec(`UPDATE lv SET b = b || '\xdeadbeef'::bytea, n = n + 1 WHERE id = 1`)
	e.srcExec(`UPDATE lv SET n = n + 1 WHERE id = 2`) // b unchanged TOAST
	e.srcExec(`UPDATE lv SET t = t || 'more', n = 5 WHERE id = 10`)
	e.srcExec(`UPDATE lv SET b = NULL WHERE id = 3`)
	e.srcExec(`INSERT INTO lk SELECT decode(string_agg(md5(i::text), ''), 'hex'), 'big key' FROM generate_series(1, 10000) i`) // 160 KB, identity FULL
	e.srcExec(`UPDATE lk SET v = 'changed'`)
	e.srcExec(`UPDATE lk SET k = k || '\x00'::bytea, v = 'new key'`)
	e.srcExec(`DELETE FROM lv WHERE id = 2`)
	eventually(t, 60*time.Second, "the changes to arrive", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM lk WHERE v = 'new key'") == 1 &&
			queryOne[int](t, e.tgt, "SELECT count(*) FROM lv") == 3
	})
	sigtermWithin(t, bg, 10*time.Second)
	e.mustVerify()
	if got := queryOne[string](t, e.tgt, "SELECT md5(b) FROM lv WHERE id = 1"); got != queryOne[string](t, e.src, "SELECT md5(b) FROM lv WHERE id = 1") {
		t.Errorf("the large bytea of row 1 differs after its update")
	}
}

// TestRunStagedValues applies rows whose values reach 4 MiB, which run
// sends to the target in pieces through a temporary table (apply/staged.go):
// a bytea (in binary) and a text in one row, a jsonb and a domain value
// (read back through their types' input), an UPDATE replacing a large value
// beside an unchanged TOAST one, and a smaller row of the same shape after
// a staged one (its own statement). The target must end as the source, and
// the pieces must have gone through the staging table.
func TestRunStagedValues(t *testing.T) {
	e := newEnv(t, `CREATE DOMAIN short_doc AS text CHECK (length(VALUE) < 10000000);
CREATE TABLE sv (id int PRIMARY KEY, b bytea, t text, j jsonb, d short_doc, n int);`, "")
	e.mustPgsync("bootstrap")
	// The same changes through a native subscription into a target made
	// with pg_dump --schema-only. On both targets a trigger enabled for
	// replicas logs each row it sees: a staged row must fire it once, as
	// the apply worker's does. (The apply worker runs with an empty
	// search_path: the trigger names its table with its schema.)
	native := newNativeSubscriber(e, "")
	const fired = `CREATE TABLE sv_fired (id int, n int, blen int);
CREATE FUNCTION sv_fire() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.sv_fired VALUES (NEW.id, NEW.n, octet_length(NEW.b)); RETURN NEW; END $$;
CREATE TRIGGER sv_fire AFTER INSERT OR UPDATE ON sv FOR EACH ROW EXECUTE FUNCTION sv_fire();
ALTER TABLE sv ENABLE ALWAYS TRIGGER sv_fire;`
	native.exec(fired)
	e.tgtExec(fired)
	native.subscribe(e, "sv", "")
	bg := e.start("run")
	const mb3 = `(SELECT decode(string_agg(md5(i::text || '%[1]s'), ''), 'hex') FROM generate_series(1, 200000) i)` // 3.2 MB
	e.srcExec(fmt.Sprintf(`INSERT INTO sv VALUES (1, %s, (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 100000) i), NULL, NULL, 0)`,
		fmt.Sprintf(mb3, "a"))) // 3.2 MB bytea + 3.2 MB text
	e.srcExec(`INSERT INTO sv VALUES (2, NULL, 'small', (SELECT jsonb_agg(md5(i::text)) FROM generate_series(1, 150000) i), NULL, 0)`)    // 5.4 MB jsonb
	e.srcExec(`INSERT INTO sv VALUES (3, NULL, NULL, NULL, (SELECT string_agg(md5(i::text), ' ') FROM generate_series(1, 200000) i), 0)`) // 6.6 MB domain
	e.srcExec(`INSERT INTO sv VALUES (4, NULL, (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 5000) i), NULL, NULL, 0)`)    // 160 kB: not staged, same shape as row 1's
	e.srcExec(fmt.Sprintf(`UPDATE sv SET b = %s, n = 1 WHERE id = 1`, fmt.Sprintf(mb3, "b")+" || "+fmt.Sprintf(mb3, "c")))                // t unchanged TOAST
	e.srcExec(`UPDATE sv SET n = 2 WHERE id = 3`)
	e.srcExec(`BEGIN; UPDATE sv SET t = (SELECT string_agg(md5((i * 7)::text), '') FROM generate_series(1, 150000) i) WHERE id = 4; DELETE FROM sv WHERE id = 2; COMMIT`)
	whileRunning(t, bg, time.Minute, "the changes to arrive", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM sv WHERE n = 1 OR n = 2") == 2 &&
			queryOne[int](t, e.tgt, "SELECT count(*) FROM sv") == 3 &&
			queryOne[int](t, e.tgt, "SELECT coalesce(length(t), 0) FROM sv WHERE id = 4") > 1000000
	})
	// The pieces went through the session's staging table: 3.2 MB in
	// 512 KiB pieces is 7, and there are more than 40 in all.
	whileRunning(t, bg, 30*time.Second, "the staging table's statistics", func() bool {
		return queryOne[int64](t, e.tgt, "SELECT coalesce(sum(n_tup_ins), 0)::int8 FROM pg_stat_all_tables WHERE relname = 'pgsync_staged'") > 40
	})
	sigtermWithin(t, bg, 10*time.Second)
	e.mustVerify()
	native.caughtUp(e)
	native.sameAsNative(e, "sv", "sv_fired")
	for _, col := range []string{"b", "t", "j::text", "d"} {
		q := "SELECT string_agg(id || ':' || coalesce(md5(" + col + "), '-'), ',' ORDER BY id) FROM sv"
		if got, want := queryOne[string](t, e.tgt, q), queryOne[string](t, e.src, q); got != want {
			t.Errorf("column %s differs: target %s, source %s", col, got, want)
		}
	}
}

// TestRunRelationResendsDeallocate changes a table's storage options on the
// source again and again between changes: each change makes pgoutput send
// the Relation again, and pgsync prepares statements for it anew. The
// target backend's prepared statements (its CachedPlanSource memory
// contexts, dumped with pg_log_backend_memory_contexts) must stay bounded.
func TestRunRelationResendsDeallocate(t *testing.T) {
	e := newEnv(t, "CREATE TABLE rr (id int PRIMARY KEY, v int); INSERT INTO rr SELECT g, 0 FROM generate_series(1, 100) g;", "")
	e.mustPgsync("bootstrap")
	bg := e.start("run")
	const rounds = 40
	for i := 0; i < rounds; i++ {
		e.srcExec(fmt.Sprintf("ALTER TABLE rr SET (fillfactor = %d)", 60+i%40))
		e.srcExec(fmt.Sprintf("BEGIN; INSERT INTO rr VALUES (%d, 0); UPDATE rr SET v = v + 1 WHERE id = %d; DELETE FROM rr WHERE id = %d; COMMIT",
			1000+i, 1+i%50, 51+i))
	}
	eventually(t, 30*time.Second, "the last round on the target", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM rr WHERE id = $1", 1000+rounds-1) == 1
	})
	pid := e.pgsyncTargetBackend()
	if pid == 0 {
		t.Fatal("no pgsync backend on the target")
	}
	logPath := filepath.Join(pgDir, "target.log")
	var plans int
	if !queryOne[bool](t, e.tgt, "SELECT pg_log_backend_memory_contexts($1)", pid) {
		t.Fatal("pg_log_backend_memory_contexts failed")
	}
	eventually(t, 10*time.Second, "the memory dump of pgsync's backend", func() bool {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		plans = 0
		done := false
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, fmt.Sprintf("[%d]", pid)) {
				continue
			}
			if strings.Contains(line, "CachedPlanSource") && strings.Contains(line, "rr") {
				plans++
			}
			if strings.Contains(line, "Grand total") {
				done = true
			}
		}
		return done
	})
	// Without deallocation every round leaves its INSERT, UPDATE and DELETE
	// behind: 3 x 40. One shape's worth may stay.
	if plans > 6 {
		t.Errorf("the target holds %d prepared statements on rr after %d Relation resends, want at most 6", plans, rounds)
	}
	t.Logf("prepared statements on rr after %d resends: %d", rounds, plans)
	sigtermWithin(t, bg, 10*time.Second)
	e.mustVerify()
}
