package apply

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgoutput"
)

// Options configures an Applier.
type Options struct {
	Job string
	// MaxBatchRows and MaxBatchBytes bound the statements queued on the
	// target connection before a round trip, and the rows of the source
	// transactions grouped into one target transaction.
	MaxBatchRows  int
	MaxBatchBytes int64
}

// flushEvery is how many queued statements go to the server in one write
// while a batch is being built, so that the server works while we decode.
const flushEvery = 64

// Applier applies decoded source transactions to the target through one
// connection in pipeline mode. Several consecutive source transactions may
// share one target transaction (group commit) when more are already waiting;
// each target transaction also moves pgsync.progress to the end of the last
// source transaction it holds, so a crash loses or repeats nothing.
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

	pipeline    *pgconn.Pipeline
	pending     []pending // statements sent, results not read yet, from pendingHead
	pendingHead int
	batchEnds   []int // end of each batch in pending whose Sync was sent
	sinceFlush  int
	batchRows   int
	batchBytes  int64
	inTarget    bool // a target transaction is open
	groupBytes  int64
	groupStart  time.Time
	run         insertRun
	groupEnd    pglogrepl.LSN
	sourceLSN   pglogrepl.LSN // commit LSN of the source transaction being applied
	progressSQL string
}

// insertRun gathers consecutive INSERTs into one table so that they go out
// as one multi-row INSERT: the target runs its executor once per run, not
// once per row.
type insertRun struct {
	rel    *relation
	rows   int
	params [][]byte // values of every row, row after row
	bytes  int64
}

// maxRunRows bounds a run; with the 65535-parameter limit of the protocol,
// wide tables get shorter runs.
const maxRunRows = 64

// maxGroupAge bounds how long a group of source transactions may stay
// uncommitted on the target, so the acknowledged position keeps moving
// under continuous load.
const maxGroupAge = time.Second

type relation struct {
	src    *pgoutput.Relation
	ident  string   // quoted schema.table
	cols   []string // quoted column names
	keys   []int    // indexes of replica identity columns
	full   bool     // REPLICA IDENTITY FULL: match the whole old row
	textEq []bool   // compare as text: the type has no equality operator
	gen    uint32   // bumped on each Relation message, part of statement keys
}

type statement struct {
	name string
	sql  string
	rel  *relation
	// setCols are the new-tuple columns bound first (INSERT: all; UPDATE:
	// those not unchanged-TOAST); the identity values follow for UPDATE and
	// DELETE.
	setCols []int
}

type pendingKind byte

const (
	pendingRow pendingKind = iota
	pendingPrepare
	pendingControl // BEGIN, COMMIT, progress update, TRUNCATE
	pendingProgress
)

type pending struct {
	kind pendingKind
	op   byte
	rel  *relation
	lsn  pglogrepl.LSN
}

// New returns an Applier writing through conn, which it owns from now on.
func New(conn *pgx.Conn, opts Options) *Applier {
	if opts.MaxBatchRows <= 0 {
		opts.MaxBatchRows = 500
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = 4 << 20
	}
	return &Applier{
		conn:        conn,
		opts:        opts,
		relations:   make(map[uint32]*relation),
		stmts:       make(map[string]*statement),
		progressSQL: "UPDATE pgsync.progress SET lsn = $2::pg_lsn, updated_at = now() WHERE job = $1",
	}
}

// ResumeLSN reads the job's durable position: every source transaction
// ending at or before it is already applied.
func (a *Applier) ResumeLSN(ctx context.Context) (pglogrepl.LSN, error) {
	p, err := ReadProgress(ctx, a.conn, a.opts.Job)
	if errors.Is(err, ErrNoProgress) {
		return 0, fmt.Errorf("job %s is not bootstrapped on the target (no row in pgsync.progress): run pgsync bootstrap first", a.opts.Job)
	}
	if err != nil {
		return 0, err
	}
	if p.State != StateReady {
		return 0, fmt.Errorf("job %s: bootstrap did not finish (pgsync.progress state %q): rerun pgsync bootstrap", a.opts.Job, p.State)
	}
	return p.LSN, nil
}

func (a *Applier) startPipeline(ctx context.Context) {
	if a.pipeline == nil {
		a.pipeline = a.conn.PgConn().StartPipeline(ctx)
	}
}

