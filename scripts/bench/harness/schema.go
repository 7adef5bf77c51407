package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["schema"] = schemaMain }

// schemaMain is a whole database into an empty target, three ways side by
// side, on the one-table dataset (-rows rows) and the two-table one (the
// same rows over two tables), each table with its primary key and two
// secondary indexes:
//
//	(a) pg_dump --schema-only restored first, then pgsync bootstrap
//	    (every row goes into tables that already have their indexes);
//	(b) pgsync bootstrap into the empty database: pg_dump's pre-data
//	    section before the copy, its post-data section after it;
//	(c) pgcopydb clone --table-jobs 2 --index-jobs 2
//	    --split-tables-larger-than 64MB (Debian's, installed when missing).
//
// Writes OUT/schema.json; schema-DS-a.log, schema-DS-b.log (the
// bootstraps' logs), schema-DS-c.log (pgcopydb's) and the verify reports
// and teardown logs of (a) and (b) go to the run's log directory.
func schemaMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("schema", flag.ContinueOnError)
	rows := fs.Int64("rows", 8000000, "rows of each dataset, over all its tables")
	datasetList := fs.String("datasets", "1,2", "comma-separated datasets: 1 (one table) and 2 (two tables)")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	datasets, err := parseDatasets(*datasetList)
	if err != nil {
		return err
	}
	b, resDir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	dir := b.logs // the run's logs; its result goes to resDir
	if err := b.installPgcopydb(ctx); err != nil {
		return err
	}
	version, err := pgcopydbVersion(ctx)
	if err != nil {
		return err
	}
	// The configurations and pgcopydb's --dir: nothing worth keeping.
	work, err := os.MkdirTemp("", "harness-schema-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	// Checkpoints forced by WAL volume would land in one way's run and not
	// another's: both clusters get room for the whole copy. The reset is
	// registered first, so that it runs even when the setting fails
	// half-way, and on a context of its own that an interrupt does not
	// cancel; it runs before the clusters stop (defers run last first).
	defer func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := setWALSize(c, "ALTER SYSTEM RESET max_wal_size"); err != nil {
			fmt.Fprintln(os.Stderr, "harness: schema: resetting max_wal_size:", err)
		}
	}()
	if err := setWALSize(ctx, "ALTER SYSTEM SET max_wal_size = '8GB'"); err != nil {
		return err
	}

	res := benchres.Schema{Command: command("schema", args), Date: now(), Env: b.env, Pgcopydb: version}
	for _, ds := range datasets {
		r, err := b.schemaDataset(ctx, dir, work, ds, *rows)
		if err != nil {
			return fmt.Errorf("dataset %d: %w", ds, err)
		}
		res.Datasets = append(res.Datasets, r)
	}
	return writeResult(filepath.Join(resDir, "schema.json"), res)
}

// parseDatasets reads -datasets: 1 and 2, comma-separated.
func parseDatasets(s string) ([]int, error) {
	return intList("schema: -datasets", s, "1 or 2", func(n int) bool { return n == 1 || n == 2 })
}

// schemaDataset builds the source database schemasrc of ds tables (rows
// in all) and moves it the three ways, each into a target database of
// its own, dropped after.
func (b *bench) schemaDataset(ctx context.Context, dir, work string, ds int, rows int64) (benchres.SchemaDataset, error) {
	r := benchres.SchemaDataset{Tables: ds, Rows: rows}
	names := []string{"bench_a", "bench_b"}[:ds]
	const src = "schemasrc"
	say("schema", "%d rows in %d table(s)", rows, ds)
	if err := freshDB(ctx, src); err != nil {
		return r, err
	}
	for _, t := range names {
		if err := runSQL(ctx, sourcePort, src, benchTableDDL(t), fillRows(t, rows/int64(ds)),
			"CREATE INDEX "+t+"_customer ON "+t+" (customer)", "CREATE INDEX "+t+"_created ON "+t+" (created)",
			"VACUUM ANALYZE "+t); err != nil {
			return r, fmt.Errorf("filling %s: %w", t, err)
		}
	}
	side := func(way, suffix string) string {
		return filepath.Join(dir, fmt.Sprintf("schema-%d-%s%s", ds, way, suffix))
	}

	// (a) the schema first, then bootstrap.
	say("schema", "(a) pg_dump --schema-only restored, then bootstrap")
	restore := func(ctx context.Context) error {
		pipe := fmt.Sprintf("%s/pg_dump --schema-only -d '%s' | %s/psql -X -q -v ON_ERROR_STOP=1 -U postgres -h 127.0.0.1 -p %d -d schema_a >/dev/null",
			b.bindir, url(sourcePort, src), b.bindir, targetPort)
		if err := b.run(ctx, 30*time.Minute, nil, "bash", "-o", "pipefail", "-c", pipe); err != nil {
			return fmt.Errorf("pg_dump --schema-only into schema_a: %w", err)
		}
		return nil
	}
	var err error
	if r.SchemaThenBoot, r.SchemaThenBootSame, err = b.schemaBootstrap(ctx, work, src, "a", side, restore); err != nil {
		return r, err
	}
	say("schema", "(a) %.2f s, identical %v", r.SchemaThenBoot, r.SchemaThenBootSame)

	// (b) bootstrap with pg_dump's sections.
	say("schema", "(b) bootstrap with pg_dump's sections")
	if r.BootSections, r.BootSectionsSame, err = b.schemaBootstrap(ctx, work, src, "b", side, nil); err != nil {
		return r, err
	}
	say("schema", "(b) %.2f s, identical %v", r.BootSections, r.BootSectionsSame)

	// (c) pgcopydb clone.
	say("schema", "(c) pgcopydb clone")
	if r.Pgcopydb, r.PgcopydbRows, err = schemaPgcopydb(ctx, work, src, names, side("c", ".log")); err != nil {
		return r, err
	}
	say("schema", "(c) %.2f s, %d rows", r.Pgcopydb, r.PgcopydbRows)
	// A clone that lost rows would be timed for less work than the others.
	if want := rows / int64(ds) * int64(ds); r.PgcopydbRows != want {
		return r, fmt.Errorf("pgcopydb clone left %d rows on the target, not %d (see %s)", r.PgcopydbRows, want, side("c", ".log"))
	}
	return r, nil
}

