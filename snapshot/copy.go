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
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
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
	// Imported is called once every stream has imported the snapshot:
	// from then on the exporting connection may close.
	Imported func()
	Progress *Progress
	Logger   *slog.Logger
}

// Progress counts copied rows and bytes, in all and per table being
// copied; it is safe for concurrent use.
type Progress struct {
	Rows        atomic.Int64
	Bytes       atomic.Int64
	TablesDone  atomic.Int64
	TablesTotal atomic.Int64

	mu     sync.Mutex
	active map[*tableProgress]struct{}
}

type tableProgress struct {
	table       string
	started     time.Time
	rows, bytes atomic.Int64
}

// TableProgress is a table being copied.
type TableProgress struct {
	Table   string
	Rows    int64
	Bytes   int64
	Elapsed time.Duration
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
	p.mu.Unlock()
}

// TableResult is what one table's copy moved.
type TableResult struct {
	Table    string
	Rows     int64
	Bytes    int64
	Duration time.Duration
}

// Copy copies tables with at most MaxParallel concurrent streams. Each
// stream is one source transaction (REPEATABLE READ, READ ONLY) that imports
// the snapshot before reading anything; a stream that cannot import it fails
// the copy rather than reading another point in time. Each table is emptied
// and filled in one target transaction, so an interrupted copy leaves no
// half-copied table behind a committed row count.
func Copy(ctx context.Context, opts Options, tables []catalog.Table) ([]TableResult, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.Progress == nil {
		opts.Progress = &Progress{}
	}
	opts.Progress.TablesTotal.Store(int64(len(tables)))
	// Largest first keeps the streams busy until the end.
	order := make([]*catalog.Table, len(tables))
	for i := range tables {
		order[i] = &tables[i]
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].SizeBytes > order[j].SizeBytes })
	work := make(chan *catalog.Table, len(order))
	for _, t := range order {
		work <- t
	}
	close(work)

	streams := max(1, min(opts.MaxParallel, len(tables)))
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
			return copyStream(gctx, opts, work, once, func(r TableResult) {
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
				log.Info("table copied", "table", r.Table, "rows", r.Rows, "bytes", r.Bytes,
					"seconds", fmt.Sprintf("%.2f", r.Duration.Seconds()),
					"mb_per_s", fmt.Sprintf("%.1f", float64(r.Bytes)/1e6/max(r.Duration.Seconds(), 1e-3)))
			})
		})
	}
	err := g.Wait()
	sort.Slice(results, func(i, j int) bool { return results[i].Table < results[j].Table })
	return results, err
}

func copyStream(ctx context.Context, opts Options, work <-chan *catalog.Table, imported func(), done func(TableResult)) error {
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

	for t := range work {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := copyTable(ctx, opts, tx.Conn(), dst, t)
		if err != nil {
			return err
		}
		opts.Progress.TablesDone.Add(1)
		done(r)
	}
	return nil
}

// copyTable pipes COPY TO STDOUT on the source into COPY FROM STDIN on the
// target through a fixed-size buffer: memory does not grow with the table.
func copyTable(ctx context.Context, opts Options, src, dst *pgx.Conn, t *catalog.Table) (TableResult, error) {
	began := time.Now()
	cols := t.CopiedColumns()
	tx, err := dst.Begin(ctx)
	if err != nil {
		return TableResult{}, fmt.Errorf("copy %s: begin on target: %w", t, err)
	}
	// The table is empty: bootstrap checked it, or emptied the job's tables
	// before starting over. A copy that fails rolls back with tx.
	defer tx.Rollback(context.WithoutCancel(ctx))

	pipe := newChunkPipe(max(opts.BufferSize, 4096), pipeChunks)
	tp := opts.Progress.start(t.String())
	defer opts.Progress.finish(tp)
	counter := &countingWriter{w: pipe, progress: opts.Progress, table: tp}
	var readErr error
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		_, readErr = src.PgConn().CopyTo(ctx, counter, fmt.Sprintf("COPY %s%s TO STDOUT", t.Ident(), columnList(cols)))
		counter.publish()
		pipe.CloseWrite(readErr)
	}()
	_, writeErr := tx.Conn().PgConn().CopyFrom(ctx, pipe, fmt.Sprintf("COPY %s%s FROM STDIN", t.Ident(), columnList(cols)))
	pipe.CloseRead()
	<-readDone
	if readErr != nil {
		return TableResult{}, fmt.Errorf("copy %s: read from source: %w", t, readErr)
	}
	if writeErr != nil {
		return TableResult{}, fmt.Errorf("copy %s: write to target: %w", t, writeErr)
	}
	if err := tx.Commit(ctx); err != nil {
		return TableResult{}, fmt.Errorf("copy %s: commit on target: %w", t, err)
	}
	return TableResult{Table: t.String(), Rows: counter.rows, Bytes: counter.bytes, Duration: time.Since(began)}, nil
}

// pipeChunks is the number of buffer_size_kb chunks between the two sides
// of one table's copy.
const pipeChunks = 4

// countingWriter counts bytes and rows (text COPY ends every row with a
// newline and escapes newlines inside values), publishing them to the
// shared Progress every megabyte rather than on every row.
type countingWriter struct {
	w           io.Writer
	rows, bytes int64
	unpublished struct{ rows, bytes int64 }
	progress    *Progress
	table       *tableProgress
}

func (c *countingWriter) Write(p []byte) (int, error) {
	rows := int64(bytes.Count(p, []byte{'\n'}))
	c.rows += rows
	c.bytes += int64(len(p))
	c.unpublished.rows += rows
	c.unpublished.bytes += int64(len(p))
	if c.unpublished.bytes >= 1<<20 {
		c.publish()
	}
	return c.w.Write(p)
}

func (c *countingWriter) publish() {
	c.progress.Rows.Add(c.unpublished.rows)
	c.progress.Bytes.Add(c.unpublished.bytes)
	c.table.rows.Store(c.rows)
	c.table.bytes.Store(c.bytes)
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
