package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["resume"] = resumeMain }

// resumeTables is the number of tables of harness resume.
const resumeTables = 10

// resumeMain is resume, not restart: ten tables; a full bootstrap is
// timed; then, from scratch again, a bootstrap is killed (SIGKILL) once
// -kill-at tables are recorded copied, and the rerun is timed: it must
// copy only what was missing and take at most 0.3x the full copy's time.
// Writes made during and after the killed copy are then applied by run
// --until-caught-up, and verify must say identical. Writes
// OUT/resume.json, and fails when verify did not say identical.
func resumeMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	rows := fs.Int64("rows", 400000, "rows a table (about 55 MB of COPY text at 400000)")
	killAt := fs.Int("kill-at", 8, "tables recorded copied when the kill comes")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *killAt < 1 || *killAt >= resumeTables {
		return fmt.Errorf("resume: -kill-at must be between 1 and %d", resumeTables-1)
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	res := benchres.Resume{Command: command("resume", args), Env: b.env, Tables: resumeTables, RowsPerTable: *rows, Verify: "fail"}
	cfg := filepath.Join(b.logs, "resume.toml")
	if err := (jobConfig{job: "resume", sourceDB: "resume", targetDB: "resume"}).write(cfg); err != nil {
		return err
	}
	step := func(name string, args ...string) (float64, error) {
		t0 := time.Now()
		err := pgsyncStep(ctx, b.pgsync, filepath.Join(b.logs, "resume-"+name+".log"), 2*time.Hour, append([]string{"-c", cfg}, args...)...)
		return round2(time.Since(t0).Seconds()), err
	}
	if err := resumeLoad(ctx, *rows); err != nil {
		return err
	}
	if res.FullSeconds, err = step("full-bootstrap", "bootstrap"); err != nil {
		return err
	}
	say("resume", "full bootstrap: %.2f s; again, killed at %d tables", res.FullSeconds, *killAt)
	if err := resumeLoad(ctx, *rows); err != nil {
		return err
	}
	if err := b.resumeKilled(ctx, cfg, *killAt, &res); err != nil {
		return err
	}
	if res.RerunSeconds, err = step("rerun-bootstrap", "bootstrap"); err != nil {
		return err
	}
	copied, err := allLogFields(filepath.Join(b.logs, "resume-rerun-bootstrap.log"), "table copied")
	if err != nil {
		return err
	}
	res.CopiedByRerun = len(copied)
	res.RerunOverFull = round2(res.RerunSeconds / res.FullSeconds)
	say("resume", "rerun: %.2f s, %d tables copied again", res.RerunSeconds, res.CopiedByRerun)
	if err := runSQL(ctx, sourcePort, "resume", "UPDATE t3 SET v = 2 WHERE id <= 1000",
		fmt.Sprintf("INSERT INTO t4 VALUES (%d, 2, 'after')", *rows+1)); err != nil {
		return err
	}
	if _, err := step("run", "run", "--until-caught-up"); err != nil {
		return err
	}
	same, err := verify(ctx, b.pgsync, cfg, filepath.Join(b.logs, "resume-verify.txt"))
	if err != nil {
		return err
	}
	if same {
		res.Verify = "identical"
	}
	if err := writeResult(filepath.Join(resDir, "resume.json"), res); err != nil {
		return err
	}
	if !same {
		return fmt.Errorf("resume: verify found a difference (see %s)", filepath.Join(b.logs, "resume-verify.txt"))
	}
	return nil
}

// resumeLoad makes database resume anew with its ten tables filled.
func resumeLoad(ctx context.Context, rows int64) error {
	if err := freshDB(ctx, "resume"); err != nil {
		return err
	}
	for i := 1; i <= resumeTables; i++ {
		if err := runSQL(ctx, sourcePort, "resume", fmt.Sprintf("CREATE TABLE t%d (id bigint PRIMARY KEY, v int NOT NULL, note text)", i),
			fmt.Sprintf("INSERT INTO t%[1]d SELECT g, 0, md5(g::text) || md5((g + %[1]d)::text) FROM generate_series(1, %[2]d) g", i, rows)); err != nil {
			return err
		}
	}
	return runSQL(ctx, sourcePort, "resume", "VACUUM ANALYZE")
}

// resumeKilled starts a bootstrap, kills it with SIGKILL once killAt
// tables are recorded ready, records what the target held then and
// writes to the source.
func (b *bench) resumeKilled(ctx context.Context, cfg string, killAt int, res *benchres.Resume) error {
	log := filepath.Join(b.logs, "resume-killed-bootstrap.log")
	p, err := start(b.logs, log, log, pgsyncEnv, b.pgsync, "-c", cfg, "bootstrap")
	if err != nil {
		return err
	}
	defer p.stop(10 * time.Second)
	err = waitFor(ctx, 10*time.Minute, fmt.Sprintf("%d tables copied", killAt), func() (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("the bootstrap ended before the kill: %v (see %s)", p.err, log)
		}
		n, err := readyTables(ctx)
		return n >= killAt, err
	})
	if err != nil {
		return err
	}
	_ = syscall.Kill(p.pid(), syscall.SIGKILL)
	_ = p.wait(ctx, 30*time.Second) // killed: its error is the kill
	if res.CopiedAtKill, err = readyTables(ctx); err != nil {
		return err
	}
	if err := query(ctx, targetPort, "resume", "SELECT coalesce(sum(n_live_tup), 0)::bigint FROM pg_stat_user_tables WHERE schemaname = 'public'", &res.RowsAtKill); err != nil {
		return err
	}
	say("resume", "killed with %d of %d tables recorded copied", res.CopiedAtKill, resumeTables)
	return runSQL(ctx, sourcePort, "resume", "UPDATE t1 SET v = 1 WHERE id <= 1000",
		fmt.Sprintf("UPDATE t%d SET v = 1 WHERE id <= 1000", resumeTables), "DELETE FROM t2 WHERE id <= 10")
}

// readyTables counts the job's tables pgsync has recorded copied on the
// target; 0 before its state table exists (looked up first, so that the
// poll logs no error on the target).
func readyTables(ctx context.Context) (int, error) {
	var exists bool
	if err := query(ctx, targetPort, "resume", "SELECT to_regclass('pgsync.tables') IS NOT NULL", &exists); err != nil || !exists {
		return 0, err
	}
	var n int
	err := query(ctx, targetPort, "resume", "SELECT count(*) FROM pgsync.tables WHERE job = 'resume' AND state = 'ready'", &n)
	return n, err
}
