package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["catchup"] = catchupMain }

// The catch-up's databases, job, subscription and writers.
const (
	catchupDB       = "catchup"
	catchupNativeDB = "catchup_native"
	catchupSub      = "native_catchup" // the subscription, its publication and its slot
	catchupClients  = 4
	// catchupLimit bounds each of the catch-up's long steps (the backlog's
	// writing, a floor read, pgsync's run, native's catch-up).
	catchupLimit = 30 * time.Minute
)

// floorWhat describes the floor in the result, as the script did.
const floorWhat = "scripts/bench/cmd/discard: stream the same backlog from a slot at the same point, read and discard, acknowledge the end; the faster of two runs"

// catchupConfig is one catch-up measurement.
type catchupConfig struct {
	dir      string   // its logs, configurations and verify reports
	backlog  int64    // transactions to write while the job is stopped
	rows     int64    // rows a table of the dataset
	rttMS    int      // the latency proxy's round trip; -1: no proxy
	runFlags []string // extra flags for pgsync run
	ddl      string   // job.ddl; "" leaves the default (stop)
}

// args are the flags of harness catchup that make the same measurement,
// for the result's command.
func (c catchupConfig) args() []string {
	a := []string{"-backlog", strconv.FormatInt(c.backlog, 10), "-rows", strconv.FormatInt(c.rows, 10)}
	if c.rttMS >= 0 {
		a = append(a, "-rtt", strconv.Itoa(c.rttMS))
	}
	if len(c.runFlags) > 0 {
		a = append(a, "-run-flags", strconv.Quote(strings.Join(c.runFlags, " ")))
	}
	if c.ddl != "" {
		a = append(a, "-ddl", c.ddl)
	}
	return a
}

// catchupMain is the catch-up throughput: with
// the job bootstrapped and stopped, a backlog of -backlog transactions
// (100 inserts, 10 updates and 5 deletes each) is applied by pgsync run
// --until-caught-up, then by a native subscription that was disabled
// while it was written; the floor (scripts/bench/cmd/discard reading the same
// backlog, and the server's decoding alone) is measured on it too. Writes
// OUT/catchup.json and catchup-applying.csv (the run's progress lines);
// the steps' logs go to the run's log directory.
func catchupMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("catchup", flag.ContinueOnError)
	backlog := fs.Int64("backlog", 5000, "transactions in the backlog")
	rows := fs.Int64("rows", 200000, "rows a table of the dataset")
	rtt := fs.Int("rtt", -1, "round trip in ms of scripts/bench/cmd/latency-proxy in front of the source for every consumer (-1: no proxy)")
	runFlags := fs.String("run-flags", "", "extra flags for pgsync run, separated by spaces")
	ddl := fs.String("ddl", "", "job.ddl of pgsync's job: stop or capture (default: the key left out, stop)")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("catchup: unexpected arguments %q", fs.Args())
	}
	if *ddl != "" && *ddl != "stop" && *ddl != "capture" {
		return fmt.Errorf("catchup: -ddl %q: want stop or capture", *ddl)
	}
	if *backlog < catchupClients || *rows < 1000 {
		return fmt.Errorf("catchup: -backlog must be at least %d and -rows at least 1000", catchupClients)
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	dir := b.logs // the run's logs; its result goes to resDir
	c := catchupConfig{dir: dir, backlog: *backlog, rows: *rows, rttMS: *rtt, runFlags: strings.Fields(*runFlags), ddl: *ddl}
	res, err := b.catchup(ctx, c)
	if err != nil {
		return err
	}
	// The command as it was given: its defaults, not the paths they became.
	res.Command = command("catchup", args)
	// The progress lines the pages draw, beside the result.
	if err := b.keepApplying(resDir, "catchup"); err != nil {
		return err
	}
	return writeResult(filepath.Join(resDir, "catchup.json"), res)
}

