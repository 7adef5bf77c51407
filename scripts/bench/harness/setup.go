package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

// The bench clusters: the directory and ports every scenario uses, apart
// from the integration tests' and the reliability drills' clusters.
// scripts/local-pg.sh's variables move them elsewhere, so that two
// harnesses can run side by side (setup reads them).
var (
	benchPGDir = "/tmp/pgsync-bench-pg"
	sourcePort = 26562
	targetPort = 26563
)

const clusterStart = 2 * time.Minute

// clustersFromEnv reads PGSYNC_PG_DIR, PGSYNC_SOURCE_PORT and
// PGSYNC_TARGET_PORT when set.
func clustersFromEnv() error {
	if d := os.Getenv("PGSYNC_PG_DIR"); d != "" {
		benchPGDir = d
	}
	for name, port := range map[string]*int{"PGSYNC_SOURCE_PORT": &sourcePort, "PGSYNC_TARGET_PORT": &targetPort} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 65535 {
				return fmt.Errorf("%s=%q is not a port", name, v)
			}
			*port = n
		}
	}
	return nil
}

// bench is what every scenario starts from: PostgreSQL installed, pgsync
// built, both clusters running.
type bench struct {
	root    string // the repository
	bindir  string // PostgreSQL's programs
	pgsync  string // the pgsync binary just built
	results string // bench-results/
	// logs is the run's log directory (-logs): every log, configuration,
	// script and report a scenario's programs write, kept out of
	// bench-results/, which holds the typed results and the series the
	// pages draw.
	logs string
	env  benchres.Environment
}

// setup installs PostgreSQL when missing, builds pgsync, makes the log
// directory (logsDir) and starts the clusters. The returned stop ends the
// clusters; call it whatever happens.
func setup(ctx context.Context, root string) (b *bench, stop func(), err error) {
	if err := clustersFromEnv(); err != nil {
		return nil, nil, err
	}
	if b, err = newBench(root); err != nil {
		return nil, nil, err
	}
	if err := b.run(ctx, 10*time.Minute, nil, "bash", "scripts/install-pg.sh"); err != nil {
		return nil, nil, err
	}
	// PGSYNC names another build to measure (an earlier commit's, or a
	// copy of this one's while another harness builds): nothing is built.
	if bin := os.Getenv("PGSYNC"); bin != "" {
		if b.pgsync, err = filepath.Abs(bin); err != nil {
			return nil, nil, err
		}
	} else if err := b.run(ctx, 5*time.Minute, nil, "make", "-s", "build"); err != nil {
		return nil, nil, err
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(matches) == 0 {
		return nil, nil, fmt.Errorf("no PostgreSQL server under /usr/lib/postgresql after scripts/install-pg.sh")
	}
	b.bindir = filepath.Dir(matches[len(matches)-1])
	if b.env, err = b.environmentOf(ctx, b.pgsync); err != nil {
		return nil, nil, err
	}
	stop = func() {
		// A context of its own: the clusters are stopped also after an
		// interrupt cancelled ctx.
		c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := b.localPG(c, "stop"); err != nil {
			fmt.Fprintln(os.Stderr, "harness: stopping the bench clusters:", err)
		}
	}
	if err := b.localPG(ctx, "start"); err != nil {
		stop()
		return nil, nil, err
	}
	return b, stop, nil
}

// newBench is a bench of the repository at root with its log directory
// made, for a scenario that needs neither clusters nor a build (setup
// does the rest).
func newBench(root string) (*bench, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	b := &bench{root: root, pgsync: filepath.Join(root, "bin", "pgsync"), results: filepath.Join(root, "bench-results")}
	// Absolute: the programs the harness starts run in it.
	if b.logs, err = filepath.Abs(logsDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(b.logs, 0o755); err != nil {
		return nil, fmt.Errorf("the log directory: %w", err)
	}
	return b, nil
}

// setupIn is setup for a scenario that writes its result in out (default
// bench-results/), made if missing and returned absolute; its logs go to
// b.logs.
func setupIn(ctx context.Context, root, out string) (b *bench, dir string, stop func(), err error) {
	if b, stop, err = setup(ctx, root); err != nil {
		return nil, "", nil, err
	}
	if dir, err = b.resultsDir(out); err != nil {
		stop()
		return nil, "", nil, err
	}
	return b, dir, stop, nil
}

// resultsDir is out (default bench-results/), absolute and made.
func (b *bench) resultsDir(out string) (string, error) {
	if out == "" {
		out = b.results
	}
	dir, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// run runs name with args in the repository, with env added to the
// harness's environment and its output on the harness's stderr; it is
// ended by ctx or after limit.
func (b *bench) run(ctx context.Context, limit time.Duration, env []string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	// A group of its own, ended whole: a pipe run by bash -c (pg_dump |
	// psql) does not outlive a timeout or an interrupt.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	defer waiting(strings.Join(append([]string{filepath.Base(name)}, args...), " "), limit)()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// localPG runs scripts/local-pg.sh verb on the bench clusters.
func (b *bench) localPG(ctx context.Context, verb string) error {
	return b.run(ctx, clusterStart, []string{"PGSYNC_PG_DIR=" + benchPGDir,
		"PGSYNC_SOURCE_PORT=" + strconv.Itoa(sourcePort), "PGSYNC_TARGET_PORT=" + strconv.Itoa(targetPort)},
		"bash", "scripts/local-pg.sh", verb)
}

// url is the postgres:// address of database db on the cluster at port.
func url(port int, db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, db)
}

// versionCommit is the commit of pgsync's version line: the version the
// Makefile stamps ("pgsync 1a2b3c4 (commit ...)"), or, for a plain go
// build in a checkout ("pgsync dev (commit 1a2b3c4d..., go...)"), the
// first seven digits of the commit Go recorded.
func versionCommit(line string) (string, error) {
	f := strings.Fields(line)
	if len(f) >= 2 && f[1] != "dev" {
		return f[1], nil
	}
	if _, rest, ok := strings.Cut(line, "(commit "); ok {
		c := strings.TrimRight(strings.Fields(rest)[0], ",)")
		if len(c) >= 7 && c != "unknown" {
			return c[:7], nil
		}
	}
	return "", fmt.Errorf("pgsync was built without a commit (%q)", strings.TrimSpace(line))
}

// environmentOf describes the machine and the build of the pgsync binary
// at bin: the commit is the one it was built from (its version command).
func (b *bench) environmentOf(ctx context.Context, bin string) (benchres.Environment, error) {
	var env benchres.Environment
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return env, fmt.Errorf("%s version: %w", bin, err)
	}
	if env.Commit, err = versionCommit(string(out)); err != nil {
		return env, fmt.Errorf("%s: %w", bin, err)
	}
	out, err = exec.CommandContext(ctx, filepath.Join(b.bindir, "postgres"), "--version").Output()
	if err != nil {
		return env, fmt.Errorf("postgres --version: %w", err)
	}
	if f := strings.Fields(string(out)); len(f) >= 3 {
		env.PostgreSQL = f[2]
	}
	env.Go = runtime.Version()
	env.Cores = runtime.NumCPU()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				env.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if m, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(m), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				env.MemoryGiB = int(kb/1048576 + 0.5)
			}
		}
	}
	if env.CPU == "" || env.PostgreSQL == "" || env.MemoryGiB == 0 {
		return env, fmt.Errorf("incomplete environment: %+v", env)
	}
	return env, nil
}

