package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgsync/pgsync/scripts/bench/pgsynclog"
)

// What the scenarios beside the whole move share: their dataset, pgsync's
// configuration, a sampled run of a program, server CPU, pgsync's log
// fields and the result files.

// tablesDDL is the benchmark dataset's two tables, of about 140 bytes of
// COPY text a row.
const tablesDDL = `CREATE TABLE bench_a (id bigint PRIMARY KEY, customer text NOT NULL, qty int NOT NULL, price numeric(12,2),
  created timestamptz NOT NULL, note text);
CREATE TABLE bench_b (id bigint PRIMARY KEY, customer text NOT NULL, qty int NOT NULL, price numeric(12,2),
  created timestamptz NOT NULL, note text)`

// benchTableDDL is one of the dataset's tables, named name.
func benchTableDDL(name string) string {
	return "CREATE TABLE " + name + ` (id bigint PRIMARY KEY, customer text NOT NULL, qty int NOT NULL, price numeric(12,2),
  created timestamptz NOT NULL, note text)`
}

// fillRows is the INSERT that fills a dataset table with rows 1..rows.
func fillRows(table string, rows int64) string {
	return fmt.Sprintf(`INSERT INTO %s SELECT g, 'customer-' || (g %% 100000), g %% 1000, (g %% 100000) / 7.0,
  '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 second', repeat(md5(g::text), 2) FROM generate_series(1, %d) g`, table, rows)
}

// loadDataset creates and fills both tables on the source, with the
// sequence the write script takes new ids from.
func loadDataset(ctx context.Context, db string, rows int64) error {
	return runSQL(ctx, sourcePort, db, tablesDDL,
		fmt.Sprintf("CREATE SEQUENCE bench_ids START %d", rows*10),
		fillRows("bench_a", rows), fillRows("bench_b", rows),
		"VACUUM ANALYZE bench_a, bench_b")
}

// writeScript writes pgbench's script of one transaction: ins inserts,
// upd updates and del deletes. Each client updates and deletes in its own
// slice of the rows, so that clients never wait for each other and every
// statement hits rows.
func writeScript(path string, rows int64, clients, ins, upd, del int) error {
	slice := rows / int64(clients)
	script := fmt.Sprintf(`\set lo (:client_id * %[1]d) + 1
\set u random(:lo, :lo + %[1]d - %[3]d - 1)
BEGIN;
INSERT INTO bench_b SELECT nextval('bench_ids'), 'customer-new', g, g * 1.5, now(), repeat('n', 64) FROM generate_series(1, %[2]d) g;
UPDATE bench_a SET qty = qty + 1, created = now() WHERE id BETWEEN :u AND :u + %[3]d - 1;
DELETE FROM bench_b WHERE id IN (SELECT id FROM bench_b WHERE id >= :lo AND id < :lo + %[1]d ORDER BY id LIMIT %[4]d);
END;
`, slice, ins, upd, del)
	return os.WriteFile(path, []byte(script), 0o644)
}

// freshDB drops database db on both clusters, its slots and subscriptions
// first, and creates it empty.
func freshDB(ctx context.Context, db string) error {
	if err := dropSubscriptions(ctx, db); err != nil {
		return err
	}
	for _, port := range []int{sourcePort, targetPort} {
		if err := dropSlots(ctx, port, db); err != nil {
			return err
		}
		if err := recreateDB(ctx, port, db); err != nil {
			return err
		}
	}
	return nil
}

// dropSubscriptions drops every subscription of database db on the
// target, if it exists, leaving their slots to the caller.
func dropSubscriptions(ctx context.Context, db string) error {
	var exists bool
	if err := query(ctx, targetPort, "postgres", "SELECT count(*) > 0 FROM pg_database WHERE datname = '"+db+"'", &exists); err != nil || !exists {
		return err
	}
	subs, err := column(ctx, targetPort, db, "SELECT quote_ident(subname) FROM pg_subscription WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())")
	if err != nil {
		return err
	}
	for _, s := range subs {
		if err := dropSubscription(ctx, db, s); err != nil {
			return err
		}
	}
	return nil
}

