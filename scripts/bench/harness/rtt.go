package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["rtt"] = rttMain }

// rttMain is the catch-up with the source far away (issue 18): the
// catchup scenario's measurement -runs times at each round trip of -rtts,
// the source behind scripts/bench/cmd/latency-proxy for pgsync, native's subscriber
// and the floor's reader alike. The runs are interleaved (run 1 at every
// round trip, then run 2...), so that a drift of the machine spreads over
// all of them. Each run's files, with its catchup.json, are in
// OUT/rtt/<rtt>ms-<run>/; the summary in OUT/rtt.json.
func rttMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("rtt", flag.ContinueOnError)
	rttList := fs.String("rtts", "0,2,10", "round trips in ms, comma-separated")
	runs := fs.Int("runs", 3, "runs at each round trip")
	backlog := fs.Int64("backlog", 5000, "transactions in each run's backlog")
	rows := fs.Int64("rows", 200000, "rows a table of the dataset")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("rtt: unexpected arguments %q", fs.Args())
	}
	rtts, err := parseRTTs(*rttList)
	if err != nil {
		return err
	}
	if *runs < 1 || *backlog < catchupClients || *rows < 1000 {
		return fmt.Errorf("rtt: -runs must be at least 1, -backlog at least %d and -rows at least 1000", catchupClients)
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	dir := b.logs // the run's logs; its result goes to resDir

	// results[i] are the runs at rtts[i], in order.
	results := make([][]benchres.Catchup, len(rtts))
	for run := 1; run <= *runs; run++ {
		for i, rtt := range rtts {
			fmt.Fprintf(os.Stderr, "harness: rtt: %s run %d of %d, round trip %d ms\n",
				time.Now().UTC().Format(time.TimeOnly), run, *runs, rtt)
			name := fmt.Sprintf("%dms-%d", rtt, run)
			c := catchupConfig{dir: filepath.Join(dir, "rtt", name), backlog: *backlog, rows: *rows, rttMS: rtt}
			res, err := b.catchup(ctx, c)
			if err != nil {
				return fmt.Errorf("rtt: run %d at %d ms: %w", run, rtt, err)
			}
			if err := writeResult(filepath.Join(resDir, "rtt", name, "catchup.json"), res); err != nil {
				return err
			}
			results[i] = append(results[i], res)
		}
	}
	summary := benchres.RTT{Command: command("rtt", args), Date: now(), Env: b.env, Backlog: results[0][0].Backlog}
	for i, rtt := range rtts {
		summary.RoundTrips = append(summary.RoundTrips, roundTrip(rtt, results[i]))
	}
	for _, r := range summary.RoundTrips {
		fmt.Fprintf(os.Stderr, "harness: rtt: %g ms: pgsync %v s, native %v s, floor %v s, identical %v\n",
			r.RTTms, r.PgsyncSeconds, r.NativeSeconds, r.FloorSeconds, r.HashesMatch)
	}
	return writeResult(filepath.Join(resDir, "rtt.json"), summary)
}

// parseRTTs reads -rtts: whole milliseconds, comma-separated.
func parseRTTs(s string) ([]int, error) {
	return intList("rtt: -rtts", s, "whole milliseconds", func(n int) bool { return n >= 0 })
}

// roundTrip summarizes the runs at one round trip: every run's seconds,
// the spreads, and whether every run's pgsync and native left identical
// tables.
func roundTrip(rttMS int, runs []benchres.Catchup) benchres.RoundTrip {
	r := benchres.RoundTrip{RTTms: float64(rttMS), HashesMatch: true}
	for _, c := range runs {
		r.NativeSeconds = append(r.NativeSeconds, c.Native.Seconds)
		r.PgsyncSeconds = append(r.PgsyncSeconds, c.Pgsync.Seconds)
		r.FloorSeconds = append(r.FloorSeconds, c.Floor.Seconds)
		r.HashesMatch = r.HashesMatch && c.Pgsync.HashesMatch && c.Native.HashesMatch
	}
	r.NativeSpread = spread(r.NativeSeconds)
	r.PgsyncSpread = spread(r.PgsyncSeconds)
	return r
}

// spread is max - min of the values, in hundredths; 0 for none.
func spread(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	return round2(slices.Max(values) - slices.Min(values))
}
