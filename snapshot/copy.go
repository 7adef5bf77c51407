// Package snapshot copies a job's tables from the source to the target with
// parallel COPY streams that all read under one exported snapshot, so the
// copy is exactly the source at the slot's consistent point.
package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgconnect"
)

// Options configures Copy.
type Options struct {
	SourceURL string
	TargetURL string
	// SnapshotName is the snapshot exported by the slot's creation.
	SnapshotName string
	// MaxParallel is the number of concurrent COPY streams.
	MaxParallel int
	// BufferSize is the size of each stream's read buffer in bytes.
	BufferSize int
	// RangeBytes, when positive, splits each table whose heap is at least
	// twice as large into block ranges of about this size, which the
	// streams take from the same work queue as whole tables: one large
	// table is then copied by every stream. It needs a TID range scan
	// (source PostgreSQL 14 or later); older sources copy whole tables.
	RangeBytes int64
	// Imported is called once every stream has imported the snapshot:
	// from then on the exporting connection may close.
	Imported func()
	Progress *Progress
	Logger   *slog.Logger
	// Copied, when set, is called once a table's copy is committed on the
	// target (every range of it), from the stream that finished it; an
	// error stops the copy. bootstrap records the table as copied there,
	// so that a rerun keeps it.
	Copied func(TableResult) error
}

// Progress counts copied rows and bytes, in all and per table being
// copied; it is safe for concurrent use.
type Progress struct {
	Rows        atomic.Int64
	Bytes       atomic.Int64
	TablesDone  atomic.Int64
	TablesTotal atomic.Int64

	mu       sync.Mutex
	active   map[*tableProgress]struct{}
	finished []TableProgress
}

type tableProgress struct {
	table       string
	started     time.Time
	rows, bytes atomic.Int64
}

// TableProgress is a table being copied, or copied (Done).
type TableProgress struct {
	Table   string
	Rows    int64
	Bytes   int64
	Elapsed time.Duration
	Done    bool
}

// Tables returns every table started so far, copied or being copied, by
// name.
func (p *Progress) Tables() []TableProgress {
	out := p.Active()
	p.mu.Lock()
	out = append(out, p.finished...)
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out
}

// Active returns the tables being copied now, by name.
func (p *Progress) Active() []TableProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]TableProgress, 0, len(p.active))
	for t := range p.active {
		out = append(out, TableProgress{Table: t.table, Rows: t.rows.Load(), Bytes: t.bytes.Load(), Elapsed: time.Since(t.started)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out
}

func (p *Progress) start(table string) *tableProgress {
	t := &tableProgress{table: table, started: time.Now()}
	p.mu.Lock()
	if p.active == nil {
		p.active = make(map[*tableProgress]struct{})
	}
	p.active[t] = struct{}{}
	p.mu.Unlock()
	return t
}

func (p *Progress) finish(t *tableProgress) {
	p.mu.Lock()
	delete(p.active, t)
	p.finished = append(p.finished, TableProgress{Table: t.table, Rows: t.rows.Load(), Bytes: t.bytes.Load(), Elapsed: time.Since(t.started), Done: true})
	p.mu.Unlock()
}

// TableResult is what one table's copy moved.
type TableResult struct {
	Table    string
	Rows     int64
	Bytes    int64
	Duration time.Duration
	// Parts is the number of block ranges it was copied in (1: whole).
	Parts int
	// Format is COPY's format: binary or text (layout.binary).
	Format string
	// Frozen: loaded with COPY ... FREEZE (tableCopy.freeze).
	Frozen bool
}

// copyPart is one item of the copy's work queue: a whole table, or a range
// of its heap blocks.
type copyPart struct {
	table *tableCopy
	// Blocks [from, to) of the heap; to is 0 for the last range, which
	// reads to the end so that blocks added since the split are not missed.
	from, to uint32
	split    bool
}

// tableCopy is the shared state of one table's parts.
type tableCopy struct {
	t         *catalog.Table
	parts     int
	remaining atomic.Int32
	began     sync.Once
	started   time.Time
	progress  *tableProgress // its rows and bytes, summed over the parts
	binary    bool           // COPY in binary format (layout.binary)
	// freeze: copied whole, emptied and loaded with COPY ... FREEZE in one
	// target transaction (layout.freezable), so that no vacuum has to
	// freeze its rows later; its copy takes no autovacuum hold (the
	// TRUNCATE's lock keeps autovacuum away until it commits).
	freeze bool
	frozen bool // the copy did use FREEZE (the table was empty)
	// release ends the table's autovacuum hold (holdOffAutovacuum), taken
	// when its first part starts; once ends it when the last part is
	// copied, or when Copy returns.
	release func()
	once    sync.Once
}

// endHold ends the table's autovacuum hold, once.
func (tc *tableCopy) endHold() {
	tc.once.Do(func() {
		if tc.release != nil {
			tc.release()
		}
	})
}

func (tc *tableCopy) format() string {
	if tc.binary {
		return "binary"
	}
	return "text"
}

// plan lists the copy's work; tables of RangeBytes or more are cut into
// ranges (cutParts), and the parts are taken largest first (byLargest).
func plan(ctx context.Context, opts Options, tables []catalog.Table) ([]copyPart, error) {
	order := make([]*catalog.Table, len(tables))
	for i := range tables {
		order[i] = &tables[i]
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].SizeBytes > order[j].SizeBytes })
	layout, err := readLayout(ctx, opts, order)
	if err != nil {
		return nil, err
	}
	return byLargest(cutParts(opts, layout, order)), nil
}

