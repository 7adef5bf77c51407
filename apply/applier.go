package apply

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/metrics"
	"github.com/pgsync/pgsync/pgoutput"
)

// Options configures an Applier.
type Options struct {
	Job string
	// MaxBatchRows and MaxBatchBytes bound the rows and value bytes sent to
	// the target between two synchronisation points (one round trip).
	// MaxBatchBytes also bounds a group of source transactions committed
	// as one target transaction.
	MaxBatchRows  int
	MaxBatchBytes int64
	// Prepared, when set, holds the number of statements prepared on the
	// target connection (for progress lines and the soak test).
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
}

// selected says whether the job's configuration still names a table.
func (o *Options) selected(schema, name string) bool {
	return o.Selected == nil || o.Selected(schema, name)
}

// skipAll is the copy position of a table whose changes are never applied:
// every transaction commits before it.
const skipAll = ^pglogrepl.LSN(0)

// flushEvery is how many queued statements go to the server in one write
// while a batch is being built, so that the server works while we decode.
const flushEvery = 64

// maxGroupAge bounds how long a group of source transactions may stay
// uncommitted on the target, so the acknowledged position keeps moving
// under continuous load.
const maxGroupAge = time.Second

// Applier applies decoded source transactions to the target through one
// connection in pipeline mode.
//
// Consecutive row changes of the same kind on the same table are gathered
// into runs sent as one statement (see run.go). Several consecutive source
// transactions may share one target transaction when more are already
// waiting (group commit). Each target transaction also moves
// pgsync.progress to the end of the last source transaction it holds, so a
// crash loses or repeats nothing.
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
	run       rowRun
	copyBuf   []byte // a run of INSERTs in COPY text format
	hash      maphash.Hash

	pipeline    *pgconn.Pipeline
	pending     []pending // statements sent, results not read yet, from pendingHead
	pendingHead int
	batchEnds   []int // end of each batch in pending whose Sync was sent
	sinceFlush  int
	batchRows   int
	batchBytes  int64

	inTarget   bool // a target transaction is open
	groupRows  int
	groupBytes int64
	groupStart time.Time
	groupEnd   pglogrepl.LSN
	groupTime  time.Time // source commit time of the group's last transaction
	timeBuf    []byte
	sourceLSN  pglogrepl.LSN // commit LSN of the source transaction being applied
}

// relation is the apply-side view of a published table.
type relation struct {
	src    *pgoutput.Relation
	ident  string   // quoted schema.table
	cols   []string // quoted column names
	types  []string // the target's type of each column, for casts
	keys   []int    // indexes of replica identity columns
	isKey  []bool   // per column: part of the replica identity
	always []bool   // per column: GENERATED ALWAYS AS IDENTITY on the target
	// anyAlways: INSERTs need OVERRIDING SYSTEM VALUE.
	anyAlways bool
	full      bool   // REPLICA IDENTITY FULL: match the whole old row
	textEq    []bool // compare as text: the type has no equality operator
	gen       uint32 // bumped on each Relation message, part of statement keys
	// counted are the row counters by operation, in rowOpIndex order
	// (Options.Metrics); nil without metrics. An array, not a map: it is
	// read for every row.
	counted *[3]prometheus.Counter
	// copiedAt is where the table's copy was taken (0 for a table copied
	// under the job's slot): its changes in transactions committed before
	// it are in the copy already. skipAll for a table out of the job.
	copiedAt pglogrepl.LSN
	// lastRowKey and lastRowStmt are the cache key and statement of the
	// last single-row statement bound for the relation: a stream of
	// deletes or key changes finds its statement without hashing the key.
	lastRowKey  []byte
	lastRowStmt *statement
}

// statement is a prepared statement of the target connection.
type statement struct {
	name string
	sql  string
	// setCols are the new-tuple columns an UPDATE sets (those not sent as
	// unchanged TOAST); their values come first, the identity values after.
	setCols []int
	relID   uint32 // the relation it was prepared for
}

type pendingKind byte

const (
	pendingRows pendingKind = iota
	pendingPrepare
	pendingControl // BEGIN, TRUNCATE
	pendingProgress
	pendingCommit
)

// pending is a statement whose result has not been read yet.
type pending struct {
	kind pendingKind
	op   byte
	// expect is the number of rows the statement must affect; 0 when any
	// number is fine.
	expect int32
	rel    *relation
	lsn    pglogrepl.LSN
	tables string // TRUNCATE: the tables, for the error
}