// recreateDB drops database db on one cluster and creates it empty.
func recreateDB(ctx context.Context, port int, db string) error {
	if err := dropDB(ctx, port, db); err != nil {
		return err
	}
	return runSQL(ctx, port, "postgres", "CREATE DATABASE "+db)
}

// dropDB drops database db on one cluster.
func dropDB(ctx context.Context, port int, db string) error {
	// A subscription left by an interrupted run would make the DROP fail.
	if port == targetPort {
		if err := dropSubscriptions(ctx, db); err != nil {
			return err
		}
	}
	return runSQL(ctx, port, "postgres", "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
}

// dropSlots ends the walsenders of database db's slots on one cluster and
// drops the slots; a walsender may take a moment to exit.
func dropSlots(ctx context.Context, port int, db string) error {
	return waitFor(ctx, 30*time.Second, "the slots of database "+db+" to be dropped", func() (bool, error) {
		err := runSQL(ctx, port, "postgres",
			"SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = '"+db+"' AND active_pid IS NOT NULL",
			"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '"+db+"' AND NOT active")
		if err != nil {
			return false, err
		}
		var left int
		err = query(ctx, port, "postgres", "SELECT count(*) FROM pg_replication_slots WHERE database = '"+db+"'", &left)
		return left == 0, err
	})
}

// dropSubscription drops subscription sub of database db on the target,
// leaving its slot on the source to the caller.
func dropSubscription(ctx context.Context, db, sub string) error {
	return runSQL(ctx, targetPort, db, "ALTER SUBSCRIPTION "+sub+" DISABLE",
		"ALTER SUBSCRIPTION "+sub+" SET (slot_name = NONE)", "DROP SUBSCRIPTION "+sub)
}

// dropSlot drops one slot on the source, once its walsender has gone.
func dropSlot(ctx context.Context, slot string) error {
	return waitFor(ctx, 30*time.Second, "slot "+slot+" to be released", func() (bool, error) {
		var gone bool
		err := query(ctx, sourcePort, "postgres",
			"SELECT count(pg_drop_replication_slot(slot_name)) >= 0 FROM pg_replication_slots WHERE slot_name = '"+slot+"' AND NOT active", &gone)
		if err != nil {
			return false, err
		}
		var left int
		err = query(ctx, sourcePort, "postgres", "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+slot+"'", &left)
		return left == 0, err
	})
}

// settle vacuums the dataset's tables on the source and checkpoints both
// clusters, so that a timed step does not pay for the previous one's dirt.
func settle(ctx context.Context, db string) error {
	if err := runSQL(ctx, sourcePort, db, "VACUUM ANALYZE bench_a, bench_b", "CHECKPOINT"); err != nil {
		return err
	}
	return runSQL(ctx, targetPort, "postgres", "CHECKPOINT")
}

// checkpoint checkpoints both clusters.
func checkpoint(ctx context.Context) error {
	if err := runSQL(ctx, sourcePort, "postgres", "CHECKPOINT"); err != nil {
		return err
	}
	return runSQL(ctx, targetPort, "postgres", "CHECKPOINT")
}

// waitFor polls cond every 200 ms until it holds; after limit it fails,
// naming what it waited for.
func waitFor(ctx context.Context, limit time.Duration, what string, cond func() (bool, error)) error {
	defer waiting(what, limit)()
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", limit, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// jobConfig is one pgsync job's configuration file.
type jobConfig struct {
	job, sourceDB, targetDB string
	// sourcePort is the port pgsync reaches the source on: the latency
	// proxy's when one runs (0: the source's own).
	sourcePort int
	tables     []string // default public.*
	tuning     string   // [tuning] keys, if any
	ddl        string   // job.ddl, if set
}

// write writes the configuration to path.
func (c jobConfig) write(path string) error {
	port := c.sourcePort
	if port == 0 {
		port = sourcePort
	}
	tables := c.tables
	if len(tables) == 0 {
		tables = []string{"public.*"}
	}
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = strconv.Quote(t)
	}
	cfg := fmt.Sprintf("[source]\nurl = %q\n[target]\nurl = %q\n[job]\nname = %q\ntables = [%s]\n",
		url(port, c.sourceDB), url(targetPort, c.targetDB), c.job, strings.Join(quoted, ", "))
	if c.ddl != "" {
		cfg += fmt.Sprintf("ddl = %q\n", c.ddl)
	}
	if c.tuning != "" {
		cfg += "[tuning]\n" + c.tuning + "\n"
	}
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// runStats is what a procSampler measured of a program.
type runStats struct {
	Seconds             float64 // the sampled span: the program's run
	RSSAvgMB, RSSPeakMB float64 // VmRSS, MB of 2^20 bytes
	CPUAvgPct           float64 // the average of each interval's CPU %
}

// sampledRun runs a program with its stdout in dir/name.out and its
// stderr in dir/name.log, samples it into dir/name-rss.csv (procSampler)
// and returns once it has ended, with an error if it failed or ran past
// limit.
func sampledRun(ctx context.Context, dir, name string, limit time.Duration, env []string, prog string, args ...string) (runStats, error) {
	p, err := start(dir, filepath.Join(dir, name+".out"), filepath.Join(dir, name+".log"), env, prog, args...)
	if err != nil {
		return runStats{}, err
	}
	defer p.stop(10 * time.Second)
	s, err := sampleProcess(p, filepath.Join(dir, name+"-rss.csv"))
	if err != nil {
		return runStats{}, err
	}
	defer s.stop()
	if err := p.wait(ctx, limit); err != nil {
		return runStats{}, fmt.Errorf("%s %s: %w (see %s)", filepath.Base(prog), strings.Join(args, " "), err, filepath.Join(dir, name+".log"))
	}
	st := s.stop()
	if st.RSSPeakMB == 0 {
		return st, fmt.Errorf("%s ended before its first sample: no memory figure", name)
	}
	return st, nil
}

// procSampler samples a process: its VmRSS and CPU every sampleEvery
// into a CSV (unix seconds, kB, % over the interval), until the process
// ends or stop is called (pgsync run, which a signal ends).
type procSampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	stats  runStats // after done; Seconds is the sampled span
}

// sampleProcess starts sampling p into csvPath.
func sampleProcess(p *process, csvPath string) (*procSampler, error) {
	csv, err := os.Create(csvPath)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &procSampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer csv.Close()
		w := bufio.NewWriter(csv)
		defer w.Flush()
		fmt.Fprintln(w, "unix_s,rss_kb,cpu_pct")
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		t0 := time.Now()
		var rssSum, cpuSum float64
		var rssN, cpuN int
		prevTicks, prevAt := int64(-1), time.Now()
		for {
			if stat, err := readStat(p.pid()); err == nil {
				if kb := vmRSS(p.pid()); kb > 0 {
					now := time.Now()
					pct := ""
					if prevTicks >= 0 {
						v := float64(stat.ticks-prevTicks) / clockTicks / now.Sub(prevAt).Seconds() * 100
						pct = fmt.Sprintf("%.0f", v)
						cpuSum += v
						cpuN++
					}
					prevTicks, prevAt = stat.ticks, now
					fmt.Fprintf(w, "%.3f,%d,%s\n", float64(now.UnixNano())/1e9, kb, pct)
					rssSum += float64(kb)
					rssN++
					s.stats.RSSPeakMB = max(s.stats.RSSPeakMB, float64(kb)/1024)
				}
			}
			select {
			case <-p.done:
			case <-ctx.Done():
			case <-tick.C:
				continue
			}
			s.stats.Seconds = time.Since(t0).Seconds()
			if rssN > 0 {
				s.stats.RSSAvgMB = rssSum / float64(rssN) / 1024
			}
			if cpuN > 0 {
				s.stats.CPUAvgPct = cpuSum / float64(cpuN)
			}
			return
		}
	}()
	return s, nil
}

// stop ends the sampling, if the process has not ended it, and returns
// what it measured; it may be called again.
func (s *procSampler) stop() runStats {
	s.cancel()
	<-s.done
	return s.stats
}

// vmRSS is a process's resident memory in kB (VmRSS), as the bench
// scripts sampled it; 0 once it has gone.
func vmRSS(pid int) int64 { return statusKB(pid, "VmRSS:") }

// endedCPU is the CPU seconds used so far by the ended children of the
// cluster's postmaster at port's data directory (backends and walsenders
// that have exited): read before and after a step, it gives what the
// step's sessions used.
func endedCPU(dataDir string) (float64, error) {
	pm, err := postmasterPID(dataDir)
	if err != nil {
		return 0, err
	}
	st, err := readStat(pm)
	if err != nil {
		return 0, err
	}
	return float64(st.children) / clockTicks, nil
}

// serverCPU brackets a step: mark before it, then since (after its
// sessions have ended) gives each cluster's CPU seconds in between.
type serverCPU struct{ source, target float64 }

func markCPU() (serverCPU, error) {
	s, err := endedCPU(filepath.Join(benchPGDir, "source"))
	if err != nil {
		return serverCPU{}, err
	}
	t, err := endedCPU(filepath.Join(benchPGDir, "target"))
	return serverCPU{s, t}, err
}

// since waits half a second for the step's sessions to be reaped and
// returns the CPU they used.
func (m serverCPU) since() (serverCPU, error) {
	time.Sleep(500 * time.Millisecond)
	now, err := markCPU()
	return serverCPU{now.source - m.source, now.target - m.target}, err
}

// procCPU is the CPU seconds a live process has used.
func procCPU(pid int) (float64, error) {
	st, err := readStat(pid)
	return float64(st.ticks) / clockTicks, err
}

// logFields are the key=value pairs of the last line of a pgsync text log
// whose msg is msg; an error when no line has it.
func logFields(path, msg string) (map[string]string, error) {
	all, err := allLogFields(path, msg)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%s has no %q line", path, msg)
	}
	return all[len(all)-1], nil
}

