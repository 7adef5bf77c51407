//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// drillApp is the application of the drill: one pgbench-shaped transaction
// after another (an account's balance, a history row without a key, an
// order with a serial key) on whichever server it is told is the primary,
// reconnecting when refused.
type drillApp struct {
	mu        sync.Mutex
	url       string
	committed atomic.Int64
	paused    atomic.Bool
	errs      []string
	stop      context.CancelFunc
	done      chan struct{}
}

func startDrillApp(url string) *drillApp {
	ctx, cancel := context.WithCancel(context.Background())
	a := &drillApp{url: url, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		var conn *pgx.Conn
		var connURL string
		for ctx.Err() == nil {
			a.mu.Lock()
			url := a.url
			a.mu.Unlock()
			if a.paused.Load() {
				if conn != nil {
					conn.Close(context.Background())
					conn = nil
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if conn == nil || conn.IsClosed() || connURL != url {
				if conn != nil {
					conn.Close(context.Background())
				}
				c, err := pgx.Connect(ctx, url)
				if err != nil {
					conn = nil
					time.Sleep(20 * time.Millisecond)
					continue
				}
				conn, connURL = c, url
			}
			id := rand.Intn(100) + 1
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance + 1 WHERE id = $1", id); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, "INSERT INTO history (account, delta) VALUES ($1, 1)", id); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "INSERT INTO orders (account) VALUES ($1)", id)
				return err
			})
			if err != nil {
				if ctx.Err() == nil && !strings.Contains(err.Error(), "read-only") && !strings.Contains(err.Error(), "terminating connection") &&
					!errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "conn closed") && !strings.Contains(err.Error(), "unexpected EOF") {
					a.mu.Lock()
					a.errs = append(a.errs, err.Error())
					a.mu.Unlock()
				}
				conn.Close(context.Background())
				conn = nil
				time.Sleep(10 * time.Millisecond)
				continue
			}
			a.committed.Add(1)
		}
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	return a
}

// moveTo points the application at url.
func (a *drillApp) moveTo(url string) {
	a.mu.Lock()
	a.url = url
	a.mu.Unlock()
}

// writes waits until the application committed n more transactions.
func (a *drillApp) writes(t *testing.T, n int64) {
	t.Helper()
	goal := a.committed.Load() + n
	eventually(t, 30*time.Second, "the application to write", func() bool { return a.committed.Load() >= goal })
}

