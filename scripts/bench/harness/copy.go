package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["copy"] = copyMain }

// copyMain is the initial copy of one large table (or of the same rows
// split over two): pgsync bootstrap with each number of COPY streams (the
// table cut into tuning.copy_range_mb ranges of heap blocks), beside a
// plain COPY TO STDOUT | COPY FROM STDIN pipe, text and binary, and a
// native subscription (one table sync worker per table). It records the
// time, pgsync's RSS and CPU, and the CPU seconds of each server's
// processes that ended with the copy. Writes OUT/copy.json, with
// copy-N-bootstrap-rss.csv and copy-N-bootstrap.json (its key builds)
// beside it; copy-N-bootstrap.log, copy-N-verify.txt and copy-N.toml go
// to the run's log directory.
func copyMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("copy", flag.ContinueOnError)
	rows := fs.Int64("rows", 8000000, "rows copied (about 123 bytes of COPY text a row)")
	streamList := fs.String("streams", "1,2,4", "comma-separated numbers of COPY streams of pgsync's runs")
	tables := fs.Int("tables", 1, "1, or 2: the rows split over two tables, as cdc has them")
	compare := fs.Bool("compare", true, "also time the COPY pipes and a native subscription (false: pgsync only)")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	streams, err := parseStreams(*streamList)
	if err != nil {
		return err
	}
	names := []string{"bench_a"}
	switch *tables {
	case 1:
	case 2:
		names = append(names, "bench_b")
	default:
		return fmt.Errorf("copy: -tables must be 1 or 2, not %d", *tables)
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	dir := b.logs // the run's logs; its result goes to resDir

	// Checkpoints forced by WAL volume would land in one contender's run
	// and not another's: both clusters get room for the whole copy. The
	// reset is registered first, so that it runs even when the setting
	// fails half-way, and on a context of its own that an interrupt does
	// not cancel; it runs before the clusters stop (defers run last first).
	defer func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := setWALSize(c, "ALTER SYSTEM RESET max_wal_size"); err != nil {
			fmt.Fprintln(os.Stderr, "harness: copy: resetting max_wal_size:", err)
		}
	}()
	if err := setWALSize(ctx, "ALTER SYSTEM SET max_wal_size = '8GB'"); err != nil {
		return err
	}

	ddl := make([]string, len(names))
	for i, t := range names {
		ddl[i] = benchTableDDL(t)
	}
	say("copy", "%d rows in %d table(s)", *rows, len(names))
	const srcDB = "copysrc"
	if err := freshDB(ctx, srcDB); err != nil {
		return err
	}
	if err := runSQL(ctx, sourcePort, srcDB, ddl...); err != nil {
		return err
	}
	perTable := *rows / int64(len(names))
	for _, t := range names {
		if err := runSQL(ctx, sourcePort, srcDB, fillRows(t, perTable), "VACUUM ANALYZE "+t); err != nil {
			return fmt.Errorf("filling %s: %w", t, err)
		}
	}
	var heap float64
	if err := query(ctx, sourcePort, srcDB,
		"SELECT sum(pg_relation_size(c.oid))::float8 FROM pg_class c WHERE relname IN ('bench_a', 'bench_b') AND relkind = 'r'", &heap); err != nil {
		return err
	}

	res := benchres.Copy{Command: command("copy", args), Date: now(), Env: b.env, Rows: *rows, Tables: len(names), HeapBytes: heap}
	for _, n := range streams {
		run, err := b.copyBootstrap(ctx, dir, srcDB, n)
		if err != nil {
			return fmt.Errorf("copy, %d stream(s): %w", n, err)
		}
		// What the pages draw of the run, beside the result.
		name := fmt.Sprintf("copy-%d-bootstrap", n)
		if err := errors.Join(b.keepSeries(resDir, name), b.keepBootstrap(resDir, name)); err != nil {
			return err
		}
		res.Pgsync = append(res.Pgsync, run)
	}

	if *compare {
		say("copy", "plain COPY pipe, text and binary")
		text, err := copyPipeDB(ctx, sourcePort, srcDB, "copy_pipe", ddl, names, "")
		if err != nil {
			return err
		}
		binary, err := copyPipeDB(ctx, sourcePort, srcDB, "copy_pipe", ddl, names, "(FORMAT binary)")
		if err != nil {
			return err
		}
		res.PipeSeconds, res.BinaryPipeSeconds = ptr(round2(text)), ptr(round2(binary))

		say("copy", "native subscription initial copy")
		const tgtDB, name = "copy_native", "native_copy"
		if err := recreateDB(ctx, targetPort, tgtDB); err != nil {
			return err
		}
		if err := runSQL(ctx, targetPort, tgtDB, ddl...); err != nil {
			return err
		}
		if err := runSQL(ctx, sourcePort, srcDB, "CREATE PUBLICATION "+name+" FOR TABLE "+strings.Join(names, ", ")); err != nil {
			return err
		}
		if err := checkpoint(ctx); err != nil {
			return err
		}
		secs, cpu, err := timedNative(ctx, sourcePort, srcDB, tgtDB, name, len(names))
		if err != nil {
			return err
		}
		res.Native = &benchres.CopyNative{Seconds: round2(secs), SourceCPU: round2(cpu.source), TargetCPU: round2(cpu.target)}
		if err := dropDB(ctx, targetPort, tgtDB); err != nil {
			return err
		}
	}
	return writeResult(filepath.Join(resDir, "copy.json"), res)
}

