package apply

import (
	"testing"

	"github.com/pgsync/pgsync/pgoutput"
	ot "github.com/pgsync/pgsync/pgoutput/pgoutputtest"
)

// testRelation returns the relation of public.t with columns (name, type)
// of which the first key columns are its key.
func testRelation(t *testing.T, full bool, key int, cols ...[2]string) *relation {
	t.Helper()
	var oc []ot.Column
	types := map[string]string{}
	for i, c := range cols {
		oc = append(oc, ot.Column{Name: c[0], TypeOID: 16384, Key: i < key})
		types[c[0]] = c[1]
	}
	ident := byte('d')
	if full {
		ident = 'f'
	}
	r, err := pgoutput.DecodeRelation(ot.Relation(1, "public", "t", ident, oc))
	if err != nil {
		t.Fatal(err)
	}
	rel, missing := newRelation(r, nil, types, nil)
	if missing >= 0 {
		t.Fatalf("column %d missing", missing)
	}
	return rel
}

// TestCompositeKeysAreCast (issue 16): a parameter compared with a key of a
// composite type is cast to the column's type, else the comparison makes
// it a record, whose input is not implemented; other keys are left as
// they are.
func TestCompositeKeysAreCast(t *testing.T) {
	rel := testRelation(t, false, 2, [2]string{"a", "mix_t"}, [2]string{"k", "integer"}, [2]string{"b", "mix_t[]"})
	rel.composite = []bool{true, false, false}
	for _, tc := range []struct{ got, want string }{
		{updateSQL(rel, []int{2}, nil), `UPDATE "public"."t" SET "b" = $1 WHERE "a" = $2::mix_t AND "k" = $3`},
		{deleteSQL(rel), `DELETE FROM "public"."t" WHERE "a" = $1::mix_t AND "k" = $2`},
		{deleteRowSetSQL(rel, 2), `DELETE FROM "public"."t" WHERE ("a", "k") IN (($1::mix_t, $2), ($3::mix_t, $4))`},
		{updateRowSetSQL(rel, []int{2}, 2), `UPDATE "public"."t" AS pgsync_t SET "b" = v.c0 FROM (VALUES ($1::mix_t[], $2::mix_t, $3::integer), ($4::mix_t[], $5::mix_t, $6::integer)) AS v(c0, c1, c2) WHERE pgsync_t."a" = v.c1 AND pgsync_t."k" = v.c2`},
	} {
		if tc.got != tc.want {
			t.Errorf("\n%s\nwant\n%s", tc.got, tc.want)
		}
	}
	full := testRelation(t, true, 2, [2]string{"a", "public.mix_t"}, [2]string{"n", "integer"})
	full.composite = []bool{true, false}
	want := `DELETE FROM "public"."t" WHERE ctid = (SELECT ctid FROM "public"."t" WHERE "a" IS NOT DISTINCT FROM $1::public.mix_t AND "n" IS NOT DISTINCT FROM $2 ORDER BY ("a"::text IS NOT DISTINCT FROM $1::text AND "n"::text IS NOT DISTINCT FROM $2::text) DESC LIMIT 1)`
	if got := deleteSQL(full); got != want {
		t.Errorf("\n%s\nwant\n%s", got, want)
	}
}
