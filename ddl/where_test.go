package ddl

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestRefused: a record without Elsewhere is run; one with it is refused
// with an error that names each table, its columns and what computed
// them, and is ErrElsewhere; the field survives signing and decoding.
func TestRefused(t *testing.T) {
	plain := Record{Job: "j", Query: "ALTER TABLE items ADD c int DEFAULT 5"}
	if err := plain.Refused(); err != nil {
		t.Errorf("a record without Elsewhere is refused: %v", err)
	}
	tests := []struct {
		found []Elsewhere
		want  []string
	}{
		{[]Elsewhere{{Table: "public.items", Columns: []string{"created_ts"}, Why: "default"}},
			[]string{"column created_ts of table public.items", "a default that is not immutable"}},
		{[]Elsewhere{{Table: "public.items", Columns: []string{"v"}, Why: "using"}, {Table: "s.\"T\"", Why: "using"}},
			[]string{"column v of table public.items", "a USING expression", `its columns of table s."T"`}},
	}
	for _, tt := range tests {
		r := Record{Job: "j", Query: "ALTER TABLE ...", Elsewhere: tt.found}
		got, err := Decode(Encode(r, "k"), "j", "k")
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("Decode = %+v, %v; want %+v", got, err, r)
		}
		err = got.Refused()
		if !errors.Is(err, ErrElsewhere) {
			t.Fatalf("Refused() = %v, want ErrElsewhere", err)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Refused() = %q, does not say %q", err, w)
			}
		}
	}
}
