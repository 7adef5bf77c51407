package catalog

import "testing"

// TestColumnDefAddClauses: the statement that adds a column the source
// gained gives the target's existing rows what the source's read, and the
// column the source's definition.
func TestColumnDefAddClauses(t *testing.T) {
	cases := []struct {
		name       string
		def        ColumnDef
		empty      bool
		definition string
		clauses    string
		dropped    bool
	}{
		{"plain", ColumnDef{Name: "n", Type: "numeric(8,2)"}, false,
			"numeric(8,2)", `ADD COLUMN "n" numeric(8,2)`, false},
		{"default and not null", ColumnDef{Name: "note", Type: "text", Default: "'x'::text", NotNull: true}, false,
			"text DEFAULT 'x'::text NOT NULL", `ADD COLUMN "note" text DEFAULT 'x'::text NOT NULL`, false},
		{"collation", ColumnDef{Name: "Code", Type: "character varying(5)", Collation: `pg_catalog."C"`}, false,
			`character varying(5) COLLATE pg_catalog."C"`, `ADD COLUMN "Code" character varying(5) COLLATE pg_catalog."C"`, false},
		{"older rows read another value", ColumnDef{Name: "at", Type: "timestamp with time zone", Default: "now()", Existing: "'2025-01-01 00:00:00+00'::timestamp with time zone", NotNull: true}, false,
			"timestamp with time zone DEFAULT now() NOT NULL",
			`ADD COLUMN "at" timestamp with time zone DEFAULT '2025-01-01 00:00:00+00'::timestamp with time zone NOT NULL, ALTER COLUMN "at" SET DEFAULT now()`, false},
		{"default dropped since", ColumnDef{Name: "k", Type: "integer", Existing: "'0'::integer", NotNull: true}, false,
			"integer NOT NULL", `ADD COLUMN "k" integer DEFAULT '0'::integer NOT NULL, ALTER COLUMN "k" DROP DEFAULT`, false},
		{"not null, nothing fills it, rows", ColumnDef{Name: "r", Type: "integer", NotNull: true}, false,
			"integer NOT NULL", `ADD COLUMN "r" integer`, true},
		{"not null, nothing fills it, empty", ColumnDef{Name: "r", Type: "integer", NotNull: true}, true,
			"integer NOT NULL", `ADD COLUMN "r" integer NOT NULL`, false},
		{"generated", ColumnDef{Name: "g", Type: "text", Generated: "upper(note)"}, false,
			"text GENERATED ALWAYS AS (upper(note)) STORED", `ADD COLUMN "g" text GENERATED ALWAYS AS (upper(note)) STORED`, false},
		{"identity", ColumnDef{Name: "i", Type: "bigint", Identity: 'a', NotNull: true}, false,
			"bigint GENERATED ALWAYS AS IDENTITY", `ADD COLUMN "i" bigint GENERATED ALWAYS AS IDENTITY`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.def.Definition(); got != tc.definition {
				t.Errorf("Definition() = %s, want %s", got, tc.definition)
			}
			clauses, dropped := tc.def.AddClauses(tc.empty)
			if clauses != tc.clauses || dropped != tc.dropped {
				t.Errorf("AddClauses(%v) = %s, %v; want %s, %v", tc.empty, clauses, dropped, tc.clauses, tc.dropped)
			}
		})
	}
}
