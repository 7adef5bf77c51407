package apply

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/pgsync/pgsync/pgoutput"
)

// rowSet gathers consecutive changes of one kind on one table so that they
// go to the target as one statement: a multi-row INSERT, an UPDATE ... FROM
// (VALUES ...) or a DELETE ... WHERE key IN (...). The target then starts its
// executor once per row set instead of once per row, which is where a
// row-at-a-time applier spends its time. A long row set of INSERTs goes as a
// COPY FROM STDIN inside the open target transaction instead, which takes
// the server's multi-insert path (docs/benchmarks.md, inserts).
//
// Order is kept: any change that cannot join the row set sends the row set
// first. A row set's values point into message buffers; they are released
// when it is sent.
type rowSet struct {
	op      byte
	rel     *relation
	mask    []byte   // UPDATE: the columns set, the same for every row
	setCols []int    // UPDATE: the columns set
	keys    []uint64 // UPDATE: hashes of the keys, each row once per row set
	rows    int
	params  [][]byte
	bytes   int64
	maskBuf []byte
}

// largeChange is the message size above which a change is not gathered
// into a row set.
const largeChange = 64 << 10

// maxRowSetRows bounds a row set sent as one statement; the protocol's 65535
// parameters bound it too.
const maxRowSetRows = 64

// A row set of at least copyMinRows INSERTs is sent as a COPY; an INSERT row set
// may grow to maxCopyRows rows or maxCopyBytes value bytes. Below
// copyMinRows, COPY saved no target CPU over multi-row INSERTs and costs
// a round trip (scripts/bench/cmd/insert-copy-bench).
const (
	copyMinRows  = 256
	maxCopyRows  = 8192
	maxCopyBytes = 1 << 20
)

// fitsRowSet reports whether the change can be part of a row set: INSERTs, and
// UPDATEs and DELETEs that find their row by key. An UPDATE that changes
// the key and a REPLICA IDENTITY FULL match go one row at a time.
//
// A change of more than largeChange bytes goes alone too, and at once: the
// statement then holds the only copy of its values (the message may be
// freed as soon as Change returns), and its bytea values go in binary.
func fitsRowSet(rel *relation, c *pgoutput.Change) bool {
	if c.Size > largeChange {
		return false
	}
	switch c.Op {
	case pgoutput.MsgInsert:
		return true
	case pgoutput.MsgDelete:
		return !rel.full
	case pgoutput.MsgUpdate:
		return !rel.full && c.OldKind == 0
	}
	return false
}

// addToRowSet adds the change to the current row set. joined is false when
// the row set holds changes the change cannot join: send the row set and
// call again. full reports that the row set cannot take another row.
func (a *Applier) addToRowSet(rel *relation, c *pgoutput.Change) (joined, full bool) {
	r := &a.rowSet
	var keyHash uint64
	if c.Op == pgoutput.MsgUpdate {
		a.setBuf, r.maskBuf = appendSetColumns(a.setBuf[:0], r.maskBuf[:0], rel, c)
		keyHash = a.keyHash(rel, &c.New)
	}
	if r.rows > 0 {
		if r.op != c.Op || r.rel != rel {
			return false, false
		}
		// One UPDATE per row in a row set: UPDATE ... FROM would apply only one
		// of two updates of the same row.
		if c.Op == pgoutput.MsgUpdate && (!bytes.Equal(r.mask, r.maskBuf) || slices.Contains(r.keys, keyHash)) {
			return false, false
		}
	} else {
		r.op, r.rel = c.Op, rel
		if c.Op == pgoutput.MsgUpdate {
			r.mask = append(r.mask[:0], r.maskBuf...)
			r.setCols = append(r.setCols[:0], a.setBuf...)
		}
	}
	switch c.Op {
	case pgoutput.MsgInsert:
		r.add(c.New.Values...)
	case pgoutput.MsgUpdate:
		for _, i := range r.setCols {
			r.add(c.New.Values[i])
		}
		for _, i := range rel.keys {
			r.add(c.New.Values[i])
		}
		r.keys = append(r.keys, keyHash)
	case pgoutput.MsgDelete:
		key := identityTuple(c)
		for _, i := range rel.keys {
			r.add(key.Values[i])
		}
	}
	r.rows++
	if c.Op == pgoutput.MsgInsert && len(rel.cols) > 0 {
		return true, r.rows >= maxCopyRows || r.bytes >= maxCopyBytes
	}
	// Another row would pass the protocol's 65535 parameters. A row has at
	// most len(r.params) of them, so under half that there is room, and
	// the per-row division is left out of the common case.
	return true, r.rows >= maxRowSetRows || len(r.params) > 65535/2 && len(r.params)+r.width() > 65535
}

