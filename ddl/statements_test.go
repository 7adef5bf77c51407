package ddl

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestSplit: statements end at semicolons outside strings, quoted
// identifiers, dollar quotes, comments and BEGIN ATOMIC bodies.
func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"ALTER TABLE t ADD c int", []string{"ALTER TABLE t ADD c int"}},
		{"ALTER TABLE t ADD c int; CREATE INDEX ON t (c);", []string{"ALTER TABLE t ADD c int", "CREATE INDEX ON t (c)"}},
		{"COMMENT ON TABLE t IS 'a;b'; SELECT 1", []string{"COMMENT ON TABLE t IS 'a;b'", "SELECT 1"}},
		{`COMMENT ON TABLE t IS E'it\'s;'; X`, []string{`COMMENT ON TABLE t IS E'it\'s;'`, "X"}},
		{`COMMENT ON TABLE t IS 'it''s;'; X`, []string{`COMMENT ON TABLE t IS 'it''s;'`, "X"}},
		{`ALTER TABLE "a;b" ADD c int; X`, []string{`ALTER TABLE "a;b" ADD c int`, "X"}},
		{"CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql; X", []string{"CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql", "X"}},
		{"CREATE FUNCTION f() RETURNS int AS $body$ SELECT $1; $x$ $body$ LANGUAGE sql; X", []string{"CREATE FUNCTION f() RETURNS int AS $body$ SELECT $1; $x$ $body$ LANGUAGE sql", "X"}},
		{"-- a comment; still\nALTER TABLE t ADD c int /* x; /* nested; */ y */; X", []string{"-- a comment; still\nALTER TABLE t ADD c int /* x; /* nested; */ y */", "X"}},
		{"CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT CASE WHEN true THEN 1 END; SELECT 2; END; X",
			[]string{"CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT CASE WHEN true THEN 1 END; SELECT 2; END", "X"}},
		{"BEGIN; ALTER TABLE t ADD c int; COMMIT;", []string{"BEGIN", "ALTER TABLE t ADD c int", "COMMIT"}},
		{" ; ;", nil},
	} {
		if got := Split(tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q)\n got %q\nwant %q", tc.query, got, tc.want)
		}
	}
}

// TestPlan: what the target runs for a statement string, and what refuses
// it.
func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		query   string
		want    string
		refused string // the statement a refusal names
	}{
		{"ALTER TABLE t ADD c int DEFAULT 0", "ALTER TABLE t ADD c int DEFAULT 0", ""},
		{"BEGIN; SET lock_timeout = '5s'; ALTER TABLE t ADD c int; CREATE INDEX i ON t (c); COMMIT",
			"ALTER TABLE t ADD c int;\nCREATE INDEX i ON t (c)", ""},
		{"START TRANSACTION; ALTER TABLE t RENAME a TO b; END", "ALTER TABLE t RENAME a TO b", ""},
		{"create unique index concurrently i on t (c)", "", "create unique index concurrently i on t (c)"},
		{"DROP INDEX CONCURRENTLY i", "", "DROP INDEX CONCURRENTLY i"},
		{"REINDEX (VERBOSE) TABLE CONCURRENTLY t", "", "REINDEX (VERBOSE) TABLE CONCURRENTLY t"},
		{"ALTER TABLE p DETACH PARTITION p1 CONCURRENTLY", "", "ALTER TABLE p DETACH PARTITION p1 CONCURRENTLY"},
		{"REFRESH MATERIALIZED VIEW CONCURRENTLY v", "REFRESH MATERIALIZED VIEW CONCURRENTLY v", ""},
		{`CREATE INDEX "concurrently" ON t (c)`, `CREATE INDEX "concurrently" ON t (c)`, ""},
		{"INSERT INTO t VALUES (1); ALTER TABLE t ADD c int", "", "INSERT INTO t VALUES (1)"},
		{"DO $$ BEGIN EXECUTE 'ALTER TABLE t ADD c int'; END $$", "", "DO $$ BEGIN EXECUTE 'ALTER TABLE t ADD c int'; END $$"},
		{"SELECT make_partition(2025)", "", "SELECT make_partition(2025)"},
	} {
		got, ref := Plan(tc.query)
		switch {
		case tc.refused == "" && ref != nil:
			t.Errorf("Plan(%q) refused: %v", tc.query, ref)
		case tc.refused != "" && (ref == nil || ref.Statement != tc.refused):
			t.Errorf("Plan(%q) = %q, %v; want a refusal of %q", tc.query, got, ref, tc.refused)
		case got != tc.want:
			t.Errorf("Plan(%q) = %q, want %q", tc.query, got, tc.want)
		}
	}
}

// TestTargetSQL: the captured search_path is set for the statements alone,
// quoted as a literal, and the session's is set back after them.
func TestTargetSQL(t *testing.T) {
	got := TargetSQL("ALTER TABLE t ADD c int", `"$user", app's`)
	want := "SELECT pg_catalog.set_config('pgsync.saved_search_path', pg_catalog.current_setting('search_path'), true), pg_catalog.set_config('search_path', '\"$user\", app''s', true);\n" +
		"ALTER TABLE t ADD c int;\n" +
		"SELECT pg_catalog.set_config('search_path', pg_catalog.current_setting('pgsync.saved_search_path'), true)"
	if got != want {
		t.Errorf("TargetSQL =\n%s\nwant\n%s", got, want)
	}
}

// TestDecode: a record signed with the job's key decodes; one signed with
// another key, or altered after signing, is refused; another job's record
// is returned unchecked, for the caller to ignore.
func TestDecode(t *testing.T) {
	r := Record{Job: "j", Query: "ALTER TABLE t ADD c int", SearchPath: "public", Role: "app", Tag: "ALTER TABLE"}
	got, err := Decode(Encode(r, "k1"), "j", "k1")
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("Decode = %+v, %v; want %+v", got, err, r)
	}
	if _, err := Decode(Encode(r, "k2"), "j", "k1"); !errors.Is(err, ErrUnsigned) {
		t.Errorf("another key's record: err = %v, want ErrUnsigned", err)
	}
	altered := strings.Replace(string(Encode(r, "k1")), "ADD c int", "ADD d int", 1)
	if _, err := Decode([]byte(altered), "j", "k1"); !errors.Is(err, ErrUnsigned) {
		t.Errorf("an altered record: err = %v, want ErrUnsigned", err)
	}
	other := r
	other.Job = "other"
	if got, err := Decode(Encode(other, "k2"), "j", "k1"); err != nil || got.Job != "other" {
		t.Errorf("another job's record = %+v, %v", got, err)
	}
	if _, err := Decode([]byte("{"), "j", "k1"); err == nil {
		t.Error("bad JSON decoded")
	}
}
