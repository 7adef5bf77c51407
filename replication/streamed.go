package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/pgsync/pgsync/pgoutput"
)

// errStopped ends the replay of a streamed transaction when the session
// ends: the target transaction is left uncommitted, for the applier's
// Close to roll back, and the next session receives the transaction again.
var errStopped = errors.New("session ended during the replay of a streamed transaction")

// stopCheckEvery is how many spooled messages the replay applies between
// two looks at whether the session is ending.
const stopCheckEvery = 1024

// handleStream handles the messages that delimit a streamed transaction
// (protocol version 2): Stream Start and Stop around each segment, then
// Stream Commit or Stream Abort. None of them comes inside an ordinary
// transaction, and only Stream Stop inside a segment.
func (d *dispatcher) handleStream(ctx context.Context, msg []byte) error {
	if d.inTxn {
		return fmt.Errorf("pgoutput %q inside a transaction", msg[0])
	}
	switch msg[0] {
	case pgoutput.MsgStreamStart:
		s, err := pgoutput.DecodeStreamStart(msg)
		if err != nil {
			return err
		}
		if s.Xid == 0 {
			return fmt.Errorf("pgoutput Stream Start of invalid xid 0")
		}
		if err := d.spools.start(s.Xid, s.First); err != nil {
			return err
		}
		if s.First {
			d.startEarly(ctx, s.Xid)
		}
		return d.segmentStart(ctx, s.Xid)
	case pgoutput.MsgStreamStop:
		if d.spools.cur != nil {
			d.pushEarly(ctx, d.spools.cur.xid)
		}
		return d.spools.stop()
	case pgoutput.MsgStreamCommit:
		c, err := pgoutput.DecodeStreamCommit(msg)
		if err != nil {
			return err
		}
		return d.streamCommit(ctx, c)
	case pgoutput.MsgStreamAbort:
		a, err := pgoutput.DecodeStreamAbort(msg)
		if err != nil {
			return err
		}
		if a.SubXid == a.Xid {
			d.endEarly(ctx, a.Xid)
		} else if d.early != nil && d.early.xid == a.Xid {
			d.giveUpEarly(ctx, fmt.Errorf("subtransaction %d aborted: %w", a.SubXid, errSubxact))
		}
		return d.spools.abort(a.Xid, a.SubXid)
	}
	return fmt.Errorf("pgoutput %q is not a stream message", msg[0])
}

// spool appends a message received inside a segment to its transaction's
// spool. Type and any Message but a captured statement are not kept (the
// applier ignores them) and
// Origin carries no xid; any other message has no place in a segment.
func (d *dispatcher) spool(ctx context.Context, msg []byte) error {
	switch msg[0] {
	case pgoutput.MsgOrigin:
		return nil
	case pgoutput.MsgRelation, pgoutput.MsgType, pgoutput.MsgInsert, pgoutput.MsgUpdate,
		pgoutput.MsgDelete, pgoutput.MsgTruncate, pgoutput.MsgMessage:
	default:
		return fmt.Errorf("pgoutput %q inside the stream segment of xid %d", msg[0], d.spools.cur.xid)
	}
	xid, body, err := pgoutput.SplitStreamed(msg)
	if err != nil {
		return err
	}
	if xid == 0 {
		return fmt.Errorf("pgoutput %q of invalid xid 0 in the stream of xid %d", msg[0], d.spools.cur.xid)
	}
	// The message in protocol version 1's form, in place: its type byte
	// over the xid's last byte (the spool has its copy).
	v1 := msg[len(msg)-len(body)-1:]
	v1[0] = msg[0]
	if msg[0] == pgoutput.MsgType {
		return nil
	}
	if d.ddlTable {
		if done, err := d.spoolDDLTable(ctx, xid, v1); done || err != nil {
			return err
		}
	}
	if msg[0] == pgoutput.MsgMessage {
		// Only a captured statement is kept, for the replay at the
		// commit; the transaction is applied there, not as it arrives
		// (the early Applier's session would hold the DDL's lock while
		// the main one applies the transactions before it).
		m, err := pgoutput.DecodeMessage(v1)
		if err != nil {
			return fmt.Errorf("decode the message in the stream of xid %d: %w", xid, err)
		}
		if !isDDL(m) {
			return nil
		}
		if e := d.early; e != nil && e.xid == d.spools.cur.xid {
			d.giveUpEarly(ctx, fmt.Errorf("it holds DDL at %s", m.LSN))
		}
		return d.spools.append(xid, msg[0], body)
	}
	if err := d.spools.append(xid, msg[0], body); err != nil {
		return err
	}
	if v1[0] == pgoutput.MsgRelation {
		r, err := pgoutput.DecodeRelation(v1)
		if err != nil {
			return fmt.Errorf("decode the Relation message in the stream of xid %d: %w", xid, err)
		}
		d.noteRelation(r.ID, v1)
	}
	d.applyEarly(ctx, xid, v1)
	return nil
}

