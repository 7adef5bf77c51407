package apply

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsync/pgsync/pgoutput"
	ot "github.com/pgsync/pgsync/pgoutput/pgoutputtest"
)

// newTestApplier returns an Applier without a connection, with relations
// 1 public.t (id bigint key, a text, b integer), 2 public.f (REPLICA
// IDENTITY FULL: x integer, j json) and 3 public.m (key k1, k2; v text).
func newTestApplier(t testing.TB) *Applier {
	t.Helper()
	a := New(nil, Options{Job: "j"})
	rels := []struct {
		msg   []byte
		types map[string]string
	}{
		{ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "a", TypeOID: 25}, {Name: "b", TypeOID: 23}}),
			map[string]string{"id": "bigint", "a": "text", "b": "integer"}},
		{ot.Relation(2, "public", "f", 'f', []ot.Column{{Name: "x", TypeOID: 23, Key: true}, {Name: "j", TypeOID: 114, Key: true}}),
			map[string]string{"x": "integer", "j": "json"}},
		{ot.Relation(3, "public", "m", 'd', []ot.Column{{Name: "k1", TypeOID: 23, Key: true}, {Name: "k2", TypeOID: 25, Key: true}, {Name: "v", TypeOID: 25}}),
			map[string]string{"k1": "integer", "k2": "text", "v": "text"}},
	}
	for _, r := range rels {
		rel, err := pgoutput.DecodeRelation(r.msg)
		if err != nil {
			t.Fatal(err)
		}
		ar, missing := newRelation(rel, a.relations[rel.ID], r.types, nil)
		if missing >= 0 {
			t.Fatalf("column %d missing", missing)
		}
		a.relations[rel.ID] = ar
	}
	return a
}

func decode(t testing.TB, msg []byte, c *pgoutput.Change) *pgoutput.Change {
	t.Helper()
	if err := pgoutput.DecodeChange(msg, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func strs(params [][]byte) []string {
	out := make([]string, len(params))
	for i, p := range params {
		if p == nil {
			out[i] = "<nil>"
		} else {
			out[i] = string(p)
		}
	}
	return out
}

func TestSingleRowStatements(t *testing.T) {
	cases := []struct {
		name   string
		msg    []byte
		sql    string
		params []string
	}{
		{"update of the key uses the old key", ot.Update(1, 'K', []ot.Value{ot.T("1"), ot.Null, ot.Null}, []ot.Value{ot.T("2"), ot.T("y"), ot.T("7")}),
			`UPDATE "public"."t" SET "id" = $1, "a" = $2, "b" = $3 WHERE "id" = $4`, []string{"2", "y", "7", "1"}},
		{"old key equal to the new: the key is not set", ot.Update(1, 'K', []ot.Value{ot.T("2"), ot.Null, ot.Null}, []ot.Value{ot.T("2"), ot.T("y"), ot.T("7")}),
			`UPDATE "public"."t" SET "a" = $1, "b" = $2 WHERE "id" = $3`, []string{"y", "7", "2"}},
		{"update of the key leaves unchanged TOAST out", ot.Update(1, 'K', []ot.Value{ot.T("1"), ot.Null, ot.Null}, []ot.Value{ot.T("2"), ot.Unchanged, ot.T("8")}),
			`UPDATE "public"."t" SET "id" = $1, "b" = $2 WHERE "id" = $3`, []string{"2", "8", "1"}},
		{"full identity delete matches one row, json as text", ot.Delete(2, 'O', []ot.Value{ot.T("3"), ot.Null}),
			`DELETE FROM "public"."f" WHERE ctid = (SELECT ctid FROM "public"."f" WHERE "x" IS NOT DISTINCT FROM $1 AND "j"::text IS NOT DISTINCT FROM $2::text ORDER BY ("x"::text IS NOT DISTINCT FROM $1::text) DESC LIMIT 1)`, []string{"3", "<nil>"}},
		{"full identity update", ot.Update(2, 'O', []ot.Value{ot.T("3"), ot.T("{}")}, []ot.Value{ot.T("4"), ot.T("{}")}),
			`UPDATE "public"."f" SET "x" = $1 WHERE ctid = (SELECT ctid FROM "public"."f" WHERE "x" IS NOT DISTINCT FROM $2 AND "j"::text IS NOT DISTINCT FROM $3::text ORDER BY ("x"::text IS NOT DISTINCT FROM $2::text) DESC LIMIT 1)`, []string{"4", "3", "{}"}},
		{"full identity update of nothing sets one column to its value (the same statement as above)", ot.Update(2, 'O', []ot.Value{ot.T("3"), ot.T("{}")}, []ot.Value{ot.T("3"), ot.T("{}")}),
			`UPDATE "public"."f" SET "x" = $1 WHERE ctid = (SELECT ctid FROM "public"."f" WHERE "x" IS NOT DISTINCT FROM $2 AND "j"::text IS NOT DISTINCT FROM $3::text ORDER BY ("x"::text IS NOT DISTINCT FROM $2::text) DESC LIMIT 1)`, []string{"3", "3", "{}"}},
	}
	a := newTestApplier(t)
	var c pgoutput.Change
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			decode(t, tc.msg, &c)
			rel := a.relations[c.RelationID]
			if fitsRowSet(rel, &c) {
				t.Fatal("change expected to go alone fits a row set")
			}
			st, fresh, params, _ := a.bindRow(rel, &c)
			if st.sql != tc.sql {
				t.Errorf("sql =\n%s\nwant\n%s", st.sql, tc.sql)
			}
			if got := fmt.Sprint(strs(params)); got != fmt.Sprint(tc.params) {
				t.Errorf("params = %s, want %s", got, tc.params)
			}
			if !fresh && !strings.Contains(tc.name, "same statement") {
				t.Error("first use not marked for preparation")
			}
			if st2, fresh2, _, _ := a.bindRow(rel, &c); st2 != st || fresh2 {
				t.Error("second use prepared again")
			}
		})
	}
}

