// Package apply writes to the target: it creates the job's tables, applies
// decoded source transactions through one pipelined connection, and owns the
// durable resume position in pgsync.progress.
package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Progress states.
const (
	// StateCopying marks a bootstrap that has not finished its copy: a rerun
	// of bootstrap starts it over.
	StateCopying = "copying"
	// StateReady marks a bootstrapped job: pgsync run streams from LSN.
	StateReady = "ready"
)

// Progress is the job's row of pgsync.progress.
type Progress struct {
	Job   string
	State string
	LSN   pglogrepl.LSN
	// SourceCommitTime is the source commit time of the last transaction
	// applied (nil before the first), for lag in seconds.
	SourceCommitTime *time.Time
}

// ErrNoProgress is returned by ReadProgress when the job has no row.
var ErrNoProgress = errors.New("no progress row")

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

// EnsureProgressTable creates pgsync.progress on the target if missing.
func EnsureProgressTable(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, progressDDL); err != nil {
		return fmt.Errorf("create pgsync.progress on target: %w", err)
	}
	return addProgressColumns(ctx, conn)
}

// addProgressColumns adds to a pgsync.progress made by an earlier release
// the columns this one writes.
func addProgressColumns(ctx context.Context, conn *pgx.Conn) error {
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

// ReadProgress returns the job's progress row, or ErrNoProgress.
func ReadProgress(ctx context.Context, conn *pgx.Conn, job string) (Progress, error) {
	p := Progress{Job: job}
	// Through to_jsonb, so that a table an earlier release made, without
	// source_commit_time, reads too (status does not alter it).
	err := conn.QueryRow(ctx, `SELECT state, lsn, (to_jsonb(p) ->> 'source_commit_time')::timestamptz
FROM pgsync.progress p WHERE job = $1`, job).Scan(&p.State, &p.LSN, &p.SourceCommitTime)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, ErrNoProgress
	}
	if err != nil {
		if exists, qerr := progressTableExists(ctx, conn); qerr == nil && !exists {
			return p, ErrNoProgress
		}
		return p, fmt.Errorf("read pgsync.progress for job %s: %w", job, err)
	}
	return p, nil
}

// WriteProgress inserts or replaces the job's progress row.
func WriteProgress(ctx context.Context, conn *pgx.Conn, p Progress) error {
	_, err := conn.Exec(ctx, `
INSERT INTO pgsync.progress (job, state, lsn) VALUES ($1, $2, $3::pg_lsn)
ON CONFLICT (job) DO UPDATE SET state = excluded.state, lsn = excluded.lsn, updated_at = now()`,
		p.Job, p.State, p.LSN.String())
	if err != nil {
		return fmt.Errorf("write pgsync.progress for job %s at %s: %w", p.Job, p.LSN, err)
	}
	return nil
}

// DeleteProgress removes the job's row and its added tables' rows; a
// missing table or row is fine.
func DeleteProgress(ctx context.Context, conn *pgx.Conn, job string) error {
	exists, err := progressTableExists(ctx, conn)
	if err == nil && exists {
		_, err = conn.Exec(ctx, `DELETE FROM pgsync.progress WHERE job = $1`, job)
	}
	if err == nil {
		err = conn.QueryRow(ctx, `SELECT to_regclass('pgsync.tables') IS NOT NULL`).Scan(&exists)
	}
	if err == nil && exists {
		_, err = conn.Exec(ctx, `DELETE FROM pgsync.tables WHERE job = $1`, job)
	}
	if err != nil {
		return fmt.Errorf("delete progress of job %s: %w", job, err)
	}
	return nil
}

func progressTableExists(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var exists bool
	err := conn.QueryRow(ctx, `SELECT to_regclass('pgsync.progress') IS NOT NULL`).Scan(&exists)
	return exists, err
}

