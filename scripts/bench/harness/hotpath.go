package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"
)

func init() { scenarios["hotpath"] = hotpathMain }

// hotpathPackages are the packages whose benchmarks are the hot path:
// decoding and statement building.
var hotpathPackages = []string{"pgoutput", "apply"}

// hotpathMain is the hot-path benchmarks (no server) of this checkout
// against -base, run interleaved on one pinned CPU (-cpu): this machine's
// speed drifts within the hour, so only runs taken in the same minutes
// compare. Writes OUT/hotpath.txt, hotpath-BASE.txt, hotpath-benchstat.txt
// (benchstat, base against this checkout) and
// hotpath-update_key_change-pprof.txt (where an UPDATE that changes its
// key spends its time), which the pages quote.
func hotpathMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("hotpath", flag.ContinueOnError)
	base := fs.String("base", "bfb5f65", "the commit compared with")
	rounds := fs.Int("rounds", 20, "rounds, each running both builds' benchmarks")
	cpu := fs.String("cpu", "1", "the CPU the benchmarks are pinned to (taskset -c)")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := newBench(root)
	if err != nil {
		return err
	}
	resDir, err := b.resultsDir(*out)
	if err != nil {
		return err
	}
	if err := staleHotpathBases(resDir, *base); err != nil {
		return err
	}
	src, remove, err := b.checkoutAt(ctx, *base)
	if err != nil {
		return err
	}
	defer remove()
	// Base first, then this checkout, in every round.
	builds := []struct{ name, src, out string }{
		{"base", src, filepath.Join(resDir, "hotpath-"+*base+".txt")},
		{"head", b.root, filepath.Join(resDir, "hotpath.txt")},
	}
	for _, build := range builds {
		for _, pkg := range hotpathPackages {
			if err := b.run(ctx, 10*time.Minute, nil, "go", "test", "-C", build.src, "-c", "-o", b.testBinary(build.name, pkg), "./"+pkg); err != nil {
				return err
			}
		}
		if err := os.WriteFile(build.out, nil, 0o644); err != nil {
			return err
		}
	}
	for i := 1; i <= *rounds; i++ {
		say("hotpath", "round %d of %d", i, *rounds)
		for _, build := range builds {
			for _, pkg := range hotpathPackages {
				if err := appendOutput(ctx, build.out, filepath.Join(b.root, pkg), "taskset", "-c", *cpu, b.testBinary(build.name, pkg),
					"-test.run", "^$", "-test.bench", ".", "-test.benchmem", "-test.benchtime", "1000000x"); err != nil {
					return err
				}
			}
		}
	}
	stat := filepath.Join(resDir, "hotpath-benchstat.txt")
	if err := writeOutput(ctx, stat, b.root, "go", "run", "golang.org/x/perf/cmd/benchstat@latest", builds[0].out, builds[1].out); err != nil {
		return err
	}
	return b.hotpathProfile(ctx, resDir, *cpu)
}

// testBinary is where a build's (base or head) test binary of pkg goes.
func (b *bench) testBinary(build, pkg string) string {
	return filepath.Join(b.logs, build+"-"+pkg+".test")
}

// hotpathProfile profiles one benchmark, an UPDATE that changes its key,
// and writes pprof's top of it to the results.
func (b *bench) hotpathProfile(ctx context.Context, resDir, cpu string) error {
	prof := filepath.Join(b.logs, "update_key_change.pprof")
	bin := b.testBinary("head", "apply")
	if err := appendOutput(ctx, filepath.Join(b.logs, "update_key_change.txt"), filepath.Join(b.root, "apply"), "taskset", "-c", cpu, bin,
		"-test.run", "^$", "-test.bench", "DecodeAndBind/update_key_change$", "-test.benchtime", "20000000x", "-test.cpuprofile", prof); err != nil {
		return err
	}
	return writeOutput(ctx, filepath.Join(resDir, "hotpath-update_key_change-pprof.txt"), b.root, "go", "tool", "pprof", "-top", "-nodecount", "25", bin, prof)
}

// staleHotpathBases removes the results of another base build
// (hotpath-<commit>.txt): the page compares with one.
func staleHotpathBases(dir, base string) error {
	paths, _ := filepath.Glob(filepath.Join(dir, "hotpath-*.txt"))
	commit := regexp.MustCompile(`^hotpath-[0-9a-f]{7,40}\.txt$`)
	for _, p := range paths {
		if name := filepath.Base(p); commit.MatchString(name) && name != "hotpath-"+base+".txt" {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// appendOutput runs name in dir, at most an hour, with its stdout
// appended to path and its stderr on the harness's.
func appendOutput(ctx context.Context, path, dir, name string, args ...string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	return runTo(ctx, f, dir, name, args...)
}

// writeOutput runs name in dir, at most an hour, with its stdout written
// to path.
func writeOutput(ctx context.Context, path, dir, name string, args ...string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := runTo(ctx, f, dir, name, args...); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runTo runs name in dir with its stdout in f, bounded by an hour.
func runTo(ctx context.Context, f *os.File, dir, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, f, os.Stderr
	defer waiting(name, time.Hour)()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s in %s: %w", name, dir, err)
	}
	return nil
}