// rowSetsOf feeds the messages through addToRowSet as Change does, and
// returns the statements and parameters the row sets would send.
func rowSetsOf(t *testing.T, a *Applier, msgs ...[]byte) (sqls []string, params [][]string) {
	t.Helper()
	var c pgoutput.Change
	emit := func() { // as sendRowSet does, COPY aside
		r := &a.rowSet
		w, chunk := r.width(), r.chunkRows()
		for start := 0; start < r.rows; start += chunk {
			n := min(chunk, r.rows-start)
			st, _ := a.rowSetStatement(n)
			sqls = append(sqls, st.sql)
			params = append(params, strs(r.params[start*w:(start+n)*w]))
		}
		a.clearRowSet()
	}
	for _, m := range msgs {
		decode(t, m, &c)
		rel := a.relations[c.RelationID]
		if !fitsRowSet(rel, &c) {
			t.Fatalf("%q does not fit a row set", m[0])
		}
		joined, full := a.addToRowSet(rel, &c)
		if !joined {
			emit()
			if joined, full = a.addToRowSet(rel, &c); !joined {
				t.Fatal("an empty row set refused a change")
			}
		}
		if full {
			emit()
		}
	}
	if a.rowSet.rows > 0 {
		emit()
	}
	return sqls, params
}

func TestRowSets(t *testing.T) {
	row := func(id, a, b string) []ot.Value { return []ot.Value{ot.T(id), ot.T(a), ot.T(b)} }
	cases := []struct {
		name   string
		msgs   [][]byte
		sqls   []string
		params [][]string
	}{
		{"inserts", [][]byte{ot.Insert(1, row("1", "x", "2")), ot.Insert(1, []ot.Value{ot.T("2"), ot.Null, ot.T("3")})},
			[]string{`INSERT INTO "public"."t" ("id", "a", "b") VALUES ($1, $2, $3), ($4, $5, $6)`},
			[][]string{{"1", "x", "2", "2", "<nil>", "3"}}},
		{"updates by key with casts", [][]byte{ot.Update(1, 0, nil, row("1", "x", "2")), ot.Update(1, 0, nil, row("2", "y", "3"))},
			[]string{`UPDATE "public"."t" AS pgsync_t SET "a" = v.c0, "b" = v.c1 FROM (VALUES ($1::text, $2::integer, $3::bigint), ($4::text, $5::integer, $6::bigint)) AS v(c0, c1, c2) WHERE pgsync_t."id" = v.c2`},
			[][]string{{"x", "2", "1", "y", "3", "2"}}},
		{"a single update is a plain UPDATE", [][]byte{ot.Update(1, 0, nil, row("1", "x", "2"))},
			[]string{`UPDATE "public"."t" SET "a" = $1, "b" = $2 WHERE "id" = $3`},
			[][]string{{"x", "2", "1"}}},
		{"the same row twice splits the row set", [][]byte{ot.Update(1, 0, nil, row("1", "x", "2")), ot.Update(1, 0, nil, row("1", "y", "2"))},
			[]string{`UPDATE "public"."t" SET "a" = $1, "b" = $2 WHERE "id" = $3`, `UPDATE "public"."t" SET "a" = $1, "b" = $2 WHERE "id" = $3`},
			[][]string{{"x", "2", "1"}, {"y", "2", "1"}}},
		{"another unchanged-TOAST shape splits the row set", [][]byte{ot.Update(1, 0, nil, row("1", "x", "2")), ot.Update(1, 0, nil, []ot.Value{ot.T("2"), ot.Unchanged, ot.T("5")})},
			[]string{`UPDATE "public"."t" SET "a" = $1, "b" = $2 WHERE "id" = $3`, `UPDATE "public"."t" SET "b" = $1 WHERE "id" = $2`},
			[][]string{{"x", "2", "1"}, {"5", "2"}}},
		{"deletes by key", [][]byte{ot.Delete(1, 'K', []ot.Value{ot.T("5"), ot.Null, ot.Null}), ot.Delete(1, 'K', []ot.Value{ot.T("6"), ot.Null, ot.Null})},
			[]string{`DELETE FROM "public"."t" WHERE "id" IN ($1, $2)`},
			[][]string{{"5", "6"}}},
		{"deletes by composite key", [][]byte{ot.Delete(3, 'K', []ot.Value{ot.T("1"), ot.T("a"), ot.Null}), ot.Delete(3, 'K', []ot.Value{ot.T("2"), ot.T("b"), ot.Null})},
			[]string{`DELETE FROM "public"."m" WHERE ("k1", "k2") IN (($1, $2), ($3, $4))`},
			[][]string{{"1", "a", "2", "b"}}},
		{"kind and table changes split row sets", [][]byte{ot.Insert(1, row("1", "x", "2")), ot.Delete(1, 'K', []ot.Value{ot.T("1"), ot.Null, ot.Null}), ot.Insert(3, row("1", "a", "v")), ot.Insert(1, row("1", "x", "2"))},
			[]string{`INSERT INTO "public"."t" ("id", "a", "b") VALUES ($1, $2, $3)`, `DELETE FROM "public"."t" WHERE "id" = $1`, `INSERT INTO "public"."m" ("k1", "k2", "v") VALUES ($1, $2, $3)`, `INSERT INTO "public"."t" ("id", "a", "b") VALUES ($1, $2, $3)`},
			[][]string{{"1", "x", "2"}, {"1"}, {"1", "a", "v"}, {"1", "x", "2"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestApplier(t)
			sqls, params := rowSetsOf(t, a, tc.msgs...)
			if fmt.Sprintf("%q", sqls) != fmt.Sprintf("%q", tc.sqls) {
				t.Errorf("statements:\n%s\nwant\n%s", sqls, tc.sqls)
			}
			if fmt.Sprint(params) != fmt.Sprint(tc.params) {
				t.Errorf("params = %v, want %v", params, tc.params)
			}
		})
	}
}

func TestRowSetSizeIsBounded(t *testing.T) {
	a := newTestApplier(t)
	var msgs [][]byte
	for i := 0; i < maxRowSetRows+3; i++ {
		msgs = append(msgs, ot.Insert(1, []ot.Value{ot.T(fmt.Sprint(i)), ot.T("x"), ot.Null}))
	}
	sqls, params := rowSetsOf(t, a, msgs...)
	if len(sqls) != 2 || len(params[0]) != 3*maxRowSetRows || len(params[1]) != 9 {
		t.Errorf("%d rows made %d statements with %d and %d params", len(msgs), len(sqls), len(params[0]), len(params[len(params)-1]))
	}
}

func TestNewRelationGenerationInvalidatesStatements(t *testing.T) {
	a := newTestApplier(t)
	var c pgoutput.Change
	decode(t, ot.Update(1, 'K', []ot.Value{ot.T("1"), ot.Null, ot.Null}, []ot.Value{ot.T("1"), ot.T("x"), ot.Null}), &c)
	st1, _, _, _ := a.bindRow(a.relations[1], &c)
	r, _ := pgoutput.DecodeRelation(ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "a", TypeOID: 25}, {Name: "b", TypeOID: 23}, {Name: "c", TypeOID: 23}}))
	rel, _ := newRelation(r, a.relations[1], map[string]string{"id": "bigint", "a": "text", "b": "integer", "c": "integer"}, nil)
	a.relations[1] = rel
	decode(t, ot.Update(1, 'K', []ot.Value{ot.T("1"), ot.Null, ot.Null, ot.Null}, []ot.Value{ot.T("1"), ot.T("x"), ot.Null, ot.T("9")}), &c)
	st2, fresh, _, _ := a.bindRow(rel, &c)
	if !fresh || st2 == st1 || st2.sql != `UPDATE "public"."t" SET "a" = $1, "b" = $2, "c" = $3 WHERE "id" = $4` {
		t.Errorf("after a new Relation: fresh=%v sql=%s", fresh, st2.sql)
	}
	if _, missing := newRelation(r, nil, map[string]string{"id": "bigint", "a": "text", "b": "integer"}, nil); missing != 3 {
		t.Errorf("missing column index = %d, want 3", missing)
	}
}

