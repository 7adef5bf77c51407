package cmd

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/config"
	"github.com/pgsync/pgsync/job"
	"github.com/pgsync/pgsync/pattern"
)

func (a *app) runCmd() *cobra.Command {
	var untilCaughtUp bool
	var logEvery time.Duration
	var cpuProfile, allocProfile string
	var readPauseQueued int
	var metricsAddr string
	var skipDDL []string
	c := &cobra.Command{
		Use:   "run",
		Short: "Stream changes from the slot and apply them to the target, exactly once",
		Long: `run streams the job's slot from the position recorded in pgsync.progress
and applies each source transaction, in commit order, through one target
connection. The target transaction that applies it also moves the
position, so a crash at any instant loses nothing and applies nothing
twice. It reports its position to the source only when it changes.

run reconnects with backoff (1 s doubling to 10 s) when a server goes away
after the stream started, when the source sends nothing, not even a
keepalive, for tuning.wal_receiver_timeout (60s), and after a
serialization failure or deadlock on the target. An error in the data (a
diverged row, a constraint the target has, a missing column) stops it
with the table, the source LSN and the server's message; nothing of the
failing transaction is committed.
With job.ddl = "capture", each DDL statement captured on the source runs
on the target at its place in its transaction; one the target refuses
stops run there, with the statement and the LSN that --skip-ddl takes.
When pgsync add-tables copies a table, run pauses at that table's first
change until the copy is done. SIGINT or SIGTERM stops it within 10 s.

Exit status: 0 stopped by a signal or caught up (--until-caught-up), 1 an
error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			skips, err := parseLSNs("--skip-ddl", skipDDL)
			if err != nil {
				return err
			}
			// tuning.run_procs (default 1): the stream is one reader and one
			// applier handing messages to each other; on one P the hand-off
			// is a goroutine switch instead of a thread wake-up, and the
			// servers keep the other cores (docs/benchmarks.md). GOMAXPROCS
			// in the environment wins.
			if os.Getenv("GOMAXPROCS") == "" && cfg.Tuning.RunProcs > 0 {
				runtime.GOMAXPROCS(cfg.Tuning.RunProcs)
			}
			// What run holds is bounded by max_inflight_bytes, except a
			// single large value, which is held while it is applied. A soft
			// limit makes the garbage collector free the previous large
			// buffer before the heap doubles (docs/reliability.md, large
			// values). GOMEMLIMIT in the environment wins.
			if os.Getenv("GOMEMLIMIT") == "" {
				debug.SetMemoryLimit(memoryLimit(cfg.Tuning.MaxInflightBytes))
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if allocProfile != "" {
				defer writeAllocProfile(allocProfile)
			}
			return job.Run(cmd.Context(), jobOptions(cfg), job.RunOptions{
				UntilCaughtUp:           untilCaughtUp,
				ProgressEvery:           logEvery,
				ReadPauseQueued:         readPauseQueued,
				MaxInflightBytes:        cfg.Tuning.MaxInflightBytes,
				WALReceiverTimeout:      cfg.Tuning.WALReceiverTimeout,
				MaxBatchRows:            cfg.Tuning.MaxBatchRows,
				MaxBatchBytes:           cfg.Tuning.MaxBatchBytes,
				MaxGroupBytes:           cfg.Tuning.MaxGroupBytes,
				ApplyStreamedAsReceived: cfg.Tuning.ApplyStreamed == config.ApplyStreamedAsReceived,
				AddColumns:              cfg.AddColumns,
				Selected:                a.selectedNow,
				MetricsAddr:             metricsAddr,
				SkipDDL:                 skips,
			}, a.log)
		},
	}
	c.Flags().BoolVar(&untilCaughtUp, "until-caught-up", false, "exit 0 once every transaction committed on the source before the start is applied and acknowledged")
	c.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (for developers)")
	_ = c.Flags().MarkHidden("cpuprofile")
	c.Flags().StringVar(&allocProfile, "allocprofile", "", "write where the heap was allocated, at exit (for developers)")
	_ = c.Flags().MarkHidden("allocprofile")
	c.Flags().IntVar(&readPauseQueued, "read-pause-queued", 0, "queue length from which the reader pauses 1 ms before reading (0: 1024, -1: never; for developers)")
	_ = c.Flags().MarkHidden("read-pause-queued")
	c.Flags().DurationVar(&logEvery, "log-every", 10*time.Second, "period of the progress log line while applying")
	c.Flags().StringSliceVar(&skipDDL, "skip-ddl", nil, "record as skipped the captured DDL statement whose message is at this LSN (job.ddl = \"capture\"; the error that stopped run names it), then run")
	c.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9187); off when empty")
	return c
}

// selectedNow says whether job.tables, read from the configuration file
// now, names a table: run asks only about a table being added, and the
// operator abandons an add by taking it out of job.tables while run runs.
// A file that no longer reads names every table: run keeps waiting, and
// says why.
func (a *app) selectedNow(schema, name string) bool {
	cfg, err := a.loadConfig()
	if err == nil {
		var m *pattern.Matcher
		if m, err = pattern.NewMatcher(cfg.Tables); err == nil {
			return m.Matches(schema, name)
		}
	}
	a.log.Warn("cannot read job.tables to know whether a table being added is still in the job; waiting for it", "table", schema+"."+name, "err", err)
	return true
}

// writeAllocProfile writes the allocations since the start (pprof's
// "allocs"): what the garbage collector has to reclaim per row.
func writeAllocProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		slog.Warn("allocation profile", "err", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		slog.Warn("allocation profile", "err", err)
	}
}

// memoryLimit is run's soft memory limit: the queue (max_inflight_bytes)
// plus room for the runtime, the statements and a batch. Above it the
// collector runs at once, so that a large message's buffer, garbage once
// it is applied, is freed before the next one is allocated (64 MiB + 2 x
// the queue left 127 MB of RSS for 40 MB values, this 109 MB:
// docs/reliability.md).
func memoryLimit(maxInflightBytes int64) int64 {
	return 32<<20 + maxInflightBytes
}

// parseLSNs parses the LSNs given to flag: a wrong one is a usage error
// that names the flag.
func parseLSNs(flag string, vals []string) ([]pglogrepl.LSN, error) {
	var out []pglogrepl.LSN
	for _, v := range vals {
		lsn, err := pglogrepl.ParseLSN(v)
		if err != nil {
			return nil, failf(ExitUsage, "%s %q: not an LSN (like 0/16B3748)", flag, v)
		}
		out = append(out, lsn)
	}
	return out, nil
}
