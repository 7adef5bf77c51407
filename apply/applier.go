// Package apply writes decoded source transactions to the target, exactly
// once: each target transaction also moves the job's position in
// pgsync.progress.
//
// One word per thing (issue 23):
//
//   - a row set is consecutive row changes of one kind on one table, sent
//     as one statement (a multi-row INSERT, an UPDATE ... FROM (VALUES
//     ...), a DELETE ... WHERE key IN (...)) or as one COPY (rowset.go);
//   - a batch is the statements sent through the target connection's
//     pipeline between two Syncs, whose results are read one batch behind
//     (pipeline.go; Options.MaxBatchRows, Options.MaxBatchBytes);
//   - a group is consecutive source transactions committed as one target
//     transaction (group commit, transaction.go; Options.MaxGroupBytes);
//   - a session is one connection to each server, from a start or a
//     reconnect to its end: one Applier each (replication.Stream);
//   - run is the command, pgsync run, and nothing else.
package apply

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/metrics"
	"github.com/pgsync/pgsync/pgoutput"
)

// Options configures an Applier.
type Options struct {
	Job string
	// MaxBatchRows and MaxBatchBytes bound the rows and value bytes of a
	// batch: what is sent to the target between two synchronisation points
	// (one round trip).
	MaxBatchRows  int
	MaxBatchBytes int64
	// MaxGroupBytes bounds the value bytes of a group: the source
	// transactions committed as one target transaction. 0 is MaxBatchBytes.
	MaxGroupBytes int64
	// Prepared, when set, holds the number of statements prepared on the
	// target connection: the Applier keeps it, across sessions when the
	// caller passes the same counter to each, for the progress line
	// (replication.StreamOptions.Prepared), pgsync_prepared_statements and the
	// soak test.
	Prepared *atomic.Int64
	// Metrics, when set, counts rows by table and times target commits.
	Metrics *metrics.Apply
	// Logger receives the pause for a table being added; slog.Default()
	// when nil.
	Logger *slog.Logger
	// Selected says whether job.tables names a table now (the
	// configuration as it is on disk: add-tables may have been given a new
	// one while run runs). A table being added that it no longer names is
	// an abandoned add: run neither waits for it nor applies its changes.
	// Nil names every table.
	Selected func(schema, name string) bool
	// SourceColumns reads the columns of a source table as the source's
	// catalog defines them now (catalog.SourceColumns over a connection of
	// its own: the Applier has only the target's). A Relation message that
	// shows a column the target lacks asks for them, so that the statement
	// the error suggests, or AddColumns runs, adds the column as the source
	// defines it: its default, collation, NOT NULL (issue 16). Nil: the
	// statement has the type the stream carries, and nothing else.
	SourceColumns func(ctx context.Context, schema, table string) ([]catalog.ColumnDef, error)
	// AddColumns (job.add_columns) makes a Relation message that shows a
	// column the target lacks add it there, with the source's definition,
	// in the target transaction that applies the change, and one whose
	// type the target's column cannot hold widen that column; without it,
	// both stop with the statement that would.
	AddColumns bool
	// Shapes remembers the tables whose schema check passed (ShapeCache):
	// give every Applier of one pgsync run the same one, so that a reconnect checks
	// no unchanged table again. Nil: the Applier keeps one of its own.
	Shapes *ShapeCache
	// Connect opens another target connection as run's own: with it, a
	// transaction the source streams is applied as it arrives, by a second
	// Applier (OpenStreamed, tuning.apply_streamed); nil applies it at its
	// commit, from its spool.
	Connect func(ctx context.Context) (*pgx.Conn, error)
	// DDL (job.ddl = "capture") applies the statements the source's DDL
	// capture emits (ddl.go); DDLKey is the key their signatures are
	// checked with (ddl.ReadKey).
	DDL    bool
	DDLKey string
}

// selected says whether the job's configuration still names a table.
func (o *Options) selected(schema, name string) bool {
	return o.Selected == nil || o.Selected(schema, name)
}

