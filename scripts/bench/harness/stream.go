package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
	"github.com/pgsync/pgsync/scripts/bench/pgsynclog"
)

func init() { scenarios["stream"] = streamMain }

// streamMain is one large transaction committed while the consumer
// streams: for each size in -sizes, a native subscription with streaming
// = on and pgsync run (protocol version 2), each already caught up, then
// one INSERT of that many rows in one source transaction. It records the
// seconds from the source's COMMIT returning to the last row on the
// target, the walsender's CPU over the whole transaction (it decodes
// while the transaction runs), pgsync's peak RSS and the bytes it
// spooled. With -base COMMIT, pgsync built at that commit runs too,
// interleaved. Writes OUT/stream.json.
func streamMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("stream", flag.ContinueOnError)
	sizes := fs.String("sizes", "1000000,5000000", "rows of the one transaction, comma-separated")
	runs := fs.Int("runs", 1, "runs of each contender at each size")
	base := fs.String("base", "", "a commit whose pgsync runs too, as contender base")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rows, err := intList("-sizes", *sizes, "a number of rows", func(n int) bool { return n > 0 })
	if err != nil {
		return err
	}
	if *runs < 1 {
		return fmt.Errorf("stream: -runs must be at least 1")
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	contenders := []string{"native", "pgsync"}
	bins := map[string]string{"pgsync": b.pgsync}
	if *base != "" {
		if bins["base"], err = b.buildAt(ctx, *base); err != nil {
			return err
		}
		contenders = append(contenders, "base")
	}
	res := benchres.Stream{Command: command("stream", args), Date: now(), Env: b.env}
	for _, n := range rows {
		for run := 1; run <= *runs; run++ {
			for _, who := range contenders {
				r, err := b.streamOnce(ctx, who, bins[who], int64(n), run)
				if err != nil {
					return fmt.Errorf("stream: %s, %d rows, run %d: %w", who, n, run, err)
				}
				say("stream", "%s: %d rows applied %.2f s after COMMIT; walsender CPU %.2f s", who, n, r.SecondsAfterCommit, r.WalsenderCPU)
				res.Runs = append(res.Runs, r)
			}
		}
	}
	if err := dropDB(ctx, targetPort, "stream_t"); err != nil {
		return err
	}
	return writeResult(filepath.Join(resDir, "stream.json"), res)
}

// streamOnce makes database stream anew on the source (with the dataset's
// tables, empty) and stream_t on the target, and measures one contender.
func (b *bench) streamOnce(ctx context.Context, who, bin string, rows int64, run int) (benchres.StreamRun, error) {
	r := benchres.StreamRun{Who: who, Rows: rows, Run: run}
	if err := freshDB(ctx, "stream"); err != nil {
		return r, err
	}
	if err := runSQL(ctx, sourcePort, "stream", tablesDDL); err != nil {
		return r, err
	}
	if err := recreateDB(ctx, targetPort, "stream_t"); err != nil {
		return r, err
	}
	if who == "native" {
		return r, b.streamNative(ctx, &r)
	}
	return r, b.streamPgsync(ctx, bin, &r)
}

// streamNative measures a native subscription that streams (streaming =
// on), created without copying.
func (b *bench) streamNative(ctx context.Context, r *benchres.StreamRun) error {
	const name = "stream_native"
	if err := runSQL(ctx, sourcePort, "stream", "CREATE PUBLICATION "+name+" FOR TABLE bench_a"); err != nil {
		return err
	}
	if err := runSQL(ctx, targetPort, "stream_t", tablesDDL, fmt.Sprintf(
		"CREATE SUBSCRIPTION %s CONNECTION 'host=127.0.0.1 port=%d dbname=stream user=postgres' PUBLICATION %s WITH (copy_data = false, streaming = on)",
		name, sourcePort, name)); err != nil {
		return err
	}
	var err error
	if r.SecondsAfterCommit, r.WalsenderCPU, err = streamMeasure(ctx, name, r.Rows); err != nil {
		return err
	}
	if err := dropSubscription(ctx, "stream_t", name); err != nil {
		return err
	}
	return dropSlot(ctx, name)
}

