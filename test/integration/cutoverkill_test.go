//go:build integration

package integration

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The kill model of the cutover: a move's three cutovers (forward with
// the way back, the rollback, forward again), each killed with SIGKILL
// after each of its statements in turn, under the application's writes,
// then rerun. A statement is pgsync's own numbering of what it sent
// (killpoint: PGSYNC_KILL_AFTER_STATEMENT), taken from an uninterrupted
// reference drill; the polls of the waits are not numbered, since their
// count depends on timing.
//
// After each kill and rerun: the rerun exits 0; a second rerun exits 0,
// says the cutover was done and changes nothing (records, slots,
// publications, the roles' settings on both servers); the application's
// role can write on the new primary and is read-only on the other; both
// sides are identical (compared here, independently of pgsync), no
// acknowledged transaction is lost and none is applied twice (each adds
// one to a balance and one history row without a key); and, where the
// way back was set up, the application's writes on the new primary reach
// the old one.
//
// PGSYNC_CUTOVER_KILL_SAMPLE (10) kill points are drawn with
// PGSYNC_CUTOVER_KILL_SEED (1); PGSYNC_CUTOVER_KILL_ALL=1 runs every point
// (scripts/cutover-kill-model.sh).
func TestCutoverKillModel(t *testing.T) {
	type point struct{ command, after int }
	var counts [3]int
	var texts [3][]string
	t.Run("reference", func(t *testing.T) {
		logs := openServerLogs(t)
		d := newKillDrill(t)
		defer d.assertQuietLogs(logs)
		for c := range killCommands {
			texts[c] = d.cutover(c, 0)
			counts[c] = len(texts[c])
			for i, s := range texts[c] {
				t.Logf("%s statement %d: %s", killCommands[c].name, i+1, s)
			}
			d.switchOver(c)
		}
	})
	if t.Failed() {
		return
	}
	var points []point
	for c, n := range counts {
		for k := 1; k <= n; k++ {
			points = append(points, point{c, k})
		}
	}
	if os.Getenv("PGSYNC_CUTOVER_KILL_ALL") == "" {
		rnd := rand.New(rand.NewSource(int64(envInt("PGSYNC_CUTOVER_KILL_SEED", 1))))
		rnd.Shuffle(len(points), func(i, j int) { points[i], points[j] = points[j], points[i] })
		points = points[:min(envInt("PGSYNC_CUTOVER_KILL_SAMPLE", 10), len(points))]
		slices.SortFunc(points, func(a, b point) int { return (a.command-b.command)*10000 + a.after - b.after })
	}
	t.Logf("statements: %s %d, %s %d, %s %d; %d kill points", killCommands[0].name, counts[0], killCommands[1].name, counts[1],
		killCommands[2].name, counts[2], len(points))
	for _, p := range points {
		stmt := texts[p.command][p.after-1]
		t.Run(fmt.Sprintf("%s/after_%d", killCommands[p.command].name, p.after), func(t *testing.T) {
			t.Logf("kill point: %s, after statement %d: %s", killCommands[p.command].name, p.after, stmt)
			d := newKillDrill(t)
			for c := 0; c < p.command; c++ {
				d.cutover(c, 0)
				d.switchOver(c)
			}
			d.cutover(p.command, p.after)
			d.switchOver(p.command)
		})
	}
}

// killCommands are the drill's cutovers, in order: on is the job's side
// (0 forward, 1 the reverse job), and primary the side (0 the first
// source, 1 the first target) that takes the application's writes after.
var killCommands = []struct {
	name        string
	on, primary int
	reverse     bool
}{
	{"forward_reverse", 0, 1, true},
	{"rollback", 1, 0, true},
	{"forward_again", 0, 1, false},
}

// killDrill is one move: the first source and target, the application's
// role and its writes, and the run of the job that streams now.
type killDrill struct {
	t    *testing.T
	e    *env
	jobs [2]*env // the forward job, the reverse job
	role string
	app  *drillApp
	run  *background
}