func (r *rowSet) add(vals ...[]byte) {
	r.params = append(r.params, vals...)
	for _, v := range vals {
		r.bytes += int64(len(v))
	}
}

// keyHash hashes the identity values of a row.
func (a *Applier) keyHash(rel *relation, t *pgoutput.Tuple) uint64 {
	a.hash.Reset()
	for _, i := range rel.keys {
		a.hash.Write(t.Values[i])
		a.hash.WriteByte(0) // text values never contain NUL
	}
	return a.hash.Sum64()
}

// rowSetStatement returns the statement for rows rows of the current row set;
// fresh is true on its first use, when it still has to be prepared.
func (a *Applier) rowSetStatement(rows int) (st *statement, fresh bool) {
	r := &a.rowSet
	k := a.statementKey(r.op, r.rel, rows)
	if r.op == pgoutput.MsgUpdate {
		k = append(k, r.mask...)
	}
	a.keyBuf = k
	if st = a.stmts[string(k)]; st != nil {
		return st, false
	}
	st = &statement{}
	switch r.op {
	case pgoutput.MsgInsert:
		st.sql = insertSQL(r.rel, rows, nil)
	case pgoutput.MsgUpdate:
		st.sql = updateRowSetSQL(r.rel, r.setCols, rows)
	case pgoutput.MsgDelete:
		st.sql = deleteRowSetSQL(r.rel, rows)
	}
	a.addStatement(k, r.rel, st)
	return st, true
}

// sendRowSet sends the current row set: as a COPY when it is a long row set of
// INSERTs, otherwise as statements of at most maxRowSetRows rows (one for
// UPDATE and DELETE row sets, which never grow past that).
func (a *Applier) sendRowSet(ctx context.Context) error {
	r := &a.rowSet
	if r.rows == 0 {
		return nil
	}
	if r.op == pgoutput.MsgInsert && r.rows >= copyMinRows {
		return a.copyRowSet(ctx)
	}
	rows, width, chunk := r.rows, r.width(), r.chunkRows()
	for start := 0; start < rows; start += chunk {
		n := min(chunk, rows-start)
		st, fresh := a.rowSetStatement(n)
		a.startPipeline(ctx)
		if fresh {
			a.prepare(st, r.op, r.rel)
		}
		var params [][]byte
		if width > 0 {
			params = r.params[start*width : (start+n)*width]
		}
		a.reserve(params, r.bytes*int64(n)/int64(rows))
		a.pipeline.SendQueryPrepared(st.name, params, nil, nil)
		// Each row of a row set is one row changed (an UPDATE or DELETE finds
		// its own row); fewer is a trigger's skip or a missing row
		// (rowsShort).
		a.pending = append(a.pending, pending{kind: pendingRows, op: r.op, expect: int32(n), rel: r.rel, lsn: a.sourceLSN})
		if err := a.queued(ctx, n, r.bytes*int64(n)/int64(rows)); err != nil {
			return err
		}
	}
	a.clearRowSet()
	return nil
}

// width is the number of parameters a row of the row set has.
func (r *rowSet) width() int { return len(r.params) / max(r.rows, 1) }

