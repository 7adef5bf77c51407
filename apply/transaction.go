package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/pgoutput"
	"github.com/pgsync/pgsync/replication"
)

// The target transaction: one holds a group of consecutive source
// transactions (group commit) and the progress row at the end of the last,
// so they all commit together or not at all.

// maxGroupAge bounds how long a group of source transactions may stay
// uncommitted on the target, so the acknowledged position keeps moving
// under continuous load.
const maxGroupAge = time.Second

// Begin opens a target transaction unless one is already open for the group.
func (a *Applier) Begin(ctx context.Context, b pgoutput.Begin) error {
	a.sourceLSN = b.FinalLSN
	a.txnFirstRow = a.groupRows
	if a.inTarget {
		return nil
	}
	a.openTarget(ctx, b.FinalLSN)
	return nil
}

// openTarget opens a target transaction for a group whose first source
// transaction commits at first.
func (a *Applier) openTarget(ctx context.Context, first pglogrepl.LSN) {
	a.startPipeline(ctx)
	a.pipeline.SendQueryParams("BEGIN", nil, nil, nil, nil)
	a.pending = append(a.pending, pending{kind: pendingControl, lsn: first})
	a.inTarget = true
	a.groupStart = time.Now()
	a.groupFirst = first
}

// Commit ends a source transaction. When more is true (further source
// transactions are already waiting) and the group is under its limits, the
// target transaction stays open for them and durable is 0; otherwise it
// commits with the progress row at c.EndLSN, which it returns as durable.
// A row set may continue into the next source transaction of the group: both
// commit in the same target transaction or not at all.
func (a *Applier) Commit(ctx context.Context, c pgoutput.Commit, more bool) (durable pglogrepl.LSN, err error) {
	a.groupEnd, a.groupTime = c.EndLSN, c.Time
	if keepGroupOpen(more, a.groupDDL, a.groupBytes, a.opts.MaxGroupBytes, time.Since(a.groupStart)) {
		return 0, nil
	}
	if err := a.commit(ctx); err != nil {
		return 0, err
	}
	return c.EndLSN, nil
}

// keepGroupOpen decides whether the target transaction stays open after a
// source transaction's commit, for the next ones (more: they are waiting
// already), under the group's limits of size (maxBytes) and age. A group
// that ran a captured DDL statement (ranDDL) commits at the end of that
// statement's source transaction: the source committed it there, and
// what follows may depend on that commit. A value added by ALTER TYPE ...
// ADD VALUE cannot be used before the transaction that added it commits
// (SQLSTATE 55P04, "unsafe use of new value"): applied in the same target
// transaction, the source's next write of that value fails and the group
// is taken apart (issue 31, found by TestDDLKindsApplied).
func keepGroupOpen(more, ranDDL bool, groupBytes, maxBytes int64, age time.Duration) bool {
	return more && !ranDDL && groupBytes < maxBytes && age < maxGroupAge
}

// Flush commits the open group of source transactions, if any, and returns
// the end of its last transaction, now durable (0 when there was none).
func (a *Applier) Flush(ctx context.Context) (durable pglogrepl.LSN, err error) {
	if !a.inTarget {
		return 0, nil
	}
	if err := a.commit(ctx); err != nil {
		return 0, err
	}
	return a.groupEnd, nil
}

