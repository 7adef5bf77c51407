package main

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func init() {
	scenarios["all"] = allMain
	scenarios["insert-copy"] = insertCopyMain
}

// allStep is one step of harness all: a scenario run by this harness as
// a program of its own, then what is made of its output.
type allStep struct {
	args  []string // the scenario and its flags
	env   []string // added to its environment (PGSYNC: another build)
	after func(ctx context.Context, logs string) error
}

// allMain runs every benchmark behind docs/benchmarks.md and its details
// page, one after the other, at the commit checked out, then writes the
// pages (scripts/bench/page). Its longest parts are the 10 GB copy (it
// needs about 45 GB free) and the three-run whole move. Run it on an idle
// machine: every figure is a ratio between contenders measured minutes
// apart. -before-copy-runs names the commit the COPY-runs comparison runs
// against (the last one that applied long INSERT runs as multi-row
// INSERTs), -before-streaming the one the stream scenario compares with
// (before streamed transactions were applied as they arrive). Each
// step's logs are in its own folder of the log directory.
func allMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("all", flag.ContinueOnError)
	beforeCopyRuns := fs.String("before-copy-runs", "2ba6cfc", "the commit bigtxn's COPY runs are compared with")
	beforeStreaming := fs.String("before-streaming", "28d8e87", "the commit the stream scenario compares with")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := newBench(root)
	if err != nil {
		return err
	}
	if err := cleanTree(ctx, b.root); err != nil {
		return err
	}
	if err := b.run(ctx, 5*time.Minute, nil, "make", "-s", "build"); err != nil {
		return err
	}
	before, err := b.buildAt(ctx, *beforeCopyRuns)
	if err != nil {
		return err
	}
	for i, s := range b.allSteps(before, *beforeStreaming) {
		say("all", "%s step %d: %s", time.Now().UTC().Format(time.TimeOnly), i+1, strings.Join(s.args, " "))
		logs := filepath.Join(b.logs, fmt.Sprintf("%02d-%s", i+1, s.args[0]))
		if err := b.harness(ctx, s.env, logs, s.args...); err != nil {
			return fmt.Errorf("all: step %d (%s): %w", i+1, strings.Join(s.args, " "), err)
		}
		if s.after != nil {
			if err := s.after(ctx, filepath.Join(logs, "logs")); err != nil {
				return fmt.Errorf("all: after step %d: %w", i+1, err)
			}
		}
	}
	return b.run(ctx, 10*time.Minute, nil, "go", "run", "-C", "scripts/bench", "./page", "-root", "../..")
}