// allLogFields are the key=value pairs of every line of a pgsync text log
// whose msg is msg, in order.
func allLogFields(path, msg string) ([]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []map[string]string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if kv := pgsynclog.Fields(s.Text()); kv["msg"] == msg {
			out = append(out, kv)
		}
	}
	return out, s.Err()
}

// logNumber is key's value on the last msg line of a pgsync log, as a
// number; an error names the file, the line and the key when it is not
// there.
func logNumber(path, msg, key string) (float64, error) {
	kv, err := logFields(path, msg)
	if err != nil {
		return 0, err
	}
	v, ok := kv[key]
	if !ok {
		return 0, fmt.Errorf("%s: the %q line has no %s", path, msg, key)
	}
	n, err := strconv.ParseFloat(strings.TrimSuffix(v, "s"), 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q line, %s=%q: %w", path, msg, key, v, err)
	}
	return n, nil
}

// verify runs pgsync verify on a job with extra flags: true when it says
// the tables are identical (exit 0), false when it found a difference
// (exit 1); its report in report.
func verify(ctx context.Context, pgsync, cfg, report string, extra ...string) (bool, error) {
	p, err := start(filepath.Dir(report), report, report, pgsyncEnv, pgsync, append([]string{"-c", cfg, "verify"}, extra...)...)
	if err != nil {
		return false, err
	}
	defer p.stop(10 * time.Second)
	if err := p.wait(ctx, 2*time.Hour); err != nil {
		// pgsync exits 1 for a difference and for a failure alike: only a
		// report that names a difference makes it a measurement.
		if p.exited() && p.cmd.ProcessState.ExitCode() == 1 && reportsDifference(report) {
			return false, nil
		}
		return false, fmt.Errorf("pgsync verify: %w (see %s)", err, report)
	}
	return true, nil
}

