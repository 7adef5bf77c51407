//go:build integration

package integration

import (
	"context"
	"sync"
	"testing"

	"github.com/pgsync/pgsync/ledger"
)

// unversionedLedger is the pgsync schema as the releases before the schema
// version left it, with the DDL text they ran: the schema with
// pgsync.progress and pgsync.tables (ledger.Ensure's progressDDL), and
// the tables made lazily by the commands that used them: the schema
// archive (a bootstrap with pg_dump), the last comparison (verify) and the
// holds (an online verify). pgsync.large_objects and pgsync.locked_roles
// are left out, as on a target whose job had no large object and was never
// reversed.
const unversionedLedger = `
CREATE SCHEMA IF NOT EXISTS pgsync;
CREATE TABLE IF NOT EXISTS pgsync.progress (
    job        text PRIMARY KEY,
    state      text NOT NULL,
    lsn        pg_lsn NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    source_commit_time timestamptz
);
CREATE TABLE IF NOT EXISTS pgsync.tables (
    job        text NOT NULL,
    schema_name text NOT NULL,
    table_name text NOT NULL,
    state      text NOT NULL,
    copied_lsn pg_lsn,
    PRIMARY KEY (job, schema_name, table_name)
);
CREATE TABLE IF NOT EXISTS pgsync.schema_archive (
    job     text PRIMARY KEY,
    archive bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS pgsync.schema_objects (
    job         text NOT NULL,
    seq         int NOT NULL,
    phase       int NOT NULL,
    entry       text NOT NULL,
    kind        text NOT NULL,
    tbl         text NOT NULL,
    name        text NOT NULL,
    primary_key boolean NOT NULL,
    done        boolean NOT NULL DEFAULT false,
    PRIMARY KEY (job, seq)
);
CREATE TABLE IF NOT EXISTS pgsync.verifications (
    job       text PRIMARY KEY,
    at        timestamptz NOT NULL,
    kind      text NOT NULL,
    lsn       pg_lsn NOT NULL,
    identical boolean NOT NULL,
    found     text NOT NULL
);
CREATE TABLE IF NOT EXISTS pgsync.holds (
    job          text PRIMARY KEY,
    at           pg_lsn NOT NULL,
    held         boolean NOT NULL DEFAULT false,
    requested_at timestamptz NOT NULL DEFAULT now()
)`

// olderLedger is the pgsync schema of a release before pgsync.tables and
// the source commit time: pgsync.progress alone, without that column.
const olderLedger = `
CREATE SCHEMA IF NOT EXISTS pgsync;
CREATE TABLE IF NOT EXISTS pgsync.progress (
    job        text PRIMARY KEY,
    state      text NOT NULL,
    lsn        pg_lsn NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
)`

// ledgerTables are every table of the pgsync schema at the latest version.
const ledgerTables = `{schema_version,progress,tables,schema_archive,schema_objects,verifications,large_objects,locked_roles,holds,ddl_skips}`

