package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart is one image on the page: its file under docs/ and its caption.
type Chart struct {
	File, Alt, Caption string
}

// chartDir is where the images go, relative to docs/.
const chartDir = "img/benchmarks"

// drawCharts writes the page's charts under docsDir/img/benchmarks and
// returns them in the page's order.
func drawCharts(root, docsDir string, r *Results, p *Page) ([]Chart, error) {
	dir := filepath.Join(root, r.Dir)
	out := filepath.Join(docsDir, chartDir)
	var charts []Chart
	save := func(pl *plot.Plot, name, alt, caption string, w, h vg.Length) error {
		if err := pl.Save(w, h, filepath.Join(out, name)); err != nil {
			return fmt.Errorf("chart %s: %w", name, err)
		}
		charts = append(charts, Chart{File: chartDir + "/" + name, Alt: alt, Caption: caption})
		return nil
	}
	if err := drawMoveCharts(save, r.Move); err != nil {
		return nil, err
	}
	p.MoveCharts, charts = charts, nil

	// 1. The headline's ratios beside their goals.
	{
		pl := plot.New()
		pl.Title.Text = "pgsync's time over its peer's (below 1: pgsync took less)"
		var vals, goals plotter.Values
		var names []string
		for _, h := range p.Headline {
			if h.Charted {
				vals = append(vals, h.RatioValue)
				goals = append(goals, h.GoalValue)
				names = append(names, h.Short)
			}
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(9))
		if err != nil {
			return nil, err
		}
		bars.Horizontal = true
		bars.Color = plotutil.Color(0)
		bars.LineStyle.Width = 0
		pts := make(plotter.XYs, len(goals))
		for i, g := range goals {
			pts[i] = plotter.XY{X: g, Y: float64(i)}
		}
		goal, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		goal.GlyphStyle.Shape = draw.BoxGlyph{}
		goal.GlyphStyle.Color = color.Black
		goal.GlyphStyle.Radius = vg.Points(3)
		parity, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.5}, {X: 1, Y: float64(len(vals)) - 0.5}})
		if err != nil {
			return nil, err
		}
		parity.LineStyle.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		pl.Add(bars, goal, parity, plotter.NewGrid())
		pl.Legend.Add("pgsync / peer", bars)
		pl.Legend.Add("goal", goal)
		pl.Legend.Add("parity", parity)
		pl.NominalY(names...)
		pl.X.Min = 0
		pl.X.Max = max(slices.Max(vals), slices.Max(goals)) * 1.05
		pl.X.Label.Text = "ratio of times"
		if err := save(pl, "ratios.png", "pgsync's time over its peer's per scenario, with the goal",
			"Each bar is a ratio of the headline table, pgsync's time over its peer's; the black square is the goal for that ratio. A bar that ends left of its square met the goal.",
			7*vg.Inch, 5*vg.Inch); err != nil {
			return nil, err
		}
	}

	// 2. The one-table copy by contender.
	{
		pl := plot.New()
		pl.Title.Text = fmt.Sprintf("Initial copy of one %s-row table, seconds", thousands(r.Copy.Rows))
		var vals plotter.Values
		var names []string
		for _, run := range r.Copy.Pgsync {
			vals = append(vals, run.Seconds)
			names = append(names, fmt.Sprintf("pgsync, %d stream(s)", run.Streams))
		}
		vals = append(vals, r.Copy.Native.Seconds, *r.Copy.PipeSeconds, *r.Copy.BinaryPipeSeconds)
		names = append(names, "native subscription", "text COPY pipe", "binary COPY pipe")
		bars, err := plotter.NewBarChart(vals, vg.Points(14))
		if err != nil {
			return nil, err
		}
		bars.Horizontal = true
		bars.Color = plotutil.Color(1)
		bars.LineStyle.Width = 0
		pl.Add(bars, plotter.NewGrid())
		pl.NominalY(names...)
		pl.X.Min = 0
		pl.X.Label.Text = "seconds (less is better)"
		if err := save(pl, "copy.png", "seconds to copy one table, per contender",
			"The one-table copy: pgsync with 1, 2 and 4 streams beside a native subscription and two COPY pipes (`copy.json`).",
			7*vg.Inch, 3*vg.Inch); err != nil {
			return nil, err
		}
	}

	// 3. Memory over time.
	{
		pl := plot.New()
		pl.Title.Text = "pgsync's resident memory over time"
		pl.X.Label.Text = "seconds since start"
		pl.Y.Label.Text = "RSS, MB"
		series := []struct{ name, file string }{
			{fmt.Sprintf("%.1f GB two-table copy", r.Copy10GB.Pgsync[0].CopyBytes/1e9), "copy-10gb/copy-2-bootstrap-rss.csv"},
			{"1 GB two-table copy", "bench-1gb-bootstrap-rss.csv"},
			{"CDC, 4 writers, 1 GB", "bench-1gb-cdc-rss.csv"},
			{fmt.Sprintf("one %s-row transaction", thousands(r.BigTxn.Rows)), "bigtxn-pgsync-rss.csv"},
		}
		var args []any
		for _, s := range series {
			xy, err := rssSeries(filepath.Join(dir, s.file))
			if err != nil {
				return nil, err
			}
			args = append(args, s.name, toXYs(xy))
		}
		if err := plotutil.AddLines(pl, args...); err != nil {
			return nil, err
		}
		pl.Add(plotter.NewGrid())
		pl.Y.Min = 0
		pl.Y.Max = 48 // room for the legend above the goal's 40 MB
		pl.Legend.Top = true
		if err := save(pl, "rss.png", "pgsync's RSS over time in four runs",
			"pgsync's RSS sampled every 0.25 s: it does not grow with the data, from a 10 GB copy to a 60 s CDC run (the scripts' `*-rss.csv`).",
			7*vg.Inch, 3.5*vg.Inch); err != nil {
			return nil, err
		}
	}

	// 4 and 5. Applied rows and lag over time during CDC and a catch-up.
	for _, c := range []struct {
		key, file, title, ylabel, alt, caption string
		scale                                  float64
	}{
		{"rows_per_s", "apply.png", "Rows applied per second", "rows/s", "rows applied per second over time",
			"Rows applied per second by `pgsync run`, from its log's progress line each second: under 4 writers for 60 s, and one catch-up of the backlog.", 1},
		{"lag_bytes", "lag.png", "Lag behind the source during CDC", "lag, MB", "lag in MB over time under 4 writers",
			"How far pgsync's applied position was behind the source's WAL, each second, under 4 writers (the run log's `lag_bytes`).", 1e6},
	} {
		pl := plot.New()
		pl.Title.Text = c.title
		pl.X.Label.Text = "seconds since the first progress line"
		pl.Y.Label.Text = c.ylabel
		logs := []struct{ name, file string }{
			{"CDC, 1 GB dataset", "bench-1gb-cdc-applying.csv"},
			{"CDC, 100 MB dataset", "bench-100mb-cdc-applying.csv"},
		}
		if c.key == "rows_per_s" {
			logs = append(logs, struct{ name, file string }{"catch-up (" + r.CatchupRuns[0].Name + ")", "catchup-runs/" + r.CatchupRuns[0].Name + "/catchup-applying.csv"})
		}
		var args []any
		for _, l := range logs {
			xy, err := applySeries(filepath.Join(dir, l.file), c.key)
			if err != nil {
				return nil, err
			}
			for i := range xy {
				xy[i].Y /= c.scale
			}
			args = append(args, l.name, toXYs(xy))
		}
		if err := plotutil.AddLinePoints(pl, args...); err != nil {
			return nil, err
		}
		pl.Add(plotter.NewGrid())
		pl.Y.Min = 0
		pl.Legend.Top = true
		if err := save(pl, c.file, c.alt, c.caption, 7*vg.Inch, 3*vg.Inch); err != nil {
			return nil, err
		}
	}

	// 6. The catch-up's runs through the latency proxy.
	{
		pl := plot.New()
		pl.Title.Text = "Catch-up with the source far away: each run"
		pl.X.Label.Text = "round trip, ms"
		pl.Y.Label.Text = "seconds"
		var pg, nat plotter.XYs
		for _, rt := range r.RTT.RoundTrips {
			for i, s := range rt.PgsyncSeconds {
				pg = append(pg, plotter.XY{X: rt.RTTms - 0.25 + 0.1*float64(i), Y: s})
			}
			for i, s := range rt.NativeSeconds {
				nat = append(nat, plotter.XY{X: rt.RTTms + 0.25 + 0.1*float64(i), Y: s})
			}
		}
		if err := plotutil.AddScatters(pl, "pgsync", pg, "native", nat); err != nil {
			return nil, err
		}
		pl.Add(plotter.NewGrid())
		pl.Y.Min = 0
		pl.Legend.Top = true
		pl.Legend.Left = true
		if err := save(pl, "rtt.png", "catch-up seconds per run at each round trip, pgsync and native",
			"Every run of the catch-up through the latency proxy (`rtt.json`): both consumers fall into a fast or a slow mode from one run to the next, set by how the walsender writes to its socket.",
			7*vg.Inch, 3*vg.Inch); err != nil {
			return nil, err
		}
	}
	return charts, nil
}

func toXYs(xy []XY) plotter.XYs {
	out := make(plotter.XYs, len(xy))
	for i, p := range xy {
		out[i] = plotter.XY{X: p.X, Y: p.Y}
	}
	return out
}
