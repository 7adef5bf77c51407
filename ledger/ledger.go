// Package ledger owns what pgsync records on the target, in the schema
// pgsync: the job's position and state (pgsync.progress), its tables'
// states (pgsync.tables), the schema archive and the post-data objects a
// bootstrap builds (pgsync.schema_archive, pgsync.schema_objects), the last
// comparison (pgsync.verifications), the large objects it copied
// (pgsync.large_objects), for a job made by cutover --reverse the roles
// that cutover locked (pgsync.locked_roles), and online verify's hold
// requests (pgsync.holds). Their DDL (ordered migrations under a version
// recorded in pgsync.schema_version: migrations.go), their typed states
// and the only rules that move between states are here; nothing outside
// this package writes a pgsync table.
package ledger

import (
	"context"
	"fmt"
	"strings"

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

// HasSchema reports whether the target has the pgsync schema: a job was
// bootstrapped there once.
func HasSchema(ctx context.Context, conn Querier) (bool, error) {
	var has bool
	err := conn.QueryRow(ctx, "SELECT to_regnamespace('pgsync') IS NOT NULL").Scan(&has)
	return has, err
}

// hasTable reports whether pgsync.<name> exists. Only the reads that a
// command may make before it writes (status, check, bootstrap's plan) ask
// first: the target may have no ledger yet, or one an earlier release
// left without the tables added since, and a query of a missing table is
// an ERROR in the server's log. Everything read or written after Ensure
// or Upgrade is there.
func hasTable(ctx context.Context, conn Querier, name string) (bool, error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('pgsync.' || $1) IS NOT NULL`, name).Scan(&exists); err != nil {
		return false, fmt.Errorf("look for pgsync.%s on the target: %w", name, err)
	}
	return exists, nil
}

// deleteJobRows deletes job's rows from pgsync.<table>.
func deleteJobRows(ctx context.Context, q Execer, table, job string) error {
	if _, err := q.Exec(ctx, `DELETE FROM pgsync.`+table+` WHERE job = $1`, job); err != nil {
		return fmt.Errorf("delete the records of job %s from pgsync.%s: %w", job, table, err)
	}
	return nil
}

// DeleteJob deletes every record of job, from every table the migrations
// made (its progress, tables, schema archive and objects, last comparison,
// large objects' record, locked roles and hold), in one round trip. The
// ledger is at the latest version (Ensure or Upgrade).
func DeleteJob(ctx context.Context, q Execer, job string) error {
	var b strings.Builder
	for _, m := range migrations {
		for _, t := range m.tables {
			fmt.Fprintf(&b, "DELETE FROM pgsync.%s WHERE job = %s;\n", t, catalog.QuoteLiteral(job))
		}
	}
	if _, err := q.Exec(ctx, b.String()); err != nil {
		return fmt.Errorf("delete the records of job %s from the pgsync schema: %w", job, err)
	}
	return nil
}