// Applier applies decoded source transactions to the target through one
// connection in pipeline mode.
//
// Consecutive row changes of the same kind on the same table are gathered
// into row sets sent as one statement (see rowset.go). Several consecutive
// source transactions may share one target transaction, a group, when more
// are already waiting (group commit). Each target transaction also moves
// pgsync.progress to the end of the last source transaction it holds, so a
// crash loses or repeats nothing.
//
// Its parts, one file each: the target transaction (transaction.go), the
// pipeline and the check of every result (pipeline.go), the relation cache
// and row checks (relation.go), the statement cache (statements.go), row sets
// (rowset.go) and tables added by pgsync add-tables (added.go).
//
// An Applier is used by one goroutine.
type Applier struct {
	conn *pgx.Conn
	opts Options

	relations map[uint32]*relation
	stmts     map[string]*statement
	stmtSeq   int
	keyBuf    []byte
	params    [][]byte
	formats   []int16
	setBuf    []int
	stagedSeq int64 // the id of the last value staged (staged.go)
	rowSet    rowSet
	copyBuf   []byte // a row set of INSERTs in COPY text format
	hash      maphash.Hash

	pipeline    *pgconn.Pipeline
	writeBuf    []byte    // pgx's write buffer, kept across writes (writeBuffer)
	pending     []pending // statements sent, results not read yet, from pendingHead
	pendingHead int
	batchEnds   []int // end of each batch in pending whose Sync was sent
	sinceFlush  int
	batchRows   int
	batchBytes  int64

	inTarget  bool // a target transaction is open
	groupRows int
	// txnFirstRow is groupRows when the current source transaction began.
	txnFirstRow int
	groupBytes  int64
	groupStart  time.Time
	groupEnd    pglogrepl.LSN
	groupFirst  pglogrepl.LSN // commit LSN of the group's first source transaction
	groupTime   time.Time     // source commit time of the group's last transaction
	groupDDL    bool          // the group ran a captured DDL statement: it commits at its source transaction's end (keepGroupOpen)
	timeBuf     []byte
	sourceLSN   pglogrepl.LSN // commit LSN of the source transaction being applied
	skips       []*relation   // relations with rows a trigger skipped in the open group (skip.go)

	// streamed: this Applier applies one streamed transaction as it
	// arrives (streamed.go); its rows are counted at its commit, and a
	// change it cannot apply before the commit LSN is known fails with
	// ErrAppliedAtCommit. stopWatch ends its lock watch.
	streamed  bool
	stopWatch func()

	// skipDDL are the captured statements pgsync run --skip-ddl recorded,
	// by the LSN of their message (ddl.go).
	skipDDL map[pglogrepl.LSN]bool
}

// New returns an Applier writing through conn, which it owns from now on.
func New(conn *pgx.Conn, opts Options) *Applier {
	if opts.MaxBatchRows <= 0 {
		opts.MaxBatchRows = 8000
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = 4 << 20
	}
	if opts.MaxGroupBytes <= 0 {
		opts.MaxGroupBytes = opts.MaxBatchBytes
	}
	if opts.Shapes == nil {
		opts.Shapes = NewShapeCache()
	}
	a := &Applier{
		conn:      conn,
		opts:      opts,
		relations: make(map[uint32]*relation),
		stmts:     make(map[string]*statement),
	}
	a.hash.SetSeed(maphash.MakeSeed())
	return a
}

// ResumeLSN reads the job's durable position: every source transaction
// ending at or before it is already applied.
func (a *Applier) ResumeLSN(ctx context.Context) (pglogrepl.LSN, error) {
	p, err := ledger.ReadReady(ctx, a.conn, a.opts.Job)
	if err != nil {
		return 0, err
	}
	if err := a.awaitAddedTables(ctx); err != nil {
		return 0, err
	}
	if err := a.readDDLSkips(ctx); err != nil {
		return 0, err
	}
	return p.LSN, nil
}

