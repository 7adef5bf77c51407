package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
	"github.com/pgsync/pgsync/scripts/bench/pgsynclog"
)

// pgsyncMove is pgsync: bootstrap, then run, then cutover --lock-source.
type pgsyncMove struct {
	b      *bench
	dir    string
	tuning string // the [tuning] section's keys, if any

	mu                  sync.Mutex
	bootstrap, run, cut *process
}

func (p *pgsyncMove) config() string { return filepath.Join(p.dir, "pgsync.toml") }

var pgsyncEnv = []string{"PGSYNC_LOG_FORMAT=text"}

func (p *pgsyncMove) begin(ctx context.Context) error {
	cfg := fmt.Sprintf("[source]\nurl = %q\n[target]\nurl = %q\n[job]\nname = %q\ntables = [\"public.*\"]\n",
		url(sourcePort, moveDB), url(targetPort, moveDB), moveDB)
	if p.tuning != "" {
		cfg += "[tuning]\n" + p.tuning + "\n"
	}
	if err := os.WriteFile(p.config(), []byte(cfg), 0o600); err != nil {
		return err
	}
	log := filepath.Join(p.dir, "bootstrap.log")
	proc, err := start(p.dir, log, log, pgsyncEnv, p.b.pgsync, "-c", p.config(), "bootstrap")
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.bootstrap = proc
	p.mu.Unlock()
	return nil
}

// copied is true once bootstrap has ended well; it then starts run.
func (p *pgsyncMove) copied(ctx context.Context) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.bootstrap == nil || !p.bootstrap.exited():
		return false, nil
	case p.bootstrap.err != nil:
		return false, fmt.Errorf("pgsync bootstrap: %v (see %s)", p.bootstrap.err, filepath.Join(p.dir, "bootstrap.log"))
	case p.run == nil:
		log := filepath.Join(p.dir, "run.log")
		proc, err := start(p.dir, log, log, pgsyncEnv, p.b.pgsync, "-c", p.config(), "run")
		if err != nil {
			return false, err
		}
		p.run = proc
	case p.run.exited():
		return false, fmt.Errorf("pgsync run ended: %v (see %s)", p.run.err, filepath.Join(p.dir, "run.log"))
	}
	return true, nil
}

func (p *pgsyncMove) toolPIDs(context.Context) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []int
	for _, proc := range []*process{p.bootstrap, p.run, p.cut} {
		if proc != nil && !proc.exited() {
			pids = append(pids, proc.pid())
		}
	}
	return pids
}

// cutover locks the application's role, waits for the target and reports
// it ready; it then compares the tables, which the harness waits for too
// (its CPU is the tool's).
func (p *pgsyncMove) cutover(ctx context.Context) (time.Time, error) {
	report := filepath.Join(p.dir, "cutover.json")
	proc, err := start(p.dir, report, filepath.Join(p.dir, "cutover.log"), pgsyncEnv, p.b.pgsync,
		"-c", p.config(), "cutover", "--lock-source", appRole, "--timeout", "120s", "--json")
	if err != nil {
		return time.Time{}, err
	}
	p.mu.Lock()
	p.cut = proc
	p.mu.Unlock()
	if err := proc.wait(ctx, 10*time.Minute); err != nil {
		return time.Time{}, fmt.Errorf("pgsync cutover: %w (see %s)", err, filepath.Join(p.dir, "cutover.log"))
	}
	r, err := readCutover(report)
	return r.ReadyAt, err
}

// cutoverReport is what the harness reads of pgsync cutover --json.
type cutoverReport struct {
	ReadyAt         time.Time `json:"ready_at"` // the target reported ready for writes
	WriteGapSeconds float64   `json:"write_gap_seconds"`
	VerifySeconds   float64   `json:"verify_seconds"` // the compare after ready
	Identical       bool      `json:"identical"`
}

// readCutover reads cutover's report at path; one without ready_at is an
// error.
func readCutover(path string) (cutoverReport, error) {
	var r cutoverReport
	data, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil || r.ReadyAt.IsZero() {
		return r, fmt.Errorf("pgsync cutover's report %s has no ready_at (%v)", path, err)
	}
	return r, nil
}