// plannedPart is a part of the copy with the bytes it is expected to read:
// its blocks for a range, the table's whole size (TOAST included) for a
// table copied whole.
type plannedPart struct {
	copyPart
	bytes int64
}

// cutParts makes the copy's parts of the tables, in order.
func cutParts(opts Options, layout layout, order []*catalog.Table) []plannedPart {
	var parts []plannedPart
	var total int64
	for _, t := range order {
		total += t.SizeBytes
	}
	streams := int64(max(opts.MaxParallel, 1))
	for _, t := range order {
		tc := &tableCopy{t: t, parts: 1, binary: layout.binary[t.Ident()]}
		n := layout.blocks[t.Ident()]
		per := uint32(max(opts.RangeBytes/layout.blockSize, 1))
		// A table is cut only when it is more than a stream's share of
		// the copy, so that it would keep one stream busy while the others
		// are done: streams writing into one table contend for its
		// extension lock and index pages (two 4M-row tables: 11.9 s in
		// ranges, docs/benchmarks.md), and one stream gains nothing.
		if !layout.tidRange || opts.RangeBytes <= 0 || streams == 1 || t.SizeBytes*streams <= total ||
			n < 2*int64(per) || t.CopiedColumns() == "" {
			tc.remaining.Store(1)
			tc.freeze = layout.freezable[t.Ident()]
			parts = append(parts, plannedPart{copyPart{table: tc}, t.SizeBytes})
			continue
		}
		tc.parts = int((n + int64(per) - 1) / int64(per))
		tc.remaining.Store(int32(tc.parts))
		for i := 0; i < tc.parts; i++ {
			p := copyPart{table: tc, from: uint32(i) * per, to: uint32(i+1) * per, split: true}
			blocks := int64(per)
			if i == tc.parts-1 {
				p.to = 0
				blocks = n - int64(p.from)
			}
			parts = append(parts, plannedPart{p, blocks * layout.blockSize})
		}
	}
	return parts
}

// byLargest orders the parts by their expected bytes, largest first, so
// that the streams end together: a table copied whole that is larger than
// another table's ranges starts before them, instead of being copied
// alone after them (a 165 MB table of TOASTed documents behind a 6M-row
// table's 13 ranges: 6.4 s on one stream at the end, issue 25). Parts of
// the same size keep their order.
func byLargest(planned []plannedPart) []copyPart {
	sort.SliceStable(planned, func(i, j int) bool { return planned[i].bytes > planned[j].bytes })
	parts := make([]copyPart, len(planned))
	for i, p := range planned {
		parts[i] = p.copyPart
	}
	return parts
}

