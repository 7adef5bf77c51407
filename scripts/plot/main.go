// Command plot draws the throughput and the resident memory of a pgsync
// run over time as an SVG, from the samples the benchmark scripts record:
// a CSV of RSS samples (unix_s,rss_kb,cpu_pct) and pgsync's log, whose
// "applying" lines (run --log-every 1s) carry rows_per_s.
//
//	go run ./scripts/plot -rss samples.csv -log pgsync.log -title "..." -o out.svg
package main

import (
	"bufio"
	"encoding/csv"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

type point struct{ t, v float64 }

func main() {
	rssPath := flag.String("rss", "", "RSS samples CSV")
	logPath := flag.String("log", "", "pgsync log")
	title := flag.String("title", "pgsync", "chart title")
	out := flag.String("o", "plot.svg", "output SVG")
	flag.Parse()
	rss, err := readRSS(*rssPath)
	if err != nil {
		fail(err)
	}
	rows, err := readRows(*logPath)
	if err != nil {
		fail(err)
	}
	if len(rss) == 0 {
		fail(fmt.Errorf("no RSS samples in %s", *rssPath))
	}
	t0 := rss[0].t
	for _, p := range rows {
		t0 = math.Min(t0, p.t)
	}
	f, err := os.Create(*out)
	if err != nil {
		fail(err)
	}
	defer f.Close()
	const w, h, pad = 900, 260, 60
	fmt.Fprintf(f, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, 2*h+40)
	fmt.Fprintf(f, `<text x="%d" y="20" font-size="15">%s</text>`+"\n", pad, escape(*title))
	panel(f, 30, w, h, pad, "rows applied per second", rows, t0, "#1f77b4")
	panel(f, 30+h, w, h, pad, "resident memory (MB)", rss, t0, "#d62728")
	fmt.Fprintln(f, "</svg>")
}

func panel(f *os.File, top, w, h, pad int, label string, pts []point, t0 float64, color string) {
	maxT, maxV := 1.0, 1.0
	for _, p := range pts {
		maxT = math.Max(maxT, p.t-t0)
		maxV = math.Max(maxV, p.v)
	}
	maxV *= 1.1
	x := func(t float64) float64 { return float64(pad) + (t-t0)/maxT*float64(w-2*pad) }
	y := func(v float64) float64 { return float64(top+h-pad/2) - v/maxV*float64(h-pad) }
	fmt.Fprintf(f, `<text x="%d" y="%d">%s</text>`+"\n", pad, top+18, label)
	fmt.Fprintf(f, `<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="#888"/>`+"\n", pad, y(0), w-pad, y(0))
	fmt.Fprintf(f, `<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="#888"/>`+"\n", pad, y(0), pad, y(maxV))
	for i := 0; i <= 4; i++ {
		v := maxV * float64(i) / 4
		fmt.Fprintf(f, `<text x="4" y="%.0f">%s</text>`+"\n", y(v)+4, short(v))
		t := maxT * float64(i) / 4
		prec := 0
		if maxT < 10 {
			prec = 1
		}
		fmt.Fprintf(f, `<text x="%.0f" y="%.0f">%.*fs</text>`+"\n", x(t0+t)-8, y(0)+16, prec, t)
	}
	var b strings.Builder
	for _, p := range pts {
		fmt.Fprintf(&b, "%.1f,%.1f ", x(p.t), y(p.v))
	}
	fmt.Fprintf(f, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", color, b.String())
}

func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func readRSS(path string) ([]point, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var pts []point
	for _, r := range recs[1:] {
		t, err1 := strconv.ParseFloat(r[0], 64)
		kb, err2 := strconv.ParseFloat(r[1], 64)
		if err1 == nil && err2 == nil {
			pts = append(pts, point{t, kb / 1024})
		}
	}
	return pts, nil
}

// readRows takes time= and rows_per_s= from the "applying" log lines.
func readRows(path string) ([]point, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var pts []point
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "msg=applying") {
			continue
		}
		var ts time.Time
		var rows float64
		for _, field := range strings.Fields(line) {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "time":
				ts, _ = time.Parse(time.RFC3339Nano, v)
			case "rows_per_s":
				rows, _ = strconv.ParseFloat(v, 64)
			}
		}
		if !ts.IsZero() {
			pts = append(pts, point{float64(ts.UnixNano()) / 1e9, rows})
		}
	}
	return pts, sc.Err()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "plot:", err)
	os.Exit(1)
}
