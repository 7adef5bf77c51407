//go:build versions

package versions

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	// Standby is "synchronous" or "asynchronous".
	Standby string `json:"standby"`
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
	// LostByFailover are acknowledged commits the asynchronous standby
	// had not received when the primary died: lost by PostgreSQL's
	// failover, not by pgsync, and on neither the new primary nor the
	// target.
	LostByFailover int `json:"lost_by_failover"`
}

// TestFailover17 moves a database from a PostgreSQL 17 primary with a
// physical standby, under writes, kills the primary's postmaster with
// SIGKILL, promotes the standby and lets pgsync run continue through the
// source url that names both: nothing is applied twice (every
// transaction inserts one row and adds one to a counter), the target
// equals the new primary, and the lag comes back to zero. With a
// synchronous standby nothing acknowledged is lost; with an asynchronous
// one, what the standby had not received is lost by the failover, and
// the target must not hold it either (the issue found 295 such rows on
// the target before failover slots). The job's slot survives because
// bootstrap creates it as a failover slot, the standby synchronizes it
// (sync_replication_slots) and the primary's synchronized_standby_slots
// keeps the target from getting ahead of the standby.
func TestFailover17(t *testing.T) {
	for _, synchronous := range []bool{true, false} {
		name := map[bool]string{true: "synchronous", false: "asynchronous"}[synchronous]
		t.Run(name, func(t *testing.T) { failover(t, synchronous, name) })
	}
}

func failover(t *testing.T, synchronous bool, standbyKind string) {
	primary, standby := startPrimaryAndStandby(t, failoverMajor, basePort+6, basePort+7, synchronous)
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
	// Without synchronized_standby_slots, check warns and says what to set.
	admin := connect(t, primary.adminURL())
	exec1(t, admin, "reset synchronized_standby_slots", "ALTER SYSTEM RESET synchronized_standby_slots")
	exec1(t, admin, "reload", "SELECT pg_reload_conf()")
	chk := pgsync(t, 2*time.Minute, cfg, "check")
	if chk.code != 0 || !strings.Contains(chk.stdout, "WARN  failover") || !strings.Contains(chk.stdout, "standby1 (slot standby1) is not held back by synchronized_standby_slots") ||
		!strings.Contains(chk.stdout, "ALTER SYSTEM SET synchronized_standby_slots") {
		t.Fatalf("check without synchronized_standby_slots does not warn for standby1 with the fix: exit %d\n%s\n%s", chk.code, chk.stdout, chk.stderr)
	}
	exec1(t, admin, "synchronized_standby_slots", "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'")
	exec1(t, admin, "reload", "SELECT pg_reload_conf()")
	chk = pgsync(t, 2*time.Minute, cfg, "check")
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
	res := failoverResult{Source: failoverMajor, Target: tgt.major, Standby: standbyKind, NoPrimarySeconds: promoted.Sub(killed).Seconds()}
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
	res.LostByFailover = compareFailover(t, w, n, g)
	if synchronous && res.LostByFailover > 0 {
		t.Errorf("%d commits acknowledged with a synchronous standby are not on the target", res.LostByFailover)
	}
	run.stop(t)
	if !strings.Contains(run.log.String(), "reconnected") {
		t.Errorf("run's log has no reconnected line:\n%s", run.log.String())
	}
	checkServerLog(t, primary)
	checkServerLog(t, standby)
	if t.Failed() {
		return
	}
	t.Logf("PostgreSQL %d primary killed, %s standby promoted: %.2f s without a primary; run applied the new primary's first row %.2f s after the promotion (%.2f s after the kill); lag under writes 5 s after the promotion %d bytes (%.3f s); caught up %.2f s after the last commit, lag %d bytes; %d commits before the kill, %d after, %d unknown, %d lost by the failover",
		failoverMajor, standbyKind, res.NoPrimarySeconds, res.ResumeAfterPromotionSeconds, res.ResumeAfterKillSeconds, res.LagBytesUnderWrites, res.LagSecondsUnderWrites,
		res.CatchUpSeconds, res.LagBytesAfter, res.CommitsBefore, res.CommitsAfter, res.Unknown, res.LostByFailover)
	for _, line := range strings.Split(run.log.String(), "\n") {
		if strings.Contains(line, "connection lost") || strings.Contains(line, "reconnected") {
			t.Log("run: " + line)
		}
	}
	appendResult(t, "failover.jsonl", &res.Date, &res.Commit, &res)
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