// Begin opens a target transaction unless one is already open for the group.
func (a *Applier) Begin(ctx context.Context, b pgoutput.Begin) error {
	a.sourceLSN = b.FinalLSN
	if a.inTarget {
		return nil
	}
	a.startPipeline(ctx)
	a.pipeline.SendQueryParams("BEGIN", nil, nil, nil, nil)
	a.pending = append(a.pending, pending{kind: pendingControl, lsn: b.FinalLSN})
	a.inTarget = true
	a.groupStart = time.Now()
	return nil
}

// Relation records a table's shape as the source now sends it and checks
// that the target table can take it: every source column must exist there.
func (a *Applier) Relation(ctx context.Context, r *pgoutput.Relation) error {
	if err := a.flushRun(ctx); err != nil {
		return err
	}
	if err := a.drain(ctx); err != nil {
		return err
	}
	target, ok, err := catalog.Lookup(ctx, a.conn, r.Schema, r.Name)
	if err != nil {
		return a.fail(ctx, err)
	}
	if !ok {
		return a.fail(ctx, fmt.Errorf("table %s at %s: it is published on the source but missing on the target", r, a.sourceLSN))
	}
	have := make(map[string]bool, len(target.Columns))
	for _, c := range target.Columns {
		if c.Generated == "" {
			have[c.Name] = true
		}
	}
	rel, missing := newRelation(r, a.relations[r.ID], have)
	if missing >= 0 {
		c := r.Columns[missing]
		var typ string
		if err := a.conn.QueryRow(ctx, "SELECT format_type($1::oid, $2::int)", c.TypeOID, c.TypMod).Scan(&typ); err != nil {
			typ = "oid " + strconv.FormatUint(uint64(c.TypeOID), 10)
		}
		return a.fail(ctx, fmt.Errorf("table %s at %s: column %s (%s) exists on the source but not on the target; add it on the target (ALTER TABLE %s ADD COLUMN %s %s) and rerun pgsync run",
			r, a.sourceLSN, c.Name, typ, rel.ident, catalog.QuoteIdent(c.Name), typ))
	}
	a.relations[r.ID] = rel
	return nil
}

// newRelation builds the apply-side view of r. have holds the target's
// column names; missing is the index of the first source column the target
// lacks, or -1.
func newRelation(r *pgoutput.Relation, prev *relation, have map[string]bool) (rel *relation, missing int) {
	rel = &relation{src: r, ident: pgx.Identifier{r.Schema, r.Name}.Sanitize(), full: r.ReplicaIdentity == 'f'}
	if prev != nil {
		rel.gen = prev.gen + 1
	}
	for i, c := range r.Columns {
		if !have[c.Name] {
			return rel, i
		}
		rel.cols = append(rel.cols, catalog.QuoteIdent(c.Name))
		rel.textEq = append(rel.textEq, noEquality[c.TypeOID])
		if c.Key {
			rel.keys = append(rel.keys, i)
		}
	}
	return rel, -1
}

// noEquality lists built-in types without a default equality operator: a
// REPLICA IDENTITY FULL match compares them as text.
var noEquality = map[uint32]bool{
	114: true, 199: true, // json, json[]
	142: true, 143: true, // xml, xml[]
	600: true, 601: true, 602: true, 603: true, 604: true, 628: true, 718: true, // geometric
	1017: true, 1018: true, 1019: true, 1020: true, 1027: true, 629: true, 719: true,
}

// Change queues one row change. Consecutive INSERTs into one table are
// gathered into a run and sent as one statement.
func (a *Applier) Change(ctx context.Context, c *pgoutput.Change) error {
	if c.Op == pgoutput.MsgInsert {
		if a.run.rows > 0 && a.run.rel.src.ID != c.RelationID {
			if err := a.flushRun(ctx); err != nil {
				return err
			}
		}
		full, err := a.addToRun(c)
		if err != nil {
			return a.fail(ctx, err)
		}
		if full {
			return a.flushRun(ctx)
		}
		return nil
	}
	if err := a.flushRun(ctx); err != nil {
		return err
	}
	st, fresh, params, n, err := a.bind(c)
	if err != nil {
		return a.fail(ctx, err)
	}
	a.startPipeline(ctx)
	if fresh {
		a.pipeline.SendPrepare(st.name, st.sql, nil)
		a.pending = append(a.pending, pending{kind: pendingPrepare, op: c.Op, rel: st.rel, lsn: a.sourceLSN})
	}
	a.pipeline.SendQueryPrepared(st.name, params, nil, nil)
	a.pending = append(a.pending, pending{kind: pendingRow, op: c.Op, rel: st.rel, lsn: a.sourceLSN})
	return a.queued(ctx, 1, n)
}