func TestCheckValuesRejectsWhatCannotBeApplied(t *testing.T) {
	a := newTestApplier(t)
	var c pgoutput.Change
	decode(t, ot.Insert(1, []ot.Value{ot.T("1"), ot.Unchanged, ot.Null}), &c)
	if err := a.checkValues(a.relations[1], &c); err == nil {
		t.Error("an INSERT with an unchanged value was accepted")
	}
	decode(t, ot.Update(1, 0, nil, []ot.Value{ot.Unchanged, ot.T("x"), ot.Null}), &c)
	if err := a.checkValues(a.relations[1], &c); err == nil {
		t.Error("an UPDATE without its key value was accepted")
	}
}

// BenchmarkDecodeAndBind is the per-row hot path without the network:
// decode the pgoutput message, add the row to its row set (or bind its own
// statement), and encode what goes on the wire for the row set, as sendRowSet
// does: Bind messages of at most maxRowSetRows rows ("insert": a row set shorter
// than copyMinRows; UPDATE and DELETE row sets), or COPY data for a long row set
// of INSERTs ("insert_copy"). allocs/op is the figure later changes must
// not make worse (docs/benchmarks.md).
func BenchmarkDecodeAndBind(b *testing.B) {
	row := []ot.Value{ot.T("123456"), ot.T("customer-123456-some-descriptive-text-to-pad-the-row-out"), ot.T("4242")}
	cases := []struct {
		name string
		msg  func(i int) []byte
		// flushAt is the row set length sent: the statement path's maxRowSetRows,
		// or a full COPY row set.
		flushAt int
	}{
		{"insert", func(int) []byte { return ot.Insert(1, row) }, maxRowSetRows},
		{"insert_copy", func(int) []byte { return ot.Insert(1, row) }, maxCopyRows},
		{"update", func(i int) []byte {
			return ot.Update(1, 0, nil, []ot.Value{ot.T(fmt.Sprint(100000 + i)), row[1], row[2]})
		}, maxRowSetRows},
		{"update_toast_unchanged", func(i int) []byte {
			return ot.Update(1, 0, nil, []ot.Value{ot.T(fmt.Sprint(100000 + i)), ot.Unchanged, row[2]})
		}, maxRowSetRows},
		{"update_key_change", func(int) []byte { return ot.Update(1, 'K', []ot.Value{ot.T("1"), ot.Null, ot.Null}, row) }, maxRowSetRows},
		{"delete", func(i int) []byte {
			return ot.Delete(1, 'K', []ot.Value{ot.T(fmt.Sprint(100000 + i)), ot.Null, ot.Null})
		}, maxRowSetRows},
		{"delete_full", func(int) []byte { return ot.Delete(2, 'O', []ot.Value{ot.T("42"), ot.T(`{"k": "v"}`)}) }, maxRowSetRows},
	}
	for _, bc := range cases {
		// Distinct keys, as a real stream has: 64 messages cycled.
		msgs := make([][]byte, maxRowSetRows)
		for i := range msgs {
			msgs[i] = bc.msg(i)
		}
		b.Run(bc.name, func(b *testing.B) {
			a := newTestApplier(b)
			var c pgoutput.Change
			var wire, copyData []byte
			encode := func(name string, params [][]byte) {
				bind := pgproto3.Bind{PreparedStatement: name, Parameters: params}
				var err error
				if wire, err = bind.Encode(wire[:0]); err != nil {
					b.Fatal(err)
				}
			}
			i := 0
			b.ReportAllocs()
			// The first flushAt rows fill one row set before b.Loop starts the
			// timer: the buffers reach their working size, as they do
			// early in a stream. The body stays inline in the loop, as it
			// was when the figures this is compared with were taken.
			for n := 0; n < bc.flushAt || b.Loop(); n++ {
				if err := pgoutput.DecodeChange(msgs[i%len(msgs)], &c); err != nil {
					b.Fatal(err)
				}
				i++
				rel := a.relations[c.RelationID]
				if !fitsRowSet(rel, &c) {
					st, _, params, _ := a.bindRow(rel, &c)
					encode(st.name, params)
					continue
				}
				joined, full := a.addToRowSet(rel, &c)
				if !joined {
					b.Fatal("row did not join the row set")
				}
				if full || a.rowSet.rows >= bc.flushAt {
					if a.rowSet.op == pgoutput.MsgInsert && a.rowSet.rows >= copyMinRows {
						copyData = appendCopyRows(copyData[:0], a.rowSet.params, len(rel.cols))
					} else {
						st, _ := a.rowSetStatement(a.rowSet.rows)
						encode(st.name, a.rowSet.params)
					}
					a.clearRowSet()
				}
			}
		})
	}
}

