package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["tables"] = tablesMain }

// tablesDB is the many-tables scenario's database, on both clusters.
const tablesDB = "tables"

// tablesMain times the move of many small tables (an application's
// schema per customer): -tables tables of -rows rows in -schemas schemas,
// every other one with a foreign key to its schema's first, for each round
// trip of -rtts to the source (scripts/bench/cmd/latency-proxy in front of
// it; 0: none). Each of -contenders starts from an empty target: native
// (pg_dump --schema-only into psql, then a subscription until every table
// is ready), pgcopydb (clone) and pgsync, whose commands are each timed:
// check, bootstrap, the catch-up of -txns transactions that each update 3
// tables, status, verify, and cutover --lock-source while run streams.
// Writes OUT/tables.json.
func tablesMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("tables", flag.ContinueOnError)
	var spec tablesSpec
	fs.IntVar(&spec.tables, "tables", 2000, "tables in all")
	fs.IntVar(&spec.schemas, "schemas", 20, "schemas they are spread over")
	fs.IntVar(&spec.rows, "rows", 20, "rows of each table")
	fs.IntVar(&spec.txns, "txns", 2000, "transactions of the catch-up, 3 tables each")
	rttList := fs.String("rtts", "0", "comma-separated round trips to the source, ms")
	contenders := fs.String("contenders", "native,pgcopydb,pgsync", "who moves the tables, in this order")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if spec.schemas < 1 || spec.tables < 2*spec.schemas || spec.rows < 1 || spec.txns < 1 {
		return fmt.Errorf("tables: -schemas at least 1, -tables at least twice -schemas, -rows and -txns at least 1")
	}
	rtts, err := intList("-rtts", *rttList, "round trips", func(v int) bool { return v >= 0 && v <= 1000 })
	if err != nil {
		return err
	}
	spec.contenders = strings.Split(*contenders, ",")
	for _, c := range spec.contenders {
		if !slices.Contains([]string{"native", "pgcopydb", "pgsync"}, c) {
			return fmt.Errorf("tables: unknown contender %q (native, pgcopydb, pgsync)", c)
		}
	}
	b, dir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	if slices.Contains(spec.contenders, "pgcopydb") {
		if err := b.installPgcopydb(ctx); err != nil {
			return err
		}
	}
	// The role's lock is lifted whatever happens (before the clusters
	// stop: defers run last first).
	defer func() {
		_ = runSQL(context.WithoutCancel(ctx), sourcePort, "postgres", "ALTER ROLE "+appRole+" RESET ALL")
	}()
	res := benchres.Tables{Command: command("tables", args), Date: now(), Env: b.env, Tables: spec.tables, Schemas: spec.schemas, Rows: spec.rows}
	for _, rtt := range rtts {
		run, err := b.tablesRun(ctx, spec, rtt)
		if err != nil {
			return fmt.Errorf("tables at %d ms: %w", rtt, err)
		}
		res.Runs = append(res.Runs, run)
	}
	return writeResult(filepath.Join(dir, "tables.json"), res)
}

// tablesSpec is what the many-tables scenario moves, and who moves it.
type tablesSpec struct {
	tables, schemas, rows, txns int
	contenders                  []string
}

// tablesSchema creates the tables on the source, in one statement.
func tablesSchema(tables, schemas, rows int) string {
	return fmt.Sprintf(`DO $$
DECLARE per int := %[1]d / %[2]d;
BEGIN
  FOR s IN 1..%[2]d LOOP
    EXECUTE format('CREATE SCHEMA tenant%%s', s);
    FOR t IN 1..per LOOP
      IF t = 1 THEN
        EXECUTE format('CREATE TABLE tenant%%s.t1 (id int PRIMARY KEY, v int NOT NULL)', s);
      ELSIF t %% 2 = 0 THEN
        EXECUTE format('CREATE TABLE tenant%%s.t%%s (id int PRIMARY KEY, parent int REFERENCES tenant%%s.t1, v int NOT NULL)', s, t, s);
      ELSE
        EXECUTE format('CREATE TABLE tenant%%s.t%%s (id int PRIMARY KEY, parent int, v int NOT NULL)', s, t);
      END IF;
      IF t = 1 THEN
        EXECUTE format('INSERT INTO tenant%%s.t1 SELECT g, g FROM generate_series(1, %[3]d) g', s);
      ELSE
        EXECUTE format('INSERT INTO tenant%%s.t%%s SELECT g, g, g FROM generate_series(1, %[3]d) g', s, t);
      END IF;
    END LOOP;
  END LOOP;
END $$`, tables, schemas, rows)
}