const progressSQL = "UPDATE pgsync.progress SET lsn = $2::pg_lsn, source_commit_time = $3::timestamptz, updated_at = now() WHERE job = $1"

// New returns an Applier writing through conn, which it owns from now on.
func New(conn *pgx.Conn, opts Options) *Applier {
	if opts.MaxBatchRows <= 0 {
		opts.MaxBatchRows = 500
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = 4 << 20
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
	// Also creates pgsync.tables for a job bootstrapped by an earlier
	// release: Relation reads it for every table.
	if err := EnsureProgressTable(ctx, a.conn); err != nil {
		return 0, err
	}
	if err := a.awaitAddedTables(ctx); err != nil {
		return 0, err
	}
	return p.LSN, nil
}

// addedTablesPoll is how often a paused run looks at pgsync.tables, and
// addedTablesLogEvery how often it says it is still waiting.
const (
	addedTablesPoll     = time.Second
	addedTablesLogEvery = 30 * time.Second
)

// awaitAddedTables waits while pgsync add-tables is copying a table of the
// job: the stream cannot pass that table's first change until the copy is
// on the target (TableBeingAddedError), and nothing holds the target or
// the slot meanwhile.
func (a *Applier) awaitAddedTables(ctx context.Context) error {
	log := a.opts.Logger
	if log == nil {
		log = slog.Default()
	}
	began := time.Now()
	var lastLog time.Time
	for {
		added, err := ReadAddedTables(ctx, a.conn, a.opts.Job)
		if err != nil {
			return err
		}
		var copying []string
		for name, t := range added {
			if Waits(t.State) && a.opts.selected(t.Schema, t.Name) {
				copying = append(copying, name)
			}
		}
		if len(copying) == 0 {
			if !lastLog.IsZero() {
				log.Info("resumed: the added tables are copied", "job", a.opts.Job, "paused_s", fmt.Sprintf("%.1f", time.Since(began).Seconds()))
			}
			return nil
		}
		if time.Since(lastLog) >= addedTablesLogEvery {
			slices.Sort(copying)
			log.Info("paused: waiting for pgsync add-tables to copy tables (if no add-tables is running, rerun it to finish them, or take them out of job.tables to abandon them)",
				"job", a.opts.Job, "tables", strings.Join(copying, ", "), "paused_s", fmt.Sprintf("%.0f", time.Since(began).Seconds()))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(addedTablesPoll):
		}
	}
}

// TableBeingAddedError ends a session at the first message of a table that
// pgsync add-tables is still copying: its changes can only go on top of
// the copy. Nothing of the open group is committed; the next session
// waits for the copy (awaitAddedTables) and resumes from the durable
// position.
type TableBeingAddedError struct {
	Job, Table string
	LSN        pglogrepl.LSN // the source transaction that reached the table
}

func (e *TableBeingAddedError) Error() string {
	return fmt.Sprintf("job %s: table %s, reached at %s, is being copied by pgsync add-tables: run pauses until the copy is done", e.Job, e.Table, e.LSN)
}

// Pause marks the end of the session as intended: replication.Run starts
// the next one at once instead of treating it as a failure.
func (e *TableBeingAddedError) Pause() {}

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
	// Casts name the type without its modifier: a value too long for a
	// varchar(n) must fail in the assignment, not be cut by the cast.
	types := make(map[string]string, len(target.Columns))
	always := make(map[string]bool)
	for _, c := range target.Columns {
		if c.Generated == "" {
			types[c.Name] = c.BaseType
			always[c.Name] = c.IdentityAlways
		}
	}
	rel, missing := newRelation(r, a.relations[r.ID], types, always)
	if missing >= 0 {
		c := r.Columns[missing]
		var typ string
		if err := a.conn.QueryRow(ctx, "SELECT format_type($1::oid, $2::int)", c.TypeOID, c.TypMod).Scan(&typ); err != nil {
			typ = "oid " + strconv.FormatUint(uint64(c.TypeOID), 10)
		}
		return a.fail(ctx, fmt.Errorf("table %s at %s: column %s (%s) exists on the source but not on the target; add it on the target (ALTER TABLE %s ADD COLUMN %s %s) and rerun pgsync run",
			r, a.sourceLSN, c.Name, typ, rel.ident, catalog.QuoteIdent(c.Name), typ))
	}
	if a.relations[r.ID] != nil {
		if err := a.deallocate(ctx, r.ID); err != nil {
			return a.fail(ctx, err)
		}
	}
	if m := a.opts.Metrics; m != nil {
		rel.counted = &[3]prometheus.Counter{
			m.RowCounter(r.String(), "insert"),
			m.RowCounter(r.String(), "update"),
			m.RowCounter(r.String(), "delete"),
		}
	}
	// Read now, not at the session's start: add-tables may have added the
	// table since, and its copy point decides which changes to skip.
	added, err := readAddedTable(ctx, a.conn, a.opts.Job, r.Schema, r.Name)
	if err != nil {
		return a.fail(ctx, err)
	}
	switch {
	case added.State == TableRemoved, Waits(added.State) && !a.opts.selected(r.Schema, r.Name):
		// An abandoned add: the table's partial copy is not the source's,
		// and none of its changes are applied.
		rel.copiedAt = skipAll
	case Waits(added.State):
		return a.fail(ctx, &TableBeingAddedError{Job: a.opts.Job, Table: r.String(), LSN: a.sourceLSN})
	default:
		rel.copiedAt = added.CopiedLSN
	}
	a.relations[r.ID] = rel
	return nil
}

