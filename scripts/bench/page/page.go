package main

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

// Page is what the two templates are given: the typed results, the
// headline computed from them and the figures of each section that take
// more than a field (ratios, medians, ranges).
type Page struct {
	R *Results
	// Bench is the run of make bench the first page is made of: its
	// commit, and what it measured.
	Bench      BenchRun
	Move       MoveSummary
	Move10GB   MoveSummary // the details page's
	MoveCharts []Chart
	// MoveGapMet, CopyMet, CatchupMet and BigTxnMet say whether the first
	// page's goals were met; MoveBound says what bounds the whole move.
	MoveGapMet, CopyMet, CatchupMet, BigTxnMet bool
	MoveBound                                  string
	// Headline, Charts and Commits are the second page's: every other
	// measurement, each at its own commit.
	Headline []HeadlineRow
	Charts   []Chart
	Commits  []CommitUse

	CopyBest          benchres.CopyRun
	CopyKeyBuilds     []float64 // copy-<n>-bootstrap.json, per stream count
	Bench1GBKeyBuilds []float64
	CatchupPause      CatchupSummary
	CatchupNoPause    CatchupSummary
	RTTRows           []RTTRow
	RTTCopyRows       []RTTCopyRow
	Hot               []BenchStat
	HotRounds         int
	HotBase           string // the base build's commit, from its file's name
	HotCommit         string
	Benchstat         string
	BenchstatSlower   []BenchstatVerdict
	BenchstatFaster   []BenchstatVerdict
	HotZeroAllocs     bool
	UpdateKeyProfile  string
	CatchupProfileTop string
	CatchupAllocsTop  string
	ExperimentNames   []string
}

// CommitUse is a commit and the scenarios whose figures came from it.
type CommitUse struct {
	Commit    string
	Scenarios []string
}

// CatchupSummary sums up catch-up runs of one kind (with or without the
// reader's pause).
type CatchupSummary struct {
	Runs                            int
	Pgsync, Native, Floor           float64 // medians
	VsNative, VsFloor               float64 // ratios of the medians
	PgsyncSpan, NativeSpan          string
	FloorSpan                       string
	PgsyncCPUSpan, WalsenderCPUSpan string
	RSSPeak                         float64
	Identical                       bool
}

// RTTRow is one round trip of rtt.json with its medians.
type RTTRow struct {
	benchres.RoundTrip
	Label                  string
	PgsyncMed, NativeMed   float64
	Ratio                  float64
	PerRun                 []float64
	PgsyncRuns, NativeRuns string
}

// RTTCopyRow is the two-table copy with the source at one round trip.
type RTTCopyRow struct {
	Label                   string
	Bench                   benchres.CDC
	Dump, SlotToDone, Ratio float64
}

// HeadlineRow is one line of the headline table.
type HeadlineRow struct {
	Scenario, Pgsync, Peer, Ratio, Goal, Met, Commit string
	// Chart: the ratio and its goal for the headline chart; Charted is
	// false for a row that has no peer.
	RatioValue, GoalValue float64
	Charted               bool
	Short                 string
}

