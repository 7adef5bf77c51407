package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["tables"] = tablesMain }

// tablesDB is the many-tables scenario's database, on both clusters.
const tablesDB = "tables"

// tablesMain times pgsync's commands on many small tables (an application's
// schema per customer): -tables tables of -rows rows in -schemas schemas,
// every other one with a foreign key to its schema's first, for each round
// trip of -rtts to the source (scripts/bench/cmd/latency-proxy in front of
// it; 0: none): check, bootstrap into an empty target, the catch-up of
// -txns transactions that each update 3 tables, status and verify. Writes
// OUT/tables.json.
func tablesMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("tables", flag.ContinueOnError)
	tables := fs.Int("tables", 2000, "tables in all")
	schemas := fs.Int("schemas", 20, "schemas they are spread over")
	rows := fs.Int("rows", 20, "rows of each table")
	txns := fs.Int("txns", 2000, "transactions of the catch-up, 3 tables each")
	rttList := fs.String("rtts", "0", "comma-separated round trips to the source, ms")
	out := fs.String("out", "", "the results' directory (default bench-results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *schemas < 1 || *tables < 2**schemas || *rows < 1 || *txns < 1 {
		return fmt.Errorf("tables: -schemas at least 1, -tables at least twice -schemas, -rows and -txns at least 1")
	}
	rtts, err := intList("-rtts", *rttList, "round trips", func(v int) bool { return v >= 0 && v <= 1000 })
	if err != nil {
		return err
	}
	b, dir, stop, err := setupIn(ctx, root, *out)
	if err != nil {
		return err
	}
	defer stop()
	res := benchres.Tables{Command: command("tables", args), Date: now(), Env: b.env, Tables: *tables, Schemas: *schemas, Rows: *rows}
	for _, rtt := range rtts {
		run, err := b.tablesRun(ctx, *tables, *schemas, *rows, *txns, rtt)
		if err != nil {
			return fmt.Errorf("tables at %d ms: %w", rtt, err)
		}
		res.Runs = append(res.Runs, run)
	}
	return writeResult(filepath.Join(dir, "tables.json"), res)
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

// tablesRun measures pgsync's commands once at round trip rtt.
func (b *bench) tablesRun(ctx context.Context, tables, schemas, rows, txns, rtt int) (benchres.TablesRun, error) {
	run := benchres.TablesRun{RTTms: rtt, CatchupTxns: txns}
	for _, port := range []int{sourcePort, targetPort} {
		if err := recreateDB(ctx, port, tablesDB); err != nil {
			return run, err
		}
	}
	say("tables", "%d tables of %d rows in %d schemas", tables, rows, schemas)
	if err := runSQL(ctx, sourcePort, tablesDB, tablesSchema(tables, schemas, rows)); err != nil {
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
	cfg := filepath.Join(b.logs, fmt.Sprintf("tables-%dms.toml", rtt))
	if err := (jobConfig{job: tablesDB, sourceDB: tablesDB, targetDB: tablesDB, sourcePort: via, tables: []string{"tenant*.*"}}).write(cfg); err != nil {
		return run, err
	}
	step := func(name string, limit time.Duration, args ...string) (float64, error) {
		say("tables", "%d ms: pgsync %s", rtt, name)
		secs, _, err := pgsyncPeak(ctx, b.pgsync, filepath.Join(b.logs, fmt.Sprintf("tables-%dms-%s.log", rtt, name)), limit, append([]string{"-c", cfg}, args...)...)
		return round2(secs), err
	}
	var err error
	if run.CheckSeconds, err = step("check", 30*time.Minute, "check"); err != nil {
		return run, err
	}
	if run.BootstrapSeconds, err = step("bootstrap", 2*time.Hour, "bootstrap"); err != nil {
		return run, err
	}
	say("tables", "%d transactions, 3 tables each", txns)
	per := tables / schemas
	var stmts []string
	for i := 0; i < txns; i++ {
		s := i%schemas + 1
		stmts = append(stmts, fmt.Sprintf("UPDATE tenant%[1]d.t1 SET v = v + 1 WHERE id = 1; UPDATE tenant%[1]d.t%[2]d SET v = v + 1 WHERE id = 1; UPDATE tenant%[1]d.t%[3]d SET v = v + 1 WHERE id = 2",
			s, 2+i%(per-1), 2+(i+1)%(per-1)))
	}
	if err := runSQL(ctx, sourcePort, tablesDB, stmts...); err != nil {
		return run, err
	}
	if run.CatchupSeconds, err = step("catchup", time.Hour, "run", "--until-caught-up"); err != nil {
		return run, err
	}
	if run.StatusSeconds, err = step("status", 30*time.Minute, "status"); err != nil {
		return run, err
	}
	run.VerifySeconds, err = step("verify", time.Hour, "verify")
	run.Identical = err == nil
	if err != nil && !reportsDifference(filepath.Join(b.logs, fmt.Sprintf("tables-%dms-verify.log", rtt))) {
		return run, err
	}
	return run, nil
}
