package main

import (
	"cmp"
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

// MoveRow is one contender's runs of the whole move, summarized: medians
// over its runs that became ready (the time to ready) or over all its runs
// (CPU), and the highest memory.
type MoveRow struct {
	Contender  string
	Runs       int
	ReadyRuns  int
	Ready      string // median seconds to ready, or why not
	ReadyValue float64
	Copied     string
	WriteGap   string
	ToolCPU    string
	ServerCPU  string // source + target
	Busy       string // share of the cores busy until ready
	BusyValue  float64
	PeakMB     string
	Equal      int // runs whose content was equal
}

// MovePhase is one of pgsync's phases: its median length over the runs.
type MovePhase struct {
	Name    string
	Seconds string
	Value   float64
}

// MoveSummary is what the page says of the whole move.
type MoveSummary struct {
	R          benchres.Move
	Rows       []MoveRow
	Phases     []MovePhase
	VsNative   string // pgsync's median time to ready over native's
	VsPgcopydb string // over pgcopydb's, or "–" when it was not ready
	// PgcopydbRan says pgcopydb was measured; PgcopydbMet that pgsync was
	// ready sooner (pgcopydb never ready counts as later).
	PgcopydbRan, PgcopydbMet bool
	Met                      bool // at most 0.6x native's
	GoalLimit                float64
}

// moveGoal is issue 25's goal: pgsync's median time to ready at most 0.6x
// native's.
const moveGoal = 0.6

// summarizeMove summarizes the whole move's runs by contender, in the
// order they ran.
func summarizeMove(m benchres.Move) (MoveSummary, error) {
	s := MoveSummary{R: m, GoalLimit: moveGoal}
	var order []string
	for _, r := range m.Runs {
		if !slices.Contains(order, r.Contender) {
			order = append(order, r.Contender)
		}
	}
	byName := make(map[string]MoveRow)
	for _, name := range order {
		var ready, copied, gaps, tool, server, busy []float64
		row := MoveRow{Contender: name}
		var peak int64
		for _, r := range m.Runs {
			if r.Contender != name {
				continue
			}
			row.Runs++
			if r.ContentEqual {
				row.Equal++
			}
			peak = max(peak, r.ToolPeakBytes)
			toolCPU := r.ToolCPUSeconds
			if name == "native" {
				toolCPU = 0 // its workers are the target's processes, in TargetCPUSeconds
			}
			tool = append(tool, r.ToolCPUSeconds)
			server = append(server, r.SourceCPUSeconds+r.TargetCPUSeconds)
			if r.CopiedSeconds != nil {
				copied = append(copied, *r.CopiedSeconds)
			}
			if !r.Ready {
				continue
			}
			if r.ReadySeconds == nil {
				return s, fmt.Errorf("move.json: %s run %d is ready without a time", name, r.Run)
			}
			row.ReadyRuns++
			ready = append(ready, *r.ReadySeconds)
			busy = append(busy, (toolCPU+r.SourceCPUSeconds+r.TargetCPUSeconds)/(float64(m.Env.Cores)**r.ReadySeconds))
			if r.WriteGapSeconds != nil {
				gaps = append(gaps, *r.WriteGapSeconds)
			}
		}
		med := func(xs []float64, unit string, digits int) string {
			if len(xs) == 0 {
				return "–"
			}
			v, _ := median(xs)
			return fmt.Sprintf("%.*f%s", digits, v, unit)
		}
		if row.ReadyRuns == row.Runs {
			row.ReadyValue, _ = median(ready)
			row.Ready = fmt.Sprintf("%.1f s", row.ReadyValue)
		} else {
			row.Ready = fmt.Sprintf("not ready in %d of %d runs", row.Runs-row.ReadyRuns, row.Runs)
		}
		row.Copied = med(copied, " s", 1)
		row.WriteGap = med(gaps, " s", 3)
		row.ToolCPU = med(tool, " s", 1)
		row.ServerCPU = med(server, " s", 1)
		if len(busy) > 0 {
			v, _ := median(busy)
			row.BusyValue = v
			row.Busy = fmt.Sprintf("%.0f %%", v*100)
		} else {
			row.Busy = "–"
		}
		row.PeakMB = fmt.Sprintf("%.0f MB", float64(peak)/(1<<20))
		s.Rows = append(s.Rows, row)
		byName[name] = row
	}
	pg, okPg := byName["pgsync"]
	nat, okNat := byName["native"]
	if !okPg || !okNat {
		return s, fmt.Errorf("move.json: needs pgsync's and native's runs")
	}
	if pg.ReadyRuns != pg.Runs || nat.ReadyRuns != nat.Runs {
		return s, fmt.Errorf("move.json: pgsync ready in %d of %d runs, native in %d of %d: no median to compare", pg.ReadyRuns, pg.Runs, nat.ReadyRuns, nat.Runs)
	}
	q, err := ratio(pg.ReadyValue, nat.ReadyValue)
	if err != nil {
		return s, err
	}
	s.VsNative = f2(q)
	s.Met = Goal{Limit: moveGoal}.Met(q)
	s.VsPgcopydb = "–"
	if c, ok := byName["pgcopydb"]; ok {
		s.PgcopydbRan = true
		// pgsync was ready in every run: faster than a peer that was not.
		s.PgcopydbMet = c.ReadyRuns < c.Runs
		if c.ReadyRuns == c.Runs {
			q, err := ratio(pg.ReadyValue, c.ReadyValue)
			if err != nil {
				return s, err
			}
			s.VsPgcopydb = f2(q)
			s.PgcopydbMet = q < 1
		}
	}
	// pgsync's phases, by name in the order of its first run.
	lengths := make(map[string][]float64)
	var names []string
	for _, r := range m.Runs {
		if r.Contender != "pgsync" {
			continue
		}
		for _, ph := range r.Phases {
			if !slices.Contains(names, ph.Name) {
				names = append(names, ph.Name)
			}
			lengths[ph.Name] = append(lengths[ph.Name], ph.End-ph.Start)
		}
	}
	for _, n := range names {
		v, err := median(lengths[n])
		if err != nil {
			return s, err
		}
		s.Phases = append(s.Phases, MovePhase{Name: n, Seconds: fmt.Sprintf("%.2f s (%d runs)", v, len(lengths[n])), Value: v})
	}
	return s, nil
}

// drawMoveCharts draws the whole move's charts from each contender's
// first run: the target's lag, its copy rate and the tool's memory over
// time.
func drawMoveCharts(save func(pl *plot.Plot, name, alt, caption string, w, h vg.Length) error, m benchres.Move) error {
	first := make(map[string]benchres.MoveRun)
	var order []string
	for _, r := range m.Runs {
		if _, ok := first[r.Contender]; !ok {
			first[r.Contender] = r
			order = append(order, r.Contender)
		}
	}
	// The charts end 10 s after the last contender that became ready did:
	// one never ready would stretch them to its timeout and flatten the
	// rest (its figures are in the per-run table).
	end := 0.0
	for _, r := range first {
		if r.ReadySeconds != nil {
			end = max(end, *r.ReadySeconds+10)
		}
	}
	type series struct {
		title, file, alt, caption, unit string
		points                          func(r benchres.MoveRun) plotter.XYs
	}
	for _, c := range []series{
		{
			title: "Lag of the target behind the source during the whole move", file: "move-lag.png", unit: "seconds behind (heartbeat)",
			alt:     "seconds the target is behind the source over time, per contender",
			caption: "The target's lag, from the heartbeat row the harness updates on the source every 0.1 s, over each contender's first run (`move.json`), until 10 s after the last one ready. A line starts when the target first holds the heartbeat; ready for cutover is when it stays under 1 s.",
			points: func(r benchres.MoveRun) plotter.XYs {
				var xy plotter.XYs
				for _, s := range r.Samples {
					if s.LagSeconds != nil {
						xy = append(xy, plotter.XY{X: s.T, Y: *s.LagSeconds})
					}
				}
				return xy
			},
		},
		{
			title: "Copy rate into the target during the whole move", file: "move-copy-rate.png", unit: "MB/s written into the target database",
			alt:     "MB per second the target database grows by, over time, per contender",
			caption: "How fast the target database grew (`pg_database_size`, in steps of 1 s), over each contender's first run (`move.json`), until 10 s after the last one ready: the copy, then the indexes it builds.",
			points: func(r benchres.MoveRun) plotter.XYs {
				var xy plotter.XYs
				step := max(1, int(1/r.SampleSeconds))
				for i := step; i < len(r.Samples); i += step {
					a, b := r.Samples[i-step], r.Samples[i]
					if dt := b.T - a.T; dt > 0 {
						xy = append(xy, plotter.XY{X: b.T, Y: max(0, float64(b.TargetBytes-a.TargetBytes)/dt/1e6)})
					}
				}
				return xy
			},
		},
		{
			title: "The tool's memory during the whole move", file: "move-memory.png", unit: "MB resident (RssAnon)",
			alt:     "the tool's anonymous resident memory over time, per contender",
			caption: "The anonymous resident memory of each tool's processes (pgsync's, pgcopydb's with its children, the native subscriber's workers), over each contender's first run (`move.json`), until 10 s after the last one ready.",
			points: func(r benchres.MoveRun) plotter.XYs {
				var xy plotter.XYs
				for _, s := range r.Samples {
					xy = append(xy, plotter.XY{X: s.T, Y: float64(s.ToolBytes) / (1 << 20)})
				}
				return xy
			},
		},
	} {
		pl := plot.New()
		pl.Title.Text = c.title
		pl.X.Label.Text = "seconds from the start"
		pl.Y.Label.Text = c.unit
		pl.Add(plotter.NewGrid())
		top := 0.0
		for i, name := range order {
			var xy plotter.XYs
			for _, p := range c.points(first[name]) {
				if end == 0 || p.X <= end {
					xy = append(xy, p)
					top = max(top, p.Y)
				}
			}
			if len(xy) == 0 {
				continue
			}
			line, err := plotter.NewLine(xy)
			if err != nil {
				return fmt.Errorf("chart %s, %s: %w", c.file, name, err)
			}
			line.LineStyle.Color = plotutil.Color(i)
			line.LineStyle.Width = vg.Points(1.5)
			pl.Add(line)
			pl.Legend.Add(name, line)
		}
		pl.Legend.Top = true
		pl.Y.Min = 0
		pl.Y.Max = top * 1.35 // room for the legend above the lines
		if end > 0 {
			pl.X.Max = end
		}
		if err := save(pl, c.file, c.alt, c.caption, 7*vg.Inch, 3.5*vg.Inch); err != nil {
			return err
		}
	}
	return nil
}

// bound says, from the medians, what bounds pgsync's time to ready: its
// longest phase, and how busy the cores were until ready, beside native.
func (s MoveSummary) bound(cores int) string {
	if len(s.Phases) == 0 {
		return ""
	}
	longest := slices.MaxFunc(s.Phases, func(a, b MovePhase) int { return cmp.Compare(a.Value, b.Value) })
	var pg, nat MoveRow
	for _, r := range s.Rows {
		switch r.Contender {
		case "pgsync":
			pg = r
		case "native":
			nat = r
		}
	}
	why := "the cores were not saturated: the longest phase waits on something other than CPU"
	if pg.BusyValue >= 0.8 {
		why = "source, target and tool share the same cores, so the move is bound by their CPU: a shorter move needs less work, not more parallelism"
	}
	return fmt.Sprintf("What bounds it: the %s is the longest phase (%.1f s of pgsync's median %.1f s to ready). "+
		"Until ready, pgsync's processes and both servers (pgbench's sessions included) kept %s of the %d cores busy, native %s; %s.",
		longest.Name, longest.Value, pg.ReadyValue, pg.Busy, cores, nat.Busy, why)
}
