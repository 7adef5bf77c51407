package replication

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgsync/pgsync/pgoutput"
)

// A streamed transaction applied as it arrives (issue 18; apply/streamed.go
// has the target's side). Its segments are spooled as always; besides, the
// first streamed transaction that starts while no other is being applied so
// goes, message by message, to a StreamedApplier of its own, whose target
// transaction commits at Stream Commit, right after the main Applier has
// committed everything before it. Whatever that applier cannot do (a
// subtransaction, a table add-tables copied at a position, an error of the
// target, a lock wait with the main session) only ends the early apply:
// the transaction is then applied at its commit from its spool, as before.

// StreamedApplier applies one streamed transaction as its segments arrive,
// in a target transaction of its own that commits at its Commit.
type StreamedApplier interface {
	Applier
	// Push sends the statements queued so far: called at each segment's
	// end, so that the target works while the source prepares the next.
	Push(ctx context.Context) error
	// Close rolls back what is not committed and closes the connection.
	Close(ctx context.Context) error
}

// ErrAppliedAtCommit is the error of a StreamedApplier that leaves its
// transaction to the spool: nothing of it is committed.
var ErrAppliedAtCommit = errors.New("applied at its commit, from its spool")

// streamedOpener is an Applier that can open a StreamedApplier; one that
// cannot, or returns nil, leaves every streamed transaction to its spool.
type streamedOpener interface {
	OpenStreamed(ctx context.Context) (StreamedApplier, error)
}

// earlyTxn is the streamed transaction being applied as it arrives.
type earlyTxn struct {
	xid uint32
	app StreamedApplier // nil once the early apply was given up
	// described are the relations app knows; inStream those the source
	// described inside the transaction, for the main Applier after the
	// commit (the source counts them as sent).
	described map[uint32]bool
	inStream  []uint32
	rows      int64
}

// startEarly opens the early apply of the streamed transaction xid at its
// first segment, when none is open and the Applier can. The main Applier
// commits what it holds first, as at every segment's start (segmentStart).
// A session that cannot be opened only means the spool applies it.
func (d *dispatcher) startEarly(ctx context.Context, xid uint32) {
	opener, ok := d.app.(streamedOpener)
	if !ok || d.early != nil || d.noEarly {
		return
	}
	app, err := opener.OpenStreamed(ctx)
	if err != nil {
		d.log.Warn("cannot open a target session for a streamed transaction: it is applied at its commit", "xid", xid, "err", err)
		return
	}
	if app == nil {
		d.noEarly = true
		return
	}
	d.early = &earlyTxn{xid: xid, app: app, described: map[uint32]bool{}}
}

// segmentStart commits the main Applier's open group before a segment of
// the transaction applied early: the segment's changes may read rows the
// transactions before it wrote, and those must be visible to its session.
// The early Applier's Begin gets the segment's WAL position, the most that
// is known of the commit LSN yet (it comes after): the Applier's skip rule
// for a table copied at a position needs a commit LSN, and a position at
// or past the copy's is enough to know it applies.
func (d *dispatcher) segmentStart(ctx context.Context, xid uint32) error {
	e := d.early
	if e == nil || e.xid != xid || e.app == nil {
		return nil
	}
	durable, err := d.app.Flush(ctx)
	if err != nil {
		return err
	}
	d.pos.AdvanceApplied(durable)
	if err := e.app.Begin(ctx, pgoutput.Begin{FinalLSN: d.walStart, Xid: xid}); err != nil {
		d.giveUpEarly(ctx, err)
	}
	return nil
}

// applyEarly hands one message of the open segment, in protocol version
// 1's form, to the early apply when the segment is its transaction's.
func (d *dispatcher) applyEarly(ctx context.Context, xid uint32, msg []byte) {
	e := d.early
	if e == nil || e.app == nil || d.spools.cur == nil || d.spools.cur.xid != e.xid {
		return
	}
	if xid != e.xid {
		d.giveUpEarly(ctx, fmt.Errorf("subtransaction %d: %w", xid, errSubxact))
		return
	}
	var err error
	switch msg[0] {
	case pgoutput.MsgRelation:
		var r *pgoutput.Relation
		if r, err = pgoutput.DecodeRelation(msg); err == nil {
			err = e.app.Relation(ctx, r)
			e.described[r.ID] = true
			e.inStream = append(e.inStream, r.ID)
		}
	case pgoutput.MsgInsert, pgoutput.MsgUpdate, pgoutput.MsgDelete:
		if err = pgoutput.DecodeChange(msg, &d.change); err == nil {
			if err = d.describeEarly(ctx, d.change.RelationID); err == nil {
				err = e.app.Change(ctx, &d.change)
				e.rows++
				// Counted as queued, as the main path counts its rows, so
				// that the progress line moves during a long transaction;
				// taken back if the spool applies them instead.
				d.stats.Rows.Add(1)
			}
		}
	case pgoutput.MsgTruncate:
		var t pgoutput.Truncate
		if t, err = pgoutput.DecodeTruncate(msg); err == nil {
			for _, id := range t.RelationIDs {
				if err = d.describeEarly(ctx, id); err != nil {
					break
				}
			}
			if err == nil {
				err = e.app.Truncate(ctx, t)
			}
		}
	}
	if err != nil {
		d.giveUpEarly(ctx, err)
	}
}