// reportsDifference says whether a verify report (or verify --rows's)
// names a difference, as opposed to an error.
func reportsDifference(report string) bool {
	b, err := os.ReadFile(report)
	if err != nil {
		return false
	}
	for _, mark := range []string{"DIFFERS", " differ: ", ": only on the ", ": values differ"} {
		if bytes.Contains(b, []byte(mark)) {
			return true
		}
	}
	return false
}

// pgsyncStep runs one pgsync command to its end, its output in log.
func pgsyncStep(ctx context.Context, pgsync, log string, limit time.Duration, args ...string) error {
	_, _, err := pgsyncPeak(ctx, pgsync, log, limit, args...)
	return err
}

// pgsyncPeak runs one pgsync command to its end, its output in log, and
// returns its seconds and its peak RSS in MB (process.peakRSSMB).
func pgsyncPeak(ctx context.Context, pgsync, log string, limit time.Duration, args ...string) (secs, peakMB float64, err error) {
	t0 := time.Now()
	p, err := start(filepath.Dir(log), log, log, pgsyncEnv, pgsync, args...)
	if err != nil {
		return 0, 0, err
	}
	defer p.stop(10 * time.Second)
	if err := p.wait(ctx, limit); err != nil {
		return 0, 0, fmt.Errorf("pgsync %s: %w (see %s)", strings.Join(args, " "), err, log)
	}
	secs = time.Since(t0).Seconds()
	peakMB, err = p.peakRSSMB()
	return secs, peakMB, err
}

