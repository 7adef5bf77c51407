package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["cutover-gap"] = cutoverGapMain }

// cutoverGapMain is the application's write gap at cutover at
// several database sizes under the same load: for each -scales entry, the
// move's application database (appDataset) is bootstrapped and streamed
// by pgsync run while pgbench writes -rate transactions a second as the
// application's role; after -load, cutover --lock-source locks the role,
// waits, reports the target ready and only then compares the tables. The
// gap is the application's: from the end of its last transaction
// committed on the source (pgbench's per-transaction log) to the moment
// cutover reported the target ready. Writes OUT/cutover-gap.json.
func cutoverGapMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("cutover-gap", flag.ContinueOnError)
	scales := fs.String("scales", "6,60", "pgbench scales, comma-separated (6: about 100 MB, 60: about 1 GB)")
	rate := fs.Int("rate", 300, "pgbench's transactions a second")
	load := fs.Duration("load", 20*time.Second, "how long pgbench writes before the cutover")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	list, err := intList("-scales", *scales, "a pgbench scale", func(n int) bool { return n > 0 })
	if err != nil {
		return err
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	// The role's lock is lifted whatever happens (before the clusters
	// stop: defers run last first).
	defer func() {
		_ = runSQL(context.WithoutCancel(ctx), sourcePort, "postgres", "ALTER ROLE "+appRole+" RESET ALL")
	}()
	res := benchres.CutoverGap{Command: command("cutover-gap", args), Date: now(), Env: b.env}
	for _, scale := range list {
		r, err := b.cutoverGap(ctx, scale, *rate, *load)
		if err != nil {
			return fmt.Errorf("cutover-gap: scale %d: %w", scale, err)
		}
		say("cutover-gap", "scale %d (%.0f MB): the application's write gap %.2f s (lock to ready %.3f s), verify after ready %.2f s, identical %v",
			scale, r.DatabaseMB, r.AppGap, r.LockToReady, r.VerifyAfter, r.Identical)
		res.Runs = append(res.Runs, r)
	}
	return writeResult(filepath.Join(resDir, "cutover-gap.json"), res)
}

// cutoverGap measures one scale, its logs in gapSCALE/ of the log
// directory, and drops its database after.
func (b *bench) cutoverGap(ctx context.Context, scale, rate int, load time.Duration) (benchres.CutoverGapRun, error) {
	r := benchres.CutoverGapRun{Scale: scale}
	db := fmt.Sprintf("gap%d", scale)
	dir := filepath.Join(b.logs, db)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	if err := freshDB(ctx, db); err != nil {
		return r, err
	}
	if err := createAppRole(ctx); err != nil {
		return r, err
	}
	if err := b.appDataset(ctx, db, scale, "VACUUM ANALYZE"); err != nil {
		return r, err
	}
	if err := query(ctx, sourcePort, db, "SELECT round(pg_database_size(current_database()) / 1048576.0)::float8", &r.DatabaseMB); err != nil {
		return r, err
	}
	cfg := filepath.Join(dir, "pgsync.toml")
	if err := (jobConfig{job: db, sourceDB: db, targetDB: db}).write(cfg); err != nil {
		return r, err
	}
	t0 := time.Now()
	if err := pgsyncStep(ctx, b.pgsync, filepath.Join(dir, "bootstrap.log"), 2*time.Hour, "-c", cfg, "bootstrap"); err != nil {
		return r, err
	}
	r.Bootstrap = round2(time.Since(t0).Seconds())
	report, err := b.cutoverUnderLoad(ctx, dir, cfg, db, rate, load)
	if err != nil {
		return r, err
	}
	last, commits, err := pgbenchTxns(dir)
	if err != nil {
		return r, err
	}
	r.SourceCommits, r.AppGap = commits, round2(report.ReadyAt.Sub(last).Seconds())
	r.LockToReady, r.VerifyAfter, r.Identical = report.WriteGapSeconds, report.VerifySeconds, report.Identical
	for _, port := range []int{sourcePort, targetPort} {
		if err := dropDB(ctx, port, db); err != nil {
			return r, err
		}
	}
	return r, runSQL(ctx, sourcePort, "postgres", "ALTER ROLE "+appRole+" RESET ALL")
}

// cutoverUnderLoad runs pgsync run and pgbench as the application (-l,
// its per-transaction logs in dir) for load, then cutover, and returns
// cutover's report once pgbench has ended.
func (b *bench) cutoverUnderLoad(ctx context.Context, dir, cfg, db string, rate int, load time.Duration) (cutoverReport, error) {
	runLog := filepath.Join(dir, "run.log")
	run, err := start(dir, runLog, runLog, pgsyncEnv, b.pgsync, "-c", cfg, "run")
	if err != nil {
		return cutoverReport{}, err
	}
	defer run.stop(30 * time.Second)
	app, err := start(dir, filepath.Join(dir, "pgbench.out"), filepath.Join(dir, "pgbench.out"), nil, filepath.Join(b.bindir, "pgbench"),
		"-n", "-c", "4", "-j", "2", "-R", strconv.Itoa(rate), "-T", strconv.Itoa(int((load + 2*time.Minute).Seconds())),
		"-l", "--log-prefix=pgbench", "-h", "127.0.0.1", "-p", strconv.Itoa(sourcePort), "-U", appRole, db)
	if err != nil {
		return cutoverReport{}, err
	}
	defer app.stop(10 * time.Second)
	select {
	case <-ctx.Done():
		return cutoverReport{}, ctx.Err()
	case <-time.After(load):
	}
	report := filepath.Join(dir, "cutover.json")
	cut, err := start(dir, report, filepath.Join(dir, "cutover.log"), pgsyncEnv, b.pgsync,
		"-c", cfg, "cutover", "--lock-source", appRole, "--timeout", "120s", "--json")
	if err != nil {
		return cutoverReport{}, err
	}
	defer cut.stop(10 * time.Second)
	if err := cut.wait(ctx, 10*time.Minute); err != nil {
		return cutoverReport{}, fmt.Errorf("pgsync cutover: %w (see %s)", err, filepath.Join(dir, "cutover.log"))
	}
	// cutover ended the application's sessions: pgbench exits (with an
	// error, its clients having lost their connections) and writes its
	// logs.
	_ = app.wait(ctx, time.Minute)
	app.stop(10 * time.Second)
	return readCutover(report)
}
