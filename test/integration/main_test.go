//go:build integration

// Package integration runs pgsync's commands against two real PostgreSQL
// clusters started by scripts/local-pg.sh. Nothing here mocks PostgreSQL:
// when the clusters cannot start, every test fails.
package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	repoRoot  string
	pgsyncBin string
	// Below the ephemeral range (32768-60999): a client socket of any
	// process may hold a port inside it, and the cluster then cannot
	// listen (seen once with 56432).
	sourcePort = envOr("PGSYNC_TEST_SOURCE_PORT", "26432")
	targetPort = envOr("PGSYNC_TEST_TARGET_PORT", "26433")
	pgDir      = envOr("PGSYNC_TEST_PG_DIR", "/tmp/pgsync-test-pg")
	dbSeq      atomic.Int64
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// TestMain starts the clusters, builds pgsync, runs the tests and stops the
// clusters whatever the outcome (no defer: os.Exit would skip it).
func TestMain(m *testing.M) {
	root, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	repoRoot = root
	// Tests read pgsync's log lines as text; TestLogFormatJSON asks for JSON.
	os.Setenv("PGSYNC_LOG_FORMAT", "text")
	code := setup()
	if code == 0 {
		code = m.Run()
	}
	if out, err := localPG("destroy"); err != nil {
		fmt.Fprintf(os.Stderr, "stopping test clusters: %v\n%s", err, out)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func setup() int {
	if out, err := localPG("start"); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: cannot start the test clusters with scripts/local-pg.sh: %v\n%s", err, out)
		return 1
	}
	bin, err := os.MkdirTemp("", "pgsync-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pgsyncBin = filepath.Join(bin, "pgsync")
	args := []string{"build", "-o", pgsyncBin}
	if os.Getenv("PGSYNC_TEST_RACE") != "" {
		args = append(args, "-race") // a pgsync built with the race detector
	}
	build := exec.Command("go", append(args, "./cmd/pgsync")...)
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: go build: %v\n%s", err, out)
		return 1
	}
	return 0
}

// localPG runs scripts/local-pg.sh for the test clusters.
func localPG(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(repoRoot, "scripts/local-pg.sh")}, args...)...)
	cmd.Env = append(os.Environ(), "PGSYNC_PG_DIR="+pgDir, "PGSYNC_SOURCE_PORT="+sourcePort, "PGSYNC_TARGET_PORT="+targetPort)
	return cmd.CombinedOutput()
}

// env is one test's pair of fresh databases and its pgsync job.
type env struct {
	t       *testing.T
	job     string
	db      string
	srcURL  string
	tgtURL  string
	cfgPath string
	src     *pgx.Conn
	tgt     *pgx.Conn
}

func adminURL(port string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", port)
}

func mustConnect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	return c
}

// newEnv creates a source and a target database for the test, runs
// sourceSQL on the source and writes a pgsync.toml. tuning is appended to
// the file verbatim.
func newEnv(t *testing.T, sourceSQL string, tuning string) *env {
	t.Helper()
	n := dbSeq.Add(1)
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "_"))
	if len(name) > 30 {
		name = name[:30]
	}
	e := &env{t: t, job: fmt.Sprintf("j%d_%s", n, name), db: fmt.Sprintf("it%d", n)}
	for _, port := range []string{sourcePort, targetPort} {
		admin := mustConnect(t, adminURL(port))
		if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+e.db+" WITH (FORCE)"); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(context.Background(), "CREATE DATABASE "+e.db); err != nil {
			t.Fatal(err)
		}
		admin.Close(context.Background())
	}
	e.srcURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%s/%s?sslmode=disable", sourcePort, e.db)
	e.tgtURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%s/%s?sslmode=disable", targetPort, e.db)
	e.src = mustConnect(t, e.srcURL)
	e.tgt = mustConnect(t, e.tgtURL)
	if sourceSQL != "" {
		e.srcExec(sourceSQL)
	}
	e.cfgPath = filepath.Join(t.TempDir(), "pgsync.toml")
	cfg := fmt.Sprintf("[source]\nurl = %q\n[target]\nurl = %q\n[job]\nname = %q\ntables = [\"public.*\"]\n%s", e.srcURL, e.tgtURL, e.job, tuning)
	if err := os.WriteFile(e.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cleanup)
	return e
}