// keepSeries copies name-rss.csv, samples a page draws, from the run's log
// directory to dir, beside the result.
func (b *bench) keepSeries(dir, name string) error {
	data, err := os.ReadFile(filepath.Join(b.logs, name+"-rss.csv"))
	if err != nil {
		return fmt.Errorf("keep %s's samples: %w", name, err)
	}
	return os.WriteFile(filepath.Join(dir, name+"-rss.csv"), data, 0o644)
}

// keepBootstrap writes name.json in dir: the figures the pages take from
// the bootstrap log name.log of the run's log directory
// (pgsynclog.Bootstrap).
func (b *bench) keepBootstrap(dir, name string) error {
	boot, err := pgsynclog.Bootstrap(filepath.Join(b.logs, name+".log"))
	if err != nil {
		return err
	}
	return writeResult(filepath.Join(dir, name+".json"), boot)
}

// keepApplying writes prefix-applying.csv in dir: the progress lines of
// the run log prefix-pgsync.log of the run's log directory, which the
// pages draw.
func (b *bench) keepApplying(dir, prefix string) error {
	return pgsynclog.WriteApplying(filepath.Join(b.logs, prefix+"-pgsync.log"), filepath.Join(dir, prefix+"-applying.csv"))
}

// writeResult writes a scenario's typed result as indented JSON.
func writeResult(path string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the command's && as it is typed
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// command is how a scenario's result names the command that made it.
func command(scenario string, args []string) string {
	return strings.TrimSpace("cd scripts/bench && go run ./harness -root ../.. " + scenario + " " + strings.Join(args, " "))
}

// intList reads a flag's comma-separated whole numbers, each valid by ok
// and given once (each names a run's files): what says what they are, in
// the error that names the flag.
func intList(flag, s, what string, ok func(int) bool) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || !ok(n) {
			return nil, fmt.Errorf("%s %q: %q is not %s", flag, s, strings.TrimSpace(f), what)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%s %q: %d is there twice", flag, s, n)
		}
		out = append(out, n)
	}
	return out, nil
}

// waiting says every 10 s, until done is called, what the harness still
// waits for, how long it is given and what else ends the wait, so that a
// long step is never silent.
func waiting(what string, limit time.Duration) (done func()) {
	if first, _, cut := strings.Cut(strings.TrimSpace(what), "\n"); cut || len(first) > 100 {
		what = first[:min(len(first), 100)] + " ..."
	}
	t0 := time.Now()
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				fmt.Fprintf(os.Stderr, "harness: still waiting for %s (%.0f s of at most %s; Ctrl-C ends it)\n",
					what, time.Since(t0).Seconds(), limit)
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(stop) }) }
}

// say prints one step of a scenario on stderr, so that a long run says
// what it is doing and what it waits for.
func say(scenario, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "harness: %s: %s\n", scenario, fmt.Sprintf(format, args...))
}

// now is a result's date.
func now() string { return time.Now().UTC().Format(time.RFC3339) }

// round2 rounds to hundredths, as the scripts printed figures.
func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// pgConn connects to database db of the cluster at port.
func pgConn(ctx context.Context, port int, db string) (*pgx.Conn, error) {
	return pgx.Connect(ctx, url(port, db))
}