// streamPgsync measures pgsync run (bin), sampled, and reads the bytes it
// spooled from its log.
func (b *bench) streamPgsync(ctx context.Context, bin string, r *benchres.StreamRun) error {
	cfg := filepath.Join(b.logs, "stream.toml")
	if err := (jobConfig{job: "stream", sourceDB: "stream", targetDB: "stream_t", tables: []string{"public.bench_a"}}).write(cfg); err != nil {
		return err
	}
	if err := pgsyncStep(ctx, bin, filepath.Join(b.logs, "stream-bootstrap.log"), time.Hour, "-c", cfg, "bootstrap"); err != nil {
		return err
	}
	name := fmt.Sprintf("stream-%s-%d", r.Who, r.Rows)
	log := filepath.Join(b.logs, name+".log")
	p, err := start(b.logs, log, log, pgsyncEnv, bin, "-c", cfg, "run", "--log-every", "1s")
	if err != nil {
		return err
	}
	defer p.stop(60 * time.Second)
	samples, err := sampleProcess(p, filepath.Join(b.logs, name+"-rss.csv"))
	if err != nil {
		return err
	}
	defer samples.stop()
	if r.SecondsAfterCommit, r.WalsenderCPU, err = streamMeasure(ctx, "pgsync%", r.Rows); err != nil {
		return err
	}
	p.stop(60 * time.Second)
	r.RSSPeakMB = ptr(round2(samples.stop().RSSPeakMB))
	if r.SpoolBytes, err = maxSpool(log); err != nil {
		return err
	}
	return pgsyncStep(ctx, bin, filepath.Join(b.logs, "stream-teardown.log"), 10*time.Minute, "-c", cfg, "teardown")
}

// streamMeasure commits one INSERT of rows rows into the source's
// bench_a while the consumer whose walsender's application_name is like
// app streams, and returns the seconds from its COMMIT to the last row on
// stream_t and the walsender's CPU seconds over the whole transaction.
func streamMeasure(ctx context.Context, app string, rows int64) (secs, cpu float64, err error) {
	var wal int
	err = waitFor(ctx, time.Minute, "the walsender of "+app, func() (bool, error) {
		err := query(ctx, sourcePort, "postgres", "SELECT coalesce(max(pid), 0) FROM pg_stat_replication WHERE application_name LIKE '"+app+"'", &wal)
		return wal != 0, err
	})
	if err != nil {
		return 0, 0, err
	}
	var first int64
	if err := query(ctx, sourcePort, "stream", "SELECT coalesce(max(id), 0) + 1 FROM bench_a", &first); err != nil {
		return 0, 0, err
	}
	last := first + rows - 1
	c0, err := procCPU(wal)
	if err != nil {
		return 0, 0, err
	}
	if err := runSQL(ctx, sourcePort, "stream", fmt.Sprintf(
		"INSERT INTO bench_a SELECT g, 'customer-' || g, g %% 1000, g / 7.0, now(), repeat(md5(g::text), 2) FROM generate_series(%d, %d) g", first, last)); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	err = waitFor(ctx, time.Hour, fmt.Sprintf("%d rows on the target", rows), func() (bool, error) {
		var there bool
		err := query(ctx, targetPort, "stream_t", "SELECT count(*) = 1 FROM bench_a WHERE id = "+strconv.FormatInt(last, 10), &there)
		return there, err
	})
	if err != nil {
		return 0, 0, err
	}
	secs = round2(time.Since(t0).Seconds())
	c1, err := procCPU(wal)
	return secs, round2(c1 - c0), err
}

// maxSpool is the largest spool_bytes= of a run log; nil when no line has
// one (nothing was spooled).
func maxSpool(log string) (*float64, error) {
	lines, err := pgsynclog.Read(log)
	if err != nil {
		return nil, err
	}
	var most *float64
	for _, l := range lines {
		if v, ok := l.Attrs["spool_bytes"]; ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: spool_bytes=%q: %w", log, v, err)
			}
			if most == nil || n > *most {
				most = &n
			}
		}
	}
	return most, nil
}
