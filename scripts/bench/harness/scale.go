package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["scale"] = scaleMain }

// scaleMain is many jobs side by side: for each N in -workers, N jobs
// (one pgsync run each, each with its own schema, publication, slot and
// target tables) while pgbench writes to all of them for -seconds; then
// every job is drained and verified. Each process's RSS is sampled; the
// aggregate sums them at each quarter-second tick. Writes
// OUT/scale.json.
func scaleMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	workers := fs.String("workers", "5,10,20", "numbers of jobs, comma-separated")
	seconds := fs.Int("seconds", 60, "how long pgbench writes")
	rows := fs.Int64("rows", 20000, "rows of each job's table")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	list, err := intList("-workers", *workers, "a number of jobs", func(n int) bool { return n > 0 })
	if err != nil {
		return err
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	res := benchres.Scale{Command: command("scale", args), Date: now(), Env: b.env}
	for _, n := range list {
		say("scale", "%d jobs", n)
		r, err := b.scaleRun(ctx, n, *rows, *seconds)
		if err != nil {
			return fmt.Errorf("scale: %d jobs: %w", n, err)
		}
		say("scale", "%d jobs, %d consistent, per-process RSS avg %.1f MB peak %.1f MB, aggregate avg %.1f MB peak %.1f MB",
			n, r.Consistent, r.ProcRSSAvgMB, r.ProcRSSPeakMB, r.TotalRSSAvgMB, r.TotalRSSPeakMB)
		res.Runs = append(res.Runs, r)
	}
	return writeResult(filepath.Join(resDir, "scale.json"), res)
}

// scaleJob is one job of harness scale: its configuration, its pgbench
// script and its running pgsync.
type scaleJob struct {
	cfg, script, rss string
	run              *process
	samples          *procSampler
}

