package apply

import (
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsync/pgsync/pgoutput"
	ot "github.com/pgsync/pgsync/pgoutput/pgoutputtest"
)

// newTestApplier returns an Applier without a connection, with relation 1
// (public.t: id key, a, b) and relation 2 (public.f, REPLICA IDENTITY FULL,
// with a json column) registered.
func newTestApplier(t testing.TB) *Applier {
	t.Helper()
	a := New(nil, Options{Job: "j"})
	for _, msg := range [][]byte{
		ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "a", TypeOID: 25}, {Name: "b", TypeOID: 23}}),
		ot.Relation(2, "public", "f", 'f', []ot.Column{{Name: "x", TypeOID: 23, Key: true}, {Name: "j", TypeOID: 114, Key: true}}),
	} {
		r, err := pgoutput.DecodeRelation(msg)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, c := range r.Columns {
			have[c.Name] = true
		}
		rel, missing := newRelation(r, a.relations[r.ID], have)
		if missing >= 0 {
			t.Fatalf("column %d missing", missing)
		}
		a.relations[r.ID] = rel
	}
	return a
}

func TestStatementBuilding(t *testing.T) {
	cases := []struct {
		name   string
		msg    []byte
		sql    string
		params []string
	}{
		{"update by new key", ot.Update(1, 0, nil, []ot.Value{ot.T("1"), ot.T("y"), ot.T("7")}),
			`UPDATE "public"."t" SET "id" = $1, "a" = $2, "b" = $3 WHERE "id" = $4`, []string{"1", "y", "7", "1"}},
		{"update of the key uses the old key", ot.Update(1, 'K', []ot.Value{ot.T("1"), ot.Null, ot.Null}, []ot.Value{ot.T("2"), ot.T("y"), ot.T("7")}),
			`UPDATE "public"."t" SET "id" = $1, "a" = $2, "b" = $3 WHERE "id" = $4`, []string{"2", "y", "7", "1"}},
		{"update leaves unchanged TOAST out", ot.Update(1, 0, nil, []ot.Value{ot.T("1"), ot.Unchanged, ot.T("8")}),
			`UPDATE "public"."t" SET "id" = $1, "b" = $2 WHERE "id" = $3`, []string{"1", "8", "1"}},
		{"delete", ot.Delete(1, 'K', []ot.Value{ot.T("5"), ot.Null, ot.Null}),
			`DELETE FROM "public"."t" WHERE "id" = $1`, []string{"5"}},
		{"full identity delete matches one row, json as text", ot.Delete(2, 'O', []ot.Value{ot.T("3"), ot.Null}),
			`DELETE FROM "public"."f" WHERE ctid = (SELECT ctid FROM "public"."f" WHERE "x" IS NOT DISTINCT FROM $1 AND "j"::text IS NOT DISTINCT FROM $2::text LIMIT 1)`, []string{"3", "<nil>"}},
		{"full identity update", ot.Update(2, 'O', []ot.Value{ot.T("3"), ot.T("{}")}, []ot.Value{ot.T("4"), ot.T("{}")}),
			`UPDATE "public"."f" SET "x" = $1, "j" = $2 WHERE ctid = (SELECT ctid FROM "public"."f" WHERE "x" IS NOT DISTINCT FROM $3 AND "j"::text IS NOT DISTINCT FROM $4::text LIMIT 1)`, []string{"4", "{}", "3", "{}"}},
	}
	a := newTestApplier(t)
	var c pgoutput.Change
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := pgoutput.DecodeChange(tc.msg, &c); err != nil {
				t.Fatal(err)
			}
			st, fresh, params, _, err := a.bind(&c)
			if err != nil {
				t.Fatal(err)
			}
			if st.sql != tc.sql {
				t.Errorf("sql =\n%s\nwant\n%s", st.sql, tc.sql)
			}
			// "update of the key" has the shape of "update by new key": the
			// statement prepared there is reused.
			if wantFresh := tc.name != "update of the key uses the old key"; fresh != wantFresh {
				t.Errorf("fresh = %v, want %v", fresh, wantFresh)
			}
			got := make([]string, len(params))
			for i, p := range params {
				if p == nil {
					got[i] = "<nil>"
				} else {
					got[i] = string(p)
				}
			}
			if len(got) != len(tc.params) {
				t.Fatalf("params = %q, want %q", got, tc.params)
			}
			for i := range got {
				if got[i] != tc.params[i] {
					t.Errorf("params = %q, want %q", got, tc.params)
				}
			}
			// The same shape reuses the prepared statement.
			st2, fresh2, _, _, _ := a.bind(&c)
			if st2 != st || fresh2 {
				t.Errorf("second use prepared again")
			}
		})
	}
}