// catchup makes one catch-up measurement on the running clusters, its
// files in c.dir; the rtt scenario calls it many times in one process.
func (b *bench) catchup(ctx context.Context, c catchupConfig) (benchres.Catchup, error) {
	res := benchres.Catchup{Command: command("catchup", c.args()), Env: b.env}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return res, err
	}
	// via is the source's port as the consumers reach it: pgsync, the
	// native subscriber and the floor's reader go through the proxy,
	// the writers and the harness's own queries do not.
	via := sourcePort
	if c.rttMS >= 0 {
		port, stopProxy, err := b.startLatencyProxy(ctx, c.rttMS, filepath.Join(c.dir, "latency-proxy.log"))
		if err != nil {
			return res, err
		}
		defer stopProxy()
		via = port
		res.RTTms = ptr(float64(c.rttMS))
	}

	say("catchup", "fresh databases, %d rows a table", c.rows)
	for _, db := range []string{catchupDB, catchupNativeDB} {
		if err := freshDB(ctx, db); err != nil {
			return res, fmt.Errorf("catchup: fresh database %s: %w", db, err)
		}
	}
	if err := loadDataset(ctx, catchupDB, c.rows); err != nil {
		return res, fmt.Errorf("catchup: dataset: %w", err)
	}
	cfg := filepath.Join(c.dir, "catchup.toml")
	res.DDL = c.ddl
	if err := (jobConfig{job: catchupDB, sourceDB: catchupDB, targetDB: catchupDB, sourcePort: via, ddl: c.ddl}).write(cfg); err != nil {
		return res, err
	}
	say("catchup", "pgsync bootstrap")
	if err := pgsyncStep(ctx, b.pgsync, filepath.Join(c.dir, "catchup-bootstrap.log"), time.Hour, "-c", cfg, "bootstrap"); err != nil {
		return res, err
	}
	say("catchup", "native subscription: initial copy, then disabled")
	if err := runSQL(ctx, sourcePort, catchupDB, "CREATE PUBLICATION "+catchupSub+" FOR TABLE bench_a, bench_b"); err != nil {
		return res, err
	}
	if err := runSQL(ctx, targetPort, catchupNativeDB, tablesDDL); err != nil {
		return res, err
	}
	if err := subscribe(ctx, via, catchupDB, catchupNativeDB, catchupSub, 2); err != nil {
		return res, err
	}
	if err := runSQL(ctx, targetPort, catchupNativeDB, "ALTER SUBSCRIPTION "+catchupSub+" DISABLE"); err != nil {
		return res, err
	}
	err := waitFor(ctx, time.Minute, "slot "+catchupSub+" to go idle", func() (bool, error) {
		var idle bool
		err := query(ctx, sourcePort, "postgres",
			"SELECT count(*) FILTER (WHERE NOT active) = 1 FROM pg_replication_slots WHERE slot_name = '"+catchupSub+"'", &idle)
		return idle, err
	})
	if err != nil {
		return res, err
	}

	// Four more slots at the same point measure the floor: two are
	// streamed by a consumer that reads and discards (scripts/bench/cmd/discard),
	// two are decoded inside the server (peek), with and without binary.
	floorSlots := []string{"decode_probe", "decode_probe2"}
	if err := runSQL(ctx, sourcePort, catchupDB,
		"SELECT pg_create_logical_replication_slot('decode_probe', 'pgoutput')",
		"SELECT pg_create_logical_replication_slot('decode_probe2', 'pgoutput')",
		"SELECT pg_create_logical_replication_slot('peek_probe', 'pgoutput')",
		"SELECT pg_create_logical_replication_slot('peek_probe_binary', 'pgoutput')"); err != nil {
		return res, fmt.Errorf("catchup: the floor's slots: %w", err)
	}

	say("catchup", "writing a backlog of %d transactions", c.backlog)
	walEnd, err := b.catchupBacklog(ctx, c, &res)
	if err != nil {
		return res, err
	}
	say("catchup", "%d transactions, %.0f bytes of WAL", res.Backlog, res.WALBytes)

	discard, err := b.buildTool(ctx, "discard")
	if err != nil {
		return res, err
	}
	// Twice: the reader's pacing makes single runs vary; the floor is the
	// faster.
	for i, slot := range floorSlots {
		run, err := catchupFloor(ctx, c.dir, discard, via, slot, walEnd, i+1)
		if err != nil {
			return res, err
		}
		res.Floor.Runs = append(res.Floor.Runs, run)
		if i == 0 || run.Seconds < res.Floor.Seconds {
			res.Floor.Seconds = run.Seconds
		}
	}
	res.Floor.What = floorWhat

	say("catchup", "decoding inside the server (peek)")
	if res.PeekSeconds, err = peek(ctx, "peek_probe", walEnd, ""); err != nil {
		return res, err
	}
	// The same with pgoutput's binary option (PostgreSQL 14+): what
	// binary values would save the walsender.
	if res.PeekBinarySeconds, err = peek(ctx, "peek_probe_binary", walEnd, ", 'binary', 'true'"); err != nil {
		return res, err
	}

	if res.Pgsync, err = b.catchupPgsync(ctx, c, cfg); err != nil {
		return res, err
	}
	if res.Native, err = b.catchupNative(ctx, c, via, walEnd); err != nil {
		return res, err
	}
	res.Date = now()
	say("catchup", "pgsync %.2f s (identical %v), native %.2f s (identical %v), floor %.2f s",
		res.Pgsync.Seconds, res.Pgsync.HashesMatch, res.Native.Seconds, res.Native.HashesMatch, res.Floor.Seconds)
	return res, nil
}