// errSubxact ends an early apply at the first change of a subtransaction,
// which may still roll back alone.
var errSubxact = errors.New("a subtransaction is applied at commit")

// describeEarly gives the early apply the source's last description of a
// relation it has not met yet: the source sent it before the transaction
// started and will not send it again.
func (d *dispatcher) describeEarly(ctx context.Context, id uint32) error {
	if d.early.described[id] {
		return nil
	}
	raw := d.relations[id]
	if raw == nil {
		return fmt.Errorf("relation %d was never described by the source", id)
	}
	r, err := pgoutput.DecodeRelation(raw)
	if err != nil {
		return err
	}
	if err := d.early.app.Relation(ctx, r); err != nil {
		return err
	}
	d.early.described[id] = true
	return nil
}

// noteRelation keeps the raw Relation message of relation id, for an early
// apply that meets the relation later.
func (d *dispatcher) noteRelation(id uint32, msg []byte) {
	if d.relations == nil {
		d.relations = map[uint32][]byte{}
	}
	d.relations[id] = append(d.relations[id][:0], msg...)
	if d.early != nil {
		delete(d.early.described, id) // described anew before its next change
	}
}

// pushEarly sends what the early apply queued, at its segment's end.
func (d *dispatcher) pushEarly(ctx context.Context, xid uint32) {
	if e := d.early; e != nil && e.xid == xid && e.app != nil {
		if err := e.app.Push(ctx); err != nil {
			d.giveUpEarly(ctx, err)
		}
	}
}

// giveUpEarly ends the early apply: its target transaction is rolled back
// and the transaction is applied at its commit, from its spool.
func (d *dispatcher) giveUpEarly(ctx context.Context, why error) {
	e := d.early
	if e == nil || e.app == nil {
		return
	}
	d.log.Info("streamed transaction: not applied as it arrives", "xid", e.xid, "reason", why.Error())
	_ = e.app.Close(ctx)
	e.app = nil
	d.stats.Rows.Add(-e.rows)
	e.rows = 0
}

// endEarly closes the early apply of xid (aborted, applied or skipped).
func (d *dispatcher) endEarly(ctx context.Context, xid uint32) {
	if e := d.early; e != nil && e.xid == xid {
		if e.app != nil {
			_ = e.app.Close(ctx)
		}
		d.stats.Rows.Add(-e.rows) // 0 once committed
		d.early = nil
	}
}

// commitEarly commits the transaction applied as it arrived: the main
// Applier's group first, then the early one with the position at its end,
// then the relations it described go to the main Applier. It reports false
// when the transaction was not applied early (the caller replays its
// spool). An error of the commit itself ends the session: the COMMIT may
// have been applied, and the next session reads the recorded position.
func (d *dispatcher) commitEarly(ctx context.Context, c pgoutput.StreamCommit, spoolBytes int64) (bool, error) {
	e := d.early
	if e == nil || e.xid != c.Xid {
		return false, nil
	}
	if e.app == nil {
		d.early = nil
		return false, nil
	}
	defer d.endEarly(ctx, c.Xid)
	durable, err := d.app.Flush(ctx)
	if err != nil {
		return false, err
	}
	d.pos.AdvanceApplied(durable)
	if err := e.app.Begin(ctx, pgoutput.Begin{FinalLSN: c.CommitLSN, Xid: c.Xid}); err != nil {
		return false, err
	}
	if durable, err = e.app.Commit(ctx, c.Commit, false); err != nil {
		if errors.Is(err, ErrAppliedAtCommit) {
			d.giveUpEarly(ctx, err)
			d.early = nil
			return false, nil
		}
		return false, fmt.Errorf("commit the streamed transaction xid %d at %s: %w", c.Xid, c.CommitLSN, err)
	}
	d.pos.AdvanceApplied(durable)
	d.stats.Txns.Add(1)
	d.stats.CommitTime.Store(c.Time.UnixNano())
	for _, id := range e.inStream {
		r, err := pgoutput.DecodeRelation(d.relations[id])
		if err != nil {
			return true, err
		}
		if err := d.app.Relation(ctx, r); err != nil {
			return true, err
		}
	}
	d.log.Info("streamed transaction applied", "xid", c.Xid, "commit_lsn", c.CommitLSN.String(), "rows", e.rows, "spool_bytes", spoolBytes, "as_received", true)
	e.rows = 0 // committed: endEarly takes nothing back
	return true, nil
}
