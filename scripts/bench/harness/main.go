// Command harness runs pgsync's benchmark scenarios against local clusters
// it starts (scripts/local-pg.sh, on the bench ports) and stops, and
// writes each scenario's typed result (package benchres) under
// bench-results/. A measurement it could not take is an error, never a
// zero.
//
//	cd scripts/bench && go run ./harness -root ../.. SCENARIO [flags]
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
	"slices"
	"strings"
	"syscall"
)

// scenarios are the harness's commands, by name: each scenario's file
// adds its own in an init function.
var scenarios = map[string]func(ctx context.Context, root string, args []string) error{}

func main() {
	root := flag.String("root", "../..", "the repository root")
	flag.Usage = func() {
		names := slices.Sorted(maps.Keys(scenarios))
		fmt.Fprintf(os.Stderr, "usage: harness [-root DIR] %s [flags]\n", strings.Join(names, "|"))
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
	err := scenario(ctx, *root, flag.Args()[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}