// tablesRun measures every contender once at round trip rtt, on one
// source database made for it; pgsync goes last, as its catch-up writes
// to the source.
func (b *bench) tablesRun(ctx context.Context, spec tablesSpec, rtt int) (benchres.TablesRun, error) {
	run := benchres.TablesRun{RTTms: rtt, CatchupTxns: spec.txns}
	if err := freshDB(ctx, tablesDB); err != nil {
		return run, err
	}
	say("tables", "%d tables of %d rows in %d schemas", spec.tables, spec.rows, spec.schemas)
	if err := runSQL(ctx, sourcePort, tablesDB, tablesSchema(spec.tables, spec.schemas, spec.rows), "VACUUM ANALYZE"); err != nil {
		return run, err
	}
	via := sourcePort
	if rtt > 0 {
		port, stopProxy, err := b.startLatencyProxy(ctx, rtt, filepath.Join(b.logs, fmt.Sprintf("tables-%dms-proxy.log", rtt)))
		if err != nil {
			return run, err
		}
		defer stopProxy()
		via = port
	}
	logPath := func(what string) string { return filepath.Join(b.logs, fmt.Sprintf("tables-%dms-%s", rtt, what)) }
	for _, c := range spec.contenders {
		if err := recreateDB(ctx, targetPort, tablesDB); err != nil {
			return run, err
		}
		say("tables", "%d ms: %s", rtt, c)
		var err error
		switch c {
		case "native":
			err = b.tablesNative(ctx, &run, via, spec.tables, logPath)
		case "pgcopydb":
			var secs float64
			secs, err = pgcopydbClone(ctx, b.logs, via, tablesDB, tablesDB, logPath("pgcopydb.log"))
			run.PgcopydbSeconds = &secs
		case "pgsync":
			err = b.tablesPgsync(ctx, &run, via, spec, logPath)
		}
		if err != nil {
			return run, fmt.Errorf("%s: %w", c, err)
		}
		// A tool that lost rows is timed for less work: the page says so.
		rows, err := tablesRowsOnTarget(ctx)
		if err != nil {
			return run, fmt.Errorf("%s: %w", c, err)
		}
		if rows != int64(spec.tables*spec.rows) {
			say("tables", "%d ms: %s left %d rows of %d on the target", rtt, c, rows, spec.tables*spec.rows)
		}
		switch c {
		case "native":
			run.NativeRows = &rows
		case "pgcopydb":
			run.PgcopydbRows = &rows
		case "pgsync":
			run.PgsyncRows = &rows
		}
	}
	return run, nil
}

// tablesRowsOnTarget counts the rows of every table of the target, in one
// query.
func tablesRowsOnTarget(ctx context.Context) (int64, error) {
	var rows int64
	err := query(ctx, targetPort, tablesDB, `SELECT coalesce(sum((xpath('/row/n/text()',
  query_to_xml(format('SELECT count(*) AS n FROM %I.%I', schemaname, tablename), false, true, '')))[1]::text::bigint), 0)::int8
FROM pg_tables WHERE schemaname LIKE 'tenant%'`, &rows)
	return rows, err
}

// tablesNative is the native way, timed in two steps: the schema, then
// the subscription until every table is ready.
func (b *bench) tablesNative(ctx context.Context, run *benchres.TablesRun, via, tables int, logPath func(string) string) error {
	t0 := time.Now()
	if err := b.dumpSchema(ctx, via, tablesDB, tablesDB, logPath("native-schema.log")); err != nil {
		return err
	}
	schema := round2(time.Since(t0).Seconds())
	if err := runSQL(ctx, sourcePort, tablesDB, "CREATE PUBLICATION tables_native FOR ALL TABLES"); err != nil {
		return err
	}
	defer waiting(fmt.Sprintf("a native subscription's copy of %d tables", tables), time.Hour)()
	sync, _, err := timedNative(ctx, via, tablesDB, tablesDB, "tables_native", tables)
	if err != nil {
		return err
	}
	sync = round2(sync)
	run.NativeSchemaSeconds, run.NativeSyncSeconds = &schema, &sync
	return nil
}