// newRelation builds the apply-side view of r. types maps the target's
// column names to their types (for casts), always marks its GENERATED
// ALWAYS identity columns; missing is the index of the first source
// column the target lacks, or -1.
func newRelation(r *pgoutput.Relation, prev *relation, types map[string]string, always map[string]bool) (rel *relation, missing int) {
	rel = &relation{src: r, ident: pgx.Identifier{r.Schema, r.Name}.Sanitize(), full: r.ReplicaIdentity == 'f'}
	if prev != nil {
		rel.gen = prev.gen + 1
	}
	for i, c := range r.Columns {
		typ, ok := types[c.Name]
		if !ok {
			return rel, i
		}
		rel.cols = append(rel.cols, catalog.QuoteIdent(c.Name))
		rel.types = append(rel.types, typ)
		rel.textEq = append(rel.textEq, noEquality[c.TypeOID])
		rel.isKey = append(rel.isKey, c.Key)
		rel.always = append(rel.always, always[c.Name])
		rel.anyAlways = rel.anyAlways || always[c.Name]
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

// Change queues one row change: into the current run when it can join it,
// otherwise as a statement of its own.
func (a *Applier) Change(ctx context.Context, c *pgoutput.Change) error {
	rel := a.relations[c.RelationID]
	if rel == nil {
		return a.fail(ctx, fmt.Errorf("change at %s: relation %d was never described by the source", a.sourceLSN, c.RelationID))
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
		rel.counted[rowOpIndex(c.Op)].Inc()
	}
	if runnable(rel, c) {
		joined, full := a.addToRun(rel, c)
		if !joined {
			if err := a.flushRun(ctx); err != nil {
				return err
			}
			_, full = a.addToRun(rel, c)
		}
		if full {
			return a.flushRun(ctx)
		}
		return nil
	}
	if err := a.flushRun(ctx); err != nil {
		return err
	}
	st, fresh, params, n := a.bindRow(rel, c)
	formats, err := a.byteaFormats(rel, st, params)
	if err != nil {
		return a.fail(ctx, err)
	}
	a.startPipeline(ctx)
	if fresh {
		a.pipeline.SendPrepare(st.name, st.sql, nil)
		a.pending = append(a.pending, pending{kind: pendingPrepare, op: c.Op, rel: rel, lsn: a.sourceLSN})
	}
	a.pipeline.SendQueryPrepared(st.name, params, formats, nil)
	clear(params) // the statement's bytes are the only copy left
	a.pending = append(a.pending, pending{kind: pendingRows, op: c.Op, expect: 1, rel: rel, lsn: a.sourceLSN})
	return a.queued(ctx, 1, n)
}

// largeValue is the size from which a bytea value is sent in binary.
const largeValue = 64 << 10

// byteaFormats turns large bytea values among the set values from their
// hex text into raw bytes, in place in the message buffer, and returns the
// parameter formats that say so (nil when none is): half the bytes to send
// and no second buffer. Identity columns are left alone, since their bytes
// may be shared with the identity parameters.
func (a *Applier) byteaFormats(rel *relation, st *statement, params [][]byte) ([]int16, error) {
	var formats []int16
	for n, i := range st.setCols {
		v := params[n]
		if len(v) < largeValue || rel.types[i] != "bytea" || v[0] != '\\' || v[1] != 'x' || rel.isKey[i] {
			continue
		}
		m, err := hex.Decode(v[:(len(v)-2)/2], v[2:])
		if err != nil {
			return nil, fmt.Errorf("%s at %s: bytea value of column %s: %w", rel.src, a.sourceLSN, rel.src.Columns[i].Name, err)
		}
		params[n] = v[:m]
		if formats == nil {
			formats = a.formats[:0]
			for range params {
				formats = append(formats, 0)
			}
			a.formats = formats
		}
		formats[n] = 1
	}
	return formats, nil
}

// checkValues refuses rows pgsync cannot express: an INSERT with an
// unchanged value, or an identity value that was not sent.
func (a *Applier) checkValues(rel *relation, c *pgoutput.Change) error {
	if c.Op == pgoutput.MsgInsert {
		for i, kind := range c.New.Kinds {
			if kind == pgoutput.ValueUnchanged {
				return fmt.Errorf("INSERT on %s at %s: column %s sent as unchanged", rel.src, a.sourceLSN, rel.src.Columns[i].Name)
			}
		}
		return nil
	}
	if !rel.full && len(rel.keys) == 0 {
		return fmt.Errorf("%s on %s at %s: the table has no replica identity on the source", opName(c.Op), rel.src, a.sourceLSN)
	}
	if c.Op == pgoutput.MsgUpdate && rel.anyAlways {
		for i := range rel.cols {
			known := c.OldKind == 'O' || c.OldKind == 'K' && rel.isKey[i]
			if rel.always[i] && known && c.New.Kinds[i] != pgoutput.ValueUnchanged && columnMayChange(rel, c, i) {
				return fmt.Errorf("UPDATE on %s at %s changes column %s, which is GENERATED ALWAYS AS IDENTITY on the target: an UPDATE cannot set it (make it GENERATED BY DEFAULT on the target)",
					rel.src, a.sourceLSN, rel.src.Columns[i].Name)
			}
		}
	}
	key := identityTuple(c)
	for _, i := range rel.keys {
		if key.Kinds[i] == pgoutput.ValueUnchanged {
			return fmt.Errorf("%s on %s at %s: identity column %s was not sent (unchanged TOAST value)", opName(c.Op), rel.src, a.sourceLSN, rel.src.Columns[i].Name)
		}
	}
	return nil
}

// identityTuple is the row image that identifies the target row: the old
// key or row when the source sent one, else the new row (key unchanged).
func identityTuple(c *pgoutput.Change) *pgoutput.Tuple {
	if c.OldKind != 0 {
		return &c.Old
	}
	return &c.New
}

// bindRow returns the single-row statement for the change (fresh when it
// must be prepared first) and its parameters: text values straight from
// the message. n is the number of value bytes.
func (a *Applier) bindRow(rel *relation, c *pgoutput.Change) (st *statement, fresh bool, params [][]byte, n int64) {
	k := a.statementKey(c.Op, rel, 1)
	if c.Op == pgoutput.MsgUpdate {
		a.setBuf, k = appendSetColumns(a.setBuf[:0], k, rel, c)
	}
	k = append(k, 'r') // single-row form
	a.keyBuf = k
	if rel.lastRowStmt != nil && bytes.Equal(rel.lastRowKey, k) {
		st = rel.lastRowStmt
	} else {
		st = a.stmts[string(k)]
	}
	if st == nil {
		st = &statement{}
		switch c.Op {
		case pgoutput.MsgInsert:
			for i := range rel.cols {
				st.setCols = append(st.setCols, i)
			}
			st.sql = insertSQL(rel, 1)
		case pgoutput.MsgUpdate:
			st.setCols = slices.Clone(a.setBuf)
			st.sql = updateSQL(rel, st.setCols)
		case pgoutput.MsgDelete:
			st.sql = deleteSQL(rel)
		}
		a.addStatement(k, rel, st)
		fresh = true
	}
	if st != rel.lastRowStmt {
		rel.lastRowKey, rel.lastRowStmt = append(rel.lastRowKey[:0], k...), st
	}
	params = a.params[:0]
	for _, i := range st.setCols {
		params = append(params, c.New.Values[i])
		n += int64(len(c.New.Values[i]))
	}
	if c.Op != pgoutput.MsgInsert {
		key := identityTuple(c)
		for _, i := range rel.keys {
			params = append(params, key.Values[i])
			n += int64(len(key.Values[i]))
		}
	}
	a.params = params
	return st, fresh, params, n
}

// statementKey starts the cache key of a statement in a.keyBuf.
func (a *Applier) statementKey(op byte, rel *relation, rows int) []byte {
	k := append(a.keyBuf[:0], op)
	k = appendUint32(k, rel.src.ID)
	k = appendUint32(k, rel.gen)
	return appendUint32(k, uint32(rows))
}

func appendUint32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// appendSetColumns appends to dst the columns an UPDATE must set, and to
// mask one bit per column of the relation, set for each of them (the mask
// goes into the statement's cache key). The columns are those the source
// sent (not unchanged TOAST) whose value may have changed. Identity
// columns are left out unless the source sent their old value and it
// differs, GENERATED ALWAYS identity columns always (checkValues refuses a
// change of one), and when the whole old row was sent, every column whose
// value is the same. If that leaves nothing, the first column that can be
// assigned is set to its (unchanged) value, so that the statement still
// finds the row and fires the target's replica triggers. Columns and mask
// come from one pass: this runs for every UPDATE.
func appendSetColumns(dst []int, mask []byte, rel *relation, c *pgoutput.Change) ([]int, []byte) {
	start, maskStart := len(dst), len(mask)
	for range (len(c.New.Kinds) + 7) / 8 {
		mask = append(mask, 0)
	}
	bits := mask[maskStart:]
	kinds, always := c.New.Kinds, rel.always[:len(c.New.Kinds)]
	for i, kind := range kinds {
		if kind != pgoutput.ValueUnchanged && !always[i] && columnMayChange(rel, c, i) {
			dst = append(dst, i)
			bits[i>>3] |= 1 << (i & 7)
		}
	}
	if len(dst) > start {
		return dst, mask
	}
	for i, kind := range kinds {
		if kind != pgoutput.ValueUnchanged && !always[i] {
			bits[i>>3] |= 1 << (i & 7)
			return append(dst, i), mask
		}
	}
	return dst, mask
}

// columnMayChange reports whether column i may differ between the old and
// the new row of an UPDATE, from what the source sent of the old row: the
// whole old row ('O'), its old key ('K'), or nothing, when the identity
// did not change. Small enough to be inlined in the per-UPDATE loop.
func columnMayChange(rel *relation, c *pgoutput.Change, i int) bool {
	if c.OldKind != 'O' && (c.OldKind != 'K' || !rel.isKey[i]) {
		return !rel.isKey[i]
	}
	return c.Old.Kinds[i] != c.New.Kinds[i] || !bytes.Equal(c.Old.Values[i], c.New.Values[i])
}

// addStatement names st and caches it under key.
func (a *Applier) addStatement(key []byte, rel *relation, st *statement) {
	a.stmtSeq++
	st.name = "pgsync_" + strconv.Itoa(a.stmtSeq)
	st.relID = rel.src.ID
	a.stmts[string(key)] = st
	if a.opts.Prepared != nil {
		a.opts.Prepared.Store(int64(len(a.stmts)))
	}
}

// deallocate drops the prepared statements of relation id, whose shape
// the source has just sent again: pgoutput resends a Relation after every
// invalidation of its cache entry (an ANALYZE, an ALTER TABLE ... SET), and
// statements of the old shape would otherwise pile up on the target.
func (a *Applier) deallocate(ctx context.Context, id uint32) error {
	var b strings.Builder
	for k, st := range a.stmts {
		if st.relID == id {
			fmt.Fprintf(&b, "DEALLOCATE %s;", st.name)
			delete(a.stmts, k)
		}
	}
	if a.opts.Prepared != nil {
		a.opts.Prepared.Store(int64(len(a.stmts)))
	}
	if b.Len() == 0 {
		return nil
	}
	if _, err := a.conn.PgConn().Exec(ctx, b.String()).ReadAll(); err != nil {
		return fmt.Errorf("deallocate the statements of relation %d at %s: %w", id, a.sourceLSN, err)
	}
	return nil
}

// Truncate queues a TRUNCATE of the listed relations with the options the
// source statement used.
func (a *Applier) Truncate(ctx context.Context, t pgoutput.Truncate) error {
	if err := a.flushRun(ctx); err != nil {
		return err
	}
	rels := make([]*relation, 0, len(t.RelationIDs))
	for _, id := range t.RelationIDs {
		rel := a.relations[id]
		if rel == nil {
			return a.fail(ctx, fmt.Errorf("TRUNCATE at %s: relation %d was never described by the source", a.sourceLSN, id))
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

// Commit ends a source transaction. When more is true (further source
// transactions are already waiting) and the group is under its limits, the
// target transaction stays open for them and durable is 0; otherwise it
// commits with the progress row at c.EndLSN, which it returns as durable.
// A run may continue into the next source transaction of the group: both
// commit in the same target transaction or not at all.
func (a *Applier) Commit(ctx context.Context, c pgoutput.Commit, more bool) (durable pglogrepl.LSN, err error) {
	a.groupEnd, a.groupTime = c.EndLSN, c.Time
	if more && a.groupBytes < a.opts.MaxBatchBytes && time.Since(a.groupStart) < maxGroupAge {
		return 0, nil
	}
	if err := a.commit(ctx); err != nil {
		return 0, err
	}
	return c.EndLSN, nil
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

func (a *Applier) commit(ctx context.Context) error {
	if !a.inTarget {
		return nil
	}
	if err := a.flushRun(ctx); err != nil {
		return err
	}
	began := time.Now()
	a.startPipeline(ctx)
	a.timeBuf = a.groupTime.AppendFormat(a.timeBuf[:0], time.RFC3339Nano)
	a.pipeline.SendQueryParams(progressSQL, [][]byte{[]byte(a.opts.Job), []byte(a.groupEnd.String()), a.timeBuf}, nil, nil, nil)
	a.pending = append(a.pending, pending{kind: pendingProgress, expect: 1, lsn: a.groupEnd})
	// Every result of the group, the progress row included, is read and
	// checked before COMMIT is sent: a statement that matched no row does
	// not raise an error on the server, so a COMMIT queued behind it would
	// make the divergence durable and move the resume point past it. The
	// cost is one round trip per target commit, not per source transaction.
	if err := a.drain(ctx); err != nil {
		return err
	}
	a.startPipeline(ctx)
	a.pipeline.SendQueryParams("COMMIT", nil, nil, nil, nil)
	a.pending = append(a.pending, pending{kind: pendingCommit, lsn: a.groupEnd})
	if err := a.drain(ctx); err != nil {
		return err
	}
	a.inTarget = false
	if m := a.opts.Metrics; m != nil {
		m.CommitSeconds.Observe(time.Since(began).Seconds())
		m.GroupRows.Observe(float64(a.groupRows))
	}
	a.groupBytes, a.groupRows = 0, 0
	return nil
}

var errNoRow = errors.New("no row matched on the target: the target has diverged from the source")

func describe(pd *pending, job string, err error) error {
	// The server's detail often names what the message does not (the
	// table whose foreign key refused a TRUNCATE, the key of a conflict).
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Detail != "" {
		err = fmt.Errorf("%w (%s)", err, pgErr.Detail)
	}
	switch pd.kind {
	case pendingRows:
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
		return fmt.Errorf("apply TRUNCATE of %s at %s: %w", pd.tables, pd.lsn, err)
	}
	return fmt.Errorf("target transaction at %s: %w", pd.lsn, err)
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
	a.clearRun()
	if a.inTarget && a.conn != nil && !a.conn.IsClosed() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		if _, err := a.conn.Exec(rctx, "ROLLBACK"); err != nil {
			_ = a.conn.PgConn().Conn().Close()
		}
		cancel()
	}
	a.inTarget = false
	a.groupBytes, a.groupRows, a.batchRows, a.batchBytes, a.sinceFlush = 0, 0, 0, 0, 0
}

// Close rolls back any open target transaction and closes the connection.
func (a *Applier) Close(ctx context.Context) error {
	a.reset(ctx)
	return a.conn.Close(ctx)
}
