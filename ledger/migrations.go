package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// A migration is one step of the ledger's schema: the target's ledger is
// at version v once every migration up to v is applied, and
// pgsync.schema_version records v.
type migration struct {
	// version is its place in migrations, from 1.
	version int
	// what says what it adds, for the error that names it.
	what string
	// sql runs in Ensure's transaction, through the simple protocol (so
	// it may hold several statements).
	sql string
	// tables are the tables it creates, each keyed by job: teardown
	// deletes a job's rows from every one (DeleteJob).
	tables []string
}

// migrations are the ledger's schema, in order. Append only: a migration
// that some target has applied is never edited. To add a table, append
//
//	{version: N+1, what: "...", sql: `CREATE TABLE pgsync.x (job text NOT NULL, ...)`, tables: []string{"x"}}
//
// Releases before the schema version (up to and including the one that
// made pgsync.holds) created these tables lazily and recorded no version:
// such a target is at version 0 and holds any of the tables of migrations
// 1 to unversionedThrough already, as those releases made them. These
// migrations are therefore written to leave what exists as it is (IF NOT
// EXISTS, and the one column an earlier release's pgsync.progress lacks
// added when missing); later ones need not be.
var migrations = []migration{
	{version: 1, what: "the job's progress and its tables' states", tables: []string{"progress", "tables"}, sql: `
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
-- Checked before it is altered: ALTER TABLE needs the table's owner and
-- its strongest lock, which a release before the version did not take
-- when the column was there.
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'pgsync.progress'::regclass
                 AND attname = 'source_commit_time' AND NOT attisdropped) THEN
    ALTER TABLE pgsync.progress ADD COLUMN source_commit_time timestamptz;
  END IF;
END $$`},
	// Where a bootstrap records pg_dump's archive and its post-data
	// objects, so that a rerun after an interruption builds those not
	// built yet.
	{version: 2, what: "the schema archive and its objects", tables: []string{"schema_archive", "schema_objects"}, sql: `
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
)`},
	{version: 3, what: "the last comparison", tables: []string{"verifications"}, sql: `
CREATE TABLE IF NOT EXISTS pgsync.verifications (
    job       text PRIMARY KEY,
    at        timestamptz NOT NULL,
    kind      text NOT NULL,
    lsn       pg_lsn NOT NULL,
    identical boolean NOT NULL,
    found     text NOT NULL
)`},
	// The large objects pgsync copied for a job: cutover removes those the
	// source no longer has, and no other.
	{version: 4, what: "the large objects copied", tables: []string{"large_objects"}, sql: `
CREATE TABLE IF NOT EXISTS pgsync.large_objects (
    job text NOT NULL,
    oid oid NOT NULL,
    PRIMARY KEY (job, oid)
)`},
	// The roles the cutover that made a reverse job locked on its target
	// (the old source): its own cutover, the rollback, unlocks exactly
	// those.
	{version: 5, what: "the roles a cutover locked", tables: []string{"locked_roles"}, sql: `
CREATE TABLE IF NOT EXISTS pgsync.locked_roles (
    job  text NOT NULL,
    role text NOT NULL,
    PRIMARY KEY (job, role)
)`},
	// An online verify's hold requests (holds.go).
	{version: 6, what: "online verify's holds", tables: []string{"holds"}, sql: `
CREATE TABLE IF NOT EXISTS pgsync.holds (
    job          text PRIMARY KEY,
    at           pg_lsn NOT NULL,
    held         boolean NOT NULL DEFAULT false,
    requested_at timestamptz NOT NULL DEFAULT now()
)`},
	{version: 7, what: "cutover's steps", tables: []string{"cutovers"}, sql: `
CREATE TABLE pgsync.cutovers (
    job          text PRIMARY KEY,
    step         text NOT NULL,
    locked_roles text[] NOT NULL DEFAULT '{}',
    goal         pg_lsn,
    reverse_job  text,
    reverse_from pg_lsn,
    started_at   timestamptz NOT NULL DEFAULT now(),
    ready_at     timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now()
)`},
	// The captured DDL statements (job.ddl = "capture") the operator chose
	// to skip, by the LSN of their message (pgsync run --skip-ddl).
	{version: 8, what: "the DDL statements skipped", tables: []string{"ddl_skips"}, sql: `
CREATE TABLE pgsync.ddl_skips (
    job          text NOT NULL,
    lsn          pg_lsn NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job, lsn)
)`},
}

// unversionedThrough is the last migration whose tables a release before
// the schema version may have made (see migrations).
const unversionedThrough = 6

// LatestVersion is the version of the ledger this pgsync writes.
func LatestVersion() int { return len(migrations) }

// ErrLedgerNewer: the target's ledger was migrated by a newer pgsync,
// whose tables this one does not know.
var ErrLedgerNewer = errors.New("the target's pgsync schema is newer than this pgsync")