// layout is what plan needs to know of the tables on the source.
type layout struct {
	blockSize int64
	tidRange  bool             // the source has TID range scans (14+)
	blocks    map[string]int64 // heap blocks by table identifier
	// binary marks the tables copied in COPY's binary format: both servers
	// run the same major version with the same encoding, every copied
	// column has a built-in type, whose binary form carries no OID that
	// could differ between the servers (arrays and records carry their
	// element types'), and the same type on the target: a wider target
	// type (int to bigint, json to jsonb) reads only the text form
	// (catalog.NeedsText). Binary input skips the parsing of text, most
	// of the target's work in a copy (docs/benchmarks.md).
	binary map[string]bool
	// freezable marks the target tables a whole-table copy may empty and
	// load with COPY ... FREEZE: plain tables the target user may
	// TRUNCATE, that no foreign key references and no TRUNCATE trigger
	// watches. Measured: the first VACUUM (FREEZE) of the 1 GB dataset
	// after a plain load wrote 1.2 GB of WAL in 3 s, after COPY FREEZE
	// 5 KB in 0.01 s (the bench harness's freeze scenario,
	// docs/benchmarks.md).
	freezable map[string]bool
}

// builtinTypes is FirstNormalObjectId: objects below it are built in.
const builtinTypes = 16384

// readLayout reads the tables' heap sizes and column types on the source,
// their column types on the target, and the versions and encodings of
// both servers. Sizes are not part of a snapshot; the last range of a
// table reads to its end whatever it is. A column that the copy widens
// with a warning (catalog.Holds: timestamp to timestamptz) is logged here,
// with the time zone its values are read in: the target session's, the
// copy streams' and run's (pgconnect's).
func readLayout(ctx context.Context, opts Options, tables []*catalog.Table) (layout, error) {
	l := layout{blockSize: 8192, blocks: make(map[string]int64), binary: make(map[string]bool), freezable: make(map[string]bool)}
	src, err := pgconnect.Connect(ctx, "source", opts.SourceURL)
	if err != nil {
		return l, err
	}
	defer src.Close(context.WithoutCancel(ctx))
	var srcVersion, tgtVersion int
	var srcEncoding, tgtEncoding string
	if err := src.QueryRow(ctx, "SELECT current_setting('block_size')::bigint, current_setting('server_version_num')::int, current_setting('server_encoding')").
		Scan(&l.blockSize, &srcVersion, &srcEncoding); err != nil {
		return l, fmt.Errorf("read the source's settings: %w", err)
	}
	l.tidRange = srcVersion >= 140000
	dst, err := pgconnect.Connect(ctx, "target", opts.TargetURL)
	if err != nil {
		return l, err
	}
	defer dst.Close(context.WithoutCancel(ctx))
	var timeZone string
	if err := dst.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, current_setting('server_encoding'), current_setting('TimeZone')").
		Scan(&tgtVersion, &tgtEncoding, &timeZone); err != nil {
		return l, fmt.Errorf("read the target's settings: %w", err)
	}
	sameServers := srcVersion/10000 == tgtVersion/10000 && srcEncoding == tgtEncoding
	widened, err := readWidened(ctx, dst, tables, timeZone, opts.Logger)
	if err != nil {
		return l, err
	}
	idents := catalog.RefIdents(tables)
	rows, err := src.Query(ctx, `SELECT t, pg_relation_size(t::regclass) / current_setting('block_size')::bigint,
       coalesce((SELECT bool_and(a.atttypid < $2) FROM pg_attribute a
                 WHERE a.attrelid = t::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''), true)
FROM unnest($1::text[]) t`, idents, builtinTypes)
	if err != nil {
		return l, fmt.Errorf("read the tables' sizes and types: %w", err)
	}
	for rows.Next() {
		var ident string
		var n int64
		var builtin bool
		if err := rows.Scan(&ident, &n, &builtin); err != nil {
			return l, err
		}
		l.blocks[ident] = n
		l.binary[ident] = sameServers && builtin && !widened[ident]
	}
	if err := rows.Err(); err != nil {
		return l, fmt.Errorf("read the tables' sizes and types: %w", err)
	}
	if l.freezable, err = readFreezable(ctx, dst, idents); err != nil {
		return l, err
	}
	return l, nil
}

