package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() {
	scenarios["bigvalue"] = bigvalueMain
	scenarios["bigrow"] = bigrowMain
}

// memoryLimit bounds each pgsync command of the memory scenarios.
const memoryLimit = 10 * time.Minute

// randomBytea is SQL for a bytea of mb MB of random bytes: TOAST does not
// shrink it.
func randomBytea(mb int) string {
	return fmt.Sprintf("(SELECT decode(string_agg(md5(random()::text), ''), 'hex') FROM generate_series(1, %d))", mb<<20/16)
}

// randomText is SQL for a text of mb MB of random hex digits.
func randomText(mb int) string {
	return fmt.Sprintf("(SELECT left(string_agg(md5(random()::text), ''), %d) FROM generate_series(1, %d))", mb<<20, mb<<20/32+1)
}

// bigTableDDL is the memory scenarios' table. Its values are stored out
// of line uncompressed (EXTERNAL): random bytes do not compress anyway,
// and the source is spared trying.
const bigTableDDL = "CREATE TABLE big (id int PRIMARY KEY, b bytea, t text)"

var inflightKey = regexp.MustCompile(`max_inflight_bytes\s*=\s*"([^"]*)"`)

// bigvalueMain is memory under large values: one row with a -mb MB bytea
// and one with a -mb MB text are inserted, then both values replaced,
// each in its own source transaction; pgsync run --until-caught-up
// applies the four, and its peak RSS is the kernel's. Writes
// OUT/bigvalue.json.
func bigvalueMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("bigvalue", flag.ContinueOnError)
	mb := fs.Int("mb", 40, "each value's size, MB")
	tuning := fs.String("tuning", "", `pgsync's [tuning] keys (e.g. max_inflight_bytes = "8MiB")`)
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	const db = "bigvalue"
	cfg, err := b.memoryJob(ctx, db, *tuning)
	if err != nil {
		return err
	}
	if err := pgsyncStep(ctx, b.pgsync, filepath.Join(b.logs, "bigvalue-bootstrap.log"), memoryLimit, "-c", cfg, "bootstrap"); err != nil {
		return err
	}
	say("bigvalue", "%d MB bytea and %d MB text, inserted then updated", *mb, *mb)
	if err := runSQL(ctx, sourcePort, db,
		"INSERT INTO big VALUES (1, "+randomBytea(*mb)+", NULL)",
		"INSERT INTO big VALUES (2, NULL, "+randomText(*mb)+")",
		"UPDATE big SET b = "+randomBytea(*mb)+" WHERE id = 1",
		"UPDATE big SET t = "+randomText(*mb)+" WHERE id = 2"); err != nil {
		return err
	}
	secs, peak, err := pgsyncPeak(ctx, b.pgsync, filepath.Join(b.logs, "bigvalue.log"), memoryLimit,
		"-c", cfg, "run", "--until-caught-up", "--log-every", "1s")
	if err != nil {
		return err
	}
	same, err := verify(ctx, b.pgsync, cfg, filepath.Join(b.logs, "bigvalue-verify.txt"))
	if err != nil {
		return err
	}
	res := benchres.BigValue{Command: command("bigvalue", args), Date: now(), Env: b.env, ValueMB: *mb,
		MaxInflightBytes: "16MiB (default)", Seconds: round2(secs), RSSPeakMB: round2(peak), HashesMatch: same}
	if m := inflightKey.FindStringSubmatch(*tuning); m != nil {
		res.MaxInflightBytes = m[1]
	}
	say("bigvalue", "%.2f s, peak RSS %.1f MB, identical %v", res.Seconds, res.RSSPeakMB, same)
	return writeResult(filepath.Join(resDir, "bigvalue.json"), res)
}

// memoryJob makes database db anew with the table big on the source and
// writes the job's configuration (job db) in the log directory.
func (b *bench) memoryJob(ctx context.Context, db, tuning string) (cfg string, err error) {
	if err := freshDB(ctx, db); err != nil {
		return "", err
	}
	if err := runSQL(ctx, sourcePort, db, bigTableDDL, "ALTER TABLE big ALTER b SET STORAGE EXTERNAL, ALTER t SET STORAGE EXTERNAL"); err != nil {
		return "", err
	}
	cfg = filepath.Join(b.logs, db+".toml")
	return cfg, jobConfig{job: db, sourceDB: db, targetDB: db, tuning: tuning}.write(cfg)
}

