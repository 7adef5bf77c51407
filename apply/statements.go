package apply

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pgsync/pgsync/pgoutput"
)

// The statement cache: the statements prepared on the target connection,
// keyed by operation, relation, shape and row count, and the binding of a
// single row's values to its statement.

// statement is a prepared statement of the target connection.
type statement struct {
	name string
	sql  string
	// setCols are the new-tuple columns an UPDATE sets (those not sent as
	// unchanged TOAST); their values come first, the identity values after.
	setCols []int
	relID   uint32 // the relation it was prepared for
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
			st.sql = insertSQL(rel, 1, nil)
		case pgoutput.MsgUpdate:
			st.setCols = slices.Clone(a.setBuf)
			st.sql = updateSQL(rel, st.setCols, nil)
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

// appendUint32 appends v big-endian: the fixed-width parts of a key.
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
