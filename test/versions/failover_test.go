//go:build versions

package versions

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// failoverMajor is the source's major in TestFailover17: the first with
// failover slots.
const failoverMajor = 17

// failoverResult is the line TestFailover17 appends to
// bench-results/failover.jsonl (docs/reliability.md cites it).
type failoverResult struct {
	Date   string `json:"date"`
	Commit string `json:"commit"`
	Source int    `json:"source"`
	Target int    `json:"target"`
	// NoPrimarySeconds runs from the SIGKILL of the primary's postmaster
	// to the end of pg_ctl promote on the standby (the test promotes at
	// once: a failover manager's detection time comes on top).
	NoPrimarySeconds float64 `json:"no_primary_seconds"`
	// ResumeAfterPromotionSeconds runs from the promotion to the first
	// row written on the new primary being on the target.
	ResumeAfterPromotionSeconds float64 `json:"resume_after_promotion_seconds"`
	// ResumeAfterKillSeconds is the same from the kill.
	ResumeAfterKillSeconds float64 `json:"resume_after_kill_seconds"`
	// LagBytesUnderWrites and LagSecondsUnderWrites are pgsync status's
	// lag, 5 s after the promotion, while the writes go on.
	LagBytesUnderWrites   int64   `json:"lag_bytes_under_writes"`
	LagSecondsUnderWrites float64 `json:"lag_seconds_under_writes"`
	// CatchUpSeconds runs from the writer's last commit to the slot
	// confirming the new primary's WAL position; LagBytesAfter is
	// status's lag then (0).
	CatchUpSeconds float64 `json:"catch_up_seconds"`
	LagBytesAfter  int64   `json:"lag_bytes_after"`
	// Commits are the writer's acknowledged transactions, before and
	// after the kill; Unknown, those whose COMMIT got no answer.
	CommitsBefore int `json:"commits_before"`
	CommitsAfter  int `json:"commits_after"`
	Unknown       int `json:"unknown"`
}

