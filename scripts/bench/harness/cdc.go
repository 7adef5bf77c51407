package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["cdc"] = cdcMain }

// The CDC phase's load, as scripts/bench.sh had it before the harness:
// writers, and each transaction's inserts, updates and deletes.
const (
	cdcWriters = 4
	cdcInserts = 30
	cdcUpdates = 20
	cdcDeletes = 5
)

// cdcMain is the initial copy and continuous replication of the two-table
// dataset (docs/benchmarks.md): pgsync bootstrap timed beside a plain COPY
// TO STDOUT | COPY FROM STDIN pipe and a native subscription's initial
// copy, then pgsync run while pgbench writers commit for -cdc-seconds, and
// the drain after they stop. With -rtt, pgsync, native's subscriber and the
// pipe's reading side reach the source through scripts/bench/cmd/latency-proxy with
// that round trip; the writers do not. Writes OUT/bench-<dataset>.json,
// with the series and bootstrap figures the pages draw beside it
// (-bootstrap-rss.csv, -bootstrap.json, -cdc-rss.csv, -cdc-applying.csv);
// its logs, pgbench script and configuration go to the run's log
// directory.
func cdcMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("cdc", flag.ContinueOnError)
	dataset := fs.String("dataset", "100MB", "100MB (2 x 400k rows) or 1GB (2 x 4M rows), ~140 bytes of COPY text a row")
	cdcSeconds := fs.Int("cdc-seconds", 60, "seconds the writers commit for")
	rtt := fs.Int("rtt", -1, "round trip in ms of a latency proxy in front of the source (-1: none)")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rows int64
	switch *dataset {
	case "100MB":
		rows = 400000
	case "1GB":
		rows = 4000000
	default:
		return fmt.Errorf("cdc: -dataset must be 100MB or 1GB, not %q", *dataset)
	}
	if *cdcSeconds < 1 {
		return fmt.Errorf("cdc: -cdc-seconds must be at least 1, not %d", *cdcSeconds)
	}
	tag := "bench-" + strings.ToLower(*dataset)
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	dir := b.logs // the run's logs; its result goes to resDir
	res := benchres.CDC{Command: command("cdc", args), Date: now(), Env: b.env, RowsPerTable: rows}
	// via is the source's port as the consumers reach it.
	via := sourcePort
	if *rtt >= 0 {
		port, stopProxy, err := b.startLatencyProxy(ctx, *rtt, filepath.Join(dir, "latency-proxy.log"))
		if err != nil {
			return err
		}
		defer stopProxy()
		via = port
		res.RTTms = ptr(float64(*rtt))
	}

	const db = "bench"
	say("cdc", "%s dataset (%d rows a table)", *dataset, rows)
	if err := freshDB(ctx, db); err != nil {
		return err
	}
	for _, d := range []string{"bench_native", "bench_pipe"} {
		if err := recreateDB(ctx, targetPort, d); err != nil {
			return err
		}
	}
	if err := loadDataset(ctx, db, rows); err != nil {
		return err
	}
	if err := query(ctx, sourcePort, db, "SELECT pg_total_relation_size('bench_a') + pg_total_relation_size('bench_b')", &res.SourceBytes); err != nil {
		return err
	}
	cfg := filepath.Join(dir, tag+".toml")
	if err := (jobConfig{job: db, sourceDB: db, targetDB: db, sourcePort: via}).write(cfg); err != nil {
		return err
	}
	if err := settle(ctx, db); err != nil {
		return err
	}

	say("cdc", "pgsync bootstrap")
	if err := b.cdcBootstrap(ctx, dir, tag, cfg, &res.Snapshot); err != nil {
		return err
	}
	if err := settle(ctx, db); err != nil {
		return err
	}

	say("cdc", "plain COPY pipe, two tables in parallel")
	if err := runSQL(ctx, targetPort, "bench_pipe", tablesDDL); err != nil {
		return err
	}
	pipe, err := pipeTables(ctx, pipeSpec{srcPort: via, srcDB: db, tgtDB: "bench_pipe"}, []string{"bench_a", "bench_b"})
	if err != nil {
		return err
	}
	res.Snapshot.PipeSeconds = round2(pipe)
	if err := settle(ctx, db); err != nil {
		return err
	}

	say("cdc", "native subscription initial copy")
	if err := runSQL(ctx, sourcePort, db, "CREATE PUBLICATION native_bench FOR TABLE bench_a, bench_b"); err != nil {
		return err
	}
	if err := runSQL(ctx, targetPort, "bench_native", tablesDDL); err != nil {
		return err
	}
	native, cpu, err := timedNative(ctx, via, db, "bench_native", "native_bench", 2)
	if err != nil {
		return err
	}
	res.Snapshot.NativeSeconds = round2(native)
	res.Snapshot.NativeServerCPU = &benchres.ServerCPU{Source: round2(cpu.source), Target: round2(cpu.target)}
	if err := settle(ctx, db); err != nil {
		return err
	}

	say("cdc", "pgsync run while %d writers commit for %d s", cdcWriters, *cdcSeconds)
	if err := b.cdcStream(ctx, dir, tag, cfg, db, rows, *cdcSeconds, &res.CDC); err != nil {
		return err
	}
	if res.HashesMatch, err = verify(ctx, b.pgsync, cfg, filepath.Join(dir, tag+"-verify.txt")); err != nil {
		return err
	}
	// What the pages draw of the run, beside the result.
	if err := errors.Join(b.keepSeries(resDir, tag+"-bootstrap"), b.keepBootstrap(resDir, tag+"-bootstrap"),
		b.keepSeries(resDir, tag+"-cdc"), b.keepApplying(resDir, tag+"-cdc")); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "harness: cdc: bootstrap %.2f s, native %.2f s, pipe %.2f s; %d txns applied, drain %.2f s, identical %v\n",
		res.Snapshot.PgsyncSeconds, res.Snapshot.NativeSeconds, res.Snapshot.PipeSeconds, res.CDC.TxnApplied, res.CDC.DrainSeconds, res.HashesMatch)
	return writeResult(filepath.Join(resDir, tag+".json"), res)
}