// TestReverseDrill is the way back, under writes throughout (issue 24,
// point 5): bootstrap and run; cutover --reverse (the forward run ends by
// itself); the application writes on the new primary while the reverse
// job streams its writes back; the rollback, a cutover of the reverse job
// with --reverse, which unlocks on the old database exactly the role the
// first cutover locked there and sets up the way forward again; writes on
// the old database, streamed forward; and forward again. After each step
// both sides are identical row by row (verify --rows, with the application
// paused), every cutover says identical, the application's serial keys
// never collide after a switch, and each write gap is logged.
func TestReverseDrill(t *testing.T) {
	e := newEnv(t, `CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT g, 0 FROM generate_series(1, 100) g;
CREATE TABLE history (account int NOT NULL, delta int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
ALTER TABLE history REPLICA IDENTITY FULL;
CREATE TABLE orders (id bigserial PRIMARY KEY, account int NOT NULL);`, "")
	role := "app_" + e.db
	for _, port := range []string{sourcePort, targetPort} {
		admin := mustConnect(t, adminURL(port))
		if _, err := admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role+"; CREATE ROLE "+role+" LOGIN"); err != nil {
			t.Fatal(err)
		}
		admin.Close(context.Background())
	}
	t.Cleanup(func() {
		for _, c := range []struct{ url, port string }{{e.srcURL, sourcePort}, {e.tgtURL, targetPort}} {
			admin := mustConnect(t, adminURL(c.port))
			_, _ = admin.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
			_, _ = admin.Exec(context.Background(), "ALTER ROLE "+role+" RESET ALL")
			admin.Close(context.Background())
			if conn, err := mustConnectErr(c.url); err == nil {
				_, _ = conn.Exec(context.Background(), "DROP OWNED BY "+role)
				conn.Close(context.Background())
			}
			admin = mustConnect(t, adminURL(c.port))
			_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
			admin.Close(context.Background())
		}
	})
	e.srcExec("GRANT SELECT, INSERT, UPDATE ON accounts, history, orders TO " + role + "; GRANT USAGE ON SEQUENCE orders_id_seq TO " + role)
	appOn := func(url string) string {
		return strings.Replace(url, "postgres://postgres@", "postgres://"+role+"@", 1)
	}

	e.mustPgsync("bootstrap")
	forward := e.start("run")
	app := startDrillApp(appOn(e.srcURL))
	defer func() { app.stop(); <-app.done }()
	app.writes(t, 100)

	back := &env{t: t, job: e.job + "_back", db: e.db, srcURL: e.tgtURL, tgtURL: e.srcURL, src: e.tgt, tgt: e.src,
		cfgPath: filepath.Join(filepath.Dir(e.cfgPath), e.job+"_back.toml")}
	again := &env{t: t, job: e.job, db: e.db, srcURL: e.srcURL, tgtURL: e.tgtURL, src: e.src, tgt: e.tgt,
		cfgPath: filepath.Join(filepath.Dir(e.cfgPath), e.job+".toml")}
	type report struct {
		Identical       bool     `json:"identical"`
		WriteGapSeconds float64  `json:"write_gap_seconds"`
		LockedRoles     []string `json:"locked_roles"`
		UnlockedRoles   []string `json:"unlocked_roles"`
		Reverse         *struct {
			Job    string `json:"job"`
			Config string `json:"config"`
		} `json:"reverse"`
	}
	cutover := func(on *env, args ...string) report {
		t.Helper()
		r := on.mustPgsync(append([]string{"cutover", "--lock-source", role, "--json"}, args...)...)
		var rep report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("cutover --json: %v\n%s", err, r.stdout)
		}
		if !rep.Identical {
			t.Fatalf("cutover of %s not identical:\n%s\n%s", on.job, r.stdout, r.stderr)
		}
		return rep
	}
	// identical pauses the application, lets run (running as bg) apply
	// everything, and compares row by row.
	identical := func(on *env, bg **background, step string) {
		t.Helper()
		app.paused.Store(true)
		time.Sleep(100 * time.Millisecond) // the last transaction ends
		sigtermWithin(t, *bg, 10*time.Second)
		on.catchUp()
		if r := on.pgsync("verify", "--rows"); r.code != 0 {
			t.Fatalf("%s: verify --rows: exit %d\n%s\n%s", step, r.code, r.stdout, r.stderr)
		}
		*bg = on.start("run")
		app.paused.Store(false)
	}

	// 1. The way back, set up at the cutover.
	rep := cutover(e, "--reverse")
	if rep.Reverse == nil || rep.Reverse.Job != back.job || rep.Reverse.Config != back.cfgPath {
		t.Fatalf("cutover --reverse set up %+v, want job %s in %s", rep.Reverse, back.job, back.cfgPath)
	}
	t.Logf("cutover --reverse: write gap %.3f s", rep.WriteGapSeconds)
	app.moveTo(appOn(e.tgtURL))
	if code := forward.wait(t, 30*time.Second); code != 0 {
		t.Errorf("the forward run exited %d after cutover --reverse ended its job:\n%s", code, forward.stderr.String())
	}
	if r := e.pgsync("run", "--until-caught-up"); r.code == 0 || !strings.Contains(r.stderr, "reversed") {
		t.Errorf("run of the reversed job: exit %d, want a refusal naming the reversal\n%s", r.code, r.stderr)
	}
	backRun := back.start("run")
	app.writes(t, 100)
	identical(back, &backRun, "writes on the new primary, streamed back")

	// 2. The rollback: the old database takes the writes again, and the
	// way forward is set up.
	rep = cutover(back, "--reverse")
	if len(rep.UnlockedRoles) != 1 || rep.UnlockedRoles[0] != role || rep.Reverse == nil || rep.Reverse.Config != again.cfgPath {
		t.Fatalf("rollback: unlocked %v, reverse %+v; want %s unlocked and the way forward in %s", rep.UnlockedRoles, rep.Reverse, role, again.cfgPath)
	}
	t.Logf("rollback: write gap %.3f s", rep.WriteGapSeconds)
	app.moveTo(appOn(e.srcURL))
	if code := backRun.wait(t, 30*time.Second); code != 0 {
		t.Errorf("the reverse run exited %d after the rollback:\n%s", code, backRun.stderr.String())
	}
	forwardAgain := again.start("run")
	app.writes(t, 100)
	identical(again, &forwardAgain, "writes on the old database, streamed forward")

	// 3. Forward again.
	rep = cutover(again)
	if len(rep.UnlockedRoles) != 1 || rep.UnlockedRoles[0] != role {
		t.Errorf("forward again: unlocked %v on the new primary, want %s", rep.UnlockedRoles, role)
	}
	t.Logf("forward again: write gap %.3f s", rep.WriteGapSeconds)
	app.moveTo(appOn(e.tgtURL))
	app.writes(t, 100)
	sigtermWithin(t, forwardAgain, 10*time.Second)
	app.stop()
	<-app.done
	if len(app.errs) > 0 {
		t.Errorf("the application failed %d times outside the write gaps, first: %s", len(app.errs), app.errs[0])
	}
}