// schemaBootstrap is way a or b: pgsync bootstrap of src into the empty
// target database schema_WAY, after first (when not nil; timed with it),
// then verified, torn down and dropped. It returns the seconds and
// whether verify found the tables identical. side names the side files.
func (b *bench) schemaBootstrap(ctx context.Context, work, src, way string, side func(way, suffix string) string,
	first func(context.Context) error) (float64, bool, error) {
	tgt := "schema_" + way
	if err := recreateDB(ctx, targetPort, tgt); err != nil {
		return 0, false, err
	}
	cfg := filepath.Join(work, way+".toml")
	if err := (jobConfig{job: "schema" + way, sourceDB: src, targetDB: tgt}).write(cfg); err != nil {
		return 0, false, err
	}
	if err := checkpoint(ctx); err != nil {
		return 0, false, err
	}
	log := side(way, ".log")
	t0 := time.Now()
	if first != nil {
		if err := first(ctx); err != nil {
			return 0, false, err
		}
	}
	if err := pgsyncStep(ctx, b.pgsync, log, 2*time.Hour, "-c", cfg, "bootstrap"); err != nil {
		return 0, false, err
	}
	secs := round2(time.Since(t0).Seconds())
	if first == nil {
		// Without a schema on the target, bootstrap must have taken
		// pg_dump's: otherwise (b) measures something else.
		text, err := os.ReadFile(log)
		if err != nil {
			return 0, false, err
		}
		if !strings.Contains(string(text), "schema restored from pg_dump") {
			return 0, false, fmt.Errorf("(%s) did not take pg_dump's schema: no 'schema restored from pg_dump' in %s", way, log)
		}
	}
	same, err := verify(ctx, b.pgsync, cfg, side(way, "-verify.txt"))
	if err != nil {
		return 0, false, err
	}
	if err := pgsyncStep(ctx, b.pgsync, side(way, "-teardown.log"), 10*time.Minute, "-c", cfg, "teardown"); err != nil {
		return 0, false, err
	}
	return secs, same, dropDB(ctx, targetPort, tgt)
}

// schemaPgcopydb is way c: pgcopydb clone of src into the empty target
// database schema_c, its output in log and its --dir under work. It
// returns the seconds and the rows of tables on the target, then drops
// the database.
func schemaPgcopydb(ctx context.Context, work, src string, tables []string, log string) (float64, int64, error) {
	const tgt = "schema_c"
	if err := recreateDB(ctx, targetPort, tgt); err != nil {
		return 0, 0, err
	}
	secs, err := pgcopydbClone(ctx, work, sourcePort, src, tgt, log, "--split-tables-larger-than", "64MB")
	if err != nil {
		return 0, 0, err
	}
	counts := make([]string, len(tables))
	for i, t := range tables {
		counts[i] = "SELECT count(*) AS n FROM " + t
	}
	var n int64
	if err := query(ctx, targetPort, tgt, "SELECT sum(n)::bigint FROM ("+strings.Join(counts, " UNION ALL ")+") x", &n); err != nil {
		return 0, 0, err
	}
	return secs, n, dropDB(ctx, targetPort, tgt)
}

// pgcopydbClone times pgcopydb clone (2 table jobs, 2 index jobs, and
// extra options) of src, reached on srcPort, into the empty target
// database tgt, after a checkpoint; its output goes to log, its --dir
// under work.
func pgcopydbClone(ctx context.Context, work string, srcPort int, src, tgt, log string, extra ...string) (float64, error) {
	pgdir := filepath.Join(work, "pgcopydb")
	if err := os.RemoveAll(pgdir); err != nil {
		return 0, err
	}
	if err := checkpoint(ctx); err != nil {
		return 0, err
	}
	t0 := time.Now()
	args := append([]string{"clone", "--source", url(srcPort, src), "--target", url(targetPort, tgt),
		"--table-jobs", "2", "--index-jobs", "2", "--dir", pgdir}, extra...)
	p, err := start(work, log, log, nil, "pgcopydb", args...)
	if err != nil {
		return 0, err
	}
	defer p.stop(30 * time.Second)
	if err := p.wait(ctx, 2*time.Hour); err != nil {
		return 0, fmt.Errorf("pgcopydb clone: %w (see %s)", err, log)
	}
	return round2(time.Since(t0).Seconds()), nil
}