// allSteps is the plan of harness all, in its order: R is bench-results/.
func (b *bench) allSteps(before, beforeStreaming string) []allStep {
	r := func(rel string) string { return filepath.Join(b.results, rel) }
	steps := []allStep{
		{args: []string{"hotpath", "-out", r("")}},
		{args: []string{"move", "-out", r("move")}},
		{args: []string{"cdc", "-dataset", "100MB", "-out", r("")}},
		{args: []string{"cdc", "-dataset", "1GB", "-out", r("")}},
		// On the 1GB dataset the cdc step left on the source.
		{args: []string{"pk", "-out", r("")}},
	}
	// The reader's pause, interleaved with runs without it.
	for _, run := range []string{"1-pause", "2-nopause", "3-pause", "4-nopause"} {
		flags := ""
		if strings.HasSuffix(run, "nopause") {
			flags = "--read-pause-queued -1"
		}
		steps = append(steps, allStep{args: []string{"catchup", "-run-flags", flags, "-out", r("catchup-runs/" + run)}})
	}
	prof := filepath.Join(b.logs, "catchup-profile")
	steps = append(steps,
		allStep{args: []string{"catchup", "-run-flags", "--cpuprofile " + prof + "-cpu.pprof --allocprofile " + prof + "-allocs.pprof", "-out", r("catchup-profile")},
			after: func(ctx context.Context, _ string) error { return b.pprofTops(ctx, prof, r("catchup-profile")) }},
		allStep{args: []string{"copy", "-out", r("")}},
		allStep{args: []string{"copy", "-rows", "80000000", "-tables", "2", "-compare=false", "-streams", "2", "-out", r("copy-10gb")}},
		allStep{args: []string{"bigtxn", "-rows", "2000000", "-out", r("")}},
	)
	// COPY runs against the commit before them, interleaved.
	for _, run := range []string{"1-before-copy-runs", "2-copy-runs", "3-before-copy-runs", "4-copy-runs"} {
		var env []string
		if strings.Contains(run, "before") {
			env = []string{"PGSYNC=" + before}
		}
		steps = append(steps, allStep{args: []string{"bigtxn", "-out", r("bigtxn-runs/" + run)}, env: env})
	}
	steps = append(steps,
		allStep{args: []string{"stream", "-base", beforeStreaming, "-out", r("")}},
		allStep{args: []string{"rtt", "-rtts", "0,2,10", "-runs", "3", "-out", r("")}},
		allStep{args: []string{"tables", "-tables", "10000", "-schemas", "100", "-rtts", "0,10", "-out", r("tables-10000")}})
	for _, ms := range []string{"0", "2", "10"} {
		steps = append(steps, allStep{args: []string{"cdc", "-rtt", ms, "-dataset", "100MB", "-cdc-seconds", "10", "-out", r("rtt-copy/" + ms + "ms")}})
	}
	return append(steps,
		allStep{args: []string{"freeze", "-out", r("")}},
		allStep{args: []string{"schema", "-out", r("")}},
		allStep{args: []string{"verify", "-out", r("")}},
		allStep{args: []string{"cutover-gap", "-out", r("")}},
		allStep{args: []string{"scale", "-out", r("")}},
		allStep{args: []string{"autovacuum-hold", "-out", r("")}},
		allStep{args: []string{"autovacuum-hold", "-tables", "2", "-compare", "-rounds", "2", "-out", r("")}},
		allStep{args: []string{"insert-copy", "-out", r("")}},
	)
}

// pprofTops writes pprof's top of the catch-up's CPU and allocation
// profiles (PREFIX-cpu.pprof, PREFIX-allocs.pprof) to dir, which the
// details page quotes.
func (b *bench) pprofTops(ctx context.Context, prefix, dir string) error {
	bin := filepath.Join(b.root, "bin", "pgsync")
	if err := writeOutput(ctx, filepath.Join(dir, "pprof-top.txt"), b.root, "go", "tool", "pprof", "-top", "-nodecount", "40", bin, prefix+"-cpu.pprof"); err != nil {
		return err
	}
	return writeOutput(ctx, filepath.Join(dir, "pprof-allocs.txt"), b.root, "go", "tool", "pprof", "-sample_index=alloc_space", "-top", "-nodecount", "12", bin, prefix+"-allocs.pprof")
}

// cleanTree refuses a checkout with changes (bench-results/ and the pages
// aside): the figures name the commit they were measured at.
func cleanTree(ctx context.Context, root string) error {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--", ".",
		":!bench-results", ":!docs/benchmarks.md", ":!docs/benchmarks-details.md", ":!docs/img/benchmarks").Output()
	if err != nil {
		return fmt.Errorf("git status: %w", err)
	}
	if len(out) > 0 {
		return fmt.Errorf("the working tree has changes; commit them so that the figures name the code:\n%s", out)
	}
	return nil
}

// insertCopyMain is scripts/bench/cmd/insert-copy-bench against the
// target cluster: the target backend's CPU for rows inserted as multi-row
// INSERTs or as COPY. Writes OUT/insert-copy.jsonl.
func insertCopyMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("insert-copy", flag.ContinueOnError)
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	bin, err := b.buildTool(ctx, "insert-copy-bench")
	if err != nil {
		return err
	}
	return writeOutput(ctx, filepath.Join(resDir, "insert-copy.jsonl"), b.logs, bin, "-url", url(targetPort, "postgres"))
}
