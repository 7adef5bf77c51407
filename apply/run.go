package apply

import (
	"bytes"
	"context"
	"slices"

	"github.com/pgsync/pgsync/pgoutput"
)

// rowRun gathers consecutive changes of one kind on one table so that they
// go to the target as one statement: a multi-row INSERT, an UPDATE ... FROM
// (VALUES ...) or a DELETE ... WHERE key IN (...). The target then starts its
// executor once per run instead of once per row, which is where a
// row-at-a-time applier spends its time.
//
// Order is kept: any change that cannot join the run sends the run first.
// A run's values point into message buffers; they are released when it is
// sent.
type rowRun struct {
	op      byte
	rel     *relation
	mask    []byte   // UPDATE: the columns set, the same for every row
	setCols []int    // UPDATE: the columns set
	keys    []uint64 // UPDATE: hashes of the keys, each row once per run
	rows    int
	params  [][]byte
	bytes   int64
	maskBuf []byte
}

// largeChange is the message size above which a change is not gathered
// into a run.
const largeChange = 64 << 10

// maxRunRows bounds a run; the protocol's 65535 parameters bound it too.
const maxRunRows = 64

// runnable reports whether the change can be part of a run: INSERTs, and
// UPDATEs and DELETEs that find their row by key. An UPDATE that changes
// the key and a REPLICA IDENTITY FULL match go one row at a time.
//
// A change of more than largeChange bytes goes alone too, and at once: the
// statement then holds the only copy of its values (the message may be
// freed as soon as Change returns), and its bytea values go in binary.
func runnable(rel *relation, c *pgoutput.Change) bool {
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

// addToRun adds the change to the current run. joined is false when the run
// holds changes the change cannot join: send the run and call again. full
// reports that the run cannot take another row.
func (a *Applier) addToRun(rel *relation, c *pgoutput.Change) (joined, full bool) {
	r := &a.run
	var keyHash uint64
	if c.Op == pgoutput.MsgUpdate {
		a.setBuf = appendSetColumns(a.setBuf[:0], rel, c)
		r.maskBuf = appendColumnMask(r.maskBuf[:0], a.setBuf, len(rel.cols))
		keyHash = a.keyHash(rel, &c.New)
	}
	if r.rows > 0 {
		if r.op != c.Op || r.rel != rel {
			return false, false
		}
		// One UPDATE per row in a run: UPDATE ... FROM would apply only one
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
	perRow := len(r.params) / r.rows
	return true, r.rows >= maxRunRows || len(r.params)+perRow > 65535
}

func (r *rowRun) add(vals ...[]byte) {
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

// runStatement returns the statement of the current run; fresh is true on
// its first use, when it still has to be prepared.
func (a *Applier) runStatement() (st *statement, fresh bool) {
	r := &a.run
	k := a.statementKey(r.op, r.rel, r.rows)
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
		st.sql = insertSQL(r.rel, r.rows)
	case pgoutput.MsgUpdate:
		st.sql = updateRunSQL(r.rel, r.setCols, r.rows)
	case pgoutput.MsgDelete:
		st.sql = deleteRunSQL(r.rel, r.rows)
	}
	a.addStatement(k, r.rel, st)
	return st, true
}

// flushRun sends the current run as one statement.
func (a *Applier) flushRun(ctx context.Context) error {
	r := &a.run
	if r.rows == 0 {
		return nil
	}
	st, fresh := a.runStatement()
	a.startPipeline(ctx)
	if fresh {
		a.pipeline.SendPrepare(st.name, st.sql, nil)
		a.pending = append(a.pending, pending{kind: pendingPrepare, op: r.op, rel: r.rel, lsn: a.sourceLSN})
	}
	a.pipeline.SendQueryPrepared(st.name, r.params, nil, nil)
	expect := int32(r.rows) // each UPDATE and DELETE of a run finds its own row
	if r.op == pgoutput.MsgInsert {
		expect = 0
	}
	a.pending = append(a.pending, pending{kind: pendingRows, op: r.op, expect: expect, rel: r.rel, lsn: a.sourceLSN})
	rows, n := r.rows, r.bytes
	a.clearRun()
	return a.queued(ctx, rows, n)
}

// clearRun empties the run, dropping its references to message buffers.
func (a *Applier) clearRun() {
	r := &a.run
	clear(r.params)
	r.params, r.keys = r.params[:0], r.keys[:0]
	r.rows, r.bytes, r.rel = 0, 0, nil
}