// tablesPgsync times pgsync's commands, one after the other, into the
// empty target.
func (b *bench) tablesPgsync(ctx context.Context, run *benchres.TablesRun, via int, spec tablesSpec, logPath func(string) string) error {
	cfg := logPath("pgsync.toml")
	if err := (jobConfig{job: tablesDB, sourceDB: tablesDB, targetDB: tablesDB, sourcePort: via, tables: []string{"tenant*.*"}}).write(cfg); err != nil {
		return err
	}
	step := func(name string, limit time.Duration, args ...string) (float64, error) {
		say("tables", "%d ms: pgsync %s", run.RTTms, name)
		secs, _, err := pgsyncPeak(ctx, b.pgsync, logPath(name+".log"), limit, append([]string{"-c", cfg}, args...)...)
		return round2(secs), err
	}
	var err error
	if run.CheckSeconds, err = step("check", 30*time.Minute, "check"); err != nil {
		return err
	}
	if run.BootstrapSeconds, err = step("bootstrap", 2*time.Hour, "bootstrap"); err != nil {
		return err
	}
	say("tables", "%d transactions, 3 tables each", spec.txns)
	per := spec.tables / spec.schemas
	var stmts []string
	for i := 0; i < spec.txns; i++ {
		s := i%spec.schemas + 1
		stmts = append(stmts, fmt.Sprintf("UPDATE tenant%[1]d.t1 SET v = v + 1 WHERE id = 1; UPDATE tenant%[1]d.t%[2]d SET v = v + 1 WHERE id = 1; UPDATE tenant%[1]d.t%[3]d SET v = v + 1 WHERE id = 2",
			s, 2+i%(per-1), 2+(i+1)%(per-1)))
	}
	if err := runSQL(ctx, sourcePort, tablesDB, stmts...); err != nil {
		return err
	}
	if run.CatchupSeconds, err = step("catchup", time.Hour, "run", "--until-caught-up"); err != nil {
		return err
	}
	if run.StatusSeconds, err = step("status", 30*time.Minute, "status"); err != nil {
		return err
	}
	run.VerifySeconds, err = step("verify", time.Hour, "verify")
	run.Identical = err == nil
	if err != nil && !reportsDifference(logPath("verify.log")) {
		return err
	}
	return b.tablesCutover(ctx, run, cfg, logPath)
}

// tablesCutover times cutover --lock-source of the application's role
// (which holds no session here) while run streams: its whole time, the
// time to its ready report and the write gap it reports.
func (b *bench) tablesCutover(ctx context.Context, run *benchres.TablesRun, cfg string, logPath func(string) string) error {
	if err := createAppRole(ctx); err != nil {
		return err
	}
	streaming, err := start(b.logs, logPath("run.log"), logPath("run.log"), pgsyncEnv, b.pgsync, "-c", cfg, "run")
	if err != nil {
		return err
	}
	defer streaming.stop(30 * time.Second)
	say("tables", "%d ms: pgsync cutover", run.RTTms)
	t0 := time.Now()
	report := logPath("cutover.json")
	cut, err := start(b.logs, report, logPath("cutover.log"), pgsyncEnv, b.pgsync,
		"-c", cfg, "cutover", "--lock-source", appRole, "--timeout", "300s", "--json")
	if err != nil {
		return err
	}
	defer cut.stop(10 * time.Second)
	if err := cut.wait(ctx, time.Hour); err != nil {
		return fmt.Errorf("pgsync cutover: %w (see %s)", err, logPath("cutover.log"))
	}
	secs := round2(time.Since(t0).Seconds())
	r, err := readCutover(report)
	if err != nil {
		return err
	}
	ready, gap := round2(r.ReadyAt.Sub(t0).Seconds()), round2(r.WriteGapSeconds)
	run.CutoverSeconds, run.CutoverReadySeconds, run.CutoverWriteGapSeconds = &secs, &ready, &gap
	run.Identical = run.Identical && r.Identical
	return runSQL(ctx, sourcePort, "postgres", "ALTER ROLE "+appRole+" RESET ALL")
}