// catchupBacklog writes the backlog with pgbench (its log in
// catchup-pgbench.log), sets res's Backlog (the transactions committed)
// and WALBytes, and returns the WAL position at its end.
func (b *bench) catchupBacklog(ctx context.Context, c catchupConfig, res *benchres.Catchup) (walEnd string, err error) {
	script := filepath.Join(c.dir, "catchup-txn.sql")
	if err := writeScript(script, c.rows, catchupClients, 100, 10, 5); err != nil {
		return "", err
	}
	var walStart string
	if err := query(ctx, sourcePort, catchupDB, "SELECT pg_current_wal_lsn()::text", &walStart); err != nil {
		return "", err
	}
	pgbenchLog := filepath.Join(c.dir, "catchup-pgbench.log")
	p, err := start(c.dir, pgbenchLog, pgbenchLog, nil, filepath.Join(b.bindir, "pgbench"), "-n", "-h", "127.0.0.1",
		"-p", strconv.Itoa(sourcePort), "-U", "postgres", "-c", strconv.Itoa(catchupClients),
		"-t", strconv.FormatInt(c.backlog/catchupClients, 10), "-f", script, catchupDB)
	if err != nil {
		return "", err
	}
	defer p.stop(10 * time.Second)
	t0 := time.Now()
	if err := p.wait(ctx, catchupLimit); err != nil {
		return "", fmt.Errorf("catchup: pgbench writing the backlog: %w (see %s)", err, pgbenchLog)
	}
	res.BacklogSeconds = time.Since(t0).Seconds()
	if err := query(ctx, sourcePort, catchupDB, "SELECT pg_current_wal_lsn()::text", &walEnd); err != nil {
		return "", err
	}
	if err := query(ctx, sourcePort, catchupDB, "SELECT ('"+walEnd+"'::pg_lsn - '"+walStart+"'::pg_lsn)::float8", &res.WALBytes); err != nil {
		return "", err
	}
	if res.Backlog, err = pgbenchCommitted(pgbenchLog); err != nil {
		return "", fmt.Errorf("catchup: %w", err)
	}
	return walEnd, nil
}

