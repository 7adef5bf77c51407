// Command harness runs pgsync's benchmark scenarios against local clusters
// it starts (scripts/local-pg.sh, on the bench ports) and stops, and
// writes each scenario's typed result (package benchres) under
// bench-results/. A measurement it could not take is an error, never a
// zero. A run's logs (pgsync's, pgbench's, configurations, verify
// reports) go to the directory -logs names, which it prints at the end:
// bench-results/ keeps only the results and the series the pages draw.
//
//	cd scripts/bench && go run ./harness -root ../.. [-logs DIR] SCENARIO [flags]
//
// PGSYNC=/path/to/pgsync measures another build instead of building the
// checkout; PGSYNC_PG_DIR, PGSYNC_SOURCE_PORT and PGSYNC_TARGET_PORT move
// the clusters (scripts/local-pg.sh's variables).
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// scenarios are the harness's commands, by name: each scenario's file
// adds its own in an init function.
var scenarios = map[string]func(ctx context.Context, root string, args []string) error{}

// logsDir is the run's log directory (-logs), which setup makes.
var logsDir string

func main() {
	root := flag.String("root", "../..", "the repository root")
	flag.StringVar(&logsDir, "logs", "", "the run's log directory (default $TMPDIR/pgsync-bench-logs/SCENARIO-TIME)")
	flag.Usage = func() {
		names := slices.Sorted(maps.Keys(scenarios))
		fmt.Fprintf(os.Stderr, "usage: harness [-root DIR] [-logs DIR] %s [flags]\n", strings.Join(names, "|"))
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() < 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	scenario, ok := scenarios[flag.Arg(0)]
	if !ok {
		flag.Usage()
		os.Exit(2)
	}
	if logsDir == "" {
		logsDir = defaultLogs(flag.Arg(0), time.Now())
	}
	err := scenario(ctx, *root, flag.Args()[1:])
	// Said whatever happened, once the scenario made it: an error names a
	// log in it.
	if _, serr := os.Stat(logsDir); serr == nil {
		fmt.Fprintln(os.Stderr, "harness: the run's logs are in", logsDir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

// defaultLogs is the log directory of a scenario started at t, outside
// the repository: a run's logs are not results.
func defaultLogs(scenario string, t time.Time) string {
	return filepath.Join(os.TempDir(), "pgsync-bench-logs", scenario+"-"+t.UTC().Format("20060102T150405Z"))
}