// Table states in pgsync.tables: a table of the job's bootstrap or one
// added by add-tables. The transitions are job.NextTableState's.
const (
	// TablePending marks a table whose checks passed and whose copy has not
	// started: run pauses at its first change; its target table holds
	// nothing pgsync copied.
	TablePending = "pending"
	// TableCopying marks a table pgsync is copying (or was, when it was
	// interrupted): run pauses at its first change, and a rerun may empty
	// it without --force, since every row in it is pgsync's.
	TableCopying = "copying"
	// TableReady marks a table copied at CopiedLSN: run applies its
	// changes from transactions committed at or after it.
	TableReady = "ready"
	// TableRemoved marks a table whose add was abandoned (job.tables no
	// longer names it): run applies none of its changes.
	TableRemoved = "removed"
)

// Waits says whether run must pause at a change of a table in state s: its
// copy is not on the target yet.
func Waits(state string) bool { return state == TablePending || state == TableCopying }

// AddedTable is a table added to a running job (pgsync add-tables), in
// pgsync.tables.
type AddedTable struct {
	Schema, Name string
	State        string
	// CopiedLSN is the consistent point of the snapshot the table was
	// copied under: the target has every transaction committed before it.
	CopiedLSN pglogrepl.LSN
}

// ReadAddedTables returns the job's added tables by "schema.name"; none
// when pgsync.tables does not exist (a job bootstrapped by an earlier
// release).
func ReadAddedTables(ctx context.Context, conn *pgx.Conn, job string) (map[string]AddedTable, error) {
	out := make(map[string]AddedTable)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('pgsync.tables') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return out, err
	}
	rows, err := conn.Query(ctx, `SELECT schema_name, table_name, state, coalesce(copied_lsn, '0/0') FROM pgsync.tables WHERE job = $1`, job)
	if err != nil {
		return nil, fmt.Errorf("read pgsync.tables for job %s: %w", job, err)
	}
	defer rows.Close()
	for rows.Next() {
		var t AddedTable
		if err := rows.Scan(&t.Schema, &t.Name, &t.State, &t.CopiedLSN); err != nil {
			return nil, fmt.Errorf("read pgsync.tables for job %s: %w", job, err)
		}
		out[t.Schema+"."+t.Name] = t
	}
	return out, rows.Err()
}

// readAddedTable returns the pgsync.tables row of one table of the job,
// the zero AddedTable when it has none (a table of the job's bootstrap).
// pgsync.tables must exist (ResumeLSN makes sure of it): an error would
// abort the target transaction the caller may have open.
func readAddedTable(ctx context.Context, conn *pgx.Conn, job, schema, name string) (AddedTable, error) {
	t := AddedTable{Schema: schema, Name: name}
	err := conn.QueryRow(ctx, `SELECT state, coalesce(copied_lsn, '0/0') FROM pgsync.tables WHERE job = $1 AND schema_name = $2 AND table_name = $3`,
		job, schema, name).Scan(&t.State, &t.CopiedLSN)
	if errors.Is(err, pgx.ErrNoRows) {
		return AddedTable{}, nil
	}
	if err != nil {
		return t, fmt.Errorf("read pgsync.tables for %s.%s: %w", schema, name, err)
	}
	return t, nil
}

// MarkTables records tables of job in state, in one transaction, with
// their copy position (0 for none).
func MarkTables(ctx context.Context, conn *pgx.Conn, job string, tables [][2]string, state string, copied pglogrepl.LSN) error {
	var lsn any
	if copied != 0 {
		lsn = copied
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, t := range tables {
			if _, err := tx.Exec(ctx, `INSERT INTO pgsync.tables (job, schema_name, table_name, state, copied_lsn) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (job, schema_name, table_name) DO UPDATE SET state = excluded.state, copied_lsn = excluded.copied_lsn`,
				job, t[0], t[1], state, lsn); err != nil {
				return fmt.Errorf("record table %s.%s as %s in pgsync.tables: %w", t[0], t[1], state, err)
			}
		}
		return nil
	})
}
