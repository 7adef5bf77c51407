package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pglogrepl"
	"golang.org/x/sync/semaphore"

	"github.com/pgsync/pgsync/ddl"
	"github.com/pgsync/pgsync/pgoutput"
	"github.com/pgsync/pgsync/position"
)

// dispatcher is the applier goroutine: it takes messages from the queue in
// order, decodes them and hands them to the Applier, and moves the applied
// position when the Applier says a commit is durable.
type dispatcher struct {
	app    Applier
	pos    *position.Positions
	stats  *Stats
	resume pglogrepl.LSN // transactions committed before it were applied earlier

	queue       chan walMessage
	sem         *semaphore.Weighted
	maxInflight int64
	stop        <-chan struct{} // closed by the reader: finish up

	change   pgoutput.Change // reused for every row change
	skipping bool            // inside a transaction applied earlier
	inTxn    bool            // between a Begin and its Commit
	// spools hold the streamed transactions until they commit
	// (streamed.go).
	spools *spoolSet
	// abortedXids asks the source which subtransactions aborted
	// (SessionOptions.AbortedXids); nil: none is asked about.
	abortedXids func(ctx context.Context, xids []uint32) ([]uint32, error)
	log         *slog.Logger
	// early is the streamed transaction applied as it arrives (early.go);
	// noEarly: the Applier applies none so. relations are the source's last
	// Relation message of each relation, for the early apply.
	walStart  pglogrepl.LSN // of the message being handled
	early     *earlyTxn
	noEarly   bool
	relations map[uint32][]byte
	// commitAloneThrough: source transactions committing at or before it
	// are committed alone (SessionOptions.CommitAloneThrough).
	commitAloneThrough pglogrepl.LSN
	// holdAt and held: SessionOptions.HoldAt and Held (hold.go).
	holdAt func() pglogrepl.LSN
	held   func(ctx context.Context, at pglogrepl.LSN) error
	// ddlTable: SessionOptions.DDLTable; ddlRelations are the relation
	// IDs of pgsync.ddl the source described, with the index of its record
	// column (ddltable.go).
	ddlTable     bool
	ddlRelations map[uint32]int
}

// run is the dispatcher's loop. ctx bounds every round trip to the target.
func (d *dispatcher) run(ctx context.Context) error {
	// Queue space goes back to the reader in slices of releaseEvery bytes,
	// so that a reader waiting on a full queue wakes once per slice, not
	// once per message.
	releaseEvery := max(d.maxInflight/8, 1)
	var unreleased int64
	defer func() {
		if d.early != nil {
			d.endEarly(ctx, d.early.xid) // rolled back: the next session receives it again
		}
	}()
	for {
		var m walMessage
		select {
		case <-d.stop:
			return d.shutdown(ctx)
		case m = <-d.queue:
		default:
			// Nothing waiting: hand back all space before blocking.
			if unreleased > 0 {
				d.sem.Release(unreleased)
				unreleased = 0
			}
			select {
			case m = <-d.queue:
			case <-d.stop:
				return d.shutdown(ctx)
			}
		}
		d.walStart = m.walStart
		err := d.handle(ctx, m.data)
		if m.done != nil {
			d.change.Release()
			close(m.done)
		}
		unreleased += m.weight
		if unreleased >= releaseEvery {
			d.sem.Release(unreleased)
			unreleased = 0
		}
		if errors.Is(err, errStopped) {
			return nil // a replay abandoned half way: Close rolls it back
		}
		if err != nil {
			return err
		}
	}
}

// shutdown commits the open group when it ends on a transaction boundary;
// a half-applied source transaction is rolled back by the Applier's Close.
func (d *dispatcher) shutdown(ctx context.Context) error {
	if d.inTxn {
		return nil
	}
	fctx, cancel := context.WithTimeout(ctx, shutdownGrace)
	defer cancel()
	durable, err := d.app.Flush(fctx)
	if err != nil {
		return err
	}
	d.pos.AdvanceApplied(durable)
	return nil
}

// handle applies one pgoutput message. Any byte sequence is either applied
// or refused with an error; none moves a position by itself.
func (d *dispatcher) handle(ctx context.Context, msg []byte) error {
	if len(msg) == 0 {
		return fmt.Errorf("empty pgoutput message")
	}
	if d.spools.inSegment() && msg[0] != pgoutput.MsgStreamStop {
		return d.spool(ctx, msg)
	}
	switch msg[0] {
	case pgoutput.MsgBegin:
		b, err := pgoutput.DecodeBegin(msg)
		if err != nil {
			return err
		}
		return d.begin(ctx, b)
	case pgoutput.MsgCommit:
		c, err := pgoutput.DecodeCommit(msg)
		if err != nil {
			return err
		}
		return d.commit(ctx, c)
	case pgoutput.MsgStreamStart, pgoutput.MsgStreamStop, pgoutput.MsgStreamCommit, pgoutput.MsgStreamAbort:
		return d.handleStream(ctx, msg)
	}
	return d.handleData(ctx, msg)
}

