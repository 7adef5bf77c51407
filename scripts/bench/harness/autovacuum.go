package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
	"github.com/pgsync/pgsync/scripts/bench/pgsynclog"
)

func init() { scenarios["autovacuum-hold"] = autovacuumMain }

// autovacuumMain is what holding autovacuum off the target tables during
// the copy saves: harness copy (8M rows, 2 streams, pgsync only; with
// -tables 2 the two 4M-row tables, with -compare native's copy too) run
// by a build of -base, which has no hold, and by this checkout's,
// interleaved for -rounds. For each run: the longest table copy and key
// build (from the bootstrap's log), the total and the target's CPU from
// copy.json, and how many autovacuum tasks the target cancelled (an index
// build that found autovacuum on its table waited deadlock_timeout for
// that). Writes OUT/experiments/autovacuum-hold/runs.jsonl
// (runs-N-tables.jsonl with -tables N).
func autovacuumMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("autovacuum-hold", flag.ContinueOnError)
	base := fs.String("base", "00286dc", "the commit without the hold")
	rounds := fs.Int("rounds", 3, "rounds, each running both builds")
	tables := fs.Int("tables", 1, "harness copy's -tables")
	compare := fs.Bool("compare", false, "harness copy's -compare: native's copy in each run")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := clustersFromEnv(); err != nil {
		return err
	}
	b, err := newBench(root)
	if err != nil {
		return err
	}
	top := *out
	if top == "" {
		top = b.results
	}
	resDir, err := b.resultsDir(filepath.Join(top, "experiments", "autovacuum-hold"))
	if err != nil {
		return err
	}
	bins := map[string]string{"head": b.pgsync}
	if err := b.run(ctx, 5*time.Minute, nil, "make", "-s", "build"); err != nil {
		return err
	}
	if bins["base"], err = b.buildAt(ctx, *base); err != nil {
		return err
	}
	jsonl := filepath.Join(resDir, "runs.jsonl")
	if *tables != 1 {
		jsonl = filepath.Join(resDir, fmt.Sprintf("runs-%d-tables.jsonl", *tables))
	}
	var lines []string
	for round := 1; round <= *rounds; round++ {
		for _, variant := range []string{"base", "head"} {
			run, err := b.holdRun(ctx, bins[variant], fmt.Sprintf("round%d-%s", round, variant), *tables, *compare)
			if err != nil {
				return fmt.Errorf("autovacuum-hold: round %d, %s: %w", round, variant, err)
			}
			run.Round, run.Variant = round, variant
			line, err := json.Marshal(run)
			if err != nil {
				return err
			}
			say("autovacuum-hold", "%s", line)
			lines = append(lines, string(line))
			if err := os.WriteFile(jsonl, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// holdRun runs harness copy with the pgsync at bin, its results and logs
// in name/ of the log directory, and reads the run's figures.
func (b *bench) holdRun(ctx context.Context, bin, name string, tables int, compare bool) (benchres.AutovacuumRun, error) {
	var run benchres.AutovacuumRun
	dir := filepath.Join(b.logs, name)
	version, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return run, fmt.Errorf("%s version: %w", bin, err)
	}
	if run.Commit, err = versionCommit(string(version)); err != nil {
		return run, err
	}
	before, err := autovacuumCancels()
	if err != nil {
		return run, err
	}
	if err := b.harness(ctx, []string{"PGSYNC=" + bin}, dir, "copy", "-streams", "2", "-tables", strconv.Itoa(tables),
		"-compare="+strconv.FormatBool(compare), "-out", dir); err != nil {
		return run, err
	}
	after, err := autovacuumCancels()
	if err != nil {
		return run, err
	}
	run.Cancelled = after - before
	var res benchres.Copy
	data, err := os.ReadFile(filepath.Join(dir, "copy.json"))
	if err != nil {
		return run, err
	}
	if err := json.Unmarshal(data, &res); err != nil || len(res.Pgsync) == 0 {
		return run, fmt.Errorf("%s/copy.json: no pgsync run (%v)", dir, err)
	}
	run.Seconds, run.TargetCPU, run.HashesMatch = res.Pgsync[0].Seconds, res.Pgsync[0].TargetCPU, res.Pgsync[0].HashesMatch
	if res.Native != nil {
		run.NativeSeconds = &res.Native.Seconds
	}
	return run, longestSteps(filepath.Join(dir, "logs", "copy-2-bootstrap.log"), &run)
}

// longestSteps reads a bootstrap log's longest table copy and key build:
// with several tables they run in parallel.
func longestSteps(log string, run *benchres.AutovacuumRun) error {
	boot, err := pgsynclog.Bootstrap(log)
	if err != nil {
		return err
	}
	copies, err := allLogFields(log, "table copied")
	if err != nil {
		return err
	}
	for _, c := range copies {
		s, err := strconv.ParseFloat(c["seconds"], 64)
		if err != nil {
			return fmt.Errorf("%s: table copied, seconds=%q: %w", log, c["seconds"], err)
		}
		run.CopySeconds = max(run.CopySeconds, s)
	}
	if len(copies) == 0 || len(boot.KeyBuildSeconds) == 0 {
		return fmt.Errorf("%s: no table copied or no key built", log)
	}
	run.PKSeconds = slices.Max(boot.KeyBuildSeconds)
	return nil
}

// autovacuumCancels counts the autovacuum tasks the target's log says it
// cancelled so far; 0 before the log exists.
func autovacuumCancels() (int, error) {
	data, err := os.ReadFile(filepath.Join(benchPGDir, "target.log"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	return strings.Count(string(data), "canceling autovacuum task"), err
}

// harness runs another scenario of this harness (this program), with env
// added, its logs in logs/ under dir: a scenario made of others.
func (b *bench) harness(ctx context.Context, env []string, dir string, args ...string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	return b.run(ctx, 12*time.Hour, env, self, append([]string{"-root", b.root, "-logs", filepath.Join(dir, "logs")}, args...)...)
}