// TestCutoverReverseRefusedDoesNothing: check --reverse lists the way
// back's items; cutover --reverse whose reverse configuration file belongs
// to something else refuses before the lock and changes nothing (the role
// can still write, the job is ready with its slot, nothing is recorded on
// the source); the same command, once the file is moved, sets the way back
// up.
func TestCutoverReverseRefusedDoesNothing(t *testing.T) {
	e := newEnv(t, "CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, 'x' FROM generate_series(1, 50) g;", "")
	e.mustPgsync("bootstrap")
	r := e.mustPgsync("check", "--reverse")
	for _, want := range []string{"OK    reverse wal_level", "OK    reverse REPLICATION", "OK    reverse job"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("check --reverse lacks %q:\n%s", want, r.stdout)
		}
	}
	bg := e.start("run")
	defer bg.kill9(t)
	e.srcExec("INSERT INTO t VALUES (100, 'y')")
	backPath := filepath.Join(filepath.Dir(e.cfgPath), e.job+"_back.toml")
	if err := os.WriteFile(backPath, []byte("# the operator's own file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.pgsync("cutover", "--reverse", "--lock-source", "postgres")
	if r.code != 1 || !strings.Contains(r.stderr, backPath) || !strings.Contains(r.stderr, "nothing was recorded") {
		t.Fatalf("cutover --reverse over another file: exit %d, want a refusal naming %s\n%s", r.code, backPath, r.stderr)
	}
	if got := queryOne[string](t, e.src, "SELECT coalesce((SELECT array_to_string(setconfig, ',') FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = 'postgres' AND s.setdatabase = 0), '')"); strings.Contains(got, "read_only") {
		t.Errorf("the refused cutover locked the role: %s", got)
	}
	if queryOne[bool](t, e.src, "SELECT to_regnamespace('pgsync') IS NOT NULL") {
		t.Error("the refused cutover recorded the reverse job on the source")
	}
	if st := queryOne[string](t, e.tgt, "SELECT state FROM pgsync.progress WHERE job = $1", e.job); st != "ready" {
		t.Errorf("job state %q after the refusal, want ready", st)
	}
	if b, _ := os.ReadFile(backPath); string(b) != "# the operator's own file\n" {
		t.Errorf("the refused cutover wrote over the operator's file: %q", b)
	}
	if err := os.Remove(backPath); err != nil {
		t.Fatal(err)
	}
	r = e.mustPgsync("cutover", "--reverse")
	if !strings.Contains(r.stdout, "way back:") || !strings.Contains(r.stdout, backPath) {
		t.Errorf("cutover --reverse after the refusal:\n%s", r.stdout)
	}
	if st := queryOne[string](t, e.src, "SELECT state FROM pgsync.progress WHERE job = $1", e.job+"_back"); st != "ready" {
		t.Errorf("reverse job state %q on the source, want ready", st)
	}

	// A rerun of the finished cutover --reverse reports it done, exits 0
	// and changes nothing: the reverse job's slot and record stay as they
	// were.
	slotBefore := queryOne[string](t, e.tgt, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", "pgsync_"+e.job+"_back")
	r = e.mustPgsync("cutover", "--reverse")
	if !strings.Contains(r.stdout, "done before") || !strings.Contains(r.stdout, "way back:") {
		t.Errorf("cutover --reverse rerun after it finished:\n%s\n%s", r.stdout, r.stderr)
	}
	if got := queryOne[string](t, e.tgt, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", "pgsync_"+e.job+"_back"); got != slotBefore {
		t.Errorf("the rerun changed the reverse slot: %s, was %s", got, slotBefore)
	}
	if st := queryOne[string](t, e.src, "SELECT state FROM pgsync.progress WHERE job = $1", e.job+"_back"); st != "ready" {
		t.Errorf("reverse job state %q on the source after the rerun, want ready", st)
	}
	// Plain cutover, run and bootstrap of the reversed job are refused,
	// naming the reversal.
	for _, args := range [][]string{{"cutover"}, {"run", "--until-caught-up"}, {"bootstrap"}} {
		if r := e.pgsync(args...); r.code != 1 || !strings.Contains(r.stderr, "reversed") {
			t.Errorf("%v of the reversed job: exit %d, want 1 naming the reversal\n%s", args, r.code, r.stderr)
		}
	}
}
