// Package ledger owns what pgsync records on the target, in the schema
// pgsync: the job's position and state (pgsync.progress), its tables'
// states (pgsync.tables), the schema archive and the post-data objects a
// bootstrap builds (pgsync.schema_archive, pgsync.schema_objects), the last
// comparison (pgsync.verifications), the large objects it copied
// (pgsync.large_objects) and, for a job made by cutover --reverse, the
// roles that cutover locked (pgsync.locked_roles). Their DDL, their upgrades, their typed states
// and the only rules that move between states are here; nothing outside
// this package writes a pgsync table.
package ledger

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/catalog"
)

// Execer runs a statement: a connection or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Querier runs statements and queries: a connection or a transaction.
type Querier interface {
	Execer
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// progressDDL creates the schema and the tables every job has.
const progressDDL = `
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
)`

// Ensure creates the pgsync schema with pgsync.progress and pgsync.tables
// on the target if missing, and upgrades what an earlier release made.
func Ensure(ctx context.Context, conn Querier) error {
	if _, err := conn.Exec(ctx, progressDDL); err != nil {
		return fmt.Errorf("create pgsync.progress on target: %w", err)
	}
	return addProgressColumns(ctx, conn)
}

// addProgressColumns adds to a pgsync.progress made by an earlier release
// the columns this one writes.
func addProgressColumns(ctx context.Context, conn Querier) error {
	var has bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = 'pgsync.progress'::regclass AND attname = 'source_commit_time' AND NOT attisdropped)`).Scan(&has); err != nil {
		return fmt.Errorf("read the columns of pgsync.progress: %w", err)
	}
	if has {
		return nil
	}
	if _, err := conn.Exec(ctx, `ALTER TABLE pgsync.progress ADD COLUMN IF NOT EXISTS source_commit_time timestamptz`); err != nil {
		return fmt.Errorf("add column source_commit_time to pgsync.progress: %w", err)
	}
	return nil
}

// HasSchema reports whether the target has the pgsync schema: a job was
// bootstrapped there once.
func HasSchema(ctx context.Context, conn Querier) (bool, error) {
	var has bool
	err := conn.QueryRow(ctx, "SELECT to_regnamespace('pgsync') IS NOT NULL").Scan(&has)
	return has, err
}

// hasTable reports whether pgsync.<name> exists: a target bootstrapped by
// an earlier release may lack the tables added since.
func hasTable(ctx context.Context, conn Querier, name string) (bool, error) {
	var exists bool
	err := conn.QueryRow(ctx, `SELECT to_regclass('pgsync.' || $1) IS NOT NULL`, name).Scan(&exists)
	return exists, err
}

// deleteJobRows deletes job's rows from pgsync.<table>, where it exists,
// in one statement (so that it runs as one in a pipeline or transaction).
func deleteJobRows(ctx context.Context, q Execer, table, job string) error {
	_, err := q.Exec(ctx, `DO $$ BEGIN IF to_regclass('pgsync.`+table+`') IS NOT NULL THEN
  DELETE FROM pgsync.`+table+` WHERE job = `+catalog.QuoteLiteral(job)+`; END IF; END $$`)
	if err != nil {
		return fmt.Errorf("delete the records of job %s from pgsync.%s: %w", job, table, err)
	}
	return nil
}

// DeleteJob deletes every record of job: its progress, its tables, its
// schema archive and objects, its last comparison and its large objects'
// record. A missing table or row is fine.
func DeleteJob(ctx context.Context, q Execer, job string) error {
	for _, t := range []string{"progress", "tables", "schema_archive", "schema_objects", "verifications", "large_objects", "locked_roles", "holds", "cutovers"} {
		if err := deleteJobRows(ctx, q, t, job); err != nil {
			return err
		}
	}
	return nil
}
