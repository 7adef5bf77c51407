package apply

import "testing"

// TestStagedValues: a row's values are staged only from stageFrom bytes in
// all, and then each value of largeValue bytes or more.
func TestStagedValues(t *testing.T) {
	st := &statement{setCols: []int{0, 1, 2}}
	big, mid, small := make([]byte, stageFrom), make([]byte, largeValue), make([]byte, largeValue-1)
	for _, tc := range []struct {
		name   string
		params [][]byte
		want   []bool
	}{
		{"under stageFrom in all", [][]byte{mid, mid, small}, nil},
		{"one value reaches it", [][]byte{big, small, nil}, []bool{true, false, false}},
		{"several large values", [][]byte{big, mid, small}, []bool{true, true, false}},
	} {
		var n int64
		for _, p := range tc.params {
			n += int64(len(p))
		}
		got := stagedValues(st, tc.params, n)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
	if got := stagedValues(&statement{}, [][]byte{big}, stageFrom); got != nil {
		t.Errorf("a DELETE's identity values were staged: %v", got)
	}
}

// TestStagedStatements: a staged value is read back from its pieces, a
// bytea as it is, any other type through its input function; the other
// values stay parameters.
func TestStagedStatements(t *testing.T) {
	rel := testRelation(t, false, 1, [2]string{"id", "bigint"}, [2]string{"b", "bytea"}, [2]string{"j", "jsonb"})
	agg := func(p string) string {
		return "(SELECT string_agg(part, ''::bytea ORDER BY seq) FROM pg_temp.pgsync_staged WHERE id = $" + p + ")"
	}
	for _, tc := range []struct{ got, want string }{
		{insertSQL(rel, 1, stagedParam(rel, []int{0, 1, 2}, []byte("-bt"))),
			`INSERT INTO "public"."t" ("id", "b", "j") VALUES ($1, ` + agg("2") + `, convert_from(` + agg("3") + `, 'UTF8')::jsonb)`},
		{updateSQL(rel, []int{2}, stagedParam(rel, []int{2}, []byte("t"))),
			`UPDATE "public"."t" SET "j" = convert_from(` + agg("1") + `, 'UTF8')::jsonb WHERE "id" = $2`},
	} {
		if tc.got != tc.want {
			t.Errorf("\n%s\nwant\n%s", tc.got, tc.want)
		}
	}
}