// checkoutAt checks commit out in a worktree of its own under the log
// directory, to build an earlier pgsync from; remove removes it.
func (b *bench) checkoutAt(ctx context.Context, commit string) (dir string, remove func(), err error) {
	dir = filepath.Join(b.logs, "src-"+commit)
	if err := b.run(ctx, time.Minute, nil, "git", "worktree", "add", "-q", "--detach", dir, commit); err != nil {
		return "", nil, err
	}
	remove = func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := b.run(c, time.Minute, nil, "git", "worktree", "remove", "--force", dir); err != nil {
			fmt.Fprintln(os.Stderr, "harness:", err)
		}
	}
	return dir, remove, nil
}

// buildAt builds pgsync at commit, its version set to the commit, into
// the log directory and returns the binary: an earlier build to measure
// beside this one.
func (b *bench) buildAt(ctx context.Context, commit string) (string, error) {
	src, remove, err := b.checkoutAt(ctx, commit)
	if err != nil {
		return "", err
	}
	defer remove()
	bin := filepath.Join(b.logs, "pgsync-"+commit)
	return bin, b.run(ctx, 10*time.Minute, nil, "go", "build", "-C", src, "-trimpath",
		"-ldflags", "-X github.com/pgsync/pgsync/cmd.Version="+commit, "-o", bin, "./cmd/pgsync")
}

// buildTool builds one of the bench module's programs
// (scripts/bench/cmd: discard, latency-proxy, insert-copy-bench) into
// bin/ and returns its path.
func (b *bench) buildTool(ctx context.Context, name string) (string, error) {
	out := filepath.Join(b.root, "bin", name)
	return out, b.run(ctx, 5*time.Minute, nil, "go", "build", "-C", "scripts/bench", "-trimpath", "-o", out, "./cmd/"+name)
}