// cdcBootstrap times pgsync bootstrap of the job in cfg, sampled into
// TAG-bootstrap-rss.csv, with the server CPU its sessions used, and fills
// the snapshot's pgsync figures.
func (b *bench) cdcBootstrap(ctx context.Context, dir, tag, cfg string, snap *benchres.CDCSnapshot) error {
	mark, err := markCPU()
	if err != nil {
		return err
	}
	st, err := sampledRun(ctx, dir, tag+"-bootstrap", 2*time.Hour, pgsyncEnv, b.pgsync, "-c", cfg, "bootstrap")
	if err != nil {
		return err
	}
	server, err := mark.since()
	if err != nil {
		return err
	}
	bytes, err := logNumber(filepath.Join(dir, tag+"-bootstrap.log"), "bootstrap done", "bytes")
	if err != nil {
		return err
	}
	snap.PgsyncSeconds, snap.CopyBytes = round2(st.Seconds), bytes
	snap.RSSAvgMB, snap.RSSPeakMB, snap.CPUAvgPct = round2(st.RSSAvgMB), round2(st.RSSPeakMB), round2(st.CPUAvgPct)
	snap.PgsyncServerCPU = &benchres.ServerCPU{Source: round2(server.source), Target: round2(server.target)}
	return nil
}

// cdcStream runs pgsync run on the job in cfg, sampled into
// TAG-cdc-rss.csv, while pgbench's writers commit on database db for
// seconds; then waits for pgsync to confirm the source's WAL position at
// the writers' stop (the drain), stops it with SIGTERM and reads what it
// applied from its last "stopped" line.
func (b *bench) cdcStream(ctx context.Context, dir, tag, cfg, db string, rows int64, seconds int, res *benchres.CDCStream) error {
	log := filepath.Join(dir, tag+"-cdc-pgsync.log")
	run, err := start(dir, log, log, pgsyncEnv, b.pgsync, "-c", cfg, "run", "--log-every", "1s")
	if err != nil {
		return err
	}
	defer run.stop(60 * time.Second)
	samples, err := sampleProcess(run, filepath.Join(dir, tag+"-cdc-rss.csv"))
	if err != nil {
		return err
	}
	defer samples.stop()

	script := filepath.Join(dir, tag+"-txn.sql")
	if err := writeScript(script, rows, cdcWriters, cdcInserts, cdcUpdates, cdcDeletes); err != nil {
		return err
	}
	pgbenchLog := filepath.Join(dir, tag+"-pgbench.log")
	pgbench, err := start(dir, pgbenchLog, pgbenchLog, nil, filepath.Join(b.bindir, "pgbench"), "-n", "-h", "127.0.0.1",
		"-p", strconv.Itoa(sourcePort), "-U", "postgres", "-c", strconv.Itoa(cdcWriters), "-T", strconv.Itoa(seconds), "-f", script, db)
	if err != nil {
		return err
	}
	defer pgbench.stop(10 * time.Second)
	if err := pgbench.wait(ctx, time.Duration(seconds)*time.Second+2*time.Minute); err != nil {
		return fmt.Errorf("pgbench: %w (see %s)", err, pgbenchLog)
	}
	stopped := time.Now()
	var head string
	if err := query(ctx, sourcePort, "postgres", "SELECT pg_current_wal_lsn()::text", &head); err != nil {
		return err
	}
	committed, err := pgbenchCommitted(pgbenchLog)
	if err != nil {
		return err
	}

	say("cdc", "%d transactions committed; waiting for pgsync to confirm %s", committed, head)
	err = waitFor(ctx, 600*time.Second, "pgsync to drain to "+head, func() (bool, error) {
		if run.exited() {
			return false, fmt.Errorf("pgsync run exited: %v (see %s)", run.err, log)
		}
		var reached bool
		err := query(ctx, sourcePort, "postgres", "SELECT coalesce(bool_or(confirmed_flush_lsn >= '"+head+"'::pg_lsn), false) FROM pg_replication_slots WHERE slot_name = 'pgsync_"+db+"'", &reached)
		return reached, err
	})
	if err != nil {
		return err
	}
	drain := time.Since(stopped).Seconds()
	run.stop(60 * time.Second)
	if run.err != nil {
		return fmt.Errorf("pgsync run, stopped by SIGTERM: %w (see %s)", run.err, log)
	}
	st := samples.stop()
	if st.RSSPeakMB == 0 {
		return fmt.Errorf("pgsync run: no memory sample in %s", filepath.Join(dir, tag+"-cdc-rss.csv"))
	}
	txns, err := logNumber(log, "stopped", "txns")
	if err != nil {
		return err
	}
	applied, err := logNumber(log, "stopped", "rows")
	if err != nil {
		return err
	}
	*res = benchres.CDCStream{
		Seconds: float64(seconds), Writers: cdcWriters, TxnCommitted: committed,
		TxnApplied: int64(txns), RowsApplied: int64(applied),
		TxnPerS: round2(txns / float64(seconds)), RowsPerS: round2(applied / float64(seconds)),
		DrainSeconds: round2(drain), RSSAvgMB: round2(st.RSSAvgMB), RSSPeakMB: round2(st.RSSPeakMB), CPUAvgPct: round2(st.CPUAvgPct),
	}
	return nil
}
