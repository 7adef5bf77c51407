package apply

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgoutput"
)

// Staged values (issue 22): a row whose values are large goes to the
// target in pieces. In text form, as pgoutput sends it, the row is in the
// connection's receive buffer, whole; a statement that carried its values
// as parameters would hold a second copy of them in pgx's write buffer
// (80 MB for a 40 MB bytea and a 40 MB text). Instead, each large value is
// sent in pieces of stagePart bytes into a temporary table of the target
// session, and the row's statement reads it from there: the client holds
// the message and one piece. The pieces live in the open target
// transaction: a rollback takes them with the row, a COMMIT empties the
// table (ON COMMIT DELETE ROWS).

// stageFrom is the size of a row's values from which its large values
// (largeValue bytes or more) are staged. Below it, the second copy costs
// less than the round of statements that staging adds.
const stageFrom = 4 << 20

// stagePart is the size of one staged piece: under maxWriteBuffer, so that
// pgx encodes every piece into the one write buffer the Applier keeps.
const stagePart = 512 << 10

// stagingTableSQL creates the session's staging table; it is sent before
// each staged row, so that a session whose creating transaction rolled
// back has it again.
const stagingTableSQL = `CREATE TEMPORARY TABLE IF NOT EXISTS pgsync_staged (
  id int8 NOT NULL, seq int4 NOT NULL, part bytea NOT NULL) ON COMMIT DELETE ROWS`

// stagePartSQL inserts one piece: the value's id, its place, its bytes.
const stagePartSQL = `INSERT INTO pg_temp.pgsync_staged (id, seq, part) VALUES ($1, $2, $3)`

var (
	stagePartOIDs    = []uint32{pgtype.Int8OID, pgtype.Int4OID, pgtype.ByteaOID}
	stagePartFormats = []int16{0, 0, 1} // the pieces in binary: raw bytes
)

// stagedValues returns, for each set value of st, whether it is staged:
// each value of largeValue bytes or more, when the row's values (n bytes)
// reach stageFrom. nil when none is.
func stagedValues(st *statement, params [][]byte, n int64) []bool {
	if n < stageFrom || len(st.setCols) == 0 {
		return nil
	}
	var staged []bool
	for k := range st.setCols {
		if len(params[k]) >= largeValue {
			if staged == nil {
				staged = make([]bool, len(st.setCols))
			}
			staged[k] = true
		}
	}
	return staged
}

// stage sends the staged values of the row in pieces, puts each value's id
// in its place among params, and returns the statement that reads them
// (fresh when it must be prepared first) and the bytes left in params.
// formats says which values are in binary (byteaFormats); the ids are text.
func (a *Applier) stage(ctx context.Context, rel *relation, op byte, st *statement, staged []bool, params [][]byte, formats []int16) (_ *statement, fresh bool, left int64, err error) {
	// The statement's cache key says which values are staged, and which of
	// them in binary ('b') or in text ('t').
	kinds := make([]byte, len(staged))
	for n := range staged {
		switch {
		case !staged[n]:
			kinds[n] = '-'
		case formats != nil && formats[n] == 1:
			kinds[n] = 'b'
		default:
			kinds[n] = 't'
		}
	}
	k := append(append(a.keyBuf, 's'), kinds...)
	a.keyBuf = k
	read := a.stmts[string(k)]
	if read == nil {
		read = &statement{setCols: st.setCols}
		if op == pgoutput.MsgInsert {
			read.sql = insertSQL(rel, 1, stagedParam(rel, st.setCols, kinds))
		} else {
			read.sql = updateSQL(rel, st.setCols, stagedParam(rel, st.setCols, kinds))
		}
		a.addStatement(k, rel, read)
		fresh = true
	}

	a.pipeline.SendQueryParams(stagingTableSQL, nil, nil, nil, nil)
	a.pending = append(a.pending, pending{kind: pendingStage, op: op, rel: rel, lsn: a.sourceLSN})
	for n, v := range params {
		if n >= len(staged) || !staged[n] {
			left += int64(len(v))
			continue
		}
		a.stagedSeq++
		id := []byte(strconv.FormatInt(a.stagedSeq, 10))
		for seq, off := 0, 0; off < len(v); seq, off = seq+1, off+stagePart {
			part := v[off:min(off+stagePart, len(v))]
			a.pipeline.SendQueryParams(stagePartSQL, [][]byte{id, []byte(strconv.Itoa(seq)), part}, stagePartOIDs, stagePartFormats, nil)
			a.pending = append(a.pending, pending{kind: pendingStage, op: op, rel: rel, lsn: a.sourceLSN})
			if err := a.flush(false); err != nil {
				return nil, false, 0, a.fail(ctx, fmt.Errorf("stage a value of %s.%s at %s: %w", rel.src, rel.src.Columns[st.setCols[n]].Name, a.sourceLSN, err))
			}
		}
		params[n] = id
		if formats != nil {
			formats[n] = 0
		}
	}
	return read, fresh, left, nil
}

// stagedParam writes the n-th set value of a statement, parameter $p: as
// it is, or, when kinds[n] says it is staged, the staged value whose id
// the parameter is, put together from its pieces.
func stagedParam(rel *relation, setCols []int, kinds []byte) func(p, n int) string {
	return func(p, n int) string {
		if kinds[n] == '-' {
			return "$" + strconv.Itoa(p)
		}
		agg := "(SELECT string_agg(part, ''::bytea ORDER BY seq) FROM pg_temp.pgsync_staged WHERE id = $" + strconv.Itoa(p) + ")"
		if kinds[n] == 'b' {
			return agg
		}
		// The value's text, in the session's encoding (pgx's UTF8), read
		// by the column type's input function as a parameter would be.
		return "convert_from(" + agg + ", 'UTF8')::" + catalog.CastType(rel.types[setCols[n]])
	}
}