// TestTruncateKeepsRestartIdentityDropsCascade: each table is truncated
// ONLY, the second as much as the first (ONLY applies to one name), except
// one partitioned on the target, whose partitions go too, as native does.
func TestTruncateKeepsRestartIdentityDropsCascade(t *testing.T) {
	rels := []*relation{{ident: `"public"."a"`}, {ident: `"s"."b"`}, {ident: `"s"."p"`, targetFacts: targetFacts{partitioned: true}}}
	for _, tc := range []struct {
		options byte
		want    string
	}{
		{0, `TRUNCATE ONLY "public"."a", ONLY "s"."b", "s"."p"`},
		{pgoutput.TruncateCascade, `TRUNCATE ONLY "public"."a", ONLY "s"."b", "s"."p"`},
		{pgoutput.TruncateRestartIdentity | pgoutput.TruncateCascade, `TRUNCATE ONLY "public"."a", ONLY "s"."b", "s"."p" RESTART IDENTITY`},
	} {
		if got := truncateSQL(rels, tc.options); got != tc.want {
			t.Errorf("options %d: %s, want %s", tc.options, got, tc.want)
		}
	}
}

func TestInsertOverridesIdentityAlways(t *testing.T) {
	rel := &relation{ident: `"public"."t"`, cols: []string{`"id"`, `"v"`}, anyAlways: true}
	if got, want := insertSQL(rel, 2, nil), `INSERT INTO "public"."t" ("id", "v") OVERRIDING SYSTEM VALUE VALUES ($1, $2), ($3, $4)`; got != want {
		t.Errorf("%s\nwant %s", got, want)
	}
}

