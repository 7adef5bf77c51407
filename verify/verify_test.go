package verify

import (
	"strings"
	"testing"

	"github.com/pgsync/pgsync/catalog"
)

func TestHashSQLColumns(t *testing.T) {
	table := &catalog.Table{Schema: "public", Name: "t", Columns: []catalog.Column{
		{Name: "id", Type: "integer"},
		{Name: "doc", Type: "json"},
		{Name: "At", Type: "timestamp without time zone"},
		{Name: "twice", Type: "integer", Generated: "id * 2"},
	}}
	tests := []struct {
		casts map[string]string
		want  string
	}{
		{nil, `ROW("id", "doc", "At")`},
		{map[string]string{"doc": "jsonb", "At": "timestamp with time zone"}, `ROW("id", "doc"::jsonb, "At"::timestamp with time zone)`},
	}
	for _, tt := range tests {
		got := hashSQL(table, tt.casts, true)
		if !strings.Contains(got, tt.want+"::text") || !strings.Contains(got, `FROM ONLY "public"."t"`) {
			t.Errorf("hashSQL with casts %v:\n%s\nwant it to hash %s", tt.casts, got, tt.want)
		}
	}
	// A table the target partitions further is read whole there.
	if got := hashSQL(table, nil, false); strings.Contains(got, "ONLY") || !strings.Contains(got, `FROM "public"."t"`) {
		t.Errorf("hashSQL of a partitioned target table reads ONLY:\n%s", got)
	}
}
