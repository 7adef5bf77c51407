//go:build integration

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestBootstrapCopiesEveryTypeAndVerifies(t *testing.T) {
	e := newEnv(t, typesDDL+multiTableDDL, "")
	// The job covers both schemas.
	cfg, _ := os.ReadFile(e.cfgPath)
	os.WriteFile(e.cfgPath, []byte(strings.Replace(string(cfg), `tables = ["public.*"]`, `tables = ["public.*", "sales.*"]`, 1)), 0o600)

	r := e.mustPgsync("bootstrap")
	if !strings.Contains(r.stdout, "bootstrapped job "+e.job+": 4 tables") {
		t.Errorf("bootstrap summary: %q", r.stdout)
	}
	// Built-in types only, same major version: binary COPY.
	if !regexp.MustCompile(`table=public\.all_types .*format=binary`).MatchString(r.stderr) {
		t.Errorf("all_types was not copied in binary:\n%s", r.stderr)
	}
	state := queryOne[string](t, e.tgt, "SELECT state FROM pgsync.progress WHERE job = $1", e.job)
	if state != "ready" {
		t.Errorf("progress state = %q, want ready", state)
	}
	slotLSN := queryOne[string](t, e.src, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", "pgsync_"+e.job)
	progLSN := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job)
	if slotLSN != progLSN {
		t.Errorf("progress lsn %s, slot consistent point %s: want equal", progLSN, slotLSN)
	}
	e.mustVerify()

	// Values arrive unchanged, compared as text on both sides.
	for _, col := range []string{"num", "f4", "f8", "tstz", "iv", "m", "arr_2d", "jsb", "vc", "big"} {
		q := fmt.Sprintf("SELECT string_agg(coalesce(%s::text, '<null>'), '|' ORDER BY id) FROM all_types", col)
		if s, d := queryOne[string](t, e.src, q), queryOne[string](t, e.tgt, q); s != d {
			t.Errorf("column %s differs:\nsource %.200s\ntarget %.200s", col, s, d)
		}
	}
	// The generated column is computed by the target.
	if v := queryOne[int](t, e.tgt, `SELECT total FROM sales."Mixed Case" WHERE "Id" = 21`); v != 42 {
		t.Errorf("generated column = %d, want 42", v)
	}

	// verify notices a difference and names the table.
	e.tgtExec("UPDATE orders SET note = 'changed' WHERE tenant = 1 AND id = 1")
	r = e.pgsync("verify")
	if r.code != 1 || !strings.Contains(r.stderr, "public.orders") || !strings.Contains(r.stdout, "DIFFERS") {
		t.Errorf("verify after a target change: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// ... also a duplicated row in a table without a key.
	e.tgtExec("UPDATE orders SET note = 'order 1' WHERE tenant = 1 AND id = 1")
	e.tgtExec("INSERT INTO events VALUES ('one', NULL, NULL)")
	r = e.pgsync("verify")
	if r.code != 1 || !strings.Contains(r.stderr, "public.events") {
		t.Errorf("verify after a duplicated row: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestBootstrapRefusesTableWithoutReplicaIdentity(t *testing.T) {
	e := newEnv(t, `CREATE TABLE keyed (id int PRIMARY KEY); CREATE TABLE loose (a int, b text); CREATE TABLE nothing (id int PRIMARY KEY);
ALTER TABLE nothing REPLICA IDENTITY NOTHING;`, "")
	r := e.pgsync("bootstrap")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"public.loose", `ALTER TABLE "public"."loose" REPLICA IDENTITY FULL`, "public.nothing"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("error does not mention %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "public.keyed") {
		t.Errorf("error blames a table with a key:\n%s", r.stderr)
	}
	if n := queryOne[int](t, e.src, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", "pgsync_"+e.job); n != 0 {
		t.Errorf("a refused bootstrap created the slot")
	}
	if n := queryOne[int](t, e.src, "SELECT count(*) FROM pg_publication"); n != 0 {
		t.Errorf("a refused bootstrap created a publication")
	}
}

func TestBootstrapTwiceTeardownAndForce(t *testing.T) {
	e := newEnv(t, "CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a SELECT g, 'x' FROM generate_series(1, 100) g;", "")
	e.mustPgsync("bootstrap")
	r := e.pgsync("bootstrap")
	if r.code != 1 || !strings.Contains(r.stderr, "already bootstrapped") {
		t.Fatalf("second bootstrap: exit %d\n%s", r.code, r.stderr)
	}
	e.srcExec("INSERT INTO a VALUES (1000, 'late')")
	e.mustPgsync("bootstrap", "--force")
	e.mustVerify()

	r = e.mustPgsync("teardown")
	if n := queryOne[int](t, e.src, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", "pgsync_"+e.job); n != 0 {
		t.Errorf("teardown left the slot")
	}
	if n := queryOne[int](t, e.src, "SELECT count(*) FROM pg_publication WHERE pubname = $1", "pgsync_"+e.job); n != 0 {
		t.Errorf("teardown left the publication")
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM pgsync.progress WHERE job = $1", e.job); n != 0 {
		t.Errorf("teardown left the progress row")
	}
	e.mustPgsync("teardown") // idempotent

	// After teardown the target tables still hold rows: a plain bootstrap
	// refuses to overwrite them.
	r = e.pgsync("bootstrap")
	if r.code != 1 || !strings.Contains(r.stderr, "public.a: not empty") {
		t.Fatalf("bootstrap into a non-empty table: exit %d\n%s", r.code, r.stderr)
	}
}

func TestBootstrapRecoversFromInterruptedRun(t *testing.T) {
	t.Run("whole table", func(t *testing.T) { bootstrapKilledDuringCopy(t, 0) })
	// In ranges, each range commits on its own: the kill comes after some
	// have, and the next bootstrap must empty the table first.
	t.Run("block ranges", func(t *testing.T) { bootstrapKilledDuringCopy(t, 8) }) // two streams: one does not split
}

func bootstrapKilledDuringCopy(t *testing.T, rangeMB int) {
	e := newEnv(t, `CREATE TABLE big (id int PRIMARY KEY, pad text);
INSERT INTO big SELECT g, repeat('p', 200) FROM generate_series(1, 800000) g;`,
		builtinCreator+fmt.Sprintf("[tuning]\nmax_parallel_copies = %d\ncopy_range_mb = %d\n", min(rangeMB+1, 2), rangeMB))
	bg := e.start("bootstrap")
	eventually(t, 60*time.Second, "the copy to start", func() bool {
		if rangeMB > 0 {
			return queryOne[bool](t, e.tgt, "SELECT to_regclass('big') IS NOT NULL") &&
				queryOne[int](t, e.tgt, "SELECT count(*) FROM big") > 0
		}
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'COPY%FROM STDIN%'") > 0
	})
	bg.kill9(t)
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM big"); n == 800000 {
		t.Fatal("the copy finished before the kill: the test did not exercise recovery")
	}
	state := queryOne[string](t, e.tgt, "SELECT state FROM pgsync.progress WHERE job = $1", e.job)
	if state != "copying" {
		t.Fatalf("state after an interrupted bootstrap = %q, want copying", state)
	}
	r := e.pgsync("run", "--until-caught-up")
	if r.code != 1 || !strings.Contains(r.stderr, "bootstrap did not finish") {
		t.Errorf("run after an interrupted bootstrap: exit %d\n%s", r.code, r.stderr)
	}
	r = e.mustPgsync("bootstrap")
	if rangeMB > 0 && !strings.Contains(r.stderr, "parts=") || rangeMB > 0 && strings.Contains(r.stderr, "parts=1 ") {
		t.Errorf("the rerun did not copy big in ranges:\n%s", r.stderr)
	}
	// The primary key is built after the copy: the killed bootstrap left
	// big without one, and the rerun must build it.
	if !strings.Contains(r.stderr, "primary key big_pkey on public.big") {
		t.Errorf("the rerun did not build big's primary key after the copy:\n%s", r.stderr)
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'big'::regclass AND contype = 'p'"); n != 1 {
		t.Errorf("big has %d primary keys on the target after the rerun, want 1", n)
	}
	e.mustVerify()
}

func TestConfigErrorsExitTwo(t *testing.T) {
	dir := t.TempDir()
	good := "[source]\nurl = \"postgres://postgres:s3cret@127.0.0.1:1/app\"\n[target]\nurl = \"postgres://postgres@127.0.0.1:1/app\"\n[job]\nname = \"x\"\ntables = [\"public.*\"]\n"
	cases := []struct {
		name, text string
		want       []string
	}{
		{"unknown key", good + "[tuning]\nmax_batch_rowz = 5\n", []string{"tuning.max_batch_rowz", "unknown key"}},
		{"bad size", good + "[tuning]\nmax_inflight_bytes = \"16 potatoes\"\n", []string{"tuning.max_inflight_bytes", "not a size"}},
		{"bad job name", strings.Replace(good, `name = "x"`, `name = "a-b"`, 1), []string{"job.name"}},
		{"missing section", good[strings.Index(good, "[target]"):], []string{"missing section [source]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".toml")
			os.WriteFile(path, []byte(tc.text), 0o600)
			for _, cmd := range []string{"bootstrap", "run", "status", "verify", "teardown"} {
				r := runPgsync(t, 30*time.Second, "-c", path, cmd)
				if r.code != 2 {
					t.Errorf("%s: exit %d, want 2\n%s", cmd, r.code, r.stderr)
				}
				lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
				if len(lines) != 1 {
					t.Errorf("%s: want one line, got %q", cmd, r.stderr)
				}
				for _, w := range append(tc.want, path) {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("%s: %q does not contain %q", cmd, r.stderr, w)
					}
				}
				if strings.Contains(r.stderr, "s3cret") {
					t.Errorf("%s: password printed: %q", cmd, r.stderr)
				}
			}
		})
	}
	r := runPgsync(t, 30*time.Second, "-c", filepath.Join(dir, "absent.toml"), "status")
	if r.code != 2 || !strings.Contains(r.stderr, "absent.toml") {
		t.Errorf("missing file: exit %d %q", r.code, r.stderr)
	}
}

func TestUnreachableServerFailsFast(t *testing.T) {
	// A port that accepts connections and never answers: the worst case.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	// And a port where nothing listens.
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	for _, addr := range []string{ln.Addr().String(), closedAddr} {
		path := filepath.Join(t.TempDir(), "pgsync.toml")
		os.WriteFile(path, []byte(fmt.Sprintf("[source]\nurl = \"postgres://postgres:s3cret@%s/app\"\n[target]\nurl = \"postgres://postgres:s3cret@%s/app\"\n[job]\nname = \"x\"\ntables = [\"public.*\"]\n", addr, addr)), 0o600)
		for _, cmd := range []string{"bootstrap", "status", "run"} {
			r := runPgsync(t, 30*time.Second, "-c", path, cmd)
			if r.code != 1 {
				t.Errorf("%s against %s: exit %d, want 1\n%s", cmd, addr, r.code, r.stderr)
			}
			if r.elapsed > 10*time.Second {
				t.Errorf("%s against %s took %s, want under 10s", cmd, addr, r.elapsed)
			}
			if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(r.stderr, "connect to source") && !strings.Contains(r.stderr, "connect to target") {
				t.Errorf("%s against %s: want one line naming the server, got %q", cmd, addr, r.stderr)
			}
			if strings.Contains(r.stderr, "s3cret") {
				t.Errorf("password printed: %q", r.stderr)
			}
		}
	}
}

func TestBootstrapSnapshotIsConsistentUnderWrites(t *testing.T) {
	t.Run("whole tables", func(t *testing.T) { snapshotUnderWrites(t, "") })
	// acct (about 2.5 MB of heap) in 1 MB ranges, taken by both streams.
	t.Run("block ranges", func(t *testing.T) { snapshotUnderWrites(t, "[tuning]\ncopy_range_mb = 1\n") })
}

func snapshotUnderWrites(t *testing.T, tuning string) {
	e := newEnv(t, `CREATE TABLE acct (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO acct SELECT g, 1000 FROM generate_series(1, 50000) g;
CREATE TABLE ledger (id bigserial PRIMARY KEY, acct int, delta bigint);`, tuning)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writer := startTransfers(ctx, t, e.srcURL)
	// Let transfers accumulate so that the snapshot has ledger rows to agree with.
	eventually(t, 30*time.Second, "transfers on the source", func() bool {
		return queryOne[int](t, e.src, "SELECT count(*) FROM ledger") > 200
	})
	r := e.mustPgsync("bootstrap")
	if tuning != "" && !regexp.MustCompile(`table=public\.acct .*parts=[2-9]`).MatchString(r.stderr) {
		t.Fatalf("acct was not copied in ranges:\n%s", r.stderr)
	}
	// The copy is one point in time across both tables: each transfer
	// updates two accounts and logs both moves in ledger in one
	// transaction, so every account's balance is its opening balance plus
	// its ledger rows. Copies of acct and ledger taken at different moments
	// break this for the accounts moved in between.
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM ledger"); n <= 200 {
		t.Fatalf("the copy holds %d ledger rows, want more than 200", n)
	}
	if bad := queryOne[int](t, e.tgt, `SELECT count(*) FROM acct a
LEFT JOIN (SELECT acct, sum(delta) AS moved FROM ledger GROUP BY acct) l ON l.acct = a.id
WHERE a.balance <> 1000 + coalesce(l.moved, 0)`); bad != 0 {
		t.Errorf("%d accounts on the target disagree with their ledger rows: acct and ledger were not copied under one snapshot", bad)
	}
	time.Sleep(time.Second)
	cancel()
	if n := writer.wait(t); n == 0 {
		t.Fatal("the writer committed nothing")
	}
	e.catchUp()
	e.mustVerify()
}

func TestBootstrapChecksTheSource(t *testing.T) {
	e := newEnv(t, "CREATE TABLE a (id int PRIMARY KEY); GRANT ALL ON TABLE a TO PUBLIC;", "")
	role := "plain_" + e.db
	e.srcExec("DROP ROLE IF EXISTS " + role + "; CREATE ROLE " + role + " LOGIN")
	t.Cleanup(func() {
		admin := mustConnect(t, adminURL(sourcePort))
		defer admin.Close(context.Background())
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
	})

	// A user without REPLICATION is told what to grant.
	cfg, _ := os.ReadFile(e.cfgPath)
	noRepl := filepath.Join(t.TempDir(), "norepl.toml")
	os.WriteFile(noRepl, []byte(strings.Replace(string(cfg), "postgres://postgres@127.0.0.1:"+sourcePort, "postgres://"+role+"@127.0.0.1:"+sourcePort, 1)), 0o600)
	r := runPgsync(t, time.Minute, "-c", noRepl, "bootstrap")
	if r.code != 1 || !strings.Contains(r.stderr, "REPLICATION") {
		t.Errorf("bootstrap as a user without REPLICATION: exit %d\n%s", r.code, r.stderr)
	}

	// Patterns that match nothing say so.
	noMatch := filepath.Join(t.TempDir(), "nomatch.toml")
	os.WriteFile(noMatch, []byte(strings.Replace(string(cfg), `"public.*"`, `"nosuch.*"`, 1)), 0o600)
	r = runPgsync(t, time.Minute, "-c", noMatch, "bootstrap")
	if r.code != 1 || !strings.Contains(r.stderr, "no source table matches job.tables nosuch.*") {
		t.Errorf("bootstrap with no matching table: exit %d\n%s", r.code, r.stderr)
	}

	// Teardown refuses while pgsync run holds the slot.
	e.mustPgsync("bootstrap")
	bg := e.start("run")
	eventually(t, 30*time.Second, "the slot to be active", func() bool {
		return queryOne[bool](t, e.src, "SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = $1", "pgsync_"+e.job)
	})
	r = e.pgsync("teardown")
	if r.code != 1 || !strings.Contains(r.stderr, "stop pgsync run first") {
		t.Errorf("teardown while running: exit %d\n%s", r.code, r.stderr)
	}
	bg.kill9(t)
}

// TestCopyHoldsAutovacuumOff: while bootstrap copies, one pgsync session
// holds SHARE UPDATE EXCLUSIVE on the target tables, so that autovacuum
// (which skips a table it cannot lock) leaves them alone, and COPY is not
// blocked by it; the hold ends before the indexes of created tables are
// built, which would otherwise wait for it forever. A statement trigger
// that sleeps keeps the copy of one table open long enough to look. The
// target's own table that references it makes it one the copy may not
// empty, so it is not loaded with COPY FREEZE, whose lock would keep
// autovacuum off instead (TestBootstrapLoadsTablesFrozen).
func TestCopyHoldsAutovacuumOff(t *testing.T) {
	e := newEnv(t, `CREATE TABLE held (id int PRIMARY KEY, v text);
INSERT INTO held SELECT g, 'v' || g FROM generate_series(1, 1000) g;
CREATE TABLE made (id int PRIMARY KEY, v text);
INSERT INTO made SELECT g, 'm' || g FROM generate_series(1, 1000) g;`, "")
	e.tgtExec(`CREATE TABLE held (id int PRIMARY KEY, v text);
CREATE TABLE held_ref (held_id int REFERENCES held);
CREATE FUNCTION slow_copy() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(4); RETURN NULL; END $$;
CREATE TRIGGER held_slow BEFORE INSERT ON held FOR EACH STATEMENT EXECUTE FUNCTION slow_copy();
ALTER TABLE held ENABLE ALWAYS TRIGGER held_slow`)
	bg := e.start("bootstrap")
	holds := `SELECT count(*) FROM pg_locks WHERE relation = 'held'::regclass AND mode = 'ShareUpdateExclusiveLock' AND granted`
	eventually(t, 30*time.Second, "a SHARE UPDATE EXCLUSIVE hold on held during its copy", func() bool {
		return queryOne[int](t, e.tgt, holds) == 1
	})

	// What autovacuum does with a table it cannot lock: VACUUM with
	// SKIP_LOCKED skips it, with a warning, instead of waiting.
	cfg, err := pgx.ParseConfig(e.tgtURL)
	if err != nil {
		t.Fatal(err)
	}
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	vac, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer vac.Close(context.Background())
	if _, err := vac.Exec(ctx, "VACUUM (SKIP_LOCKED) held"); err != nil {
		t.Fatalf("VACUUM (SKIP_LOCKED) during the copy: %v", err)
	}
	if len(notices) != 1 || !strings.Contains(notices[0], `skipping vacuum of "held" --- lock not available`) {
		t.Errorf("VACUUM (SKIP_LOCKED) during the copy did not skip held: notices %q", notices)
	}

	if code := bg.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("bootstrap: exit %d\n%s", code, bg.stderr.String())
	}
	if !strings.Contains(bg.stderr.String(), "primary key made_pkey on public.made") {
		t.Errorf("bootstrap did not build made's primary key after the copy:\n%s", bg.stderr.String())
	}
	if n := queryOne[int](t, e.tgt, holds); n != 0 {
		t.Errorf("%d SHARE UPDATE EXCLUSIVE locks on held remain after bootstrap", n)
	}
	e.mustVerify()
}