// startLatencyProxy puts scripts/bench/cmd/latency-proxy, with a round trip of
// rttMS milliseconds, in front of the source on sourcePort+100 (its errors
// in logPath) and returns that port; stop ends it. Consumers reach the
// source through it; writers do not.
func (b *bench) startLatencyProxy(ctx context.Context, rttMS int, logPath string) (port int, stop func(), err error) {
	bin, err := b.buildTool(ctx, "latency-proxy")
	if err != nil {
		return 0, nil, err
	}
	port = sourcePort + 100
	if c, err := pgConn(ctx, port, "postgres"); err == nil {
		c.Close(ctx)
		return 0, nil, fmt.Errorf("port %d, the latency proxy's, is already in use (a proxy left running?)", port)
	}
	p, err := start(b.root, logPath, logPath, nil, bin, "-listen", fmt.Sprintf("127.0.0.1:%d", port),
		"-target", fmt.Sprintf("127.0.0.1:%d", sourcePort), "-rtt", fmt.Sprintf("%dms", rttMS))
	if err != nil {
		return 0, nil, err
	}
	stop = func() { p.stop(10 * time.Second) }
	err = waitFor(ctx, 30*time.Second, "the latency proxy on port "+strconv.Itoa(port), func() (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("the latency proxy exited: %v (see %s)", p.err, logPath)
		}
		c, err := pgConn(ctx, port, "postgres")
		if err != nil {
			return false, nil
		}
		c.Close(ctx)
		return true, nil
	})
	if err != nil {
		stop()
		return 0, nil, err
	}
	return port, stop, nil
}

// pgbenchCommitted is the number of transactions pgbench's output in path
// says it processed: its line "number of transactions actually processed:
// N" (with -T) or "N/M" (with -t).
func pgbenchCommitted(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), "number of transactions actually processed:")
		if !ok {
			continue
		}
		done, _, _ := strings.Cut(strings.TrimSpace(rest), "/")
		n, err := strconv.ParseInt(done, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", path, s.Text(), err)
		}
		return n, nil
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no \"number of transactions actually processed\" line", path)
}

// setWALSize runs stmt (an ALTER SYSTEM of max_wal_size) on both clusters
// and reloads their configuration.
func setWALSize(ctx context.Context, stmt string) error {
	var errs []error
	for _, port := range []int{sourcePort, targetPort} {
		errs = append(errs, runSQL(ctx, port, "postgres", stmt, "SELECT pg_reload_conf()"))
	}
	return errors.Join(errs...)
}

// subscribe creates subscription name on the target database tgtDB, with
// copy_data, to publication name of srcDB reached on srcPort (the latency
// proxy's when one runs; the publication and the tables on the target
// already made), and returns once its tables tables are ready (srsubstate
// 'r').
func subscribe(ctx context.Context, srcPort int, srcDB, tgtDB, name string, tables int) error {
	create, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := runSQL(create, targetPort, tgtDB, fmt.Sprintf(
		"CREATE SUBSCRIPTION %s CONNECTION 'host=127.0.0.1 port=%d dbname=%s user=postgres' PUBLICATION %s WITH (copy_data = true)",
		name, srcPort, srcDB, name)); err != nil {
		return err
	}
	return waitFor(ctx, time.Hour, "the initial copy of subscription "+name, func() (bool, error) {
		var ready int
		err := query(ctx, targetPort, tgtDB, "SELECT count(*) FILTER (WHERE srsubstate = 'r') FROM pg_subscription_rel WHERE srsubid = (SELECT oid FROM pg_subscription WHERE subname = '"+name+"')", &ready)
		return ready == tables, err
	})
}

