package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["bigtxn"] = bigtxnMain }

// bigtxnMain is the memory under one large transaction: a single source
// transaction of -rows inserted rows, applied by pgsync run
// --until-caught-up while its RSS is sampled. pgsync applies the
// transaction as it arrives, so its memory stays at the configured bounds
// whatever the transaction's size. Writes OUT/bigtxn.json, with
// bigtxn-pgsync-rss.csv (the samples the pages draw) beside it;
// bigtxn-pgsync.log goes to the run's log directory.
func bigtxnMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("bigtxn", flag.ContinueOnError)
	rows := fs.Int64("rows", 1000000, "rows inserted by the one transaction")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	dir := b.logs // the run's logs; its result goes to resDir

	const db = "bigtxn"
	if err := freshDB(ctx, db); err != nil {
		return err
	}
	if err := runSQL(ctx, sourcePort, db, tablesDDL); err != nil {
		return err
	}
	cfg := filepath.Join(dir, "bigtxn.toml")
	if err := (jobConfig{job: db, sourceDB: db, targetDB: db}).write(cfg); err != nil {
		return err
	}
	if err := pgsyncStep(ctx, b.pgsync, filepath.Join(dir, "bigtxn-bootstrap.log"), time.Hour, "-c", cfg, "bootstrap"); err != nil {
		return err
	}
	say("bigtxn", "one transaction of %d rows", *rows)
	if err := runSQL(ctx, sourcePort, db, fmt.Sprintf(
		"INSERT INTO bench_a SELECT g, 'customer-' || g, g %% 1000, g / 7.0, now(), repeat(md5(g::text), 2) FROM generate_series(1, %d) g", *rows)); err != nil {
		return err
	}
	if err := settle(ctx, db); err != nil {
		return err
	}
	mark, err := markCPU()
	if err != nil {
		return err
	}
	run, err := sampledRun(ctx, dir, "bigtxn-pgsync", time.Hour, pgsyncEnv, b.pgsync, "-c", cfg, "run", "--until-caught-up", "--log-every", "1s")
	if err != nil {
		return err
	}
	// The walsender and the target's backend are reaped within a second,
	// as the script waited.
	time.Sleep(500 * time.Millisecond)
	server, err := mark.since()
	if err != nil {
		return err
	}
	self, err := logNumber(filepath.Join(dir, "bigtxn-pgsync.log"), "stopped", "cpu_s")
	if err != nil {
		return err
	}
	same, err := verify(ctx, b.pgsync, cfg, filepath.Join(dir, "bigtxn-verify.txt"))
	if err != nil {
		return err
	}
	res := benchres.BigTxn{
		Command: command("bigtxn", args), Date: now(), Env: b.env, Rows: *rows,
		Seconds: round2(run.Seconds), RSSAvgMB: round2(run.RSSAvgMB), RSSPeakMB: round2(run.RSSPeakMB),
		CPU:       benchres.PgsyncCPU{Pgsync: self, Walsender: round2(server.source), TargetBackend: round2(server.target)},
		CPUAvgPct: round2(run.CPUAvgPct), HashesMatch: same,
	}
	// The samples the pages draw, beside the result.
	if err := b.keepSeries(resDir, "bigtxn-pgsync"); err != nil {
		return err
	}
	say("bigtxn", "%.2f s, RSS peak %.1f MB, identical %v", res.Seconds, res.RSSPeakMB, same)
	return writeResult(filepath.Join(resDir, "bigtxn.json"), res)
}