// migrationLock is the advisory lock key (in the target database) under
// which pgsync migrates its ledger: "pgsync" in ASCII, unlikely to be
// another application's.
const migrationLock int64 = 0x7067_7379_6e63

// ledgerState is what the target has of the ledger.
type ledgerState struct {
	schema    bool // the pgsync schema exists
	versioned bool // pgsync.schema_version exists
	version   int  // its row; 0 when there is none
}

// readState reads the target's ledger state without raising an error in
// the server's log on a target that has none: the version table is read
// only once the catalog says it is there.
func readState(ctx context.Context, conn Querier) (ledgerState, error) {
	var st ledgerState
	if err := conn.QueryRow(ctx, `SELECT to_regnamespace('pgsync') IS NOT NULL,
       to_regclass('pgsync.schema_version') IS NOT NULL`).Scan(&st.schema, &st.versioned); err != nil {
		return st, fmt.Errorf("look for the pgsync schema on the target: %w", err)
	}
	if !st.versioned {
		return st, nil
	}
	err := conn.QueryRow(ctx, `SELECT version FROM pgsync.schema_version`).Scan(&st.version)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("read pgsync.schema_version: %w", err)
	}
	return st, nil
}

// Ensure brings the target's ledger to LatestVersion: it creates the
// pgsync schema when missing and applies, in one transaction, every
// migration above the recorded version, then records the new one. A
// ledger already at the latest version costs two reads and takes no lock.
// A ledger an earlier release left without a version is upgraded in place
// (see migrations). Commands that create a job's records call it before
// they write; it commits a transaction of its own, so conn must not be in
// one.
func Ensure(ctx context.Context, conn *pgx.Conn) error {
	st, err := readState(ctx, conn)
	if err != nil {
		return err
	}
	return ensure(ctx, conn, st)
}

// Upgrade brings the target's ledger to LatestVersion as Ensure does when
// the target has the pgsync schema, and reports whether it has: a target
// without one is left as it is. Commands that write a job's records but
// never create a job (cutover, verify, teardown) call it, so that they
// create nothing on a target no job was bootstrapped on.
func Upgrade(ctx context.Context, conn *pgx.Conn) (present bool, err error) {
	st, err := readState(ctx, conn)
	if err != nil || !st.schema {
		return false, err
	}
	return true, ensure(ctx, conn, st)
}

// ensure migrates a ledger in state st that is not at the latest version.
func ensure(ctx context.Context, conn *pgx.Conn, st ledgerState) error {
	switch {
	case st.versioned && st.version == LatestVersion():
		return nil
	case st.version > LatestVersion():
		return newerError(st.version)
	}
	return migrate(ctx, conn)
}

func newerError(version int) error {
	return fmt.Errorf("%w (version %d; this pgsync knows %d)", ErrLedgerNewer, version, LatestVersion())
}

// migrate applies the migrations the ledger lacks. Two pgsync processes
// may migrate at once (a run and a verify started together on a target an
// earlier release left): a session-level advisory lock, taken before the
// transaction begins, orders them, and the state is read again under it.
// Taken before, not inside: a transaction reads the catalog changes other
// sessions committed as it begins, so the second one then sees the first
// one's schema and tables rather than a cached absence of them.
func migrate(ctx context.Context, conn *pgx.Conn) (err error) {
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("lock the pgsync schema for its migration: %w", err)
	}
	defer func() {
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock); uerr != nil && err == nil {
			err = fmt.Errorf("unlock the pgsync schema after its migration: %w", uerr)
		}
	}()
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		st, err := readState(ctx, tx)
		if err != nil {
			return err
		}
		if st.version > LatestVersion() {
			return newerError(st.version)
		}
		if err := createVersion(ctx, tx, st); err != nil {
			return err
		}
		for _, m := range migrations[st.version:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migrate the pgsync schema to version %d (%s): %w", m.version, m.what, err)
			}
		}
		// Replaced, not updated: the table keeps exactly one row.
		if _, err := tx.Exec(ctx, `DELETE FROM pgsync.schema_version; INSERT INTO pgsync.schema_version VALUES (`+strconv.Itoa(LatestVersion())+`)`); err != nil {
			return fmt.Errorf("record the pgsync schema's version %d: %w", LatestVersion(), err)
		}
		return nil
	})
}

// createVersion creates what the migrations are recorded in, when
// missing: the pgsync schema (only then, so that a role given that schema
// by an administrator needs no CREATE on the database) and
// pgsync.schema_version.
func createVersion(ctx context.Context, tx pgx.Tx, st ledgerState) error {
	if !st.schema {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA pgsync`); err != nil {
			return fmt.Errorf("create schema pgsync on the target: %w", err)
		}
	}
	if st.versioned {
		return nil
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE pgsync.schema_version (version int NOT NULL)`); err != nil {
		return fmt.Errorf("create pgsync.schema_version: %w", err)
	}
	return nil
}