// catchupFloor streams the backlog from slot through scripts/bench/cmd/discard (its
// JSON line in catchup-floor-N.json), through the proxy when one runs,
// and drops the slot: the Nth run of the floor.
func catchupFloor(ctx context.Context, dir, discard string, via int, slot, walEnd string, n int) (benchres.FloorRun, error) {
	var run benchres.FloorRun
	if err := settle(ctx, catchupDB); err != nil {
		return run, err
	}
	say("catchup", "the floor (%d): read and discard the same backlog", n)
	outPath := filepath.Join(dir, fmt.Sprintf("catchup-floor-%d.json", n))
	errPath := filepath.Join(dir, fmt.Sprintf("catchup-floor-%d.log", n))
	mark, err := markCPU()
	if err != nil {
		return run, err
	}
	t0 := time.Now()
	p, err := start(dir, outPath, errPath, nil, discard,
		"-url", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?replication=database", via, catchupDB),
		"-slot", slot, "-publication", "pgsync_"+catchupDB, "-until", walEnd)
	if err != nil {
		return run, err
	}
	defer p.stop(10 * time.Second)
	if err := p.wait(ctx, catchupLimit); err != nil {
		return run, fmt.Errorf("catchup: the floor (%d), discard from slot %s: %w (see %s)", n, slot, err, errPath)
	}
	run.Seconds = round2(time.Since(t0).Seconds())
	server, err := mark.since()
	if err != nil {
		return run, err
	}
	run.CPU.Walsender = round2(server.source)
	text, err := os.ReadFile(outPath)
	if err != nil {
		return run, err
	}
	var line struct {
		CPU *float64 `json:"cpu_seconds"`
	}
	if err := json.Unmarshal(text, &line); err != nil || line.CPU == nil {
		return run, fmt.Errorf("catchup: %s: no cpu_seconds in %q (%v)", outPath, text, err)
	}
	run.CPU.Discard = *line.CPU
	return run, dropSlot(ctx, slot)
}

// peek times the server's decoding of the backlog from slot up to walEnd
// (pg_logical_slot_peek_binary_changes, with pgoutput's options plus
// extra), after settle, and drops the slot.
func peek(ctx context.Context, slot, walEnd, extra string) (float64, error) {
	if err := settle(ctx, catchupDB); err != nil {
		return 0, err
	}
	var changes int64
	decode, cancel := context.WithTimeout(ctx, catchupLimit)
	defer cancel()
	t0 := time.Now()
	err := query(decode, sourcePort, catchupDB, fmt.Sprintf(`SELECT count(*) FROM pg_logical_slot_peek_binary_changes('%s', '%s', NULL,
  'proto_version', '1', 'publication_names', 'pgsync_catchup'%s)`, slot, walEnd, extra), &changes)
	if err != nil {
		return 0, fmt.Errorf("catchup: peek on slot %s: %w", slot, err)
	}
	secs := round2(time.Since(t0).Seconds())
	return secs, dropSlot(ctx, slot)
}

// catchupPgsync applies the backlog with pgsync run --until-caught-up
// (the catchup-pgsync run, sampled) and verifies the tables.
func (b *bench) catchupPgsync(ctx context.Context, c catchupConfig, cfg string) (benchres.CatchupPgsync, error) {
	var r benchres.CatchupPgsync
	if err := settle(ctx, catchupDB); err != nil {
		return r, err
	}
	say("catchup", "pgsync run --until-caught-up")
	mark, err := markCPU()
	if err != nil {
		return r, err
	}
	const commits = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
	var commits0, commits1 int64
	if err := query(ctx, targetPort, catchupDB, commits, &commits0); err != nil {
		return r, err
	}
	args := append([]string{"-c", cfg, "run", "--until-caught-up", "--log-every", "1s"}, c.runFlags...)
	run, err := sampledRun(ctx, c.dir, "catchup-pgsync", catchupLimit, pgsyncEnv, b.pgsync, args...)
	if err != nil {
		return r, err
	}
	// The script waited a second for the sessions to end; since waits
	// another half.
	time.Sleep(500 * time.Millisecond)
	server, err := mark.since()
	if err != nil {
		return r, err
	}
	// Target transactions committed during the run (pgsync's groups, plus
	// the handful of the harness's sessions around it): what
	// synchronous_commit costs.
	if err := query(ctx, targetPort, catchupDB, commits, &commits1); err != nil {
		return r, err
	}
	// What pgsync applied and its own CPU, from its last stopped line.
	logPath := filepath.Join(c.dir, "catchup-pgsync.log")
	nums := map[string]float64{}
	for _, k := range []string{"txns", "rows", "cpu_s"} {
		if nums[k], err = logNumber(logPath, "stopped", k); err != nil {
			return r, err
		}
	}
	same, err := verify(ctx, b.pgsync, cfg, filepath.Join(c.dir, "catchup-verify.txt"))
	if err != nil {
		return r, err
	}
	r = benchres.CatchupPgsync{
		Seconds: round2(run.Seconds), TxnApplied: int64(nums["txns"]), RowsApplied: int64(nums["rows"]),
		RSSAvgMB: round2(run.RSSAvgMB), RSSPeakMB: round2(run.RSSPeakMB), CPUAvgPct: round2(run.CPUAvgPct),
		CPU:           benchres.PgsyncCPU{Pgsync: nums["cpu_s"], Walsender: round2(server.source), TargetBackend: round2(server.target)},
		TargetCommits: int(commits1 - commits0), HashesMatch: same,
	}
	return r, nil
}