// TestLedgerUpgradeFromUnversioned: a target whose pgsync schema a
// release before the schema version left (fixtures of its DDL, with the
// job's progress and another job's rows in it) is read by status as it is,
// without a change, and upgraded by the first run: afterwards the schema
// is at the latest version, every table exists, the rows are as they were
// and the job streams on from its recorded position.
func TestLedgerUpgradeFromUnversioned(t *testing.T) {
	for _, tc := range []struct {
		name, ddl string
		// rows are the other job's rows, in tables the fixture has.
		rows string
	}{
		{"today", unversionedLedger, `INSERT INTO pgsync.tables VALUES ('other', 'public', 'x', 'ready', '0/10');
INSERT INTO pgsync.verifications VALUES ('other', '2024-01-02 03:04:05+00', 'verify', '0/20', true, '');
INSERT INTO pgsync.schema_archive VALUES ('other', '\x01');`},
		{"before tables", olderLedger, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, `CREATE TABLE acct (id int PRIMARY KEY, v int);
INSERT INTO acct SELECT g, g FROM generate_series(1, 100) g;`, builtinCreator)
			e.mustPgsync("bootstrap")
			state := queryOne[string](t, e.tgt, "SELECT state FROM pgsync.progress WHERE job = $1", e.job)
			lsn := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job)
			// The ledger as the earlier release left it, with the job's
			// progress and the other job's rows.
			e.tgtExec("DROP SCHEMA pgsync CASCADE")
			e.tgtExec(tc.ddl)
			e.tgtExec("INSERT INTO pgsync.progress (job, state, lsn) VALUES ($1, $2, $3::pg_lsn), ('other', 'ready', '0/30')", e.job, state, lsn)
			if tc.rows != "" {
				e.tgtExec(tc.rows)
			}
			before := e.otherRows()

			e.mustPgsync("status")
			if queryOne[bool](t, e.tgt, "SELECT to_regclass('pgsync.schema_version') IS NOT NULL") {
				t.Fatal("status migrated the ledger: a command that only reads must change nothing")
			}
			e.srcExec("INSERT INTO acct SELECT g, g FROM generate_series(101, 150) g; UPDATE acct SET v = 0 WHERE id <= 10")
			e.catchUp()

			if v := queryOne[[]int32](t, e.tgt, "SELECT array_agg(version) FROM pgsync.schema_version"); len(v) != 1 || int(v[0]) != ledger.LatestVersion() {
				t.Errorf("pgsync.schema_version after run: %v, want one row at %d", v, ledger.LatestVersion())
			}
			if missing := queryOne[[]string](t, e.tgt, `SELECT coalesce(array_agg(t), '{}') FROM unnest($1::text[]) t
WHERE to_regclass('pgsync.' || t) IS NULL`, ledgerTables); len(missing) > 0 {
				t.Errorf("after run the pgsync schema lacks %v", missing)
			}
			if !queryOne[bool](t, e.tgt, `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = 'pgsync.progress'::regclass AND attname = 'source_commit_time' AND NOT attisdropped)`) {
				t.Error("pgsync.progress has no source_commit_time after run")
			}
			if after := e.otherRows(); after != before {
				t.Errorf("the other job's rows changed:\nbefore %s\nafter  %s", before, after)
			}
			if st := queryOne[string](t, e.tgt, "SELECT state FROM pgsync.progress WHERE job = $1", e.job); st != state {
				t.Errorf("job state after run: %s, want %s", st, state)
			}
			if !queryOne[bool](t, e.tgt, "SELECT lsn > $2::pg_lsn FROM pgsync.progress WHERE job = $1", e.job, lsn) {
				t.Errorf("the job's position did not move on from %s", lsn)
			}
			e.mustVerify()
			e.mustPgsync("teardown")
			if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM pgsync.progress WHERE job = $1", e.job); n != 0 {
				t.Errorf("teardown left %d progress rows of the job", n)
			}
		})
	}
}

// otherRows returns, as text, every row of the job 'other' in the pgsync
// tables, by table (those without one left out).
func (e *env) otherRows() string {
	e.t.Helper()
	return queryOne[string](e.t, e.tgt, `SELECT coalesce(string_agg(relname || ': ' || rows, ' | ' ORDER BY relname), '')
FROM (SELECT c.relname, query_to_xml(format('SELECT * FROM pgsync.%I WHERE job = %L', c.relname, 'other'), false, true, '')::text AS rows
  FROM pg_class c WHERE c.relnamespace = 'pgsync'::regnamespace AND c.relkind = 'r'
  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'job')) t
WHERE rows <> ''`)
}

// TestLedgerEnsureConcurrent: pgsync processes that make the ledger of a
// fresh target at the same moment (a run and a verify started together)
// do not collide: each succeeds and one version row is recorded.
func TestLedgerEnsureConcurrent(t *testing.T) {
	e := newEnv(t, "", "")
	const n = 4
	errs := make(chan error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		conn := mustConnect(t, e.tgtURL)
		defer conn.Close(context.Background())
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs <- ledger.Ensure(context.Background(), conn)
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Ensure beside %d others: %v", n-1, err)
		}
	}
	if v := queryOne[[]int32](t, e.tgt, "SELECT array_agg(version) FROM pgsync.schema_version"); len(v) != 1 || int(v[0]) != ledger.LatestVersion() {
		t.Errorf("pgsync.schema_version: %v, want one row at %d", v, ledger.LatestVersion())
	}
}