// addToRun appends an INSERT's values to the current run, which is empty or
// of the same table. full reports that the run has reached its size.
func (a *Applier) addToRun(c *pgoutput.Change) (full bool, err error) {
	rel := a.relations[c.RelationID]
	if rel == nil {
		return false, fmt.Errorf("insert at %s: relation %d was never described by the source", a.sourceLSN, c.RelationID)
	}
	if len(c.New.Kinds) != len(rel.cols) {
		return false, fmt.Errorf("insert on %s at %s: row has %d columns, relation has %d", rel.src, a.sourceLSN, len(c.New.Kinds), len(rel.cols))
	}
	for i, kind := range c.New.Kinds {
		if kind == pgoutput.ValueUnchanged {
			return false, fmt.Errorf("insert on %s at %s: column %s sent as unchanged", rel.src, a.sourceLSN, rel.src.Columns[i].Name)
		}
	}
	a.run.rel = rel
	a.run.rows++
	a.run.params = append(a.run.params, c.New.Values...)
	for _, v := range c.New.Values {
		a.run.bytes += int64(len(v))
	}
	return a.run.rows >= min(maxRunRows, 65535/max(len(rel.cols), 1)), nil
}

// flushRun sends the gathered INSERTs as one statement.
func (a *Applier) flushRun(ctx context.Context) error {
	if a.run.rows == 0 {
		return nil
	}
	rel, rows := a.run.rel, a.run.rows
	st, fresh := a.runStatement(rel, rows)
	a.startPipeline(ctx)
	if fresh {
		a.pipeline.SendPrepare(st.name, st.sql, nil)
		a.pending = append(a.pending, pending{kind: pendingPrepare, op: pgoutput.MsgInsert, rel: rel, lsn: a.sourceLSN})
	}
	a.pipeline.SendQueryPrepared(st.name, a.run.params, nil, nil)
	a.pending = append(a.pending, pending{kind: pendingRow, op: pgoutput.MsgInsert, rel: rel, lsn: a.sourceLSN})
	n := a.run.bytes
	clear(a.run.params) // drop the references to message buffers
	a.run = insertRun{params: a.run.params[:0]}
	return a.queued(ctx, rows, n)
}

// runStatement returns the INSERT statement of rows rows into rel; fresh is
// true on its first use, when it still has to be prepared.
func (a *Applier) runStatement(rel *relation, rows int) (st *statement, fresh bool) {
	k := a.keyBuf[:0]
	k = append(k, pgoutput.MsgInsert)
	k = binary.BigEndian.AppendUint32(k, rel.src.ID)
	k = binary.BigEndian.AppendUint32(k, rel.gen)
	k = binary.BigEndian.AppendUint16(k, uint16(rows))
	a.keyBuf = k
	if st = a.stmts[string(k)]; st != nil {
		return st, false
	}
	a.stmtSeq++
	st = &statement{name: "pgsync_" + strconv.Itoa(a.stmtSeq), sql: insertSQL(rel, rows), rel: rel}
	a.stmts[string(k)] = st
	return st, true
}

// bind finds the statement for the change (fresh when it must be prepared
// first) and its parameters: text values straight from the message, no
// conversion. n is the number of value bytes.
func (a *Applier) bind(c *pgoutput.Change) (st *statement, fresh bool, params [][]byte, n int64, err error) {
	rel := a.relations[c.RelationID]
	if rel == nil {
		return nil, false, nil, 0, fmt.Errorf("change at %s: relation %d was never described by the source", a.sourceLSN, c.RelationID)
	}
	if len(c.New.Kinds) != 0 && len(c.New.Kinds) != len(rel.cols) || len(c.Old.Kinds) != 0 && len(c.Old.Kinds) != len(rel.cols) {
		return nil, false, nil, 0, fmt.Errorf("%s on %s at %s: row has %d columns, relation has %d", opName(c.Op), rel.src, a.sourceLSN, max(len(c.New.Kinds), len(c.Old.Kinds)), len(rel.cols))
	}
	st, fresh, err = a.statementFor(rel, c)
	if err != nil {
		return nil, false, nil, 0, err
	}
	params = a.params[:0]
	for _, i := range st.setCols {
		params = append(params, c.New.Values[i])
		n += int64(len(c.New.Values[i]))
	}
	{
		key := &c.Old
		if c.OldKind == 0 {
			key = &c.New
		}
		for _, i := range rel.keys {
			if key.Kinds[i] == pgoutput.ValueUnchanged {
				return nil, false, nil, 0, fmt.Errorf("%s on %s at %s: identity column %s was not sent (unchanged TOAST value)", opName(c.Op), rel.src, a.sourceLSN, rel.src.Columns[i].Name)
			}
			params = append(params, key.Values[i])
			n += int64(len(key.Values[i]))
		}
	}
	a.params = params
	return st, fresh, params, n, nil
}

