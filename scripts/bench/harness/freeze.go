package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func init() { scenarios["freeze"] = freezeMain }

// freezeMain is the first VACUUM (FREEZE) of a freshly moved database
// (issue 18): its seconds and the WAL it writes after three ways of
// loading the same two tables of -rows rows each:
//
//	pgsync  pgsync bootstrap (COPY without FREEZE, keys built after)
//	plain   COPY TO STDOUT piped into COPY FROM STDIN, into a table
//	        emptied in the same transaction, without FREEZE
//	frozen  the same pipe with COPY FROM STDIN (FREEZE)
//
// Each load's seconds too: FREEZE may cost the load what it saves the
// vacuum. A CHECKPOINT comes before each vacuum, as the first autovacuum
// of a moved database usually runs after one. Writes OUT/freeze.json;
// freeze.toml, freeze-bootstrap.log and freeze-teardown.log go to the
// run's log directory.
func freezeMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("freeze", flag.ContinueOnError)
	rows := fs.Int64("rows", 4000000, "rows in each of the two tables (4,000,000: the 1 GB dataset)")
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

	const db = "freeze_source" // FREEZE is a keyword: no database is named so
	say("freeze", "dataset of %d rows a table", *rows)
	if err := freshDB(ctx, db); err != nil {
		return err
	}
	for _, t := range []string{"freeze_plain", "freeze_frozen"} {
		if err := recreateDB(ctx, targetPort, t); err != nil {
			return err
		}
	}
	if err := loadDataset(ctx, db, *rows); err != nil {
		return err
	}
	cfg := filepath.Join(dir, "freeze.toml")
	if err := (jobConfig{job: "freeze", sourceDB: db, targetDB: db}).write(cfg); err != nil {
		return err
	}
	if err := settle(ctx, db); err != nil {
		return err
	}

	res := benchres.Freeze{Command: command("freeze", args), Date: now(), Env: b.env, RowsPerTable: *rows}
	say("freeze", "pgsync bootstrap")
	t0 := time.Now()
	if err := pgsyncStep(ctx, b.pgsync, filepath.Join(dir, "freeze-bootstrap.log"), 2*time.Hour, "-c", cfg, "bootstrap"); err != nil {
		return err
	}
	load := time.Since(t0).Seconds()
	run, err := vacuumFreeze(ctx, db)
	if err != nil {
		return err
	}
	run.Who, run.LoadSeconds = "pgsync", round2(load)
	res.Runs = append(res.Runs, freezeReport(run))
	// The bash script ignored teardown's failure too: the tables are
	// measured, what teardown leaves is dropped by the next run's freshDB.
	if err := pgsyncStep(ctx, b.pgsync, filepath.Join(dir, "freeze-teardown.log"), 10*time.Minute, "-c", cfg, "teardown"); err != nil {
		fmt.Fprintln(os.Stderr, "harness: freeze: ignored:", err)
	}

	for _, who := range []string{"plain", "frozen"} {
		opts := ""
		if who == "frozen" {
			opts = "(FREEZE)"
		}
		if err := runSQL(ctx, targetPort, "postgres", "CHECKPOINT"); err != nil {
			return err
		}
		say("freeze", "COPY pipe, %s", who)
		tgt := "freeze_" + who
		if err := runSQL(ctx, targetPort, tgt, tablesDDL); err != nil {
			return err
		}
		load, err := pipeTables(ctx, pipeSpec{srcPort: sourcePort, srcDB: db, tgtDB: tgt, from: opts, truncate: true}, []string{"bench_a", "bench_b"})
		if err != nil {
			return fmt.Errorf("%s load: %w", who, err)
		}
		run, err := vacuumFreeze(ctx, tgt)
		if err != nil {
			return err
		}
		run.Who, run.LoadSeconds = who, round2(load)
		res.Runs = append(res.Runs, freezeReport(run))
	}
	return writeResult(filepath.Join(resDir, "freeze.json"), res)
}

// freezeReport logs a load's figures and returns it.
func freezeReport(r benchres.FreezeRun) benchres.FreezeRun {
	say("freeze", "%s: load %.2f s; VACUUM (FREEZE) %.2f s, %.0f bytes of WAL", r.Who, r.LoadSeconds, r.VacuumSeconds, r.VacuumWAL)
	return r
}

// vacuumFreeze checkpoints the target, then runs VACUUM (FREEZE) of both
// tables of database db there, and returns its seconds and the WAL bytes
// the target wrote meanwhile.
func vacuumFreeze(ctx context.Context, db string) (benchres.FreezeRun, error) {
	var r benchres.FreezeRun
	conn, err := pgConn(ctx, targetPort, db)
	if err != nil {
		return r, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return r, fmt.Errorf("CHECKPOINT before the vacuum of %s: %w", db, err)
	}
	var l0, l1 string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&l0); err != nil {
		return r, fmt.Errorf("%s: WAL position before the vacuum: %w", db, err)
	}
	t0 := time.Now()
	if _, err := conn.Exec(ctx, "VACUUM (FREEZE) bench_a, bench_b"); err != nil {
		return r, fmt.Errorf("VACUUM (FREEZE) of %s: %w", db, err)
	}
	r.VacuumSeconds = round2(time.Since(t0).Seconds())
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&l1); err != nil {
		return r, fmt.Errorf("%s: WAL position after the vacuum: %w", db, err)
	}
	var wal int64
	if err := conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint", l1, l0).Scan(&wal); err != nil {
		return r, fmt.Errorf("%s: WAL of the vacuum: %w", db, err)
	}
	r.VacuumWAL = float64(wal)
	return r, nil
}
