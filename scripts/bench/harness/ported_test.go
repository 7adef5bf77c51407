package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

// Every step of harness all names a registered scenario, with its results
// under bench-results/ and its earlier build given only to bigtxn.
func TestAllSteps(t *testing.T) {
	b := &bench{root: "/r", results: "/r/bench-results", logs: "/l"}
	steps := b.allSteps("/l/pgsync-before", "28d8e87")
	seen := map[string]bool{}
	for _, s := range steps {
		if _, ok := scenarios[s.args[0]]; !ok {
			t.Errorf("step %v: no scenario %q", s.args, s.args[0])
		}
		seen[s.args[0]] = true
		i := slices.Index(s.args, "-out")
		if i < 0 || !strings.HasPrefix(s.args[i+1], "/r/bench-results") {
			t.Errorf("step %v: results not under bench-results", s.args)
		}
		if len(s.env) > 0 && s.args[0] != "bigtxn" {
			t.Errorf("step %v: env %v", s.args, s.env)
		}
	}
	// Every benchmark but the memory and resume drills of
	// docs/reliability.md is in the set.
	for name := range scenarios {
		if !seen[name] && !slices.Contains([]string{"all", "bigrow", "bigvalue", "resume"}, name) {
			t.Errorf("scenario %s is not in harness all", name)
		}
	}
}

// The aggregate RSS sums the processes' samples at each quarter-second
// tick; the per-process figures average the averages and keep the
// largest peak.
func TestScaleMemory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	jobs := []*scaleJob{
		{rss: write("a.csv", "unix_s,rss_kb,cpu_pct\n100.00,1024,\n100.25,3072,5\n")},
		{rss: write("b.csv", "unix_s,rss_kb,cpu_pct\n100.01,1024,\n100.26,1024,1\n")},
	}
	var r benchres.ScaleRun
	if err := scaleMemory(&r, jobs, []runStats{{RSSAvgMB: 2, RSSPeakMB: 3}, {RSSAvgMB: 1, RSSPeakMB: 1}}); err != nil {
		t.Fatal(err)
	}
	if r.ProcRSSAvgMB != 1.5 || r.ProcRSSPeakMB != 3 || r.TotalRSSAvgMB != 3 || r.TotalRSSPeakMB != 4 {
		t.Errorf("got %+v, want per process 1.5/3, aggregate 3/4", r)
	}
	if err := scaleMemory(&r, []*scaleJob{{rss: write("c.csv", "unix_s,rss_kb,cpu_pct\nx,1,\n")}}, []runStats{{}}); err == nil {
		t.Error("a sample that is no number gave no error")
	}
}

// maxSpool is the largest spool_bytes of a log, nil without any.
func TestMaxSpool(t *testing.T) {
	log := filepath.Join(t.TempDir(), "run.log")
	text := "time=2026-12-03T23:45:43Z level=INFO msg=applying spool_bytes=10\n" +
		"time=2026-12-03T23:45:44Z level=INFO msg=applying spool_bytes=300\n" +
		"time=2026-12-03T23:45:45Z level=INFO msg=stopped\n"
	if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := maxSpool(log); err != nil || got == nil || *got != 300 {
		t.Errorf("maxSpool = %v, %v; want 300", got, err)
	}
	if err := os.WriteFile(log, []byte("time=2026-12-03T23:45:45Z level=INFO msg=stopped\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := maxSpool(log); err != nil || got != nil {
		t.Errorf("maxSpool without spooling = %v, %v; want nil", got, err)
	}
}

// Only the base build's hot-path file of another commit is removed.
func TestStaleHotpathBases(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"hotpath.txt", "hotpath-benchstat.txt", "hotpath-bfb5f65.txt", "hotpath-0123abc.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := staleHotpathBases(dir, "bfb5f65"); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	for i := range left {
		left[i] = filepath.Base(left[i])
	}
	if want := []string{"hotpath-benchstat.txt", "hotpath-bfb5f65.txt", "hotpath.txt"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
