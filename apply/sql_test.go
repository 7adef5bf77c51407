package apply

import (
	"strings"
	"testing"

	"github.com/pgsync/pgsync/pgoutput"
	ot "github.com/pgsync/pgsync/pgoutput/pgoutputtest"
)

// TestUpdateRunCastsCannotChangeValues (issue 16): the VALUES of a batched
// UPDATE are cast to types that take every value unchanged, keys and set
// columns alike; a bare bit or character would be bit(1) or character(1),
// and cut the value.
func TestUpdateRunCastsCannotChangeValues(t *testing.T) {
	tests := []struct{ base, cast string }{
		{"bit", `"bit"`},
		{"bit[]", `"bit"[]`},
		{"character", "bpchar"},
		{"character[]", "bpchar[]"},
		{"bit varying", "bit varying"},
		{"character varying", "character varying"},
		{"numeric[]", "numeric[]"},
		{"time without time zone", "time without time zone"},
		{"timestamp with time zone", "timestamp with time zone"},
		{"interval", "interval"},
	}
	for _, tt := range tests {
		t.Run(tt.base, func(t *testing.T) {
			r, err := pgoutput.DecodeRelation(ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "k", Key: true}, {Name: "v"}}))
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := newRelation(r, nil, map[string]string{"k": tt.base, "v": tt.base}, nil)
			got := updateRowSetSQL(rel, []int{1}, 2)
			want := `UPDATE "public"."t" AS pgsync_t SET "v" = v.c0 FROM (VALUES ($1::` + tt.cast + `, $2::` + tt.cast + `), ($3::` + tt.cast + `, $4::` + tt.cast + `)) AS v(c0, c1) WHERE pgsync_t."k" = v.c1`
			if got != want {
				t.Errorf("updateRowSetSQL:\n%s\nwant\n%s", got, want)
			}
			// The other statements cast nothing: their parameters take
			// the column's type, without a modifier, from what they meet.
			for _, sql := range []string{insertSQL(rel, 2, nil), updateSQL(rel, []int{1}, nil), deleteSQL(rel), deleteRowSetSQL(rel, 2)} {
				if strings.Contains(sql, "::") {
					t.Errorf("a cast in %s", sql)
				}
			}
		})
	}
}
