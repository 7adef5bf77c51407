//go:build versions

// Package versions is the upgrade matrix (issue 32): a database shaped
// like an application moved between clusters of two PostgreSQL majors,
// under writes, and compared after cutover without pgsync. The servers
// other than Debian's 15 come from scripts/pg-versions.sh.
//
// It has a build tag of its own (versions), apart from the integration
// tests: `make test` does not compile it, and `make test-versions` names
// the pairs in PGSYNC_TEST_VERSION_PAIRS ("13:15,15:18"). Without pairs it
// fails rather than pass having moved nothing.
package versions

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	repoRoot  string
	pgsyncBin string
	// workDir holds every cluster the tests start, and nothing else.
	workDir string
	pairs   []pair
	// basePort is the first of the ports the tests use (nine of them:
	// the failover test's three after the matrix's six).
	basePort = envInt("PGSYNC_TEST_VERSION_PORT", 26612)

	startedMu sync.Mutex
	started   []string // cluster dirs, stopped by TestMain whatever happened
)

// pair is a move from a source of one major to a target of another.
type pair struct{ src, tgt int }

func (p pair) String() string { return fmt.Sprintf("%d_to_%d", p.src, p.tgt) }

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

// parsePairs reads "13:15,15:18".
func parsePairs(s string) ([]pair, error) {
	var out []pair
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		a, b, ok := strings.Cut(f, ":")
		src, err1 := strconv.Atoi(a)
		tgt, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || src < 12 || tgt < 12 || src > 18 || tgt > 18 {
			return nil, fmt.Errorf("PGSYNC_TEST_VERSION_PAIRS: %q is not SOURCE:TARGET with majors 12 to 18", f)
		}
		out = append(out, pair{src, tgt})
	}
	return out, nil
}

// TestMain builds pgsync, fetches the majors the pairs need, runs the
// tests and stops every cluster they started, pass or fail (no defer:
// os.Exit would skip it).
func TestMain(m *testing.M) {
	// An interrupted run (Ctrl-C, go test's own kill at -timeout sends
	// SIGQUIT and is not caught) stops its clusters too.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "%s: stopping the test clusters\n", s)
		if err := stopAll(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}()
	code := setup()
	if code == 0 {
		code = m.Run()
	}
	if err := stopAll(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func setup() int {
	var err error
	if pairs, err = parsePairs(os.Getenv("PGSYNC_TEST_VERSION_PAIRS")); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	if len(pairs) == 0 {
		fmt.Fprintln(os.Stderr, "FAIL: PGSYNC_TEST_VERSION_PAIRS names no pair (e.g. \"13:15,15:18\"): nothing would be tested; run make test-versions")
		return 1
	}
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// PGSYNC_TEST_VERSION_DIR keeps the clusters of runs beside each
	// other apart (default /tmp).
	base := os.Getenv("PGSYNC_TEST_VERSION_DIR")
	if base == "" {
		base = "/tmp"
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if workDir, err = os.MkdirTemp(base, "pgsync-versions-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The servers run as the postgres user, who must reach their dirs.
	if err := os.Chmod(workDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pgsyncBin = filepath.Join(workDir, "pgsync")
	build := exec.Command("go", "build", "-o", pgsyncBin, "./cmd/pgsync")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: go build: %v\n%s", err, out)
		return 1
	}
	// Every major first, so that a download is not timed as a move.
	// 15 and 13: the downgrade test's; 16 and 17: the standby tests'.
	seen := map[int]bool{15: true, 13: true, 16: true, 17: true}
	majors := []int{15, 13, 16, 17}
	for _, p := range pairs {
		for _, v := range []int{p.src, p.tgt} {
			if !seen[v] {
				seen[v] = true
				majors = append(majors, v)
			}
		}
	}
	for _, v := range majors {
		if out, err := pgVersions(10*time.Minute, "bindir", strconv.Itoa(v)); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: PostgreSQL %d: %v\n%s", v, err, out)
			return 1
		}
	}
	return 0
}

// pgVersions runs scripts/pg-versions.sh, bounded by timeout.
func pgVersions(timeout time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(repoRoot, "scripts/pg-versions.sh")}, args...)...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return out, fmt.Errorf("scripts/pg-versions.sh %v did not finish within %s", args, timeout)
	}
	return out, err
}

// startCluster starts a cluster of major on port in a directory of its
// own under workDir; the test's cleanup stops it, and TestMain again if
// the test binary got no further.
func startCluster(t *testing.T, major, port int) string {
	t.Helper()
	dir, err := os.MkdirTemp(workDir, fmt.Sprintf("pg%d-", major))
	if err != nil {
		t.Fatal(err)
	}
	startedMu.Lock()
	started = append(started, dir)
	startedMu.Unlock()
	t.Cleanup(func() {
		if out, err := pgVersions(2*time.Minute, "stop", dir); err != nil {
			t.Errorf("stop PostgreSQL %d in %s: %v\n%s", major, dir, err, out)
		}
	})
	if out, err := pgVersions(3*time.Minute, "start", strconv.Itoa(major), dir, strconv.Itoa(port)); err != nil {
		t.Fatalf("start PostgreSQL %d on %d: %v\n%s", major, port, err, out)
	}
	return dir
}

// stopAll stops every cluster started (stopping one already stopped is a
// no-op) and removes workDir.
func stopAll() error {
	if workDir == "" {
		return nil
	}
	startedMu.Lock()
	dirs := append([]string(nil), started...)
	startedMu.Unlock()
	var failed []string
	for _, dir := range dirs {
		if out, err := pgVersions(2*time.Minute, "stop", dir); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v\n%s", dir, err, out))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("stopping test clusters:\n%s", strings.Join(failed, "\n"))
	}
	return os.RemoveAll(workDir)
}

// result is a finished pgsync command.
type result struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

// pgsync runs the binary with cfg, bounded by timeout.
func pgsync(t *testing.T, timeout time.Duration, cfg string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, pgsyncBin, append([]string{"-c", cfg}, args...)...)
	cmd.Env = append(os.Environ(), "PGSYNC_LOG_FORMAT=text")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	began := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(began)}
	if ctx.Err() != nil {
		t.Fatalf("pgsync %v did not finish within %s\nstdout:\n%s\nstderr:\n%s", args, timeout, r.stdout, r.stderr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("pgsync %v: %v", args, err)
	}
	return r
}

func mustPgsync(t *testing.T, timeout time.Duration, cfg string, args ...string) result {
	t.Helper()
	r := pgsync(t, timeout, cfg, args...)
	if r.code != 0 {
		t.Fatalf("pgsync %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// lockedBuffer is a process's output, read while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