func (p *pgsyncMove) end(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, proc := range []*process{p.bootstrap, p.run, p.cut} {
		if proc != nil {
			proc.stop(30 * time.Second)
		}
	}
	return nil
}

// phases splits pgsync's move from its logs: the schema and the slot, the
// copy, what bootstrap builds after the copy, run's start, and the
// catch-up until ready (readyAfter from t0; 0 when it never was).
func (p *pgsyncMove) phases(t0 time.Time, readyAfter time.Duration) ([]benchres.Phase, error) {
	boot, err := logTimes(filepath.Join(p.dir, "bootstrap.log"))
	if err != nil {
		return nil, err
	}
	run, err := logTimes(filepath.Join(p.dir, "run.log"))
	if err != nil {
		return nil, err
	}
	slot, copiedAll, done, started := boot.first("slot created"), boot.last("table copied"), boot.first("bootstrap done"), run.first("started")
	for what, t := range map[string]time.Time{"slot created": slot, "table copied": copiedAll, "bootstrap done": done, "run's started": started} {
		if t.IsZero() {
			return nil, fmt.Errorf("pgsync's logs under %s have no %q line", p.dir, what)
		}
	}
	at := func(t time.Time) float64 { return t.Sub(t0).Seconds() }
	phases := []benchres.Phase{
		{Name: "pg_dump, pre-data schema, slot", Start: 0, End: at(slot)},
		{Name: "copy", Start: at(slot), End: at(copiedAll)},
		{Name: "keys and foreign keys after the copy", Start: at(copiedAll), End: at(done)},
		{Name: "run's start", Start: at(done), End: at(started)},
	}
	if readyAfter > 0 {
		phases = append(phases, benchres.Phase{Name: "catch-up until ready", Start: at(started), End: readyAfter.Seconds()})
	}
	return phases, nil
}

// loggedTimes are the times of a pgsync log's lines, by message.
type loggedTimes map[string][]time.Time

func (l loggedTimes) first(msg string) time.Time {
	if ts := l[msg]; len(ts) > 0 {
		return ts[0]
	}
	return time.Time{}
}

func (l loggedTimes) last(msg string) time.Time {
	if ts := l[msg]; len(ts) > 0 {
		return ts[len(ts)-1]
	}
	return time.Time{}
}

// logTimes reads a log in slog's text format: time=... level=... msg=...
func logTimes(path string) (loggedTimes, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l := make(loggedTimes)
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		t, msg, ok := parseLogLine(s.Text())
		if ok {
			l[msg] = append(l[msg], t)
		}
	}
	return l, s.Err()
}

// parseLogLine takes the time and the message of one slog text line.
func parseLogLine(line string) (time.Time, string, bool) {
	kv := pgsynclog.Fields(line)
	msg, hasMsg := kv["msg"]
	t, err := time.Parse(time.RFC3339Nano, kv["time"])
	return t, msg, hasMsg && err == nil
}

// nativeMove is PostgreSQL's own: pg_dump --schema-only restored on the
// target, a publication for all tables, a subscription that copies them.
type nativeMove struct {
	b   *bench
	dir string
}

func (n *nativeMove) begin(ctx context.Context) error {
	if err := n.b.dumpSchema(ctx, sourcePort, moveDB, moveDB, filepath.Join(n.dir, "schema.log")); err != nil {
		return err
	}
	if err := runSQL(ctx, sourcePort, moveDB, "CREATE PUBLICATION move_pub FOR ALL TABLES"); err != nil {
		return err
	}
	return runSQL(ctx, targetPort, moveDB, fmt.Sprintf(
		"CREATE SUBSCRIPTION move_sub CONNECTION 'host=127.0.0.1 port=%d user=postgres dbname=%s' PUBLICATION move_pub WITH (copy_data = true)",
		sourcePort, moveDB))
}