// readFreezable reads which target tables a copy may empty and load with
// COPY ... FREEZE (layout.freezable).
func readFreezable(ctx context.Context, dst *pgx.Conn, idents []string) (map[string]bool, error) {
	rows, err := dst.Query(ctx, `SELECT t, c.relkind = 'r' AND has_table_privilege(c.oid, 'TRUNCATE')
   AND NOT EXISTS (SELECT FROM pg_constraint f WHERE f.contype = 'f' AND f.confrelid = c.oid)
   AND NOT EXISTS (SELECT FROM pg_trigger g WHERE g.tgrelid = c.oid AND NOT g.tgisinternal AND g.tgtype & 32 <> 0)
FROM unnest($1::text[]) t JOIN pg_class c ON c.oid = to_regclass(t)`, idents)
	if err != nil {
		return nil, fmt.Errorf("read which target tables COPY FREEZE can load: %w", err)
	}
	freezable := make(map[string]bool)
	for rows.Next() {
		var ident string
		var ok bool
		if err := rows.Scan(&ident, &ok); err != nil {
			return nil, err
		}
		freezable[ident] = ok
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read which target tables COPY FREEZE can load: %w", err)
	}
	return freezable, nil
}

// readWidened returns the tables (by identifier) with a column of another
// type on the target, which only COPY's text format carries, and logs the
// warnings of those types (catalog.Holds).
func readWidened(ctx context.Context, dst *pgx.Conn, tables []*catalog.Table, timeZone string, log *slog.Logger) (map[string]bool, error) {
	if log == nil {
		log = slog.Default()
	}
	found, err := catalog.LookupAll(ctx, dst, catalog.RefNames(tables))
	if err != nil {
		return nil, fmt.Errorf("read the target's column types: %w", err)
	}
	targets := catalog.ByName(found)
	widened := make(map[string]bool)
	for _, t := range tables {
		have, ok := targets[t.TableName()]
		if !ok {
			continue // the copy names it
		}
		widened[t.Ident()] = catalog.NeedsText(t, have)
		types := make(map[string]catalog.ColumnType, len(have.Columns))
		for _, c := range have.Columns {
			types[c.Name] = c.ColumnType()
		}
		for _, c := range t.Columns {
			if target, ok := types[c.Name]; ok && c.Generated == "" {
				if _, warn, _ := catalog.Holds(c.ColumnType(), target); warn != "" {
					log.Warn(warn, "table", t.String(), "column", c.Name, "source_type", c.Type, "target_type", target.Type, "time_zone", timeZone)
				}
			}
		}
	}
	return widened, nil
}