func newKillDrill(t *testing.T) *killDrill {
	e := newEnv(t, `CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT g, 0 FROM generate_series(1, 100) g;
CREATE TABLE history (account int NOT NULL, delta int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
ALTER TABLE history REPLICA IDENTITY FULL;
CREATE TABLE orders (id bigserial PRIMARY KEY, account int NOT NULL);`, "")
	d := &killDrill{t: t, e: e, role: "app_" + e.db}
	d.jobs[0] = e
	d.jobs[1] = &env{t: t, job: e.job + "_back", db: e.db, srcURL: e.tgtURL, tgtURL: e.srcURL, src: e.tgt, tgt: e.src,
		cfgPath: filepath.Join(filepath.Dir(e.cfgPath), e.job+"_back.toml")}
	for _, port := range []string{sourcePort, targetPort} {
		admin := mustConnect(t, adminURL(port))
		if _, err := admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+d.role+"; CREATE ROLE "+d.role+" LOGIN"); err != nil {
			t.Fatal(err)
		}
		admin.Close(context.Background())
	}
	t.Cleanup(d.cleanup)
	e.srcExec("GRANT SELECT, INSERT, UPDATE ON accounts, history, orders TO " + d.role + "; GRANT USAGE ON SEQUENCE orders_id_seq TO " + d.role)
	e.mustPgsync("bootstrap")
	d.run = e.start("run")
	d.app = startDrillApp(d.appURL(0))
	d.app.writes(t, 30)
	return d
}

// cleanup stops the application and drops its role on both servers.
func (d *killDrill) cleanup() {
	d.app.stop()
	<-d.app.done
	for i, port := range []string{sourcePort, targetPort} {
		admin := mustConnect(d.t, adminURL(port))
		_, _ = admin.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", d.role)
		_, _ = admin.Exec(context.Background(), "ALTER ROLE "+d.role+" RESET ALL")
		admin.Close(context.Background())
		if conn, err := mustConnectErr(d.url(i)); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP OWNED BY "+d.role)
			conn.Close(context.Background())
		}
		admin = mustConnect(d.t, adminURL(port))
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+d.role)
		admin.Close(context.Background())
	}
}

// url is side i's URL as the test's superuser; appURL as the application.
func (d *killDrill) url(side int) string {
	return []string{d.e.srcURL, d.e.tgtURL}[side]
}

func (d *killDrill) appURL(side int) string {
	return strings.Replace(d.url(side), "postgres://postgres@", "postgres://"+d.role+"@", 1)
}

// cutover runs cutover c: killed after statement killAfter and rerun when
// killAfter > 0; then rerun once more, which must find it done and change
// nothing. It returns the statements of the first run as numbered by
// pgsync (all of them when it was not killed).
func (d *killDrill) cutover(c, killAfter int) []string {
	t := d.t
	t.Helper()
	kc := killCommands[c]
	on := d.jobs[kc.on]
	args := []string{"-c", on.cfgPath, "cutover", "--lock-source", d.role, "--timeout", "60s"}
	if kc.reverse {
		args = append(args, "--reverse")
	}
	stmtLog := filepath.Join(t.TempDir(), "statements")
	// Its sessions are told apart from run's by their name (pgx reads
	// PGAPPNAME; pgsync keeps a name the operator gave).
	env := []string{"PGSYNC_STATEMENT_LOG=" + stmtLog, "PGAPPNAME=pgsync-killed-cutover"}
	if killAfter > 0 {
		env = append(env, fmt.Sprintf("PGSYNC_KILL_AFTER_STATEMENT=%d", killAfter))
	}
	first := runPgsyncEnv(t, env, args...)
	stmts := readStatements(t, stmtLog)
	switch {
	case killAfter > 0 && first.code == -9:
		t.Logf("%s killed after statement %d (%s); rerun", kc.name, killAfter, stmts[len(stmts)-1])
		// The killed process's sessions end with it; a statement it sent
		// last may still run on a server, and commit: the rerun starts
		// once they are gone.
		d.awaitGone("pgsync-killed-cutover")
		if r := runPgsyncEnv(t, nil, args...); r.code != 0 {
			t.Fatalf("%s rerun after the kill: exit %d\n%s\n%s", kc.name, r.code, r.stdout, r.stderr)
		}
	case killAfter > 0:
		t.Logf("%s ran %d statements, not %d: not killed", kc.name, len(stmts), killAfter)
		fallthrough
	default:
		if first.code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", kc.name, first.code, first.stdout, first.stderr)
		}
	}
	before := d.recorded()
	again := runPgsyncEnv(t, nil, args...)
	if again.code != 0 || !strings.Contains(again.stdout, "done before") {
		t.Fatalf("%s rerun after it finished: exit %d, want 0 and \"done before\"\n%s\n%s", kc.name, again.code, again.stdout, again.stderr)
	}
	if after := d.recorded(); after != before {
		t.Fatalf("%s rerun after it finished changed what is recorded:\nbefore %s\nafter  %s", kc.name, before, after)
	}
	if st := runPgsyncEnv(t, nil, "-c", on.cfgPath, "status"); strings.Contains(st.stdout+st.stderr, "--force") {
		t.Fatalf("%s: status advises --force once the target holds everything:\n%s\n%s", kc.name, st.stdout, st.stderr)
	}
	d.assertWritableOn(kc.primary, kc.name)
	d.assertIdentical(kc.name)
	return stmts
}

