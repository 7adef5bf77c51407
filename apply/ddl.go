package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/ddl"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/pgoutput"
)

// Captured DDL (job.ddl = "capture", issue 31): each statement the source's
// event trigger emitted runs in the target transaction that applies its
// source transaction, at its place. The pipeline is drained first, so that
// every change before it is applied and checked; the statement then runs
// through the simple protocol (the string may hold several commands),
// with the source's search_path for it alone and pgsync's target user as
// its role (no SET ROLE: the objects it creates are that user's). The
// Relation messages the source sends after it describe the new shape, and
// Relation reads the target's shape again in the same transaction, so the
// relation and statement caches follow.

// DDLError is a captured statement that the target did not run: refused
// by ddl.Plan, not signed by the job's capture, or failed there. Nothing
// of its source transaction is committed, and the position stays before
// it.
type DDLError struct {
	// LSN is the message's: pgsync run --skip-ddl LSN skips exactly this
	// statement.
	LSN pglogrepl.LSN
	// Commit is the commit LSN of its source transaction.
	Commit    pglogrepl.LSN
	Statement string
	Err       error
}

// Error words it on one line: the statement, where, and the target's
// error or the refusal.
func (e *DDLError) Error() string {
	return fmt.Sprintf("DDL at %s (source transaction committing at %s) not applied: %q: %v", e.LSN, e.Commit, ddl.Short(e.Statement), e.Err)
}

// Unwrap returns the cause: a *pgconn.PgError of the target, a
// *ddl.Refusal, or ddl.ErrUnsigned.
func (e *DDLError) Unwrap() error { return e.Err }

// DDL applies the statement a captured DDL message carries (replication's
// DDLApplier).
func (a *Applier) DDL(ctx context.Context, m pgoutput.Message) error {
	rec, err := ddl.Decode(m.Content, a.opts.Job, a.opts.DDLKey)
	if rec.Job != a.opts.Job && err == nil {
		return nil // another job's capture on the same source
	}
	if a.skipDDL[m.LSN] {
		a.logger().Info("captured DDL skipped, as pgsync run --skip-ddl recorded", "lsn", m.LSN.String(),
			"commit_lsn", a.sourceLSN.String(), "statement", ddl.Short(rec.Query))
		return nil
	}
	if err != nil {
		return a.failDDL(ctx, m.LSN, rec.Query, err)
	}
	if rec.Outside {
		a.logger().Info("DDL on objects outside the job's schemas ignored", "lsn", m.LSN.String(), "commit_lsn", a.sourceLSN.String(),
			"role_on_source", rec.Role, "statement", ddl.Short(rec.Query))
		return nil
	}
	if a.streamed {
		// The dispatcher gives such a transaction to its spool; this is
		// the guard.
		return a.fail(ctx, notAsArrived("DDL at %s", m.LSN))
	}
	if err := rec.Refused(); err != nil {
		return a.failDDL(ctx, m.LSN, rec.Query, err)
	}
	planned, refusal := ddl.Plan(rec.Query)
	if refusal != nil {
		return a.failDDL(ctx, m.LSN, refusal.Statement, refusal)
	}
	if planned.OnItsOwn != nil {
		return a.runOnItsOwn(ctx, m.LSN, rec, planned.OnItsOwn)
	}
	stmts := planned.InTransaction
	if stmts == "" {
		return nil
	}
	if err := a.sendRowSet(ctx); err != nil {
		return err
	}
	if err := a.drain(ctx); err != nil {
		return err
	}
	if _, err := a.conn.Exec(ctx, ddl.TargetSQL(stmts, rec.SearchPath)); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Detail != "" {
			err = fmt.Errorf("%w (%s)", err, pgErr.Detail)
		}
		return a.failDDL(ctx, m.LSN, stmts, err)
	}
	a.groupDDL = true
	a.logger().Info("applied DDL captured on the source", "lsn", m.LSN.String(), "commit_lsn", a.sourceLSN.String(),
		"role_on_source", rec.Role, "statement", ddl.Short(stmts))
	return nil
}

