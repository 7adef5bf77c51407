package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/pgoutput"
)

// The target connection in pipeline mode: statements are queued, sent in
// batches ended by a Sync, and their results read one batch behind, so the
// target executes a batch while the next one is built.

// flushEvery is how many queued statements go to the server in one write
// while a batch is being built, so that the server works while we decode.
const flushEvery = 64

// pendingKind says what a pending statement is, for the check of its
// result and the error that names it (describe).
type pendingKind byte

const (
	pendingRows pendingKind = iota
	pendingPrepare
	pendingControl // BEGIN, TRUNCATE
	pendingProgress
	pendingCommit
	pendingStage // a piece of a staged value, or its table (staged.go)
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

// startPipeline puts the connection in pipeline mode unless it is already.
func (a *Applier) startPipeline(ctx context.Context) {
	if a.pipeline == nil {
		a.pipeline = a.conn.PgConn().StartPipeline(ctx)
	}
}

// queued accounts for a queued statement of rows rows and n value bytes,
// and ends the batch when it is full.
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
		if err := a.flush(false); err != nil {
			return a.fail(ctx, fmt.Errorf("send to target at %s: %w", a.sourceLSN, err))
		}
	}
	return nil
}

// flush writes what the pipeline holds, after a Sync when sync is set,
// with the applier's own write buffer (writeBuffer).
func (a *Applier) flush(sync bool) error {
	if sync {
		a.pipeline.SendPipelineSync()
	}
	frontend := a.conn.PgConn().Frontend()
	frontend.Send(writeBuffer{&a.writeBuf}) // keep the buffer pgx may have grown
	err := a.pipeline.Flush()
	frontend.Send(writeBuffer{&a.writeBuf}) // and give it back for what comes next
	return err
}

// writeBuffer is a message of no bytes that swaps the buffer pgx's
// Frontend encodes into. pgx drops that buffer after every write of more
// than 1 KiB and grows a new one by doubling while the next statements are
// encoded: on the catch-up that was three quarters of what run allocated,
// and most of the garbage collector's work (docs/benchmarks.md). Sent
// before a write, it keeps the buffer pgx grew (up to maxWriteBuffer);
// after it, it hands that buffer back, with whatever pgx holds. Reusing
// it is safe because a writer does not retain what it was given (io.Writer).
type writeBuffer struct{ kept *[]byte }

// maxWriteBuffer bounds the buffer kept across writes: a batch with one
// large value passes through pgx's own buffer and is not kept.
const maxWriteBuffer = 1 << 20

// Encode returns dst's bytes in the kept buffer, or keeps dst when it is
// the larger one.
func (w writeBuffer) Encode(dst []byte) ([]byte, error) {
	kept := *w.kept
	if cap(dst) >= cap(kept) {
		if cap(dst) > cap(kept) && cap(dst) <= maxWriteBuffer {
			*w.kept = dst[:0]
		}
		return dst, nil
	}
	return append(kept[:0], dst...), nil
}

// Decode is never called: the message is only sent.
func (writeBuffer) Decode([]byte) error { return errors.New("writeBuffer is not decoded") }

// Frontend marks writeBuffer as a message to the server.
func (writeBuffer) Frontend() {}

// reserveBuffer is a message of no bytes that grows the buffer pgx's
// Frontend encodes into, once, to hold that many more bytes: a statement
// with a large value is then encoded without the buffer's doublings, each
// of which held the old buffer beside the new one (issue 22).
type reserveBuffer int64

// Encode returns dst with room for the reserved bytes.
func (n reserveBuffer) Encode(dst []byte) ([]byte, error) { return slices.Grow(dst, int(n)), nil }

// Decode is never called: the message is only sent.
func (reserveBuffer) Decode([]byte) error { return errors.New("reserveBuffer is not decoded") }

// Frontend marks reserveBuffer as a message to the server.
func (reserveBuffer) Frontend() {}

// reserve makes room in pgx's write buffer for a statement of params
// holding valueBytes when they are large (a Bind message takes 4 bytes a
// parameter besides its value).
func (a *Applier) reserve(params [][]byte, valueBytes int64) {
	if valueBytes >= largeValue {
		a.conn.PgConn().Frontend().Send(reserveBuffer(valueBytes + 4*int64(len(params)) + 256))
	}
}

// send ends the current batch with a Sync and sends it, then reads the
// results of the batches before it: one batch stays in flight.
func (a *Applier) send(ctx context.Context) error {
	a.batchRows, a.batchBytes, a.sinceFlush = 0, 0, 0
	if a.pipeline == nil || a.pendingHead == len(a.pending) && len(a.batchEnds) == 0 {
		return nil
	}
	if n := len(a.batchEnds); n == 0 || a.batchEnds[n-1] != len(a.pending) {
		if err := a.flush(true); err != nil {
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
				if pd.kind == pendingRows && pd.rel.checks(pd.op) {
					err = a.checkedResult(ctx, pd, r)
					break
				}
				var tag pgconn.CommandTag
				tag, err = r.Close()
				switch {
				case err != nil:
				case pd.expect > 0 && tag.RowsAffected() != int64(pd.expect):
					// A trigger may have skipped rows (skip.go); the
					// rows that match cost nothing more.
					err = a.rowsShort(ctx, pd, tag.RowsAffected(), -1)
				case pd.kind == pendingCommit && tag.String() != "COMMIT":
					// The server answers COMMIT of an aborted transaction
					// with ROLLBACK and no error.
					err = fmt.Errorf("the target rolled the transaction back (%s)", tag)
				}
			case *pgconn.StatementDescription:
			default:
				err = fmt.Errorf("unexpected pipeline result %T", res)
			}
		}
		if err != nil {
			return a.fail(ctx, a.inGroup(pd.lsn, describe(pd, a.opts.Job, err)))
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

// errNoRow is the error of a statement that affected fewer rows than it
// must, and not because a trigger skipped them: the server raises none, so
// readBatch checks the command tag (and rowsShort the rows it lacks).
var errNoRow = errors.New("no row matched on the target: the target has diverged from the source")

// describe wraps the error of a pending statement with what it was: the
// operation, the table and the source LSN, or the progress row of job.
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
	case pendingStage:
		return fmt.Errorf("stage a large value of %s for %s at %s: %w", pd.rel.src, opName(pd.op), pd.lsn, err)
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