func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// build computes the page from the results; root is the repository root,
// where the series beside the JSON are read.
func build(root string, r *Results) (*Page, error) {
	p := &Page{R: r, ExperimentNames: experimentNames}
	dir := filepath.Join(root, r.Dir)
	var err error
	if p.Bench, err = benchRun(r); err != nil {
		return nil, err
	}
	if p.Move, err = summarizeMove(r.Move); err != nil {
		return nil, err
	}
	if p.Move10GB, err = summarizeMove(r.Move10GB); err != nil {
		return nil, fmt.Errorf("move-10gb: %w", err)
	}

	// The one-table copy: pgsync's fastest run against native's.
	if len(r.Copy.Pgsync) == 0 {
		return nil, fmt.Errorf("%s/copy.json: pgsync: no runs", r.Dir)
	}
	p.CopyBest = slices.MinFunc(r.Copy.Pgsync, func(a, b benchres.CopyRun) int { return cmp.Compare(a.Seconds, b.Seconds) })
	if err := p.firstPageGoals(r); err != nil {
		return nil, err
	}
	for _, run := range r.Copy.Pgsync {
		kb, err := keyBuilds(filepath.Join(dir, fmt.Sprintf("copy-%d-bootstrap.json", run.Streams)))
		if err != nil {
			return nil, err
		}
		p.CopyKeyBuilds = append(p.CopyKeyBuilds, kb...)
	}
	if p.Bench1GBKeyBuilds, err = keyBuilds(filepath.Join(dir, "bench-1gb-bootstrap.json")); err != nil {
		return nil, err
	}

	// The catch-up runs, with and without the reader's pause.
	var pause, nopause []benchres.Catchup
	for _, c := range r.CatchupRuns {
		switch {
		case strings.HasSuffix(c.Name, "-nopause"):
			nopause = append(nopause, c.R)
		case strings.HasSuffix(c.Name, "-pause"):
			pause = append(pause, c.R)
		default:
			return nil, fmt.Errorf("%s/catchup-runs/%s: neither -pause nor -nopause", r.Dir, c.Name)
		}
	}
	if p.CatchupPause, err = summarizeCatchup(pause); err != nil {
		return nil, fmt.Errorf("catchup-runs (pause): %w", err)
	}
	if p.CatchupNoPause, err = summarizeCatchup(nopause); err != nil {
		return nil, fmt.Errorf("catchup-runs (nopause): %w", err)
	}

	for _, rt := range r.RTT.RoundTrips {
		row := RTTRow{RoundTrip: rt, Label: fmt.Sprintf("%g ms", rt.RTTms)}
		if row.PgsyncMed, err = median(rt.PgsyncSeconds); err != nil {
			return nil, fmt.Errorf("rtt.json at %s: pgsync_seconds: %w", row.Label, err)
		}
		if row.NativeMed, err = median(rt.NativeSeconds); err != nil {
			return nil, fmt.Errorf("rtt.json at %s: native_seconds: %w", row.Label, err)
		}
		if row.Ratio, err = ratio(row.PgsyncMed, row.NativeMed); err != nil {
			return nil, err
		}
		if row.PerRun, err = ratios(rt.PgsyncSeconds, rt.NativeSeconds); err != nil {
			return nil, fmt.Errorf("rtt.json at %s: %w", row.Label, err)
		}
		row.PgsyncRuns, row.NativeRuns = joinF2(rt.PgsyncSeconds), joinF2(rt.NativeSeconds)
		p.RTTRows = append(p.RTTRows, row)
	}
	slices.SortFunc(r.RTTRuns, func(a, b Named[benchres.Catchup]) int { return strings.Compare(sortKey(a.Name), sortKey(b.Name)) })
	slices.SortFunc(r.RTTCopy, func(a, b Named[benchres.CDC]) int { return strings.Compare(sortKey(a.Name), sortKey(b.Name)) })
	for _, b := range r.RTTCopy {
		row := RTTCopyRow{Label: strings.Replace(b.Name, "ms", " ms", 1), Bench: b.R}
		if row.Dump, row.SlotToDone, err = bootParts(filepath.Join(dir, "rtt-copy", b.Name, "bench-100mb-bootstrap.json")); err != nil {
			return nil, err
		}
		if row.Ratio, err = ratio(b.R.Snapshot.PgsyncSeconds, b.R.Snapshot.NativeSeconds); err != nil {
			return nil, err
		}
		p.RTTCopyRows = append(p.RTTCopyRows, row)
	}

	// The hot path: this run's benchmarks against the base build's.
	basePath, baseCommit, err := baseHotpath(dir)
	if err != nil {
		return nil, err
	}
	p.HotBase, p.HotCommit = baseCommit, r.Bench1GB.Env.Commit
	now, err := parseGoBench(filepath.Join(dir, "hotpath.txt"))
	if err != nil {
		return nil, err
	}
	base, err := parseGoBench(basePath)
	if err != nil {
		return nil, err
	}
	p.HotZeroAllocs = true
	for _, name := range slices.Sorted(maps.Keys(now)) {
		s := now[name]
		if b, ok := base[name]; ok {
			s.BaseNsOp, s.HasBase = b.NsOp, true
		}
		p.HotZeroAllocs = p.HotZeroAllocs && s.AllocsOp == 0 && s.BytesOp == 0
		p.HotRounds = s.Rounds
		p.Hot = append(p.Hot, s)
	}
	var verdicts []BenchstatVerdict
	if p.Benchstat, verdicts, err = parseBenchstat(filepath.Join(dir, "hotpath-benchstat.txt")); err != nil {
		return nil, err
	}
	for _, v := range verdicts {
		if strings.HasPrefix(v.Change, "+") {
			p.BenchstatSlower = append(p.BenchstatSlower, v)
		} else {
			p.BenchstatFaster = append(p.BenchstatFaster, v)
		}
	}
	if p.UpdateKeyProfile, err = headLines(filepath.Join(dir, "hotpath-update_key_change-pprof.txt"), 18); err != nil {
		return nil, err
	}
	if p.CatchupProfileTop, err = headLines(filepath.Join(dir, "catchup-profile/pprof-top.txt"), 22); err != nil {
		return nil, err
	}
	if p.CatchupAllocsTop, err = headLines(filepath.Join(dir, "catchup-profile/pprof-allocs.txt"), 16); err != nil {
		return nil, err
	}
	if p.Headline, err = headline(r, p); err != nil {
		return nil, err
	}
	p.Commits = commitUses(r)
	return p, nil
}