func (e *env) cleanup() {
	ctx := context.Background()
	e.src.Close(ctx)
	e.tgt.Close(ctx)
	for _, port := range []string{sourcePort, targetPort} {
		admin, err := pgx.Connect(ctx, adminURL(port))
		if err != nil {
			e.t.Logf("cleanup: %v", err)
			continue
		}
		// A slot pins its database: drop it first.
		_, _ = admin.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`, e.db)
		time.Sleep(100 * time.Millisecond)
		_, _ = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1`, e.db)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+e.db+" WITH (FORCE)"); err != nil {
			e.t.Logf("cleanup: drop database %s: %v", e.db, err)
		}
		admin.Close(ctx)
	}
}

func (e *env) srcExec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.src.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("source: %v\n%s", err, sql)
	}
}

func (e *env) tgtExec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.tgt.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("target: %v\n%s", err, sql)
	}
}

func queryOne[T any](t testing.TB, c *pgx.Conn, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := c.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// result is a finished pgsync command.
type result struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

// pgsync runs the binary with the test's config, bounded by a timeout.
func (e *env) pgsync(args ...string) result {
	e.t.Helper()
	return runPgsync(e.t, 3*time.Minute, append([]string{"-c", e.cfgPath}, args...)...)
}

func runPgsync(t testing.TB, timeout time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, pgsyncBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	began := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(began)}
	if ctx.Err() != nil {
		t.Fatalf("pgsync %v did not finish within %s\nstderr:\n%s", args, timeout, r.stderr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("pgsync %v: %v", args, err)
	}
	return r
}

// mustPgsync runs pgsync and fails the test unless it exits 0.
func (e *env) mustPgsync(args ...string) result {
	e.t.Helper()
	r := e.pgsync(args...)
	if r.code != 0 {
		e.t.Fatalf("pgsync %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// background is a pgsync process running while the test works.
type background struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

type syncBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.String()
}

// start runs pgsync in the background; the test's cleanup kills it if it
// is still running.
func (e *env) start(args ...string) *background {
	e.t.Helper()
	cmd := exec.Command(pgsyncBin, append([]string{"-c", e.cfgPath}, args...)...)
	bg := &background{cmd: cmd, stderr: newSyncBuffer(), done: make(chan struct{})}
	cmd.Stderr = bg.stderr
	cmd.Stdout = bg.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { bg.err = cmd.Wait(); close(bg.done) }()
	e.t.Cleanup(func() {
		select {
		case <-bg.done:
		default:
			_ = cmd.Process.Kill()
			<-bg.done
		}
	})
	return bg
}

// kill9 kills the process with SIGKILL and waits for it.
func (b *background) kill9(t testing.TB) {
	t.Helper()
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		t.Fatal("pgsync did not die after SIGKILL")
	}
}

// wait waits for the process to exit and returns its exit code.
func (b *background) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(timeout):
		t.Fatalf("pgsync still running after %s\n%s", timeout, b.stderr.String())
	}
	if ee, ok := b.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	return 0
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

// mustVerify runs pgsync verify and fails unless every table is identical.
func (e *env) mustVerify() {
	e.t.Helper()
	r := e.pgsync("verify")
	if r.code != 0 || !strings.Contains(r.stdout, "identical") {
		e.t.Fatalf("verify: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// catchUp runs pgsync run --until-caught-up and requires exit 0.
func (e *env) catchUp() result {
	e.t.Helper()
	return e.mustPgsync("run", "--until-caught-up")
}

// localPGRestart restarts one of the test clusters with pg_ctl in mode
// (fast or immediate).
func localPGRestart(cluster, mode string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := fmt.Sprintf(`set -e; d=%s/%s; b=$(ls -d /usr/lib/postgresql/*/bin | tail -1); if [ "$(id -u)" = 0 ]; then runuser -u postgres -- $b/pg_ctl -D $d -m %s -w -t 60 restart -l %s/%s.log; else $b/pg_ctl -D $d -m %s -w -t 60 restart -l %s/%s.log; fi`,
		pgDir, cluster, mode, pgDir, cluster, mode, pgDir, cluster)
	return exec.CommandContext(ctx, "bash", "-c", script).CombinedOutput()
}

// mustConnectErr connects without failing a test, for cleanups.
func mustConnectErr(url string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return pgx.Connect(ctx, url)
}