func TestInsertRuns(t *testing.T) {
	a := newTestApplier(t)
	var c pgoutput.Change
	for i := 0; i < 3; i++ {
		pgoutput.DecodeChange(ot.Insert(1, []ot.Value{ot.T(string(rune('1' + i))), ot.T("x"), ot.Null}), &c)
		full, err := a.addToRun(&c)
		if err != nil || full {
			t.Fatalf("row %d: full=%v err=%v", i, full, err)
		}
	}
	if a.run.rows != 3 || len(a.run.params) != 9 || string(a.run.params[3]) != "2" || a.run.params[8] != nil {
		t.Errorf("run = %d rows, params %q", a.run.rows, a.run.params)
	}
	st, fresh := a.runStatement(a.run.rel, a.run.rows)
	want := `INSERT INTO "public"."t" ("id", "a", "b") VALUES ($1, $2, $3), ($4, $5, $6), ($7, $8, $9)`
	if st.sql != want || !fresh {
		t.Errorf("run statement = %s (fresh %v), want %s", st.sql, fresh, want)
	}
	if st2, fresh2 := a.runStatement(a.run.rel, 3); st2 != st || fresh2 {
		t.Error("the statement of a run of the same size was prepared again")
	}
	for i := 3; i < maxRunRows; i++ {
		pgoutput.DecodeChange(ot.Insert(1, []ot.Value{ot.T("9"), ot.T("x"), ot.Null}), &c)
		full, _ := a.addToRun(&c)
		if full != (i == maxRunRows-1) {
			t.Fatalf("row %d: full = %v", i, full)
		}
	}
	pgoutput.DecodeChange(ot.Insert(1, []ot.Value{ot.T("1"), ot.Unchanged, ot.Null}), &c)
	if _, err := a.addToRun(&c); err == nil {
		t.Error("an INSERT with an unchanged value was accepted")
	}
}

func TestNewRelationGenerationInvalidatesStatements(t *testing.T) {
	a := newTestApplier(t)
	var c pgoutput.Change
	pgoutput.DecodeChange(ot.Update(1, 0, nil, []ot.Value{ot.T("1"), ot.T("x"), ot.Null}), &c)
	st1, _, _, _, _ := a.bind(&c)
	r, _ := pgoutput.DecodeRelation(ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "a", TypeOID: 25}, {Name: "b", TypeOID: 23}, {Name: "c", TypeOID: 23}}))
	rel, _ := newRelation(r, a.relations[1], map[string]bool{"id": true, "a": true, "b": true, "c": true})
	a.relations[1] = rel
	pgoutput.DecodeChange(ot.Update(1, 0, nil, []ot.Value{ot.T("1"), ot.T("x"), ot.Null, ot.T("9")}), &c)
	st2, fresh, _, _, err := a.bind(&c)
	if err != nil || !fresh || st2 == st1 || st2.sql != `UPDATE "public"."t" SET "id" = $1, "a" = $2, "b" = $3, "c" = $4 WHERE "id" = $5` {
		t.Errorf("after a new Relation: fresh=%v err=%v sql=%s", fresh, err, st2.sql)
	}
	_, missing := newRelation(r, nil, map[string]bool{"id": true, "a": true, "b": true})
	if missing != 3 {
		t.Errorf("missing column index = %d, want 3", missing)
	}
}

func TestBindRejectsBadRows(t *testing.T) {
	a := newTestApplier(t)
	var c pgoutput.Change
	pgoutput.DecodeChange(ot.Delete(9, 'K', []ot.Value{ot.T("1")}), &c)
	if _, _, _, _, err := a.bind(&c); err == nil {
		t.Error("change on an unknown relation accepted")
	}
	pgoutput.DecodeChange(ot.Update(1, 0, nil, []ot.Value{ot.T("1")}), &c)
	if _, _, _, _, err := a.bind(&c); err == nil {
		t.Error("row with the wrong number of columns accepted")
	}
	pgoutput.DecodeChange(ot.Insert(1, []ot.Value{ot.T("1")}), &c)
	if _, err := a.addToRun(&c); err == nil {
		t.Error("insert with the wrong number of columns accepted")
	}
}

// BenchmarkDecodeAndBind is the per-row hot path without the network:
// decode the pgoutput message, find the prepared statement, gather the
// parameters and encode the Bind message that goes on the wire. allocs/op
// is the figure later changes must not make worse (docs/benchmarks.md).
func BenchmarkDecodeAndBind(b *testing.B) {
	row := []ot.Value{ot.T("123456"), ot.T("customer-123456-some-descriptive-text-to-pad-the-row-out"), ot.T("4242")}
	msgs := map[string][]byte{
		"insert":         ot.Insert(1, row),
		"update":         ot.Update(1, 0, nil, row),
		"update_toast_u": ot.Update(1, 0, nil, []ot.Value{row[0], ot.Unchanged, row[2]}),
		"delete":         ot.Delete(1, 'K', []ot.Value{ot.T("123456"), ot.Null, ot.Null}),
		"delete_full":    ot.Delete(2, 'O', []ot.Value{ot.T("42"), ot.T(`{"k": "v"}`)}),
	}
	for _, name := range []string{"insert", "update", "update_toast_u", "delete", "delete_full"} {
		msg := msgs[name]
		b.Run(name, func(b *testing.B) {
			a := newTestApplier(b)
			var c pgoutput.Change
			var wire []byte
			b.ReportAllocs()
			for b.Loop() {
				if err := pgoutput.DecodeChange(msg, &c); err != nil {
					b.Fatal(err)
				}
				if c.Op == pgoutput.MsgInsert {
					// Inserts join a run; a full run becomes one Bind.
					full, err := a.addToRun(&c)
					if err != nil {
						b.Fatal(err)
					}
					if full {
						st, _ := a.runStatement(a.run.rel, a.run.rows)
						bind := pgproto3.Bind{PreparedStatement: st.name, Parameters: a.run.params}
						if wire, err = bind.Encode(wire[:0]); err != nil {
							b.Fatal(err)
						}
						clear(a.run.params)
						a.run = insertRun{params: a.run.params[:0]}
					}
					continue
				}
				st, _, params, _, err := a.bind(&c)
				if err != nil {
					b.Fatal(err)
				}
				bind := pgproto3.Bind{PreparedStatement: st.name, Parameters: params}
				if wire, err = bind.Encode(wire[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