// summarizeCatchup gives the medians and ranges of catch-up runs.
func summarizeCatchup(runs []benchres.Catchup) (CatchupSummary, error) {
	var s CatchupSummary
	if len(runs) == 0 {
		return s, fmt.Errorf("no runs")
	}
	var pg, nat, fl, pgcpu, ws []float64
	s.Identical = true
	for _, c := range runs {
		pg = append(pg, c.Pgsync.Seconds)
		nat = append(nat, c.Native.Seconds)
		fl = append(fl, c.Floor.Seconds)
		pgcpu = append(pgcpu, c.Pgsync.CPU.Pgsync)
		ws = append(ws, c.Pgsync.CPU.Walsender)
		s.RSSPeak = max(s.RSSPeak, c.Pgsync.RSSPeakMB)
		s.Identical = s.Identical && c.Pgsync.HashesMatch && c.Native.HashesMatch
	}
	s.Runs = len(runs)
	s.Pgsync, _ = median(pg)
	s.Native, _ = median(nat)
	s.Floor, _ = median(fl)
	var err error
	if s.VsNative, err = ratio(s.Pgsync, s.Native); err != nil {
		return s, err
	}
	if s.VsFloor, err = ratio(s.Pgsync, s.Floor); err != nil {
		return s, err
	}
	s.PgsyncSpan, s.NativeSpan, s.FloorSpan = span(pg, 2), span(nat, 2), span(fl, 2)
	s.PgsyncCPUSpan, s.WalsenderCPUSpan = span(pgcpu, 2), span(ws, 2)
	return s, nil
}

// commitUses lists each commit the figures came from, with its scenarios,
// in the order they first appear.
func commitUses(r *Results) []CommitUse {
	var out []CommitUse
	add := func(commit, scenario string) {
		for i := range out {
			if out[i].Commit == commit {
				if !slices.Contains(out[i].Scenarios, scenario) {
					out[i].Scenarios = append(out[i].Scenarios, scenario)
				}
				return
			}
		}
		out = append(out, CommitUse{Commit: commit, Scenarios: []string{scenario}})
	}
	add(r.Copy.Env.Commit, "one-table copy")
	add(r.Bench1GB.Env.Commit, "two-table copy and CDC")
	add(r.Copy10GB.Env.Commit, "10 GB copy")
	add(r.CatchupRuns[0].R.Env.Commit, "catch-up runs")
	add(r.BigTxn.Env.Commit, "large transaction without streaming")
	add(r.Schema.Env.Commit, "whole database")
	add(r.Stream.Env.Commit, "large transaction while streaming")
	add(r.RTT.Env.Commit, "source far away")
	add(r.Freeze.Env.Commit, "COPY FREEZE")
	add(r.CutoverGap.Env.Commit, "write gap at cutover")
	add(r.VerifyRows.Env.Commit, "verify --rows")
	add(r.Scale.Env.Commit, "many jobs")
	return out
}

func joinF2(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = f2(x)
	}
	return strings.Join(s, ", ")
}

// sortKey orders names like "10ms-2" by their numbers: zero-padded.
func sortKey(name string) string {
	var b strings.Builder
	num := ""
	flush := func() {
		if num != "" {
			b.WriteString(fmt.Sprintf("%08s", num))
			num = ""
		}
	}
	for _, c := range name {
		if c >= '0' && c <= '9' {
			num += string(c)
			continue
		}
		flush()
		b.WriteRune(c)
	}
	flush()
	return b.String()
}

// BenchRun is what make bench measured, all at one commit: the whole
// move, the copy, the catch-up and the large transaction.
type BenchRun struct {
	Commit string
	Env    benchres.Environment
}

// benchRun checks that the first page's results come from one commit.
func benchRun(r *Results) (BenchRun, error) {
	b := BenchRun{Commit: r.Move.Env.Commit, Env: r.Move.Env}
	for file, commit := range map[string]string{"copy.json": r.Copy.Env.Commit, "catchup.json": r.Catchup.Env.Commit, "bigtxn.json": r.BigTxn.Env.Commit} {
		if commit != b.Commit {
			return b, fmt.Errorf("%s/%s is from %s, move/move.json from %s: run make bench to measure them at one commit", r.Dir, file, commit, b.Commit)
		}
	}
	return b, nil
}

// firstPageGoals decides the first page's goals from the results.
func (p *Page) firstPageGoals(r *Results) error {
	q, err := ratio(p.CopyBest.Seconds, r.Copy.Native.Seconds)
	if err != nil {
		return fmt.Errorf("copy.json: %w", err)
	}
	p.CopyMet = Goal{Limit: 1 / 1.7}.Met(q)
	if q, err = ratio(r.Catchup.Pgsync.Seconds, r.Catchup.Native.Seconds); err != nil {
		return fmt.Errorf("catchup.json: %w", err)
	}
	p.CatchupMet = Goal{Limit: 0.6}.Met(q)
	p.BigTxnMet = r.BigTxn.RSSPeakMB < 40
	var gaps []float64
	for _, run := range r.Move.Runs {
		if run.Contender == "pgsync" && run.WriteGapSeconds != nil {
			gaps = append(gaps, *run.WriteGapSeconds)
		}
	}
	gap, err := median(gaps)
	if err != nil {
		return fmt.Errorf("move.json: pgsync's write gaps: %w", err)
	}
	p.MoveGapMet = gap <= 0.5
	p.MoveBound = p.Move.bound(r.Move.Env.Cores)
	return nil
}