// queued accounts for a queued statement of rows rows and n value bytes,
// and starts a round trip when the batch is full.
func (a *Applier) queued(ctx context.Context, rows int, n int64) error {
	a.batchRows += rows
	a.batchBytes += n
	a.groupBytes += n
	a.sinceFlush++
	if a.batchRows >= a.opts.MaxBatchRows || a.batchBytes >= a.opts.MaxBatchBytes {
		return a.send(ctx)
	}
	if a.sinceFlush >= flushEvery {
		a.sinceFlush = 0
		if err := a.pipeline.Flush(); err != nil {
			return a.fail(ctx, fmt.Errorf("send to target at %s: %w", a.sourceLSN, err))
		}
	}
	return nil
}

// statementFor returns the prepared statement for the change's shape; fresh
// is true on its first use, when it still has to be prepared.
func (a *Applier) statementFor(rel *relation, c *pgoutput.Change) (st *statement, fresh bool, err error) {
	k := a.keyBuf[:0]
	k = append(k, c.Op)
	k = binary.BigEndian.AppendUint32(k, c.RelationID)
	k = binary.BigEndian.AppendUint32(k, rel.gen)
	if c.Op == pgoutput.MsgUpdate {
		var bits byte
		for i, kind := range c.New.Kinds {
			if kind == pgoutput.ValueUnchanged {
				bits |= 1 << (i % 8)
			}
			if i%8 == 7 || i == len(c.New.Kinds)-1 {
				k = append(k, bits)
				bits = 0
			}
		}
	}
	a.keyBuf = k
	if st := a.stmts[string(k)]; st != nil {
		return st, false, nil
	}
	if c.Op != pgoutput.MsgUpdate && c.Op != pgoutput.MsgDelete {
		return nil, false, fmt.Errorf("%s at %s: not an UPDATE or DELETE", opName(c.Op), a.sourceLSN)
	}
	if !rel.full && len(rel.keys) == 0 {
		return nil, false, fmt.Errorf("%s on %s at %s: the table has no replica identity on the source", opName(c.Op), rel.src, a.sourceLSN)
	}
	st = &statement{rel: rel}
	switch c.Op {
	case pgoutput.MsgUpdate:
		for i, kind := range c.New.Kinds {
			if kind != pgoutput.ValueUnchanged {
				st.setCols = append(st.setCols, i)
			}
		}
		st.sql = updateSQL(rel, st.setCols)
	case pgoutput.MsgDelete:
		st.sql = deleteSQL(rel)
	}
	a.stmtSeq++
	st.name = "pgsync_" + strconv.Itoa(a.stmtSeq)
	a.stmts[string(k)] = st
	return st, true, nil
}

// insertSQL returns an INSERT of rows rows.
func insertSQL(rel *relation, rows int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES ", rel.ident, strings.Join(rel.cols, ", "))
	p := 1
	for r := 0; r < rows; r++ {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for i := range rel.cols {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "$%d", p)
			p++
		}
		b.WriteString(")")
	}
	return b.String()
}

// whereIdentity writes the row match, numbering parameters from next. A
// full-row identity matches one row only, even among duplicates.
func whereIdentity(b *strings.Builder, rel *relation, next int) {
	if rel.full {
		fmt.Fprintf(b, " WHERE ctid = (SELECT ctid FROM %s WHERE ", rel.ident)
	} else {
		b.WriteString(" WHERE ")
	}
	for n, i := range rel.keys {
		if n > 0 {
			b.WriteString(" AND ")
		}
		switch {
		case rel.full && rel.textEq[i]:
			fmt.Fprintf(b, "%s::text IS NOT DISTINCT FROM $%d::text", rel.cols[i], next+n)
		case rel.full:
			fmt.Fprintf(b, "%s IS NOT DISTINCT FROM $%d", rel.cols[i], next+n)
		default:
			fmt.Fprintf(b, "%s = $%d", rel.cols[i], next+n)
		}
	}
	if rel.full {
		b.WriteString(" LIMIT 1)")
	}
}