// begin starts a source transaction, or skips it when an earlier session
// applied it.
func (d *dispatcher) begin(ctx context.Context, b pgoutput.Begin) error {
	if d.inTxn {
		return fmt.Errorf("pgoutput Begin of the transaction committing at %s inside another transaction", b.FinalLSN)
	}
	d.inTxn = true
	if appliedBefore(b.FinalLSN, d.resume) {
		d.skipping = true
		return nil
	}
	if err := d.holdBefore(ctx, b.FinalLSN); err != nil {
		return err
	}
	return d.app.Begin(ctx, b)
}

// commit ends a source transaction and moves the applied position to what
// the applier says is durable.
func (d *dispatcher) commit(ctx context.Context, c pgoutput.Commit) error {
	if !d.inTxn {
		return fmt.Errorf("pgoutput Commit at %s outside a transaction", c.CommitLSN)
	}
	d.inTxn = false
	if d.skipping {
		d.skipping = false
		return nil
	}
	// More transactions waiting may share the target transaction, except
	// those a failed group left to commit alone.
	more := len(d.queue) > 0 && c.CommitLSN > d.commitAloneThrough
	durable, err := d.app.Commit(ctx, c, more)
	if err != nil {
		return err
	}
	d.stats.Txns.Add(1)
	d.stats.CommitTime.Store(c.Time.UnixNano())
	d.pos.AdvanceApplied(durable)
	return nil
}

// handleData applies a message of protocol version 1's form that is not a
// Begin or a Commit: received as such, or read back from a spool.
func (d *dispatcher) handleData(ctx context.Context, msg []byte) error {
	switch msg[0] {
	case pgoutput.MsgRelation:
		r, err := pgoutput.DecodeRelation(msg)
		if err != nil {
			return err
		}
		if d.noteDDLRelation(r) {
			return nil
		}
		d.noteRelation(r.ID, msg)
		return d.app.Relation(ctx, r)
	case pgoutput.MsgInsert, pgoutput.MsgUpdate, pgoutput.MsgDelete:
		if !d.inTxn {
			return fmt.Errorf("pgoutput %q change outside a transaction", msg[0])
		}
		if d.skipping {
			return nil
		}
		if err := pgoutput.DecodeChange(msg, &d.change); err != nil {
			return err
		}
		if d.isDDLTable(d.change.RelationID) {
			return d.ddlRow(ctx, &d.change)
		}
		d.stats.Rows.Add(1)
		return d.app.Change(ctx, &d.change)
	case pgoutput.MsgTruncate:
		if !d.inTxn {
			return fmt.Errorf("pgoutput Truncate outside a transaction")
		}
		if d.skipping {
			return nil
		}
		t, err := pgoutput.DecodeTruncate(msg)
		if err != nil {
			return err
		}
		if t = d.withoutDDLTable(t); len(t.RelationIDs) == 0 {
			return nil
		}
		return d.app.Truncate(ctx, t)
	case pgoutput.MsgMessage:
		return d.message(ctx, msg)
	case pgoutput.MsgType, pgoutput.MsgOrigin:
		return nil
	}
	return fmt.Errorf("unknown pgoutput message type %q", msg[0])
}

// message hands a captured DDL statement (a transactional message of
// ddl.Prefix, job.ddl = "capture") to the Applier, at its place in its
// source transaction; any other message is ignored, as is every message
// when the session did not ask for them (SessionOptions.Messages).
func (d *dispatcher) message(ctx context.Context, msg []byte) error {
	m, err := pgoutput.DecodeMessage(msg)
	if err != nil {
		return err
	}
	if !isDDL(m) {
		return nil
	}
	return d.ddl(ctx, m)
}

// ddl hands the captured statement m to the Applier: received as a
// message, or as a row of pgsync.ddl (ddltable.go).
func (d *dispatcher) ddl(ctx context.Context, m pgoutput.Message) error {
	if !d.inTxn {
		return fmt.Errorf("pgoutput %s message at %s outside a transaction", ddl.Prefix, m.LSN)
	}
	if d.skipping {
		return nil
	}
	app, ok := d.app.(DDLApplier)
	if !ok {
		return fmt.Errorf("pgoutput %s message at %s: the applier takes no DDL", ddl.Prefix, m.LSN)
	}
	return app.DDL(ctx, m)
}

// isDDL says whether m carries a statement the source's DDL capture
// emitted: transactional, of ddl.Prefix.
func isDDL(m pgoutput.Message) bool { return m.Transactional && m.Prefix == ddl.Prefix }