// Copy copies tables with at most MaxParallel concurrent streams. Each
// stream is one source transaction (REPEATABLE READ, READ ONLY) that imports
// the snapshot before reading anything; a stream that cannot import it fails
// the copy rather than reading another point in time. Each table, or each
// range of a table's blocks, is filled in one target transaction
// (copyPartOf). While a table is being copied, autovacuum is held off it
// (holdOffAutovacuum); the hold ends as soon as the table's last part is
// copied, so that its indexes can be built while other tables copy
// (Options.Copied), and in any case when Copy returns.
func Copy(ctx context.Context, opts Options, tables []catalog.Table) ([]TableResult, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	opts.Logger = log
	if opts.Progress == nil {
		opts.Progress = &Progress{}
	}
	opts.Progress.TablesTotal.Store(int64(len(tables)))
	parts, err := plan(ctx, opts, tables)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range parts {
			p.table.endHold()
		}
	}()
	work := make(chan copyPart, len(parts))
	for _, p := range parts {
		work <- p
	}
	close(work)

	streams := max(1, min(opts.MaxParallel, len(parts)))
	var imported sync.WaitGroup
	imported.Add(streams)
	importedDone := make(chan struct{})
	go func() {
		defer close(importedDone)
		imported.Wait()
		if opts.Imported != nil {
			opts.Imported()
		}
	}()
	// Imported has run by the time Copy returns: the caller may then close
	// what Imported closes without racing it.
	defer func() { <-importedDone }()

	var mu sync.Mutex
	var results []TableResult
	g, gctx := errgroup.WithContext(ctx)
	for i := 0; i < streams; i++ {
		g.Go(func() error {
			once := sync.OnceFunc(imported.Done)
			defer once() // a failed stream must not hold the others' barrier
			return copyStream(gctx, opts, work, once, func(r TableResult) error {
				if opts.Copied != nil {
					if err := opts.Copied(r); err != nil {
						return err
					}
				}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
				log.Info("table copied", "table", r.Table, "rows", r.Rows, "bytes", r.Bytes, "parts", r.Parts, "format", r.Format, "frozen", r.Frozen,
					"seconds", fmt.Sprintf("%.2f", r.Duration.Seconds()),
					"mb_per_s", fmt.Sprintf("%.1f", float64(r.Bytes)/1e6/max(r.Duration.Seconds(), 1e-3)))
				return nil
			})
		})
	}
	err = g.Wait()
	sort.Slice(results, func(i, j int) bool { return results[i].Table < results[j].Table })
	return results, err
}

// holdOffAutovacuum keeps autovacuum away from target tables while they
// are being filled: one session holds SHARE UPDATE EXCLUSIVE on them,
// which COPY's ROW EXCLUSIVE does not conflict with, and autovacuum skips
// a table it cannot lock at once (except to prevent wraparound, which a
// table just filled does not need). Without it, autovacuum starts on a
// table during a long copy, does work the copy makes stale, and is still
// running when the index builds after the copy queue behind it, for
// deadlock_timeout, until PostgreSQL cancels it (docs/benchmarks.md).
// The hold is an optimisation: when the lock is not granted within 3 s,
// or the session fails, the copy goes on without it. Nothing
// outlives pgsync: the lock ends with the session. release must be called
// before anything that locks the tables more strongly (the index builds),
// which would otherwise wait for the hold.
func holdOffAutovacuum(ctx context.Context, targetURL string, tables []catalog.Table, log *slog.Logger) (release func()) {
	noop := func() {}
	if len(tables) == 0 {
		return noop
	}
	conn, err := pgconnect.Connect(ctx, "target", targetURL)
	if err != nil {
		log.Info("autovacuum not held off the target tables during the copy", "err", err)
		return noop
	}
	closeConn := func() { conn.Close(context.WithoutCancel(ctx)) }
	// One transaction: the lock is held until COMMIT. It takes no snapshot
	// (LOCK and SET do not), so it keeps no row versions alive. An
	// autovacuum already running on a table is cancelled by PostgreSQL
	// after deadlock_timeout (1 s by default) of waiting: lock_timeout
	// leaves it time to.
	lock := "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '3s'; SET LOCAL idle_in_transaction_session_timeout = 0; " +
		"LOCK TABLE ONLY " + strings.Join(catalog.Idents(tables), ", ") + " IN SHARE UPDATE EXCLUSIVE MODE"
	if _, err := conn.Exec(ctx, lock); err != nil {
		log.Info("autovacuum not held off the target tables during the copy", "err", err)
		closeConn()
		return noop
	}
	return func() {
		// Closing the session would end the hold too; COMMIT ends it
		// cleanly, within a bound even when ctx has ended.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(cctx, "COMMIT"); err != nil {
			log.Debug("end the autovacuum hold", "err", err)
		}
		closeConn()
	}
}