func updateSQL(rel *relation, setCols []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "UPDATE %s SET ", rel.ident)
	for n, i := range setCols {
		if n > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = $%d", rel.cols[i], n+1)
	}
	whereIdentity(&b, rel, len(setCols)+1)
	return b.String()
}

func deleteSQL(rel *relation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "DELETE FROM %s", rel.ident)
	whereIdentity(&b, rel, 1)
	return b.String()
}

// Truncate queues a TRUNCATE of the listed relations with the options the
// source statement used.
func (a *Applier) Truncate(ctx context.Context, t pgoutput.Truncate) error {
	if err := a.flushRun(ctx); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("TRUNCATE ONLY ")
	for i, id := range t.RelationIDs {
		rel := a.relations[id]
		if rel == nil {
			return a.fail(ctx, fmt.Errorf("truncate at %s: relation %d was never described by the source", a.sourceLSN, id))
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(rel.ident)
	}
	if t.Options&pgoutput.TruncateRestartIdentity != 0 {
		b.WriteString(" RESTART IDENTITY")
	}
	if t.Options&pgoutput.TruncateCascade != 0 {
		b.WriteString(" CASCADE")
	}
	a.startPipeline(ctx)
	a.pipeline.SendQueryParams(b.String(), nil, nil, nil, nil)
	a.pending = append(a.pending, pending{kind: pendingControl, op: pgoutput.MsgTruncate, lsn: a.sourceLSN})
	return a.queued(ctx, 1, 0)
}

// Commit ends a source transaction. When more is true (further source
// transactions are already waiting) and the group is under the batch
// limits, the target transaction stays open for them; otherwise it commits
// with the progress row at c.EndLSN. committed reports which happened.
//
// A run of INSERTs may continue into the next source transaction of the
// group: both commit in the same target transaction or not at all.
func (a *Applier) Commit(ctx context.Context, c pgoutput.Commit, more bool) (committed bool, err error) {
	a.groupEnd = c.EndLSN
	if more && a.groupBytes < a.opts.MaxBatchBytes && time.Since(a.groupStart) < maxGroupAge {
		return false, nil
	}
	return true, a.commit(ctx)
}

// Flush commits the open group of source transactions, if any.
func (a *Applier) Flush(ctx context.Context) (committed bool, err error) {
	if err := a.flushRun(ctx); err != nil {
		return false, err
	}
	if !a.inTarget {
		return false, nil
	}
	return true, a.commit(ctx)
}

// GroupEnd returns the end LSN of the last source transaction in the group
// that the last commit made durable.
func (a *Applier) GroupEnd() pglogrepl.LSN { return a.groupEnd }

func (a *Applier) commit(ctx context.Context) error {
	if !a.inTarget {
		return nil
	}
	if err := a.flushRun(ctx); err != nil {
		return err
	}
	a.startPipeline(ctx)
	a.pipeline.SendQueryParams(a.progressSQL, [][]byte{[]byte(a.opts.Job), []byte(a.groupEnd.String())}, nil, nil, nil)
	a.pending = append(a.pending, pending{kind: pendingProgress, lsn: a.groupEnd})
	a.pipeline.SendQueryParams("COMMIT", nil, nil, nil, nil)
	a.pending = append(a.pending, pending{kind: pendingControl, lsn: a.groupEnd})
	if err := a.drain(ctx); err != nil {
		return err
	}
	a.inTarget = false
	a.groupBytes = 0
	return nil
}

// send ends the current batch with a Sync and sends it, then reads the
// results of the batches before it: one batch stays in flight, so the
// target executes it while the next one is built.
func (a *Applier) send(ctx context.Context) error {
	a.batchRows, a.batchBytes, a.sinceFlush = 0, 0, 0
	if a.pipeline == nil || a.pendingHead == len(a.pending) && len(a.batchEnds) == 0 {
		return nil
	}
	if n := len(a.batchEnds); n == 0 || a.batchEnds[n-1] != len(a.pending) {
		if err := a.pipeline.Sync(); err != nil {
			return a.fail(ctx, fmt.Errorf("send to target at %s: %w", a.sourceLSN, err))
		}
		a.batchEnds = append(a.batchEnds, len(a.pending))
	}
	for len(a.batchEnds) > 1 {
		if err := a.readBatch(ctx); err != nil {
			return err
		}
	}
	// Keep only the batch in flight, so that a long source transaction
	// does not grow the list.
	if a.pendingHead > 0 {
		n := copy(a.pending, a.pending[a.pendingHead:])
		a.pending = a.pending[:n]
		for i := range a.batchEnds {
			a.batchEnds[i] -= a.pendingHead
		}
		a.pendingHead = 0
	}
	return nil
}

// drain sends what is queued and waits for every result: afterwards the
// connection is out of pipeline mode and everything sent has succeeded.
func (a *Applier) drain(ctx context.Context) error {
	if err := a.send(ctx); err != nil {
		return err
	}
	for len(a.batchEnds) > 0 {
		if err := a.readBatch(ctx); err != nil {
			return err
		}
	}
	if a.pipeline == nil {
		return nil
	}
	p := a.pipeline
	a.pipeline = nil
	a.pending, a.pendingHead = a.pending[:0], 0
	if err := p.Close(); err != nil {
		return a.fail(ctx, fmt.Errorf("target pipeline at %s: %w", a.sourceLSN, err))
	}
	return nil
}

// readBatch reads and checks the results of the oldest batch in flight.
func (a *Applier) readBatch(ctx context.Context) error {
	p := a.pipeline
	end := a.batchEnds[0]
	for ; a.pendingHead < end; a.pendingHead++ {
		pd := &a.pending[a.pendingHead]
		res, err := p.GetResults()
		if err == nil {
			switch r := res.(type) {
			case *pgconn.ResultReader:
				var tag pgconn.CommandTag
				tag, err = r.Close()
				if err == nil && (pd.kind == pendingProgress || pd.kind == pendingRow && pd.op != pgoutput.MsgInsert) && tag.RowsAffected() != 1 {
					err = errNoRow
				}
			case *pgconn.StatementDescription:
			default:
				err = fmt.Errorf("unexpected pipeline result %T", res)
			}
		}
		if err != nil {
			return a.fail(ctx, describe(pd, a.opts.Job, err))
		}
	}
	if res, err := p.GetResults(); err != nil {
		return a.fail(ctx, fmt.Errorf("target sync at %s: %w", a.sourceLSN, err))
	} else if _, ok := res.(*pgconn.PipelineSync); !ok {
		return a.fail(ctx, fmt.Errorf("target sync at %s: unexpected result %T", a.sourceLSN, res))
	}
	a.batchEnds = a.batchEnds[1:]
	return nil
}

var errNoRow = errors.New("no row matched on the target: the target has diverged from the source")

func describe(pd *pending, job string, err error) error {
	switch pd.kind {
	case pendingRow:
		return fmt.Errorf("apply %s on %s at %s: %w", opName(pd.op), pd.rel.src, pd.lsn, err)
	case pendingPrepare:
		return fmt.Errorf("prepare %s on %s at %s: %w", opName(pd.op), pd.rel.src, pd.lsn, err)
	case pendingProgress:
		if errors.Is(err, errNoRow) {
			err = fmt.Errorf("the progress row of job %s is gone (was pgsync teardown run?)", job)
		}
		return fmt.Errorf("record progress at %s: %w", pd.lsn, err)
	}
	if pd.op == pgoutput.MsgTruncate {
		return fmt.Errorf("apply TRUNCATE at %s: %w", pd.lsn, err)
	}
	return fmt.Errorf("target transaction at %s: %w", pd.lsn, err)
}

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

// fail abandons the open target transaction and returns err. Nothing of the
// group is committed, so the resume position stays where it was.
func (a *Applier) fail(ctx context.Context, err error) error {
	a.reset(ctx)
	return err
}

func (a *Applier) reset(ctx context.Context) {
	if a.pipeline != nil {
		_ = a.pipeline.Close()
		a.pipeline = nil
	}
	a.pending, a.pendingHead, a.batchEnds = a.pending[:0], 0, a.batchEnds[:0]
	if a.inTarget && !a.conn.IsClosed() {
		_, _ = a.conn.Exec(ctx, "ROLLBACK")
	}
	a.inTarget = false
	clear(a.run.params)
	a.run = insertRun{params: a.run.params[:0]}
	a.groupBytes, a.batchRows, a.batchBytes, a.sinceFlush = 0, 0, 0, 0
}

// Close rolls back any open target transaction and closes the connection.
func (a *Applier) Close(ctx context.Context) error {
	a.reset(ctx)
	return a.conn.Close(ctx)
}