// catchupNative enables the native subscription on the same backlog,
// times it until its slot has confirmed walEnd, takes its walsender's and
// apply worker's CPU, verifies its tables and drops it with its slot.
func (b *bench) catchupNative(ctx context.Context, c catchupConfig, via int, walEnd string) (benchres.CatchupNative, error) {
	var r benchres.CatchupNative
	if err := runSQL(ctx, targetPort, catchupDB, "VACUUM ANALYZE bench_a, bench_b"); err != nil {
		return r, err
	}
	if err := settle(ctx, catchupDB); err != nil {
		return r, err
	}
	say("catchup", "native subscription, enabled on the same backlog")
	t0 := time.Now()
	if err := runSQL(ctx, targetPort, catchupNativeDB, "ALTER SUBSCRIPTION "+catchupSub+" ENABLE"); err != nil {
		return r, err
	}
	err := waitFor(ctx, catchupLimit, "the native catch-up to "+walEnd, func() (bool, error) {
		var done bool
		err := query(ctx, sourcePort, "postgres", "SELECT count(*) FILTER (WHERE confirmed_flush_lsn >= '"+walEnd+
			"'::pg_lsn) = 1 FROM pg_replication_slots WHERE slot_name = '"+catchupSub+"'", &done)
		return done, err
	})
	if err != nil {
		return r, err
	}
	r.Seconds = round2(time.Since(t0).Seconds())
	// Both processes started at ENABLE: their whole CPU is the catch-up's.
	var walsender, worker *int
	if err := query(ctx, sourcePort, "postgres", "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '"+catchupSub+"'", &walsender); err != nil {
		return r, err
	}
	if err := query(ctx, targetPort, catchupNativeDB, "SELECT pid FROM pg_stat_subscription WHERE subname = '"+catchupSub+"' AND relid IS NULL", &worker); err != nil {
		return r, err
	}
	if walsender == nil || worker == nil {
		return r, fmt.Errorf("catchup: native subscription %s: no walsender (%v) or apply worker (%v) after its catch-up", catchupSub, walsender, worker)
	}
	if r.CPU.Walsender, err = procCPU(*walsender); err != nil {
		return r, fmt.Errorf("catchup: native walsender %d: %w", *walsender, err)
	}
	if r.CPU.ApplyWorker, err = procCPU(*worker); err != nil {
		return r, fmt.Errorf("catchup: native apply worker %d: %w", *worker, err)
	}
	r.CPU.Walsender, r.CPU.ApplyWorker = round2(r.CPU.Walsender), round2(r.CPU.ApplyWorker)
	cfg := filepath.Join(c.dir, "catchup-native.toml")
	if err := (jobConfig{job: catchupDB, sourceDB: catchupDB, targetDB: catchupNativeDB, sourcePort: via}).write(cfg); err != nil {
		return r, err
	}
	if r.HashesMatch, err = verify(ctx, b.pgsync, cfg, filepath.Join(c.dir, "catchup-native-verify.txt")); err != nil {
		return r, err
	}
	if err := dropSubscription(ctx, catchupNativeDB, catchupSub); err != nil {
		return r, err
	}
	return r, dropSlot(ctx, catchupSub)
}