// dumpSchema is the native way's schema: pg_dump --schema-only of srcDB,
// reached on srcPort, into psql on the target's tgtDB, its output in log.
func (b *bench) dumpSchema(ctx context.Context, srcPort int, srcDB, tgtDB, log string) error {
	dump := fmt.Sprintf("set -o pipefail; %s/pg_dump --schema-only -h 127.0.0.1 -p %d -U postgres %s | %s/psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p %d -U postgres -d %s >%s 2>&1",
		b.bindir, srcPort, srcDB, b.bindir, targetPort, tgtDB, log)
	if err := b.run(ctx, time.Hour, nil, "bash", "-c", dump); err != nil {
		return fmt.Errorf("pg_dump --schema-only into the target: %w (see %s)", err, log)
	}
	return nil
}

// copied is true once every table's state is ready ('r').
func (n *nativeMove) copied(ctx context.Context) (bool, error) {
	var total, notReady int
	err := query(ctx, targetPort, moveDB, "SELECT count(*), count(*) FILTER (WHERE srsubstate <> 'r') FROM pg_subscription_rel", &total, &notReady)
	return err == nil && total > 0 && notReady == 0, nil
}

func (n *nativeMove) toolPIDs(ctx context.Context) []int {
	pids, err := column(ctx, targetPort, "postgres", "SELECT pid::text FROM pg_stat_activity WHERE backend_type = 'logical replication worker'")
	if err != nil {
		return nil
	}
	var out []int
	for _, s := range pids {
		if pid, err := strconv.Atoi(s); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func (n *nativeMove) cutover(context.Context) (time.Time, error) { return time.Time{}, nil }

// end disables the subscription.
func (n *nativeMove) end(ctx context.Context) error {
	return runSQL(ctx, targetPort, moveDB, "ALTER SUBSCRIPTION move_sub DISABLE")
}

// pgcopydbMove is pgcopydb clone --follow: it copies, then replays what
// its slot decoded (with wal2json) since its snapshot.
type pgcopydbMove struct {
	b    *bench
	dir  string
	mu   sync.Mutex
	proc *process
}

func (c *pgcopydbMove) begin(ctx context.Context) error {
	work := filepath.Join(c.dir, "work")
	log := filepath.Join(c.dir, "pgcopydb.log")
	proc, err := start(c.dir, log, log, nil, "/usr/bin/pgcopydb", "clone", "--follow",
		"--source", url(sourcePort, moveDB), "--target", url(targetPort, moveDB), "--dir", work,
		"--table-jobs", "2", "--index-jobs", "2")
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.proc = proc
	c.mu.Unlock()
	return nil
}

// copied is true once pgcopydb's sentinel on the source allows the apply:
// clone --follow sets it when its copy is done.
func (c *pgcopydbMove) copied(ctx context.Context) (bool, error) {
	c.mu.Lock()
	proc := c.proc
	c.mu.Unlock()
	if proc != nil && proc.exited() {
		return false, fmt.Errorf("pgcopydb ended: %v (see %s)", proc.err, filepath.Join(c.dir, "pgcopydb.log"))
	}
	var apply bool
	err := query(ctx, sourcePort, moveDB, "SELECT apply FROM pgcopydb.sentinel", &apply)
	return err == nil && apply, nil
}

func (c *pgcopydbMove) toolPIDs(context.Context) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil || c.proc.exited() {
		return nil
	}
	return []int{c.proc.pid()}
}

func (c *pgcopydbMove) cutover(context.Context) (time.Time, error) { return time.Time{}, nil }

func (c *pgcopydbMove) end(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return errors.New("pgcopydb was not started")
	}
	c.proc.stop(30 * time.Second)
	return os.RemoveAll(filepath.Join(c.dir, "work"))
}

// pgcopydbVersionRE finds the version in pgcopydb --version's output,
// whose first line is a log line naming it too.
var pgcopydbVersionRE = regexp.MustCompile(`pgcopydb version (\S+)`)

// pgcopydbVersion is the version pgcopydb --version names.
func pgcopydbVersion(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "pgcopydb", "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pgcopydb --version: %w", err)
	}
	return parsePgcopydbVersion(string(out))
}

// parsePgcopydbVersion is the version in pgcopydb --version's output.
func parsePgcopydbVersion(out string) (string, error) {
	m := pgcopydbVersionRE.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("pgcopydb --version names no version: %q", out)
	}
	return m[1], nil
}