// timedNative times a native subscription's initial copy: subscription
// name on tgtDB, to publication name of srcDB reached on srcPort (the
// publication and the tables on the target already made), until every
// one of its tables is ready (srsubstate 'r'). It returns the seconds and
// the CPU of the server processes that ended with it (the table sync
// workers and their walsenders), then drops the subscription, its slot and
// the publication.
func timedNative(ctx context.Context, srcPort int, srcDB, tgtDB, name string, tables int) (float64, serverCPU, error) {
	mark, err := markCPU()
	if err != nil {
		return 0, serverCPU{}, err
	}
	t0 := time.Now()
	if err := subscribe(ctx, srcPort, srcDB, tgtDB, name, tables); err != nil {
		return 0, serverCPU{}, err
	}
	secs := time.Since(t0).Seconds()
	cpu, err := mark.since()
	if err != nil {
		return 0, serverCPU{}, err
	}
	if err := dropSubscription(ctx, tgtDB, name); err != nil {
		return 0, serverCPU{}, err
	}
	if err := dropSlot(ctx, name); err != nil {
		return 0, serverCPU{}, err
	}
	if err := runSQL(ctx, sourcePort, srcDB, "DROP PUBLICATION "+name); err != nil {
		return 0, serverCPU{}, err
	}
	return secs, cpu, nil
}

// pipeSpec is a plain COPY pipe between the clusters, the baseline the
// copies are measured against.
type pipeSpec struct {
	srcPort      int // the port the source is reached on (the proxy's, when one runs)
	srcDB, tgtDB string
	to, from     string // options of COPY TO and COPY FROM: a format, FREEZE
	// truncate empties each table in the target transaction that loads
	// it: COPY FREEZE takes only a table created or truncated in its own
	// transaction.
	truncate bool
}

// pipeTables copies every table through its own pipe, all at once, and
// returns the seconds until the last has committed. Connecting is timed
// too, as psql's was.
func pipeTables(ctx context.Context, p pipeSpec, tables []string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Hour)
	defer cancel()
	defer waiting("the COPY pipes of "+strings.Join(tables, ", "), 2*time.Hour)()
	t0 := time.Now()
	errs := make([]error, len(tables))
	var wg sync.WaitGroup
	for i, t := range tables {
		wg.Go(func() { errs[i] = pipeTable(ctx, p, t) })
	}
	wg.Wait()
	return time.Since(t0).Seconds(), errors.Join(errs...)
}

// pipeTable streams COPY table TO STDOUT from the source into COPY table
// FROM STDIN in one target transaction, through an in-memory pipe: the
// bytes are never parsed, as with psql | psql.
func pipeTable(ctx context.Context, p pipeSpec, table string) error {
	src, err := pgConn(ctx, p.srcPort, p.srcDB)
	if err != nil {
		return fmt.Errorf("pipe of %s: %w", table, err)
	}
	defer src.Close(context.Background())
	tgt, err := pgConn(ctx, targetPort, p.tgtDB)
	if err != nil {
		return fmt.Errorf("pipe of %s: %w", table, err)
	}
	defer tgt.Close(context.Background())
	tx, err := tgt.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pipe of %s: BEGIN: %w", table, err)
	}
	// After a commit the rollback does nothing.
	defer tx.Rollback(context.Background())
	if p.truncate {
		if _, err := tx.Exec(ctx, "TRUNCATE "+table); err != nil {
			return fmt.Errorf("pipe of %s: TRUNCATE: %w", table, err)
		}
	}
	r, w := io.Pipe()
	read := make(chan error, 1)
	go func() {
		// The server sends a message a row: buffered, the target's COPY
		// gets chunks of 64 kB, as psql | psql's stdio gave it.
		bw := bufio.NewWriterSize(w, 64<<10)
		_, err := src.PgConn().CopyTo(ctx, bw, strings.TrimSpace("COPY "+table+" TO STDOUT "+p.to))
		if err == nil {
			err = bw.Flush()
		}
		// nil ends the target's COPY cleanly (EOF); an error fails it.
		w.CloseWithError(err)
		read <- err
	}()
	into := strings.TrimSpace("COPY " + table + " FROM STDIN " + p.from)
	_, werr := tx.Conn().PgConn().CopyFrom(ctx, r, into)
	// A failed COPY FROM stops reading: closing the pipe ends the COPY TO's
	// writes, which would otherwise block.
	r.CloseWithError(errors.New("the target's COPY ended"))
	if rerr := <-read; rerr != nil && werr == nil {
		return fmt.Errorf("pipe of %s: COPY TO: %w", table, rerr)
	}
	if werr != nil {
		return fmt.Errorf("pipe of %s: %s: %w", table, into, werr)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pipe of %s: COMMIT: %w", table, err)
	}
	return nil
}
