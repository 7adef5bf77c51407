package main

import (
	"fmt"
	"slices"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

// headline builds the headline table: each pgsync figure beside its peer's,
// their ratio (pgsync's over the peer's: below 1, pgsync took less), the
// goal the issue set and whether it was met.
func headline(r *Results, p *Page) ([]HeadlineRow, error) {
	var rows []HeadlineRow
	var err error
	// vs adds a row comparing two times against a goal on their ratio.
	vs := func(scenario, short string, pgsync, peer float64, peerName string, g Goal, goal, commit string) {
		if err != nil {
			return
		}
		var q float64
		if q, err = ratio(pgsync, peer); err != nil {
			err = fmt.Errorf("headline %q: %w", scenario, err)
			return
		}
		rows = append(rows, HeadlineRow{
			Scenario: scenario, Short: short,
			Pgsync: f2(pgsync) + " s", Peer: f2(peer) + " s " + peerName,
			Ratio: f2(q), Goal: goal, Met: yes(g.Met(q)), Commit: commit,
			RatioValue: q, GoalValue: g.Limit, Charted: true,
		})
	}
	// alone adds a row for a figure that has no peer.
	alone := func(scenario, pgsync, goal string, met bool, commit string) {
		rows = append(rows, HeadlineRow{Scenario: scenario, Pgsync: pgsync, Peer: "", Ratio: "", Goal: goal, Met: yes(met), Commit: commit})
	}

	c := r.Copy
	vs(fmt.Sprintf("initial copy, one %s-row table (best of %d stream counts: %d)", thousands(c.Rows), len(c.Pgsync), p.CopyBest.Streams),
		"copy, 1 table", p.CopyBest.Seconds, c.Native.Seconds, "native", Goal{Limit: 1 / 1.7}, "at least 1.7x faster (ratio 0.59)", c.Env.Commit)
	b := r.Bench1GB
	vs(fmt.Sprintf("initial copy, two tables of %s rows (1 GB)", thousands(b.RowsPerTable)),
		"copy, 2 tables", b.Snapshot.PgsyncSeconds, b.Snapshot.NativeSeconds, "native", Goal{Limit: 0.7}, "at most 0.7x", b.Env.Commit)
	for _, d := range r.Schema.Datasets {
		what := fmt.Sprintf("%d tables", d.Tables)
		if d.Tables == 1 {
			what = "one table"
		}
		vs(fmt.Sprintf("whole database into an empty target, %s, %s rows in all", what, thousands(d.Rows)),
			"whole db vs pgcopydb, "+what, d.BootSections, d.Pgcopydb, "pgcopydb clone", Goal{Limit: 0.995}, "faster than pgcopydb", r.Schema.Env.Commit)
		vs(fmt.Sprintf("the same, beside `pg_dump -s` restored first, %s", what),
			"whole db vs schema first, "+what, d.BootSections, d.SchemaThenBoot, "schema, then bootstrap", Goal{Limit: 0.6}, "at most 0.6x", r.Schema.Env.Commit)
	}
	cp := p.CatchupPause
	commit := r.CatchupRuns[0].R.Env.Commit
	vs(fmt.Sprintf("catch-up of %s transactions, median of %d runs", thousands(r.CatchupRuns[0].R.Backlog), cp.Runs),
		"catch-up vs native", cp.Pgsync, cp.Native, "native", Goal{Limit: 0.6}, "at most 0.6x", commit)
	vs("the same, beside the read-and-discard floor",
		"catch-up vs floor", cp.Pgsync, cp.Floor, "floor", Goal{Limit: 1.2}, "at most 1.2x", commit)
	for _, rt := range p.RTTRows {
		vs(fmt.Sprintf("catch-up, source %s away (median of %d runs)", rt.Label, len(rt.PgsyncSeconds)),
			"catch-up at "+rt.Label, rt.PgsyncMed, rt.NativeMed, "native", Goal{Limit: 0.8}, "at most 0.8x in each run", r.RTT.Env.Commit)
		if err == nil {
			// The goal holds for each run, not for the medians.
			rows[len(rows)-1].Ratio += " (runs " + joinF2(rt.PerRun) + ")"
			rows[len(rows)-1].Met = yes(Goal{Limit: 0.8}.Met(slices.Max(rt.PerRun)))
		}
	}
	for _, rows := range streamSizes(r.Stream) {
		pg, nat, ok := streamPair(r.Stream, rows)
		if !ok {
			return nil, fmt.Errorf("stream.json: no pgsync and native run of %d rows", rows)
		}
		vs(fmt.Sprintf("one %s-row transaction while streaming, time after COMMIT", thousands(rows)),
			fmt.Sprintf("streamed txn, %dM rows", rows/1000000), pg.SecondsAfterCommit, nat.SecondsAfterCommit, "native", Goal{Limit: 0.5}, "at most 0.5x", r.Stream.Env.Commit)
	}
	v := r.VerifyRows
	vs(fmt.Sprintf("`verify --rows` on %s rows, beside the copy of the same table", thousands(v.Rows)),
		"verify --rows vs copy", v.RowsSeconds, v.CopySeconds, "copy", Goal{Limit: 1}, "at most 1x, in 50 MB", v.Env.Commit)
	if err != nil {
		return nil, err
	}

	gaps := make([]float64, 0, len(r.CutoverGap.Runs))
	for _, g := range r.CutoverGap.Runs {
		gaps = append(gaps, g.LockToReady)
	}
	alone("write gap at cutover (lock to ready), "+fmt.Sprintf("%d databases", len(gaps)),
		span(gaps, 3)+" s", "at most 0.5 s, not growing", slices.Max(gaps) <= 0.5, r.CutoverGap.Env.Commit)
	alone("CDC under 4 writers, drain after they stop (100 MB, 1 GB)",
		f2(r.Bench100MB.CDC.DrainSeconds)+", "+f2(r.Bench1GB.CDC.DrainSeconds)+" s", "under 0.5 s",
		max(r.Bench100MB.CDC.DrainSeconds, r.Bench1GB.CDC.DrainSeconds) < 0.5, b.Env.Commit)
	c10 := r.Copy10GB.Pgsync[0]
	alone(fmt.Sprintf("RSS peak: %.1f GB copy; %s-row transaction", c10.CopyBytes/1e9, thousands(r.BigTxn.Rows)),
		fmt.Sprintf("%.1f MB; %.1f MB", c10.RSSPeakMB, r.BigTxn.RSSPeakMB), "under 40 MB", max(c10.RSSPeakMB, r.BigTxn.RSSPeakMB) < 40, r.Copy10GB.Env.Commit)
	alone("allocations per row operation on the hot path",
		map[bool]string{true: "0 in every benchmark", false: "some"}[p.HotZeroAllocs], "0", p.HotZeroAllocs, p.HotCommit)
	return rows, nil
}

// streamSizes is the transaction sizes of stream.json, smallest first.
func streamSizes(s benchres.Stream) []int64 {
	var out []int64
	for _, r := range s.Runs {
		if !slices.Contains(out, r.Rows) {
			out = append(out, r.Rows)
		}
	}
	slices.Sort(out)
	return out
}

// streamPair is pgsync's and native's first run of one size.
func streamPair(s benchres.Stream, rows int64) (pg, nat benchres.StreamRun, ok bool) {
	var havePg, haveNat bool
	for _, r := range s.Runs {
		if r.Rows != rows {
			continue
		}
		switch {
		case r.Who == "pgsync" && !havePg:
			pg, havePg = r, true
		case r.Who == "native" && !haveNat:
			nat, haveNat = r, true
		}
	}
	return pg, nat, havePg && haveNat
}