// TestFailover17 moves a database from a PostgreSQL 17 primary with a
// synchronous physical standby, under writes, kills the primary's
// postmaster with SIGKILL, promotes the standby and lets pgsync run
// continue through the source url that names both: nothing acknowledged
// is lost, nothing is applied twice (every transaction inserts one row
// and adds one to a counter), the target equals the new primary, and the
// lag comes back to zero. The job's slot survives because bootstrap
// creates it as a failover slot, the standby synchronizes it
// (sync_replication_slots) and the primary's synchronized_standby_slots
// keeps the target from getting ahead of the standby.
func TestFailover17(t *testing.T) {
	primary, standby := startPrimaryAndStandby(t, failoverMajor, basePort+6, basePort+7)
	tgt := cluster{major: failoverMajor, port: basePort + 8, url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/app?sslmode=disable", basePort+8)}
	tgt.dir = startCluster(t, tgt.major, tgt.port)
	exec1(t, connect(t, tgt.adminURL()), "create database", "CREATE DATABASE app")
	// A source newer than Debian's pg_dump: the operator prepares the target.
	exec1(t, connect(t, tgt.url), "the schema on the target", failoverSchema)

	sourceURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/app?sslmode=disable&target_session_attrs=read-write&connect_timeout=2", primary.port, standby.port)
	cfg := filepath.Join(t.TempDir(), "pgsync.toml")
	body := fmt.Sprintf("[source]\nurl = %q\n[target]\nurl = %q\n[job]\nname = \"upgrade\"\ntables = [\"public.*\"]\n", sourceURL, tgt.url)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	chk := pgsync(t, 2*time.Minute, cfg, "check")
	if chk.code != 0 || !strings.Contains(chk.stdout, "synchronized_standby_slots holds it back for standby standby1") {
		t.Fatalf("check does not say the slot is held back for standby1: exit %d\n%s\n%s", chk.code, chk.stdout, chk.stderr)
	}

	w := startAckWriter(t, sourceURL)
	eventually(t, 30*time.Second, "the writer's first commits", func() bool { return w.count() > 20 })
	mustPgsync(t, 5*time.Minute, cfg, "bootstrap")
	s := connect(t, primary.url)
	if !queryOne[bool](t, s, "SELECT failover FROM pg_replication_slots WHERE slot_name = 'pgsync_upgrade'") {
		t.Fatalf("bootstrap created slot pgsync_upgrade without failover on PostgreSQL %d", failoverMajor)
	}
	run := startRun(t, cfg)
	run.awaitConfirmed(t, s, 2*time.Minute, "run to apply the writes")
	// The premise: the standby has a persistent copy of the slot. Slot
	// synchronization runs every 200 ms to 30 s.
	sb := connect(t, standby.url)
	eventually(t, 90*time.Second, "the standby to synchronize slot pgsync_upgrade", func() bool {
		return queryOne[bool](t, sb, "SELECT coalesce((SELECT synced AND NOT temporary FROM pg_replication_slots WHERE slot_name = 'pgsync_upgrade'), false)")
	})
	time.Sleep(2 * time.Second) // writes and run go on
	if err := w.failure(); err != nil {
		t.Fatalf("the writer before the failover: %v", err)
	}

	killed, promoted := failOver(t, primary, standby, w)
	res := failoverResult{Source: failoverMajor, Target: tgt.major, NoPrimarySeconds: promoted.Sub(killed).Seconds()}
	g := connect(t, tgt.url)
	// The first row the writer committed after the promotion (so on the
	// new primary), on the target.
	var applied time.Time
	eventually(t, 60*time.Second, "run to apply a row written on the new primary", func() bool {
		first := w.firstIDAfter(promoted)
		if first == 0 || !queryOne[bool](t, g, "SELECT EXISTS (SELECT 1 FROM acks WHERE id = $1)", first) {
			return false
		}
		applied = time.Now()
		return true
	})
	res.ResumeAfterPromotionSeconds = applied.Sub(promoted).Seconds()
	res.ResumeAfterKillSeconds = applied.Sub(killed).Seconds()
	time.Sleep(time.Until(promoted.Add(5 * time.Second)))
	lag := status(t, cfg)
	res.LagBytesUnderWrites, res.LagSecondsUnderWrites = lag.bytes, lag.seconds

	w.halt()
	if err := w.failure(); err != nil {
		t.Fatalf("the writer: %v", err)
	}
	lastCommit := w.lastCommit()
	n := connect(t, standby.url) // the new primary
	run.awaitConfirmedSlot(t, n, n, "pgsync_upgrade", 2*time.Minute, "run to apply the new primary's writes")
	res.CatchUpSeconds = time.Since(lastCommit).Seconds()
	res.LagBytesAfter = status(t, cfg).bytes
	if res.LagBytesAfter != 0 {
		t.Errorf("pgsync status gives a lag of %d bytes after run confirmed the new primary's position, want 0", res.LagBytesAfter)
	}
	res.CommitsBefore, res.CommitsAfter, res.Unknown = w.tally(killed)
	compareFailover(t, w, n, g)
	run.stop(t)
	if !strings.Contains(run.log.String(), "reconnected") {
		t.Errorf("run's log has no reconnected line:\n%s", run.log.String())
	}
	checkServerLog(t, primary)
	checkServerLog(t, standby)
	if t.Failed() {
		return
	}
	t.Logf("PostgreSQL %d primary killed, standby promoted: %.2f s without a primary; run applied the new primary's first row %.2f s after the promotion (%.2f s after the kill); lag under writes 5 s after the promotion %d bytes (%.3f s); caught up %.2f s after the last commit, lag %d bytes; %d commits before the kill, %d after, %d unknown",
		failoverMajor, res.NoPrimarySeconds, res.ResumeAfterPromotionSeconds, res.ResumeAfterKillSeconds, res.LagBytesUnderWrites, res.LagSecondsUnderWrites,
		res.CatchUpSeconds, res.LagBytesAfter, res.CommitsBefore, res.CommitsAfter, res.Unknown)
	for _, line := range strings.Split(run.log.String(), "\n") {
		if strings.Contains(line, "connection lost") || strings.Contains(line, "reconnected") {
			t.Log("run: " + line)
		}
	}
	appendResult(t, "failover.jsonl", &res.Date, &res.Commit, &res)
}

// writerRole is the application's role in the standby tests, which
// cutover locks.
const writerRole = "app_writer"

// failoverSchema is the moved database: acks holds one row per writer
// transaction, counter counts the transactions (a transaction applied
// twice counts twice), both on source and target.
const failoverSchema = `
CREATE TABLE acks (id bigint PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(), note text);
CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL);
`

// startPrimaryAndStandby starts a primary of major with database app
// (failoverSchema, 10,000 rows, the counter at 10,000) and a hot standby
// made from a copy of its stopped data directory (the npm package has no
// pg_basebackup), streaming synchronously through physical slot standby1
// with hot_standby_feedback; from 17 on the standby also synchronizes
// slots and the primary's synchronized_standby_slots names standby1.
// Both are stopped by the test's cleanup and by TestMain.
func startPrimaryAndStandby(t *testing.T, major, primaryPort, standbyPort int) (primary, standby cluster) {
	t.Helper()
	primary = cluster{major: major, port: primaryPort, url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/app?sslmode=disable", primaryPort)}
	standby = cluster{major: major, port: standbyPort, url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/app?sslmode=disable", standbyPort)}
	primary.dir = startCluster(t, primary.major, primary.port)
	admin := connect(t, primary.adminURL())
	exec1(t, admin, "create database", "CREATE DATABASE app")
	exec1(t, connect(t, primary.url), "the schema on the primary", failoverSchema+`
INSERT INTO acks (id, note) SELECT -g, 'before the move' FROM generate_series(1, 10000) g;
INSERT INTO counter VALUES (1, 10000);
CREATE ROLE `+writerRole+` LOGIN;
GRANT SELECT, INSERT, UPDATE ON acks, counter TO `+writerRole)
	exec1(t, admin, "the standby's slot", "SELECT pg_create_physical_replication_slot('standby1')")
	if out, err := pgVersions(2*time.Minute, "stop", primary.dir); err != nil {
		t.Fatalf("stop the primary to copy it: %v\n%s", err, out)
	}

	standby.dir = registerDir(t, fmt.Sprintf("pg%d-standby-", major))
	if out, err := asPostgres(time.Minute, "cp", "-a", filepath.Join(primary.dir, "data"), filepath.Join(standby.dir, "data")); err != nil {
		t.Fatalf("copy the primary's data directory: %v\n%s", err, out)
	}
	data := filepath.Join(standby.dir, "data")
	writePostgresFile(t, filepath.Join(data, "standby.signal"), "", false)
	// Later lines win: the copy's port and socket directory are the
	// primary's. A server refuses to start on a setting it does not know.
	conf := fmt.Sprintf(`
port = %d
unix_socket_directories = '%s'
primary_conninfo = 'host=127.0.0.1 port=%d user=postgres dbname=postgres application_name=standby1'
primary_slot_name = 'standby1'
hot_standby_feedback = on
`, standbyPort, standby.dir, primaryPort)
	if major >= 17 {
		conf += "sync_replication_slots = on\n"
	}
	writePostgresFile(t, filepath.Join(data, "postgresql.conf"), conf, true)
	for _, c := range []cluster{primary, standby} {
		if out, err := pgVersions(2*time.Minute, "start", strconv.Itoa(c.major), c.dir, strconv.Itoa(c.port)); err != nil {
			t.Fatalf("start PostgreSQL %d in %s: %v\n%s", c.major, c.dir, err, out)
		}
	}
	// Set after the copy, so that the promoted standby has neither.
	admin = connect(t, primary.adminURL())
	if major >= 17 {
		exec1(t, admin, "synchronized_standby_slots", "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'")
	}
	exec1(t, admin, "synchronous_standby_names", "ALTER SYSTEM SET synchronous_standby_names = 'standby1'")
	exec1(t, admin, "reload", "SELECT pg_reload_conf()")
	eventually(t, 60*time.Second, "standby1 to stream synchronously", func() bool {
		return queryOne[bool](t, admin, "SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE application_name = 'standby1' AND state = 'streaming' AND sync_state = 'sync')")
	})
	return primary, standby
}

// registerDir makes a cluster directory under workDir that the test's
// cleanup and TestMain stop the server of.
func registerDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp(workDir, prefix)
	if err != nil {
		t.Fatal(err)
	}
	startedMu.Lock()
	started = append(started, dir)
	startedMu.Unlock()
	t.Cleanup(func() {
		if out, err := pgVersions(2*time.Minute, "stop", dir); err != nil {
			t.Errorf("stop the cluster in %s: %v\n%s", dir, err, out)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	chownPostgres(t, dir)
	return dir
}

// asPostgres runs a command as the postgres user when the test runs as
// root (the servers' files are postgres's), bounded by timeout.
func asPostgres(timeout time.Duration, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return cmd.CombinedOutput()
}

// writePostgresFile writes (or appends) body to path, owned by postgres
// when the test runs as root.
func writePostgresFile(t *testing.T, path, body string, appendTo bool) {
	t.Helper()
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if appendTo {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	chownPostgres(t, path)
}

func chownPostgres(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// failOver kills the primary's postmaster with SIGKILL and promotes the
// standby at once, returning when each happened. The writer must have
// lost the primary: its errors until the promotion are the outage.
func failOver(t *testing.T, primary, standby cluster, w *ackWriter) (killed, promoted time.Time) {
	t.Helper()
	pidFile, err := os.ReadFile(filepath.Join(primary.dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(pidFile), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("postmaster.pid of the primary: %v", err)
	}
	killed = time.Now()
	w.mark(killed)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL the primary's postmaster %d: %v", pid, err)
	}
	bin, err := pgVersions(time.Minute, "bindir", strconv.Itoa(failoverMajor))
	if err != nil {
		t.Fatalf("bindir %d: %v\n%s", failoverMajor, err, bin)
	}
	if out, err := asPostgres(time.Minute, filepath.Join(strings.TrimSpace(string(bin)), "pg_ctl"), "promote", "-w", "-t", "60", "-D", filepath.Join(standby.dir, "data")); err != nil {
		t.Fatalf("promote the standby: %v\n%s", err, out)
	}
	return killed, time.Now()
}

// ackWriter is the application: one transaction at a time, each inserting
// a row of a new id into acks and adding one to counter, through the
// url that names both servers. It records each commit the server
// acknowledged, and each whose COMMIT got no answer (unknown: it may or
// may not have committed). Across the failover it reconnects every 50 ms
// for up to a minute.
type ackWriter struct {
	url  string
	stop chan struct{}
	done chan struct{}

	// cutting: cutover has begun, and the first error (the role locked
	// read-only) ends the writes quietly.
	cutting atomic.Bool

	mu       sync.Mutex
	acked    map[int64]time.Time
	unknown  []int64
	killedAt time.Time
	last     time.Time
	err      error
}

func startAckWriter(t *testing.T, url string) *ackWriter {
	t.Helper()
	url = strings.Replace(url, "postgres://postgres@", "postgres://"+writerRole+"@", 1)
	w := &ackWriter{url: url, stop: make(chan struct{}), done: make(chan struct{}), acked: map[int64]time.Time{}}
	go w.loop()
	t.Cleanup(w.halt)
	return w
}

func (w *ackWriter) loop() {
	defer close(w.done)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	var failingSince time.Time
	for id := int64(1); ; id++ {
		select {
		case <-w.stop:
			return
		default:
		}
		if conn == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := pgx.Connect(ctx, w.url)
			cancel()
			if err != nil {
				if !w.outage(&failingSince, err) {
					return
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			conn = c
		}
		committed, err := commitOne(conn, id)
		switch {
		case err == nil:
			failingSince = time.Time{}
			w.mu.Lock()
			w.acked[id], w.last = time.Now(), time.Now()
			w.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		case committed:
			w.mu.Lock()
			w.unknown = append(w.unknown, id)
			w.mu.Unlock()
			fallthrough
		default:
			conn.Close(context.Background())
			conn = nil
			if !w.outage(&failingSince, err) {
				return
			}
		}
	}
}

// commitOne runs the writer's transaction of id. sent says whether
// COMMIT was sent when err is not nil: the transaction's fate is unknown.
func commitOne(conn *pgx.Conn, id int64) (sent bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO acks (id, note) VALUES ($1, 'written')", id); err != nil {
		tx.Rollback(ctx)
		return false, err
	}
	if _, err := tx.Exec(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1"); err != nil {
		tx.Rollback(ctx)
		return false, err
	}
	return true, tx.Commit(ctx)
}

// outage records a failed attempt; it returns false (and sets the
// writer's error) once the writes have failed for a minute before the
// kill, or for a minute at all.
func (w *ackWriter) outage(since *time.Time, err error) bool {
	if since.IsZero() {
		*since = time.Now()
	}
	if w.cutting.Load() {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.killedAt.IsZero() || time.Since(*since) > time.Minute {
		w.err = fmt.Errorf("a write failed (outage of %s): %w", time.Since(*since).Round(time.Millisecond), err)
		return false
	}
	return true
}

func (w *ackWriter) mark(killed time.Time) { w.mu.Lock(); w.killedAt = killed; w.mu.Unlock() }

func (w *ackWriter) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *ackWriter) failure() error { w.mu.Lock(); defer w.mu.Unlock(); return w.err }

func (w *ackWriter) count() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.acked) }

func (w *ackWriter) lastCommit() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.last }

// firstIDAfter is the first id acknowledged after at, 0 when none is yet.
func (w *ackWriter) firstIDAfter(at time.Time) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first int64
	for id, when := range w.acked {
		if when.After(at) && (first == 0 || id < first) {
			first = id
		}
	}
	return first
}

// tally counts the acknowledged commits before and after killed, and the
// unknown ones.
func (w *ackWriter) tally(killed time.Time) (before, after, unknown int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, when := range w.acked {
		if when.After(killed) {
			after++
		} else {
			before++
		}
	}
	return before, after, len(w.unknown)
}

// compareFailover checks exactly once across the failover: the target
// equals the new primary n row for row, has every commit the writer saw
// acknowledged, and its counter equals its rows (a transaction applied
// twice would count twice; a lost one, not at all).
func compareFailover(t *testing.T, w *ackWriter, n, g *pgx.Conn) {
	t.Helper()
	for _, table := range []string{"acks", "counter"} {
		q := fmt.Sprintf("SELECT count(*) || ':' || coalesce(md5(string_agg(r::text, '|' ORDER BY r::text)), '') FROM %s r", table)
		if a, b := queryOne[string](t, n, q), queryOne[string](t, g, q); a != b {
			t.Errorf("%s: the target has %s, the new primary %s", table, b, a)
		}
	}
	rows := queryOne[int64](t, g, "SELECT count(*) FROM acks")
	if c := queryOne[int64](t, g, "SELECT n FROM counter WHERE id = 1"); c != rows {
		t.Errorf("the target's counter is %d, its rows %d: a transaction was applied twice or lost", c, rows)
	}
	w.mu.Lock()
	ids := make([]int64, 0, len(w.acked))
	for id := range w.acked {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	var missing []int64
	err := g.QueryRow(context.Background(), "SELECT coalesce(array_agg(i), '{}') FROM unnest($1::bigint[]) i WHERE NOT EXISTS (SELECT 1 FROM acks WHERE id = i)", ids).Scan(&missing)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("%d acknowledged commits are not on the target: %v", len(missing), missing[:min(len(missing), 20)])
	}
	if len(ids) < 100 {
		t.Errorf("only %d commits acknowledged: the move was not under writes", len(ids))
	}
}

// awaitConfirmedSlot waits until slot on c confirms the WAL position of
// primary (c itself, or the primary of a standby c) at the call; it fails
// at once if run ends.
func (r *runProc) awaitConfirmedSlot(t *testing.T, primary, c *pgx.Conn, slot string, timeout time.Duration, what string) {
	t.Helper()
	head := queryOne[string](t, primary, "SELECT pg_current_wal_lsn()::text")
	eventually(t, timeout, what+" (at "+head+")", func() bool {
		select {
		case <-r.done:
			t.Fatalf("run ended: %v\n%s", r.err, r.log.String())
		default:
		}
		return queryOne[bool](t, c, "SELECT coalesce((SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = $2), false)", head, slot)
	})
}

// lagOf is pgsync status's lag.
type lagOf struct {
	bytes   int64
	seconds float64
}

func status(t *testing.T, cfg string) lagOf {
	t.Helper()
	r := mustPgsync(t, time.Minute, cfg, "status", "--json")
	var st struct {
		LagBytes   *int64   `json:"lag_bytes"`
		LagSeconds *float64 `json:"lag_seconds"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	if st.LagBytes == nil {
		t.Fatalf("status --json gives no lag_bytes:\n%s", r.stdout)
	}
	out := lagOf{bytes: *st.LagBytes}
	if st.LagSeconds != nil {
		out.seconds = *st.LagSeconds
	}
	return out
}

// appendResult appends res as one JSON line to bench-results/name,
// setting its date and commit first (as recordResult does).
func appendResult(t *testing.T, name string, date, commit *string, res any) {
	t.Helper()
	*date = time.Now().UTC().Format("2006-01-02")
	if out, err := exec.Command("git", "-C", repoRoot, "describe", "--always").Output(); err == nil {
		*commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", repoRoot, "status", "--porcelain", "--", ".", ":!bench-results").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			*commit += "-dirty"
		}
	}
	line, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(repoRoot, "bench-results", name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
}