// chunkRows is the number of rows each statement of the row set carries: all
// of them, except for an INSERT row set, which may be longer than a statement
// can take (maxRowSetRows, 65535 parameters).
func (r *rowSet) chunkRows() int {
	if r.op != pgoutput.MsgInsert || r.width() == 0 {
		return r.rows
	}
	return min(maxRowSetRows, 65535/r.width())
}

// copyRowSet sends the current row set of INSERTs as COPY FROM STDIN in the open
// target transaction. The pipeline is drained first (COPY is its own round
// trip), so every earlier statement has succeeded and order is kept.
func (a *Applier) copyRowSet(ctx context.Context) error {
	r := &a.rowSet
	rel, rows, n := r.rel, r.rows, r.bytes
	a.copyBuf = appendCopyRows(a.copyBuf[:0], r.params, len(rel.cols))
	a.clearRowSet()
	if err := a.drain(ctx); err != nil {
		return err
	}
	tag, err := a.conn.PgConn().CopyFrom(ctx, bytes.NewReader(a.copyBuf), copySQL(rel))
	if cap(a.copyBuf) > 4*maxCopyBytes {
		a.copyBuf = nil // one row set of escaped values: do not keep it
	}
	pd := pending{kind: pendingRows, op: pgoutput.MsgInsert, expect: int32(rows), rel: rel, lsn: a.sourceLSN}
	switch {
	case err != nil:
	case tag.RowsAffected() < int64(rows):
		// A BEFORE INSERT trigger enabled for replicas skipped rows.
		err = a.rowsShort(ctx, &pd, tag.RowsAffected(), -1)
	case tag.RowsAffected() != int64(rows):
		err = fmt.Errorf("COPY stored %d rows of %d", tag.RowsAffected(), rows)
	}
	if err != nil {
		return a.fail(ctx, describe(&pd, a.opts.Job, fmt.Errorf("COPY of %d rows: %w", rows, err)))
	}
	a.groupBytes += n
	return nil
}

// appendCopyRows appends rows of width text values (nil is NULL) in COPY's
// text format: tab-separated, one line a row, with backslash, tab, newline
// and carriage return escaped.
func appendCopyRows(dst []byte, values [][]byte, width int) []byte {
	for i, v := range values {
		if i%width != 0 {
			dst = append(dst, '\t')
		}
		if v == nil {
			dst = append(dst, '\\', 'N')
		} else {
			dst = appendCopyValue(dst, v)
		}
		if i%width == width-1 {
			dst = append(dst, '\n')
		}
	}
	return dst
}

// copyEscapes maps each byte COPY's text format escapes to the letter that
// follows the backslash.
var copyEscapes = [256]byte{'\\': '\\', '\t': 't', '\n': 'n', '\r': 'r'}

// appendCopyValue appends v escaped. Most values have nothing to escape:
// their clean prefix is found eight bytes at a time and copied at once
// (harness hotpath, insert_copy).
func appendCopyValue(dst, v []byte) []byte {
	clean := 0
	for clean+8 <= len(v) && !copyEscapeIn(binary.LittleEndian.Uint64(v[clean:])) {
		clean += 8
	}
	dst = append(dst, v[:clean]...)
	start := clean
	for j := clean; j < len(v); j++ {
		if e := copyEscapes[v[j]]; e != 0 {
			dst = append(dst, v[start:j]...)
			dst = append(dst, '\\', e)
			start = j + 1
		}
	}
	return append(dst, v[start:]...)
}

// copyEscapeIn reports whether one of the eight bytes of w may need an
// escape: a byte below 0x0e (tab, newline and carriage return are among
// them) or a backslash. False positives only cost the byte-wise path.
func copyEscapeIn(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below := (w - ones*0x0e) &^ w & highs
	bs := w ^ ones*'\\'
	backslash := (bs - ones) &^ bs & highs
	return below|backslash != 0
}

// clearRowSet empties the row set, dropping its references to message buffers.
func (a *Applier) clearRowSet() {
	r := &a.rowSet
	clear(r.params)
	r.params, r.keys = r.params[:0], r.keys[:0]
	r.rows, r.bytes, r.rel = 0, 0, nil
}