// commit commits the open group with the progress row at its end, after
// every result of the group is read and checked.
func (a *Applier) commit(ctx context.Context) error {
	if !a.inTarget {
		return nil
	}
	if err := a.sendRowSet(ctx); err != nil {
		return a.beforeCommit(err)
	}
	began := time.Now()
	a.startPipeline(ctx)
	a.timeBuf = a.groupTime.AppendFormat(a.timeBuf[:0], time.RFC3339Nano)
	a.pipeline.SendQueryParams(ledger.ProgressSQL, [][]byte{[]byte(a.opts.Job), []byte(a.groupEnd.String()), a.timeBuf}, nil, nil, nil)
	a.pending = append(a.pending, pending{kind: pendingProgress, expect: 1, lsn: a.groupEnd})
	// Every result of the group, the progress row included, is read and
	// checked before COMMIT is sent: a statement that matched no row does
	// not raise an error on the server, so a COMMIT queued behind it would
	// make the divergence durable and move the resume point past it. The
	// cost is one round trip per target commit, not per source transaction.
	if err := a.drain(ctx); err != nil {
		return a.beforeCommit(err)
	}
	a.startPipeline(ctx)
	a.pipeline.SendQueryParams("COMMIT", nil, nil, nil, nil)
	a.pending = append(a.pending, pending{kind: pendingCommit, lsn: a.groupEnd})
	if err := a.drain(ctx); err != nil {
		return err
	}
	a.inTarget = false
	a.reportSkips() // committed: the rows triggers skipped are final
	if a.streamed {
		a.countRows()
	}
	if m := a.opts.Metrics; m != nil {
		m.CommitSeconds.Observe(time.Since(began).Seconds())
		m.GroupRows.Observe(float64(a.groupRows))
	}
	a.groupBytes, a.groupRows, a.groupDDL = 0, 0, false
	return nil
}

// inGroup wraps err, the failure of the source transaction committing at
// at, as a replication.GroupFailedError when that transaction is not the
// first of the open group: the group's earlier transactions can then be
// committed without it. A streamed Applier's transaction is alone.
func (a *Applier) inGroup(at pglogrepl.LSN, err error) error {
	if a.streamed || !a.inTarget || at <= a.groupFirst {
		return err
	}
	return &replication.GroupFailedError{At: at, Err: err}
}

// fail abandons the open target transaction and returns err. Nothing of the
// group is committed, so the resume position stays where it was.
func (a *Applier) fail(ctx context.Context, err error) error {
	a.reset(ctx)
	return err
}

// reset abandons the open target transaction and everything queued, and
// empties the current row set: the Applier is left with no group open.
func (a *Applier) reset(ctx context.Context) {
	if a.pipeline != nil {
		// Statements may still be queued on the server (behind a lock, on
		// a frozen backend): draining them, or a ROLLBACK behind them,
		// could wait as long as they do. Closing the socket ends the session
		// now. No COMMIT is queued behind unchecked results (commit reads
		// them all first), so the server rolls the group back; only a
		// COMMIT whose own reply was cut may have committed, together with
		// its progress row, which the next session reads. Every error of
		// the Applier ends its session: the connection is not used again.
		_ = a.conn.PgConn().Conn().Close()
		a.pipeline = nil
		a.inTarget = false
	}
	a.pending, a.pendingHead, a.batchEnds = a.pending[:0], 0, a.batchEnds[:0]
	a.clearRowSet()
	a.dropSkips()
	if a.inTarget && a.conn != nil && !a.conn.IsClosed() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		if _, err := a.conn.Exec(rctx, "ROLLBACK"); err != nil {
			_ = a.conn.PgConn().Conn().Close()
		}
		cancel()
	}
	a.inTarget, a.groupDDL = false, false
	a.groupBytes, a.groupRows, a.batchRows, a.batchBytes, a.sinceFlush = 0, 0, 0, 0, 0
}

// countRows adds the rows a streamed Applier applied to the row counters,
// once they are committed.
func (a *Applier) countRows() {
	for _, rel := range a.relations {
		if rel.counted == nil {
			continue
		}
		for i, n := range rel.uncounted {
			if n > 0 {
				rel.counted[i].Add(n)
			}
		}
		rel.uncounted = [3]float64{}
	}
}

// beforeCommit is the error of a commit that failed before its COMMIT was
// sent: nothing of the group is committed. A streamed Applier's then leaves
// the transaction to its spool (replication.ErrAppliedAtCommit).
func (a *Applier) beforeCommit(err error) error {
	if a.streamed && !errors.Is(err, replication.ErrAppliedAtCommit) {
		return fmt.Errorf("%w: %w", replication.ErrAppliedAtCommit, err)
	}
	return err
}