// runOnItsOwn runs a captured statement that cannot run in a transaction
// block (ddl/onitsown.go): the target transaction is committed before it
// with the source transactions before its own, the statement's Todo runs
// outside any, in its search_path, and a target transaction is opened
// again for the rest of its source transaction, which commits at that
// source transaction's end with the position past it. Its source
// transaction must not have changed anything before it: those changes
// would be committed with the position before them, and applied again
// after a kill.
func (a *Applier) runOnItsOwn(ctx context.Context, lsn pglogrepl.LSN, rec ddl.Record, own *ddl.OnItsOwn) error {
	if a.groupRows != a.txnFirstRow || a.groupDDL {
		return a.failDDL(ctx, lsn, own.Statement, &ddl.Refusal{Statement: own.Statement,
			Why: "it cannot run in a transaction block, and its source transaction changed the database before it", Fix: "run it on the target by hand"})
	}
	if err := a.commitBefore(ctx); err != nil {
		return err
	}
	var saved string
	if err := a.conn.QueryRow(ctx, "SELECT pg_catalog.current_setting('search_path'), pg_catalog.set_config('search_path', $1, false)",
		rec.SearchPath).Scan(&saved, nil); err != nil {
		return a.fail(ctx, fmt.Errorf("set search_path for DDL at %s: %w", lsn, err))
	}
	var todo []string
	if err := a.conn.QueryRow(ctx, own.Todo, own.Args...).Scan(&todo); err != nil {
		return a.failDDL(ctx, lsn, own.Statement, fmt.Errorf("read what the target still runs of it: %w", err))
	}
	if len(todo) == 0 {
		a.logger().Info("captured DDL found applied on the target already (a run was cut after it)", "lsn", lsn.String(),
			"commit_lsn", a.sourceLSN.String(), "statement", ddl.Short(own.Statement))
	}
	for _, st := range todo {
		a.logger().Info("applying DDL captured on the source, on its own (it cannot run inside a transaction)", "lsn", lsn.String(),
			"commit_lsn", a.sourceLSN.String(), "role_on_source", rec.Role, "statement", ddl.Short(st))
		if _, err := a.conn.Exec(ctx, st); err != nil {
			return a.failDDL(ctx, lsn, st, err)
		}
	}
	if _, err := a.conn.Exec(ctx, "SELECT pg_catalog.set_config('search_path', $1, false)", saved); err != nil {
		return a.fail(ctx, fmt.Errorf("set search_path back after DDL at %s: %w", lsn, err))
	}
	a.openTarget(ctx, a.sourceLSN)
	a.groupDDL = true
	return nil
}

// commitBefore commits the open target transaction, which holds nothing
// of the current source transaction: with the position at the end of the
// source transactions before it when it holds any, as an empty COMMIT
// when the current one is its first.
func (a *Applier) commitBefore(ctx context.Context) error {
	if !a.inTarget {
		return nil
	}
	if a.sourceLSN > a.groupFirst {
		return a.commit(ctx)
	}
	if err := a.drain(ctx); err != nil {
		return err
	}
	if _, err := a.conn.Exec(ctx, "COMMIT"); err != nil {
		return a.fail(ctx, fmt.Errorf("target commit before DDL of the source transaction committing at %s: %w", a.sourceLSN, err))
	}
	a.inTarget = false
	return nil
}

// failDDL abandons the target transaction at the statement: when its
// source transaction is not the group's first, the group's earlier ones
// are committed without it first (GroupFailedError), so that the stop is
// at exactly this source transaction.
func (a *Applier) failDDL(ctx context.Context, lsn pglogrepl.LSN, stmt string, err error) error {
	return a.fail(ctx, a.inGroup(a.sourceLSN, &DDLError{LSN: lsn, Commit: a.sourceLSN, Statement: stmt, Err: err}))
}

// readDDLSkips reads the captured statements to skip, at the session's
// start; a ledger without its table has none.
func (a *Applier) readDDLSkips(ctx context.Context) error {
	if !a.opts.DDL {
		return nil
	}
	skips, err := ledger.ReadDDLSkips(ctx, a.conn, a.opts.Job)
	if err != nil {
		return err
	}
	a.skipDDL = skips
	return nil
}
