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
		{"create index concurrently on t (c)", "", "create index concurrently on t (c)"},
		{"ALTER TABLE t ADD c int; CREATE INDEX CONCURRENTLY i ON t (c)", "", "CREATE INDEX CONCURRENTLY i ON t (c)"},
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
			t.Errorf("Plan(%q) = %+v, %v; want a refusal of %q", tc.query, got, ref, tc.refused)
		case got.InTransaction != tc.want || got.OnItsOwn != nil:
			t.Errorf("Plan(%q) = %+v, want %q", tc.query, got, tc.want)
		}
	}
}

// TestPlanOnItsOwn: a statement that cannot run in a transaction block
// runs on its own, with the query that tells what is left of it on the
// target reading the names it acts on, as written.
func TestPlanOnItsOwn(t *testing.T) {
	for _, tc := range []struct {
		query string
		todo  string
		names []any
	}{
		{"create unique index concurrently i on t (c)", todoCreateIndex, []any{"i", "t"}},
		{`CREATE INDEX CONCURRENTLY IF NOT EXISTS "Big Idx" ON ONLY app."Items" USING btree (c)`, todoCreateIndex, []any{`"Big Idx"`, `app."Items"`}},
		{"DROP INDEX CONCURRENTLY IF EXISTS app.i", todoDropIndex, []any{"app.i"}},
		{"REINDEX (VERBOSE) TABLE CONCURRENTLY t", todoReindex, []any{"t"}},
		{"REINDEX SCHEMA CONCURRENTLY app", todoAlways, nil},
		{"ALTER TABLE IF EXISTS ONLY m DETACH PARTITION m_2024 CONCURRENTLY", todoDetach, []any{"m", "m_2024"}},
	} {
		got, ref := Plan(tc.query)
		if ref != nil || got.OnItsOwn == nil || got.InTransaction != "" {
			t.Errorf("Plan(%q) = %+v, %v; want it on its own", tc.query, got, ref)
			continue
		}
		own := got.OnItsOwn
		if !strings.HasPrefix(own.Todo, tc.todo[:min(40, len(tc.todo))]) || own.Statement != tc.query || !reflect.DeepEqual(own.Args, append([]any{tc.query}, tc.names...)) {
			t.Errorf("Plan(%q).OnItsOwn = %+v", tc.query, own)
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