// Change queues one row change: into the current row set when it can join it,
// otherwise as a statement of its own.
func (a *Applier) Change(ctx context.Context, c *pgoutput.Change) error {
	rel := a.relations[c.RelationID]
	if rel == nil {
		return a.fail(ctx, fmt.Errorf("change at %s: relation %d was never described by the source", a.sourceLSN, c.RelationID))
	}
	if a.streamed && a.sourceLSN < rel.copiedAt {
		// sourceLSN is only a lower bound of the commit LSN yet.
		return a.fail(ctx, notAsArrived("%s was copied at %s, after %s", rel.src, rel.copiedAt, a.sourceLSN))
	}
	if a.sourceLSN < rel.copiedAt {
		return nil // in the copy add-tables took (the skip rule, per table)
	}
	if len(c.New.Kinds) != 0 && len(c.New.Kinds) != len(rel.cols) || len(c.Old.Kinds) != 0 && len(c.Old.Kinds) != len(rel.cols) {
		return a.fail(ctx, fmt.Errorf("%s on %s at %s: row has %d columns, relation has %d", opName(c.Op), rel.src, a.sourceLSN, max(len(c.New.Kinds), len(c.Old.Kinds)), len(rel.cols)))
	}
	if err := a.checkValues(rel, c); err != nil {
		return a.fail(ctx, err)
	}
	a.groupRows++
	if rel.counted != nil {
		if a.streamed {
			rel.uncounted[rowOpIndex(c.Op)]++
		} else {
			rel.counted[rowOpIndex(c.Op)].Inc()
		}
	}
	if fitsRowSet(rel, c) {
		joined, full := a.addToRowSet(rel, c)
		if !joined {
			if err := a.sendRowSet(ctx); err != nil {
				return err
			}
			_, full = a.addToRowSet(rel, c)
		}
		if full {
			return a.sendRowSet(ctx)
		}
		return nil
	}
	if err := a.sendRowSet(ctx); err != nil {
		return err
	}
	st, fresh, params, n := a.bindRow(rel, c)
	formats, err := a.byteaFormats(rel, st, params)
	if err != nil {
		return a.fail(ctx, err)
	}
	a.startPipeline(ctx)
	left := n
	if staged := stagedValues(st, params, n); staged != nil {
		if fresh { // cached by bindRow: it must exist for the rows to come
			a.prepare(st, c.Op, rel)
		}
		if st, fresh, left, err = a.stage(ctx, rel, c.Op, st, staged, params, formats); err != nil {
			return err
		}
	}
	if fresh {
		a.prepare(st, c.Op, rel)
	}
	a.reserve(params, left)
	a.pipeline.SendQueryPrepared(st.name, params, formats, nil)
	clear(params) // the statement's bytes are the only copy left
	a.pending = append(a.pending, pending{kind: pendingRows, op: c.Op, expect: 1, rel: rel, lsn: a.sourceLSN})
	return a.queued(ctx, 1, n)
}

// prepare queues the preparation of statement st, which applies op to rel.
func (a *Applier) prepare(st *statement, op byte, rel *relation) {
	a.pipeline.SendPrepare(st.name, st.sql, nil)
	a.pending = append(a.pending, pending{kind: pendingPrepare, op: op, rel: rel, lsn: a.sourceLSN})
}

// Truncate queues a TRUNCATE of the listed relations with the options the
// source statement used.
func (a *Applier) Truncate(ctx context.Context, t pgoutput.Truncate) error {
	if err := a.sendRowSet(ctx); err != nil {
		return err
	}
	rels := make([]*relation, 0, len(t.RelationIDs))
	for _, id := range t.RelationIDs {
		rel := a.relations[id]
		if rel == nil {
			return a.fail(ctx, fmt.Errorf("TRUNCATE at %s: relation %d was never described by the source", a.sourceLSN, id))
		}
		if a.streamed && a.sourceLSN < rel.copiedAt {
			return a.fail(ctx, notAsArrived("%s was copied at %s, after %s", rel.src, rel.copiedAt, a.sourceLSN))
		}
		if a.sourceLSN >= rel.copiedAt { // else in add-tables' copy already
			rels = append(rels, rel)
		}
	}
	if len(rels) == 0 {
		return nil
	}
	a.startPipeline(ctx)
	a.pipeline.SendQueryParams(truncateSQL(rels, t.Options), nil, nil, nil, nil)
	names := make([]string, len(rels))
	for i, r := range rels {
		names[i] = r.src.String()
	}
	a.pending = append(a.pending, pending{kind: pendingControl, op: pgoutput.MsgTruncate, lsn: a.sourceLSN, tables: strings.Join(names, ", ")})
	return a.queued(ctx, 1, 0)
}

// rowOpIndex is the index of a row change's operation in
// relation.counted: INSERT, UPDATE, DELETE.
func rowOpIndex(op byte) int {
	switch op {
	case pgoutput.MsgInsert:
		return 0
	case pgoutput.MsgUpdate:
		return 1
	}
	return 2
}

// opName names a message type in errors: INSERT, UPDATE, DELETE, TRUNCATE.
func opName(op byte) string {
	switch op {
	case pgoutput.MsgInsert:
		return "INSERT"
	case pgoutput.MsgUpdate:
		return "UPDATE"
	case pgoutput.MsgDelete:
		return "DELETE"
	case pgoutput.MsgTruncate:
		return "TRUNCATE"
	}
	return "change"
}

// Close rolls back any open target transaction and closes the connection.
func (a *Applier) Close(ctx context.Context) error {
	a.reset(ctx)
	if a.stopWatch != nil {
		a.stopWatch()
		a.stopWatch = nil
	}
	return a.conn.Close(ctx)
}