// parseStreams reads -streams: numbers of streams, comma-separated.
func parseStreams(s string) ([]int, error) {
	return intList("copy: -streams", s, "a number of streams", func(n int) bool { return n >= 1 })
}

// copyBootstrap is one pgsync bootstrap of the source database srcDB into
// a new target database copy_N with streams COPY streams, timed and
// sampled, then verified, torn down and dropped.
func (b *bench) copyBootstrap(ctx context.Context, dir, srcDB string, streams int) (benchres.CopyRun, error) {
	run := benchres.CopyRun{Streams: streams}
	say("copy", "pgsync bootstrap, %d stream(s)", streams)
	tgtDB := fmt.Sprintf("copy_%d", streams)
	if err := recreateDB(ctx, targetPort, tgtDB); err != nil {
		return run, err
	}
	cfg := filepath.Join(dir, fmt.Sprintf("copy-%d.toml", streams))
	job := jobConfig{job: fmt.Sprintf("copy%d", streams), sourceDB: srcDB, targetDB: tgtDB,
		tuning: fmt.Sprintf("max_parallel_copies = %d", streams)}
	if err := job.write(cfg); err != nil {
		return run, err
	}
	if err := checkpoint(ctx); err != nil {
		return run, err
	}
	mark, err := markCPU()
	if err != nil {
		return run, err
	}
	name := fmt.Sprintf("copy-%d-bootstrap", streams)
	st, err := sampledRun(ctx, dir, name, 2*time.Hour, pgsyncEnv, b.pgsync, "-c", cfg, "bootstrap")
	if err != nil {
		return run, err
	}
	server, err := mark.since()
	if err != nil {
		return run, err
	}
	log := filepath.Join(dir, name+".log")
	bytes, err := logNumber(log, "bootstrap done", "bytes")
	if err != nil {
		return run, err
	}
	parts, err := sumParts(log)
	if err != nil {
		return run, err
	}
	same, err := verify(ctx, b.pgsync, cfg, filepath.Join(dir, fmt.Sprintf("copy-%d-verify.txt", streams)))
	if err != nil {
		return run, err
	}
	if err := pgsyncStep(ctx, b.pgsync, filepath.Join(dir, fmt.Sprintf("copy-%d-teardown.log", streams)), 10*time.Minute, "-c", cfg, "teardown"); err != nil {
		return run, err
	}
	if err := dropDB(ctx, targetPort, tgtDB); err != nil {
		return run, err
	}
	run.Seconds, run.CopyBytes, run.Parts = round2(st.Seconds), bytes, parts
	run.MBPerS = round2(bytes / 1e6 / st.Seconds)
	run.RSSAvgMB, run.RSSPeakMB, run.CPUAvgPct = round2(st.RSSAvgMB), round2(st.RSSPeakMB), round2(st.CPUAvgPct)
	run.SourceCPU, run.TargetCPU, run.HashesMatch = round2(server.source), round2(server.target), same
	say("copy", "%d stream(s): %.2f s, %d parts, identical %v", streams, run.Seconds, parts, same)
	return run, nil
}

// sumParts is the sum of parts= over every "table copied" line of a
// bootstrap's log: the COPY ranges of all its tables. A log without such
// a line, or a line without parts, is an error.
func sumParts(log string) (int, error) {
	lines, err := allLogFields(log, "table copied")
	if err != nil {
		return 0, err
	}
	if len(lines) == 0 {
		return 0, fmt.Errorf("%s has no \"table copied\" line", log)
	}
	total := 0
	for _, kv := range lines {
		n, err := strconv.Atoi(kv["parts"])
		if err != nil {
			return 0, fmt.Errorf("%s: \"table copied\" line of %s, parts=%q: %w", log, kv["table"], kv["parts"], err)
		}
		total += n
	}
	return total, nil
}

// copyPipeDB times a plain COPY pipe of tables from srcDB, reached on
// srcPort, into a new target database tgtDB made with ddl: every table
// through its own COPY TO STDOUT | COPY FROM STDIN with opts (the format),
// the tables in parallel. The target database is dropped after.
func copyPipeDB(ctx context.Context, srcPort int, srcDB, tgtDB string, ddl, tables []string, opts string) (float64, error) {
	if err := recreateDB(ctx, targetPort, tgtDB); err != nil {
		return 0, err
	}
	if err := runSQL(ctx, targetPort, tgtDB, ddl...); err != nil {
		return 0, err
	}
	if err := checkpoint(ctx); err != nil {
		return 0, err
	}
	secs, err := pipeTables(ctx, pipeSpec{srcPort: srcPort, srcDB: srcDB, tgtDB: tgtDB, to: opts, from: opts}, tables)
	if err != nil {
		return 0, err
	}
	return secs, dropDB(ctx, targetPort, tgtDB)
}