func copyStream(ctx context.Context, opts Options, work <-chan copyPart, imported func(), done func(TableResult) error) error {
	src, err := pgconnect.Connect(ctx, "source", opts.SourceURL)
	if err != nil {
		return err
	}
	defer src.Close(context.WithoutCancel(ctx))
	tx, err := src.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin snapshot transaction on source: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+opts.SnapshotName+"'"); err != nil {
		return fmt.Errorf("import snapshot %s on source: %w", opts.SnapshotName, err)
	}
	imported()

	dst, err := pgconnect.ConnectTarget(ctx, opts.TargetURL)
	if err != nil {
		return err
	}
	defer dst.Close(context.WithoutCancel(ctx))

	for p := range work {
		if err := ctx.Err(); err != nil {
			return err
		}
		tc := p.table
		tc.began.Do(func() {
			tc.started = time.Now()
			tc.progress = opts.Progress.start(tc.t.String())
			if !tc.freeze {
				tc.release = holdOffAutovacuum(ctx, opts.TargetURL, []catalog.Table{*tc.t}, opts.Logger)
			}
		})
		if err := copyPartOf(ctx, opts, tx.Conn(), dst, p); err != nil {
			return err
		}
		if tc.remaining.Add(-1) == 0 {
			tc.endHold()
			opts.Progress.finish(tc.progress)
			opts.Progress.TablesDone.Add(1)
			if err := done(TableResult{Table: tc.t.String(), Rows: tc.progress.rows.Load(), Bytes: tc.progress.bytes.Load(), Duration: time.Since(tc.started), Parts: tc.parts, Format: tc.format(), Frozen: tc.frozen}); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyPartOf pipes COPY TO STDOUT on the source into COPY FROM STDIN on
// the target through a fixed-size buffer: memory does not grow with the
// table. Each part is one target transaction; a copy that fails leaves
// the parts it committed to the next bootstrap, which empties the job's
// tables before it starts over.
func copyPartOf(ctx context.Context, opts Options, src, dst *pgx.Conn, p copyPart) error {
	t := p.table.t
	cols := t.CopiedColumns()
	what := t.String()
	format := ""
	if p.table.binary {
		format = " (FORMAT binary)"
	}
	read := fmt.Sprintf("COPY %s%s TO STDOUT%s", t.Ident(), columnList(cols), format)
	if p.split {
		what = fmt.Sprintf("%s (blocks %d-%s)", t, p.from, blockEnd(p.to))
		where := fmt.Sprintf("ctid >= '(%d,0)'::tid", p.from)
		if p.to != 0 {
			where += fmt.Sprintf(" AND ctid < '(%d,0)'::tid", p.to)
		}
		read = fmt.Sprintf("COPY (SELECT %s FROM %s WHERE %s) TO STDOUT%s", cols, t.Ident(), where, format)
	}
	tx, err := dst.Begin(ctx)
	if err != nil {
		return fmt.Errorf("copy %s: begin on target: %w", what, err)
	}
	// The table is empty: bootstrap checked it, or emptied the job's tables
	// before starting over. A copy that fails rolls back with tx.
	defer tx.Rollback(context.WithoutCancel(ctx))
	if p.table.freeze && !p.split {
		frozen, err := emptyForFreeze(ctx, tx.Conn().PgConn(), t.Ident())
		if err != nil {
			return fmt.Errorf("copy %s: %w", what, err)
		}
		if frozen {
			format = freezeOption(p.table.binary)
		}
		p.table.frozen = frozen // one part: only this stream writes it
	}

	pipe := newChunkPipe(max(opts.BufferSize, 4096), pipeChunks)
	counter := &countingWriter{w: pipe, progress: opts.Progress, table: p.table, countRows: !p.table.binary}
	var readErr error
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		var tag pgconn.CommandTag
		tag, readErr = src.PgConn().CopyTo(ctx, counter, read)
		if readErr == nil && p.table.binary {
			// Binary rows have no terminator to count as they pass.
			counter.unpublished.rows = tag.RowsAffected()
		}
		counter.publish()
		if readErr != nil {
			readErr = fmt.Errorf("source: %w", readErr)
		}
		pipe.CloseWrite(readErr)
	}()
	_, writeErr := tx.Conn().PgConn().CopyFrom(ctx, pipe, fmt.Sprintf("COPY %s%s FROM STDIN%s", t.Ident(), columnList(cols), format))
	if writeErr != nil {
		writeErr = fmt.Errorf("target: %w", writeErr)
	}
	pipe.CloseRead(writeErr)
	<-readDone
	// The side that failed first: a target that refuses a row stops the
	// source's reads ("copy reader stopped"), and a source that fails makes
	// the target's COPY fail ("COPY from stdin failed"); either consequence
	// would hide the cause (issue 15).
	if err := pipe.Err(); err != nil {
		return fmt.Errorf("copy %s: %w", what, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("copy %s: commit on target: %w", what, err)
	}
	return nil
}

func blockEnd(to uint32) string {
	if to == 0 {
		return "end"
	}
	return fmt.Sprint(to - 1)
}

// pipeChunks is the number of buffer_size_kb chunks between the two sides
// of one table's copy.
const pipeChunks = 4

// countingWriter counts bytes and rows (text COPY ends every row with a
// newline and escapes newlines inside values), publishing them to the
// shared Progress and the table's parts every megabyte rather than on
// every row.
type countingWriter struct {
	w           io.Writer
	unpublished struct{ rows, bytes int64 }
	progress    *Progress
	table       *tableCopy
	countRows   bool // text format: rows are counted as they pass
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.countRows {
		c.unpublished.rows += int64(bytes.Count(p, []byte{'\n'}))
	}
	c.unpublished.bytes += int64(len(p))
	if c.unpublished.bytes >= 1<<20 {
		c.publish()
	}
	return c.w.Write(p)
}

func (c *countingWriter) publish() {
	c.progress.Rows.Add(c.unpublished.rows)
	c.progress.Bytes.Add(c.unpublished.bytes)
	c.table.progress.rows.Add(c.unpublished.rows)
	c.table.progress.bytes.Add(c.unpublished.bytes)
	c.unpublished.rows, c.unpublished.bytes = 0, 0
}

// columnList is " (cols)", or nothing for a table without columns, which
// COPY copies as one empty line per row.
func columnList(cols string) string {
	if cols == "" {
		return ""
	}
	return " (" + cols + ")"
}

// emptyForFreeze empties ident in the open target transaction, so that
// COPY ... FREEZE may load it, when it is empty under an ACCESS EXCLUSIVE
// lock: a TRUNCATE never takes rows pgsync did not copy. It reports
// whether it did; a table with rows is copied into as it is. Simple
// protocol: COPY FREEZE refuses a transaction with a portal left open.
func emptyForFreeze(ctx context.Context, conn *pgconn.PgConn, ident string) (bool, error) {
	res, err := conn.Exec(ctx, "LOCK TABLE ONLY "+ident+" IN ACCESS EXCLUSIVE MODE; SELECT EXISTS (SELECT FROM ONLY "+ident+")").ReadAll()
	if err != nil {
		return false, fmt.Errorf("lock on target: %w", err)
	}
	if len(res) != 2 || len(res[1].Rows) != 1 || string(res[1].Rows[0][0]) != "f" {
		return false, nil
	}
	if _, err := conn.Exec(ctx, "TRUNCATE ONLY "+ident).ReadAll(); err != nil {
		return false, fmt.Errorf("empty on target for COPY FREEZE: %w", err)
	}
	return true, nil
}

// freezeOption is COPY FROM's option list with FREEZE.
func freezeOption(binary bool) string {
	if binary {
		return " (FORMAT binary, FREEZE)"
	}
	return " (FREEZE)"
}
