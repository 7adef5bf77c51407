package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["verify"] = verifyMain }

// plantedDifferences is how many rows verifyMain changes on the target
// behind pgsync's back: two removed, two added, six with other values.
const plantedDifferences = 10

// verifyMain is verify --rows beside verify and beside the copy of the
// same table: one table of -rows rows of about 70 bytes,
// bootstrapped (the copy's time from bootstrap's log), then
// plantedDifferences rows changed on the target; pgsync verify and pgsync
// verify --rows are timed with their peak RSS. Goal: verify --rows no
// longer than the copy, in at most 50 MB. Writes OUT/verify-rows.json;
// verify-rows.toml, verify-rows-bootstrap.log, verify-rows-verify.out and
// verify-rows-rows.out go to the run's log directory.
func verifyMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	rows := fs.Int64("rows", 10000000, "rows of the table")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	dir := b.logs // the run's logs; its result goes to resDir

	const db = "vrows"
	if err := freshDB(ctx, db); err != nil {
		return err
	}
	say("verify", "loading %d rows", *rows)
	if err := runSQL(ctx, sourcePort, db,
		"CREATE TABLE items (id bigint PRIMARY KEY, customer text NOT NULL, qty int NOT NULL, price numeric(12,2), created timestamptz NOT NULL, note text)",
		fmt.Sprintf(`INSERT INTO items SELECT g, 'customer ' || (g %% 100000), (g %% 97)::int, (g %% 10000) / 100.0, '2026-01-01'::timestamptz + g * interval '1 second', md5(g::text)
FROM generate_series(1, %d) g`, *rows),
		"VACUUM ANALYZE items"); err != nil {
		return err
	}
	res := benchres.VerifyRows{Command: command("verify", args), Date: now(), Env: b.env, Rows: *rows, Planted: plantedDifferences}
	if err := query(ctx, sourcePort, db, "SELECT round(pg_table_size('items') / 1048576.0)::float8", &res.TableMB); err != nil {
		return err
	}
	cfg := filepath.Join(dir, "verify-rows.toml")
	if err := (jobConfig{job: db, sourceDB: db, targetDB: db}).write(cfg); err != nil {
		return err
	}
	say("verify", "pgsync bootstrap")
	bootLog := filepath.Join(dir, "verify-rows-bootstrap.log")
	t0 := time.Now()
	if err := pgsyncStep(ctx, b.pgsync, bootLog, 2*time.Hour, "-c", cfg, "bootstrap"); err != nil {
		return err
	}
	res.BootstrapSeconds = round2(time.Since(t0).Seconds())
	if res.CopySeconds, err = tableCopySeconds(bootLog, "public.items"); err != nil {
		return err
	}

	say("verify", "planting %d differences on the target", plantedDifferences)
	if err := runSQL(ctx, targetPort, db,
		"DELETE FROM items WHERE id IN (17, 1000003)",
		fmt.Sprintf("INSERT INTO items VALUES (%d + 1, 'extra', 1, 1, now(), 'x'), (%d + 2, 'extra', 2, 2, now(), 'y')", *rows, *rows),
		"UPDATE items SET qty = qty + 1 WHERE id IN (42, 4242, 424242)",
		"UPDATE items SET note = 'changed' WHERE id IN (7, 77, 777)",
		"VACUUM ANALYZE items", "CHECKPOINT"); err != nil {
		return err
	}
	if err := runSQL(ctx, sourcePort, db, "CHECKPOINT"); err != nil {
		return err
	}

	say("verify", "pgsync verify")
	var peak int64
	res.VerifySeconds, peak, err = verifyPeak(ctx, b.pgsync, filepath.Join(dir, "verify-rows-verify.out"), "-c", cfg, "verify")
	if err != nil {
		return err
	}
	res.VerifyRSSPeakMB = round2(float64(peak) / 1024)
	say("verify", "verify: %.2f s, peak RSS %.1f MB", res.VerifySeconds, res.VerifyRSSPeakMB)

	say("verify", "pgsync verify --rows")
	rowsOut := filepath.Join(dir, "verify-rows-rows.out")
	res.RowsSeconds, peak, err = verifyPeak(ctx, b.pgsync, rowsOut, "-c", cfg, "verify", "--rows")
	if err != nil {
		return err
	}
	res.RowsRSSPeakMB = round2(float64(peak) / 1024)
	if res.Named, err = namedDifferences(rowsOut); err != nil {
		return err
	}
	say("verify", "verify --rows: %.2f s, peak RSS %.1f MB, %d of %d differences named",
		res.RowsSeconds, res.RowsRSSPeakMB, res.Named, res.Planted)
	return writeResult(filepath.Join(resDir, "verify-rows.json"), res)
}

// tableCopySeconds is the seconds= of the "table copied" line of table in
// a pgsync bootstrap log.
func tableCopySeconds(log, table string) (float64, error) {
	lines, err := allLogFields(log, "table copied")
	if err != nil {
		return 0, err
	}
	for _, kv := range lines {
		if kv["table"] != table {
			continue
		}
		s, err := strconv.ParseFloat(kv["seconds"], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: the %q line of %s: seconds=%q: %w", log, "table copied", table, kv["seconds"], err)
		}
		return s, nil
	}
	return 0, fmt.Errorf("%s has no %q line of %s", log, "table copied", table)
}

// verifyPeak runs pgsync (verify) with args to its end, its output in
// outPath, and returns its seconds and its peak resident memory in kB,
// from the kernel's rusage of the ended process: exact, where sampling
// would miss a short peak. verify exits 1 when it found differences, which
// the planted rows make the expected end here; any other failure is an
// error.
func verifyPeak(ctx context.Context, pgsync, outPath string, args ...string) (float64, int64, error) {
	t0 := time.Now()
	p, err := start(filepath.Dir(outPath), outPath, outPath, pgsyncEnv, pgsync, args...)
	if err != nil {
		return 0, 0, err
	}
	defer p.stop(10 * time.Second)
	werr := p.wait(ctx, 2*time.Hour)
	secs := round2(time.Since(t0).Seconds())
	if !p.exited() {
		return 0, 0, fmt.Errorf("pgsync %s: %w (see %s)", strings.Join(args, " "), werr, outPath)
	}
	switch code := p.cmd.ProcessState.ExitCode(); {
	case code == 1 && !reportsDifference(outPath):
		// pgsync exits 1 on a failure too: without a difference in its
		// report the run measured nothing.
		return 0, 0, fmt.Errorf("pgsync %s failed: %w (see %s)", strings.Join(args, " "), werr, outPath)
	case code == 1:
	case code == 0:
		// Not an error, as the bash script had it: the figures stand, and
		// differences_named tells the reader.
		say("verify", "pgsync %s found no difference, though %d were planted (see %s)", strings.Join(args, " "), plantedDifferences, outPath)
	default:
		return 0, 0, fmt.Errorf("pgsync %s: %w (see %s)", strings.Join(args, " "), werr, outPath)
	}
	peak, err := p.peakRSSMB()
	return secs, int64(peak * 1024), err
}

// namedDifferences counts the lines of a verify --rows report that name a
// row: missing on one side or with other values.
func namedDifferences(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if line := s.Text(); strings.Contains(line, ": only on the") || strings.Contains(line, ": values differ") {
			n++
		}
	}
	return n, s.Err()
}