// switchOver moves the application to cutover c's new primary, where it
// writes; where the way back was set up, the run that streamed into the
// old primary has ended, the new job's run starts, and its writes reach
// the old primary.
func (d *killDrill) switchOver(c int) {
	t := d.t
	kc := killCommands[c]
	d.app.moveTo(d.appURL(kc.primary))
	if !kc.reverse {
		d.app.writes(t, 20)
		return
	}
	d.run.wait(t, 30*time.Second) // its job is reversed: it ends by itself
	next := d.jobs[1-kc.on]
	d.run = next.start("run")
	d.app.writes(t, 20)
	d.app.paused.Store(true)
	time.Sleep(100 * time.Millisecond) // the last transaction ends
	sigtermWithin(t, d.run, 10*time.Second)
	next.catchUp()
	d.assertIdentical(kc.name + ", then writes on the new primary streamed back")
	d.run = next.start("run")
	d.app.paused.Store(false)
}

// assertQuietLogs fails on an ERROR that one of pgsync's sessions raised
// in the drill's database on either server since logs were opened. The
// application's own refusals (read-only, its sessions ended) are not
// pgsync's, nor the end of a run's walsender that cutover --reverse
// terminates (FATAL, by design).
func (d *killDrill) assertQuietLogs(logs []serverLog) {
	d.t.Helper()
	seen := 0
	for _, l := range logs {
		for _, entry := range l.errorsOf(d.t, d.e.db) {
			seen++
			first, _, _ := strings.Cut(strings.TrimPrefix(entry, l.cluster+": "), "\n")
			m := logEntry.FindStringSubmatch(first)
			if m != nil && strings.HasPrefix(m[3], "pgsync") && m[4] == "ERROR" {
				d.t.Errorf("pgsync raised an ERROR in the %s server's log during the drill:\n%s", l.cluster, entry)
			}
		}
	}
	if seen == 0 {
		// The locks end the application's sessions (FATAL, in the
		// drill's database): none seen means the log is not read.
		d.t.Errorf("no entry of the drill's database in the servers' logs: the premise of the check does not hold")
	}
}

// awaitGone waits until no session named app is left on either server.
func (d *killDrill) awaitGone(app string) {
	d.t.Helper()
	eventually(d.t, 10*time.Second, "the killed pgsync's sessions to end", func() bool {
		for _, conn := range []*pgx.Conn{d.e.src, d.e.tgt} {
			if queryOne[int](d.t, conn, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app) > 0 {
				return false
			}
		}
		return true
	})
}