// scaleRun measures n jobs, their files in scale-N/ of the log directory.
func (b *bench) scaleRun(ctx context.Context, n int, rows int64, seconds int) (benchres.ScaleRun, error) {
	r := benchres.ScaleRun{Workers: n}
	dir := filepath.Join(b.logs, fmt.Sprintf("scale-%d", n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	jobs, err := b.scaleJobs(ctx, dir, n, rows)
	// Whatever happens, every run started ends with the measurement.
	for _, j := range jobs {
		if j.run != nil {
			defer j.run.stop(60 * time.Second)
		}
		if j.samples != nil {
			defer j.samples.stop()
		}
	}
	if err != nil {
		return r, err
	}
	pgbenchArgs := []string{"-n", "-h", "127.0.0.1", "-p", strconv.Itoa(sourcePort), "-U", "postgres", "-c", "4", "-T", strconv.Itoa(seconds)}
	for _, j := range jobs {
		pgbenchArgs = append(pgbenchArgs, "-f", j.script)
	}
	pgbenchLog := filepath.Join(dir, "pgbench.log")
	app, err := start(dir, pgbenchLog, pgbenchLog, nil, filepath.Join(b.bindir, "pgbench"), append(pgbenchArgs, "scale")...)
	if err != nil {
		return r, err
	}
	defer app.stop(10 * time.Second)
	if err := app.wait(ctx, time.Duration(seconds)*time.Second+5*time.Minute); err != nil {
		return r, fmt.Errorf("pgbench: %w (see %s)", err, pgbenchLog)
	}
	if r.Committed, err = pgbenchCommitted(pgbenchLog); err != nil {
		return r, err
	}
	for i := range jobs {
		if err := waitSlot(ctx, fmt.Sprintf("pgsync_scale%d", i+1), 5*time.Minute); err != nil {
			return r, err
		}
	}
	var stats []runStats
	for _, j := range jobs {
		j.run.stop(60 * time.Second)
		stats = append(stats, j.samples.stop())
	}
	for i, j := range jobs {
		same, err := verify(ctx, b.pgsync, j.cfg, filepath.Join(dir, fmt.Sprintf("job%d-verify.txt", i+1)))
		if err != nil {
			return r, err
		}
		if same {
			r.Consistent++
		}
	}
	if err := scaleMemory(&r, jobs, stats); err != nil {
		return r, err
	}
	var errs []error
	for i, j := range jobs {
		errs = append(errs, pgsyncStep(ctx, b.pgsync, filepath.Join(dir, fmt.Sprintf("job%d-teardown.log", i+1)), 10*time.Minute, "-c", j.cfg, "teardown"))
	}
	return r, errors.Join(errs...)
}

// scaleJobs makes database scale anew with one schema a job (a table of
// rows rows and a sequence), bootstraps each job and starts its pgsync
// run, sampled. On an error it returns the jobs made so far too, so that
// the caller stops the runs that started.
func (b *bench) scaleJobs(ctx context.Context, dir string, n int, rows int64) ([]*scaleJob, error) {
	if err := freshDB(ctx, "scale"); err != nil {
		return nil, err
	}
	var jobs []*scaleJob
	for i := 1; i <= n; i++ {
		s := fmt.Sprintf("s%d", i)
		if err := runSQL(ctx, sourcePort, "scale", "CREATE SCHEMA "+s,
			"CREATE TABLE "+s+".items (id bigint PRIMARY KEY, qty int NOT NULL, note text, at timestamptz NOT NULL DEFAULT now())",
			fmt.Sprintf("INSERT INTO %s.items SELECT g, g %% 100, md5(g::text), now() FROM generate_series(1, %d) g", s, rows),
			fmt.Sprintf("CREATE SEQUENCE %s.ids START %d", s, rows+1)); err != nil {
			return jobs, err
		}
		j := &scaleJob{cfg: filepath.Join(dir, fmt.Sprintf("job%d.toml", i)), script: filepath.Join(dir, fmt.Sprintf("job%d.sql", i)),
			rss: filepath.Join(dir, fmt.Sprintf("job%d-rss.csv", i))}
		script := fmt.Sprintf(`\set id random(1, %[2]d)
BEGIN;
UPDATE %[1]s.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO %[1]s.items (id, qty, note) VALUES (nextval('%[1]s.ids'), 1, 'new');
DELETE FROM %[1]s.items WHERE id = (SELECT min(id) FROM %[1]s.items WHERE id > :id);
END;
`, s, rows)
		if err := os.WriteFile(j.script, []byte(script), 0o644); err != nil {
			return jobs, err
		}
		if err := (jobConfig{job: fmt.Sprintf("scale%d", i), sourceDB: "scale", targetDB: "scale", tables: []string{s + ".*"}}).write(j.cfg); err != nil {
			return jobs, err
		}
		if err := pgsyncStep(ctx, b.pgsync, filepath.Join(dir, fmt.Sprintf("job%d-bootstrap.log", i)), 10*time.Minute, "-c", j.cfg, "bootstrap"); err != nil {
			return jobs, err
		}
		jobs = append(jobs, j)
	}
	for i, j := range jobs {
		log := filepath.Join(dir, fmt.Sprintf("job%d.log", i+1))
		var err error
		if j.run, err = start(dir, log, log, pgsyncEnv, b.pgsync, "-c", j.cfg, "run"); err != nil {
			return jobs, err
		}
		if j.samples, err = sampleProcess(j.run, j.rss); err != nil {
			return jobs, err
		}
	}
	return jobs, nil
}

// scaleMemory fills the run's memory figures: per process, the average
// of the processes' averages and the largest peak; aggregate, the sum of
// every process's RSS at each quarter-second tick, averaged and at its
// peak.
func scaleMemory(r *benchres.ScaleRun, jobs []*scaleJob, stats []runStats) error {
	sum := map[int64]float64{} // kB, by tick
	for i, j := range jobs {
		r.ProcRSSAvgMB += stats[i].RSSAvgMB / float64(len(jobs))
		r.ProcRSSPeakMB = max(r.ProcRSSPeakMB, stats[i].RSSPeakMB)
		if err := addRSS(sum, j.rss); err != nil {
			return err
		}
	}
	if len(sum) == 0 {
		return fmt.Errorf("no RSS samples of any job")
	}
	for _, kb := range sum {
		r.TotalRSSAvgMB += kb / 1024 / float64(len(sum))
		r.TotalRSSPeakMB = max(r.TotalRSSPeakMB, kb/1024)
	}
	r.ProcRSSAvgMB, r.ProcRSSPeakMB = round2(r.ProcRSSAvgMB), round2(r.ProcRSSPeakMB)
	r.TotalRSSAvgMB, r.TotalRSSPeakMB = round2(r.TotalRSSAvgMB), round2(r.TotalRSSPeakMB)
	return nil
}

// addRSS adds the samples of a procSampler's CSV (unix_s,rss_kb,cpu_pct)
// to sum, by quarter-second tick.
func addRSS(sum map[int64]float64, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, row := range rows[min(1, len(rows)):] {
		t, err1 := strconv.ParseFloat(row[0], 64)
		kb, err2 := strconv.ParseFloat(row[1], 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%s: %q is not a sample", path, row)
		}
		sum[int64(t*4)] += kb
	}
	return nil
}