// streamCommit applies a streamed transaction that committed on the source:
// its spool is read back through the path of an ordinary transaction (a
// Begin at the commit LSN, each message, the Commit), in the order the
// commits arrive, which is the source's commit order. The applier records
// the position at its Commit, in the same target transaction, as for any
// other transaction.
//
// The changes of a subtransaction that aborted are skipped even when the
// source did not send its Stream Abort: PostgreSQL 15.18 sends none for a
// subtransaction whose changes it spilled to disk before streaming them (a
// TOASTed value rolled back to a savepoint: the integration test
// TestStreamedLargeValues meets it; a native subscription with streaming =
// on applies such rows). So when the spool holds subtransactions, the
// source's commit log is asked which of them aborted
// (SessionOptions.AbortedXids).
func (d *dispatcher) streamCommit(ctx context.Context, c pgoutput.StreamCommit) (err error) {
	sp, err := d.spools.take(c.Xid)
	if err != nil {
		return err
	}
	if sp == nil {
		return fmt.Errorf("pgoutput Stream Commit of xid %d at %s: no segment of it was received", c.Xid, c.CommitLSN)
	}
	defer func() {
		if rerr := sp.remove(); err == nil {
			err = rerr
		}
	}()
	if appliedBefore(c.CommitLSN, d.resume) {
		d.endEarly(ctx, c.Xid)
		return nil
	}
	if err := d.holdBefore(ctx, c.CommitLSN); err != nil {
		return err
	}
	if applied, err := d.commitEarly(ctx, c, sp.size); applied || err != nil {
		return err
	}
	aborted, err := d.abortedSubxacts(ctx, c, sp)
	if err != nil {
		return err
	}
	rows := d.stats.Rows.Load()
	if err := d.begin(ctx, pgoutput.Begin{FinalLSN: c.CommitLSN, Xid: c.Xid}); err != nil {
		return err
	}
	r := spoolReader{f: sp.f}
	for n := 1; ; n++ {
		xid, msg, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("replay the spool of xid %d committed at %s: %w", c.Xid, c.CommitLSN, err)
		}
		if _, skip := aborted[xid]; !skip || msg[0] == pgoutput.MsgRelation {
			// A Relation is applied whichever subtransaction it came in:
			// the source, which sent no abort, counts it as sent for the
			// whole transaction and will not send it again.
			if err := d.handleData(ctx, msg); err != nil {
				return err
			}
		}
		if len(msg) >= collectAfter {
			// As for a large message received (dispatcher.run): free it
			// before the next one is read.
			d.change.Release()
			r.drop()
			runtime.GC()
		}
		if n%stopCheckEvery == 0 && d.stopping() {
			return errStopped
		}
	}
	if err := d.commit(ctx, c.Commit); err != nil {
		return err
	}
	d.log.Info("streamed transaction applied", "xid", c.Xid, "commit_lsn", c.CommitLSN.String(),
		"rows", d.stats.Rows.Load()-rows, "spool_bytes", sp.size)
	return nil
}

// abortedSubxacts returns the subtransactions of the spool that the source's
// commit log records as aborted, and says so in the log when there are any:
// the source sent their changes without their Stream Abort.
func (d *dispatcher) abortedSubxacts(ctx context.Context, c pgoutput.StreamCommit, sp *spool) (map[uint32]struct{}, error) {
	if len(sp.subxacts) == 0 || d.abortedXids == nil {
		return nil, nil
	}
	xids := make([]uint32, len(sp.subxacts))
	for i, s := range sp.subxacts {
		xids[i] = s.xid
	}
	found, err := d.abortedXids(ctx, xids)
	if err != nil {
		return nil, fmt.Errorf("streamed transaction xid %d committed at %s: %w", c.Xid, c.CommitLSN, err)
	}
	if len(found) == 0 {
		return nil, nil
	}
	aborted := make(map[uint32]struct{}, len(found))
	for _, x := range found {
		aborted[x] = struct{}{}
	}
	d.log.Warn("the source sent changes of aborted subtransactions without their Stream Abort: skipping them",
		"xid", c.Xid, "commit_lsn", c.CommitLSN.String(), "subxacts", len(found))
	return aborted, nil
}

// stopping reports whether the reader has ended the session.
func (d *dispatcher) stopping() bool {
	select {
	case <-d.stop:
		return true
	default:
		return false
	}
}