// recorded is what a finished cutover's rerun must not change: pgsync's
// records (positions aside: a run may apply), the slots and publications,
// and the roles' settings, on both servers.
func (d *killDrill) recorded() string {
	var b strings.Builder
	for i, conn := range []*pgx.Conn{d.e.src, d.e.tgt} {
		fmt.Fprintf(&b, "[%d] ", i)
		if queryOne[bool](d.t, conn, "SELECT to_regclass('pgsync.progress') IS NOT NULL") {
			b.WriteString(queryOne[string](d.t, conn, "SELECT coalesce(string_agg(job || '=' || state, ',' ORDER BY job), '') FROM pgsync.progress") + " ")
		}
		b.WriteString(queryOne[string](d.t, conn, `SELECT concat_ws(' ',
  (SELECT string_agg(slot_name || '@' || coalesce(two_phase::text, ''), ',' ORDER BY slot_name) FROM pg_replication_slots WHERE database = current_database()),
  (SELECT string_agg(pubname, ',' ORDER BY pubname) FROM pg_publication),
  (SELECT string_agg(r.rolname || ':' || array_to_string(s.setconfig, ';'), ',' ORDER BY r.rolname)
     FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = $1))`, d.role))
		if queryOne[bool](d.t, conn, "SELECT to_regclass('pgsync.cutovers') IS NOT NULL") {
			b.WriteString(" " + queryOne[string](d.t, conn, `SELECT coalesce(string_agg(concat_ws('/', job, step, locked_roles::text, goal::text, reverse_job, reverse_from::text, ready_at::text), ',' ORDER BY job), '')
FROM pgsync.cutovers`))
		}
		if queryOne[bool](d.t, conn, "SELECT to_regclass('pgsync.locked_roles') IS NOT NULL") {
			b.WriteString(" " + queryOne[string](d.t, conn, "SELECT coalesce(string_agg(job || ':' || role, ',' ORDER BY job, role), '') FROM pgsync.locked_roles"))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// assertWritableOn checks that the application's role can write on side
// primary and is read-only on the other (new sessions).
func (d *killDrill) assertWritableOn(primary int, step string) {
	d.t.Helper()
	for side := 0; side < 2; side++ {
		conn, err := mustConnectErr(d.appURL(side))
		if err != nil {
			d.t.Fatalf("%s: connect as the application to side %d: %v", step, side, err)
		}
		_, err = conn.Exec(context.Background(), "BEGIN; INSERT INTO orders (account) VALUES (0); ROLLBACK")
		conn.Close(context.Background())
		if writable := err == nil; writable != (side == primary) {
			d.t.Fatalf("%s: the application's role can write on side %d: %v (err %v); want only on side %d", step, side, writable, err, primary)
		}
	}
}

// assertIdentical compares the tables of both sides row by row, and checks
// on each that every transaction the application saw commit is there once.
func (d *killDrill) assertIdentical(step string) {
	d.t.Helper()
	const digest = `SELECT concat_ws(' ',
  (SELECT md5(coalesce(string_agg(id || ':' || balance, ',' ORDER BY id), '')) FROM accounts),
  (SELECT md5(coalesce(string_agg(account || ':' || delta || ':' || at, ',' ORDER BY at, account), '')) FROM history),
  (SELECT md5(coalesce(string_agg(id || ':' || account, ',' ORDER BY id), '')) FROM orders))`
	src, tgt := queryOne[string](d.t, d.e.src, digest), queryOne[string](d.t, d.e.tgt, digest)
	if src != tgt {
		d.t.Fatalf("%s: the sides differ: source %s, target %s", step, src, tgt)
	}
	committed := d.app.committed.Load()
	balance := queryOne[int64](d.t, d.e.src, "SELECT sum(balance)::bigint FROM accounts")
	history := queryOne[int64](d.t, d.e.src, "SELECT count(*) FROM history")
	if balance != history || history < committed {
		d.t.Fatalf("%s: balances add up to %d, history has %d rows, the application saw %d commits: lost or applied twice", step, balance, history, committed)
	}
}

// runPgsyncEnv runs pgsync with env added, bounded by 3 minutes; code is
// -9 when SIGKILL ended it.
func runPgsyncEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pgsyncBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb syncBuffer
	out.mu, errb.mu = make(chan struct{}, 1), make(chan struct{}, 1)
	cmd.Stdout, cmd.Stderr = &out, &errb
	began := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(began)}
	if ctx.Err() != nil {
		t.Fatalf("pgsync %v did not finish within 3 minutes\n%s", args, r.stderr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			r.code = -9
		}
	} else if err != nil {
		t.Fatalf("pgsync %v: %v", args, err)
	}
	return r
}

// readStatements reads pgsync's numbered statements (killpoint's log).
func readStatements(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("pgsync wrote no statement log: %v", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n, text, _ := strings.Cut(sc.Text(), "\t")
		if n != fmt.Sprint(len(out)+1) {
			t.Fatalf("statement log out of order at %q", sc.Text())
		}
		out = append(out, text)
	}
	return out
}