func TestAppendCopyRows(t *testing.T) {
	values := [][]byte{
		[]byte("1"), []byte(`a\b`), nil,
		[]byte("2"), {}, []byte("tab\there\nnl\rcr"),
	}
	got := string(appendCopyRows(nil, values, 3))
	want := "1\ta\\\\b\t\\N\n2\t\ttab\\there\\nnl\\rcr\n"
	if got != want {
		t.Errorf("appendCopyRows = %q, want %q", got, want)
	}
}

// TestAppendCopyValueMatchesBytewise checks the eight-bytes-at-a-time
// path against the plain rule, with every special byte at every position
// of values longer than a word, next to bytes from all of 0..255.
func TestAppendCopyValueMatchesBytewise(t *testing.T) {
	plain := func(v []byte) string {
		var b strings.Builder
		for _, c := range v {
			switch c {
			case '\\':
				b.WriteString(`\\`)
			case '\t':
				b.WriteString(`\t`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			default:
				b.WriteByte(c)
			}
		}
		return b.String()
	}
	for n := 0; n <= 33; n++ {
		for pos := 0; pos < n; pos++ {
			for _, special := range []byte{'\\', '\t', '\n', '\r', 0x0d, 0x0e, 0x5b, 0x5d, 0x80, 0xdc, 0xff, 0x00} {
				v := make([]byte, n)
				for i := range v {
					v[i] = byte('a' + i%26)
					if i%7 == 3 {
						v[i] = byte(0x80 + i) // UTF-8 continuation-like bytes
					}
				}
				v[pos] = special
				if got, want := string(appendCopyValue(nil, v)), plain(v); got != want {
					t.Fatalf("%q: got %q, want %q", v, got, want)
				}
			}
		}
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	if got, want := string(appendCopyValue(nil, all)), plain(all); got != want {
		t.Fatalf("bytes 0..255: got %q, want %q", got, want)
	}
}

func TestLongInsertRunsGoAsCopy(t *testing.T) {
	a := newTestApplier(t)
	var msgs [][]byte
	for i := 0; i < copyMinRows; i++ {
		msgs = append(msgs, ot.Insert(1, []ot.Value{ot.T(fmt.Sprint(i)), ot.T("x"), ot.T("2")}))
	}
	var c pgoutput.Change
	for _, m := range msgs {
		decode(t, m, &c)
		rel := a.relations[c.RelationID]
		joined, full := a.addToRowSet(rel, &c)
		if !joined || full {
			t.Fatalf("row %s: joined %v, full %v: an INSERT row set must grow past %d rows", c.New.Values[0], joined, full, maxRowSetRows)
		}
	}
	if a.rowSet.rows != copyMinRows {
		t.Fatalf("row set of %d rows, want %d", a.rowSet.rows, copyMinRows)
	}
}

// TestSetColumnsOfKeyChanges: an UPDATE that carries its old key sets every
// column whose value may have changed, never an unchanged key column or an
// unchanged TOAST value, and the statement's mask says the same.
func TestSetColumnsOfKeyChanges(t *testing.T) {
	a := newTestApplier(t)
	cases := []struct {
		name string
		msg  []byte
		want []int
	}{
		{"whole key changed", ot.Update(1, 'K', []ot.Value{ot.T("1"), ot.Null, ot.Null}, []ot.Value{ot.T("2"), ot.T("x"), ot.Null}), []int{0, 1, 2}},
		{"key unchanged", ot.Update(1, 'K', []ot.Value{ot.T("1"), ot.Null, ot.Null}, []ot.Value{ot.T("1"), ot.T("x"), ot.Null}), []int{1, 2}},
		{"unchanged TOAST", ot.Update(1, 'K', []ot.Value{ot.T("1"), ot.Null, ot.Null}, []ot.Value{ot.T("2"), ot.Unchanged, ot.T("3")}), []int{0, 2}},
		{"composite key, one part changed", ot.Update(3, 'K', []ot.Value{ot.T("1"), ot.T("a"), ot.Null}, []ot.Value{ot.T("1"), ot.T("b"), ot.T("v")}), []int{1, 2}},
		{"composite key, both parts changed", ot.Update(3, 'K', []ot.Value{ot.T("1"), ot.T("a"), ot.Null}, []ot.Value{ot.T("2"), ot.T("b"), ot.T("v")}), []int{0, 1, 2}},
		{"no old key", ot.Update(1, 0, nil, []ot.Value{ot.T("1"), ot.T("x"), ot.T("3")}), []int{1, 2}},
	}
	var c pgoutput.Change
	for _, tc := range cases {
		decode(t, tc.msg, &c)
		rel := a.relations[c.RelationID]
		cols, mask := appendSetColumns(nil, nil, rel, &c)
		var wantMask byte
		for _, i := range tc.want {
			wantMask |= 1 << i
		}
		if !slices.Equal(cols, tc.want) || len(mask) != 1 || mask[0] != wantMask {
			t.Errorf("%s: columns %v mask %08b, want %v %08b", tc.name, cols, mask, tc.want, wantMask)
		}
	}
}