// bigrowMain is memory with one row as large as a test makes it (issue
// 22): a row of two -mb MB values, a bytea and a text of random bytes,
// carried on every path, each path's peak RSS the kernel's:
//
//	copy       bootstrap copying a table that holds the row;
//	caught-up  run --until-caught-up applying the row's INSERT;
//	run        run applying the row's UPDATE while streaming, ended by
//	           SIGTERM once the slot confirmed it;
//	streamed   run --until-caught-up applying a transaction larger than
//	           logical_decoding_work_mem (64 kB here), streamed as it
//	           runs, whose last change is the row.
//
// The goal: at most twice the row plus 30 MB on each. Writes
// OUT/bigrow.json.
func bigrowMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("bigrow", flag.ContinueOnError)
	mb := fs.Int("mb", 40, "each of the row's two values, MB")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	const db = "bigrow"
	row := func(id int) string { return fmt.Sprintf("(%d, %s, %s)", id, randomBytea(*mb), randomText(*mb)) }
	cfg, err := b.memoryJob(ctx, db, "")
	if err != nil {
		return err
	}
	res := benchres.BigRow{Command: command("bigrow", args), Date: now(), Env: b.env}
	if err := runSQL(ctx, sourcePort, db, "INSERT INTO big VALUES "+row(1)); err != nil {
		return err
	}
	if err := query(ctx, sourcePort, db, "SELECT round((octet_length(b) + octet_length(t)) / 1048576.0, 1)::float8 FROM big WHERE id = 1", &res.RowMB); err != nil {
		return err
	}
	res.GoalMB = round2(2*res.RowMB + 30)
	say("bigrow", "a row of %.1f MB: copy", res.RowMB)
	peak := func(name string, args ...string) (float64, error) {
		_, mb, err := pgsyncPeak(ctx, b.pgsync, filepath.Join(b.logs, "bigrow-"+name+".log"), memoryLimit, append([]string{"-c", cfg}, args...)...)
		return round2(mb), err
	}
	if res.PeakMB.Copy, err = peak("copy", "bootstrap"); err != nil {
		return err
	}
	say("bigrow", "run --until-caught-up applying the row's INSERT")
	if err := runSQL(ctx, sourcePort, db, "INSERT INTO big VALUES "+row(2)); err != nil {
		return err
	}
	if res.PeakMB.CaughtUp, err = peak("caughtup", "run", "--until-caught-up"); err != nil {
		return err
	}
	say("bigrow", "run applying the row's UPDATE while streaming")
	if res.PeakMB.Run, err = b.bigrowStreaming(ctx, cfg, fmt.Sprintf("UPDATE big SET b = %s, t = %s WHERE id = 2", randomBytea(*mb), randomText(*mb))); err != nil {
		return err
	}
	say("bigrow", "a streamed transaction whose last change is the row")
	if res.PeakMB.Streamed, res.StreamedLogLines, err = b.bigrowStreamed(ctx, cfg, row(3)); err != nil {
		return err
	}
	if res.Identical, err = verify(ctx, b.pgsync, cfg, filepath.Join(b.logs, "bigrow-verify.txt")); err != nil {
		return err
	}
	say("bigrow", "peaks %+v MB (goal %.1f), identical %v", res.PeakMB, res.GoalMB, res.Identical)
	return writeResult(filepath.Join(resDir, "bigrow.json"), res)
}

// bigrowStreaming starts pgsync run, runs stmt on the source, waits for
// the slot to confirm it and ends run with SIGTERM: its peak RSS, MB.
func (b *bench) bigrowStreaming(ctx context.Context, cfg, stmt string) (float64, error) {
	log := filepath.Join(b.logs, "bigrow-run.log")
	p, err := start(b.logs, log, log, pgsyncEnv, b.pgsync, "-c", cfg, "run")
	if err != nil {
		return 0, err
	}
	defer p.stop(60 * time.Second)
	time.Sleep(time.Second)
	if err := runSQL(ctx, sourcePort, "bigrow", stmt); err != nil {
		return 0, err
	}
	if err := waitSlot(ctx, "pgsync_bigrow", 5*time.Minute); err != nil {
		return 0, err
	}
	p.stop(60 * time.Second)
	mb, err := p.peakRSSMB()
	return round2(mb), err
}

// bigrowStreamed commits a transaction of 3,000 small rows and then the
// row on the source with logical_decoding_work_mem at 64 kB, so that the
// server streams it, and applies it with run --until-caught-up: its peak
// RSS and how many of its log lines name a stream.
func (b *bench) bigrowStreamed(ctx context.Context, cfg, row string) (float64, int, error) {
	reset := func() error {
		return runSQL(context.WithoutCancel(ctx), sourcePort, "postgres", "ALTER SYSTEM RESET logical_decoding_work_mem", "SELECT pg_reload_conf()")
	}
	if err := runSQL(ctx, sourcePort, "postgres", "ALTER SYSTEM SET logical_decoding_work_mem = '64kB'", "SELECT pg_reload_conf()"); err != nil {
		return 0, 0, err
	}
	defer reset()
	if err := runSQL(ctx, sourcePort, "bigrow", "BEGIN; INSERT INTO big SELECT g, NULL, repeat('s', 200) FROM generate_series(100, 3100) g; INSERT INTO big VALUES "+row+"; COMMIT"); err != nil {
		return 0, 0, err
	}
	log := filepath.Join(b.logs, "bigrow-streamed.log")
	_, mb, err := pgsyncPeak(ctx, b.pgsync, log, memoryLimit, "-c", cfg, "run", "--until-caught-up")
	if err != nil {
		return 0, 0, err
	}
	if err := reset(); err != nil {
		return 0, 0, err
	}
	text, err := os.ReadFile(log)
	if err != nil {
		return 0, 0, err
	}
	lines := 0
	for _, l := range bytes.Split(text, []byte("\n")) {
		if bytes.Contains(l, []byte("stream")) {
			lines++
		}
	}
	return round2(mb), lines, nil
}

// waitSlot waits at most limit for slot to confirm the source's current
// WAL position.
func waitSlot(ctx context.Context, slot string, limit time.Duration) error {
	var goal string
	if err := query(ctx, sourcePort, "postgres", "SELECT pg_current_wal_lsn()::text", &goal); err != nil {
		return err
	}
	return waitFor(ctx, limit, "slot "+slot+" to confirm "+goal, func() (bool, error) {
		var ok bool
		err := query(ctx, sourcePort, "postgres", "SELECT coalesce(bool_or(confirmed_flush_lsn >= '"+goal+"'::pg_lsn), false) FROM pg_replication_slots WHERE slot_name = '"+slot+"'", &ok)
		return ok, err
	})
}
