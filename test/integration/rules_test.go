//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// checkItem is one item of pgsync check --json.
type checkItem struct {
	Item   string `json:"item"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// checkItems runs pgsync check --json and returns its items by name (an
// item named twice keeps its failing one).
func (e *env) checkItems() (map[string]checkItem, result) {
	e.t.Helper()
	r := e.pgsync("check", "--json")
	var items []checkItem
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil {
		e.t.Fatalf("check --json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	byName := map[string]checkItem{}
	for _, it := range items {
		if prev, ok := byName[it.Item]; ok && prev.Status == "FAIL" {
			continue
		}
		byName[it.Item] = it
	}
	return byName, r
}

// worded is an item as a refusal words it (job.FailedItems).
func (it checkItem) worded() string {
	s := it.Item + ": " + it.Detail
	if it.Fix != "" {
		s += " (fix: " + it.Fix + ")"
	}
	return s
}

// fakePgDump writes a pg_dump that says it is version (for --version) and
// fails at anything else, and returns its path: a pg_dump older than the
// source, as a machine with an older client package has.
func fakePgDump(t *testing.T, version string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pg_dump")
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo 'pg_dump (PostgreSQL) %s'; exit 0; fi\necho 'fake pg_dump: only --version' >&2\nexit 1\n", version)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// sourceOnlyRole creates a role on the source's cluster only, dropped at
// the end of the test on both.
func sourceOnlyRole(t *testing.T, prefix string) string {
	t.Helper()
	role := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1e9)
	admin := mustConnect(t, adminURL(sourcePort))
	if _, err := admin.Exec(context.Background(), "CREATE ROLE "+role); err != nil {
		t.Fatal(err)
	}
	admin.Close(context.Background())
	t.Cleanup(func() {
		for _, port := range []string{sourcePort, targetPort} {
			if a, err := mustConnectErr(adminURL(port)); err == nil {
				_, _ = a.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
				a.Close(context.Background())
			}
		}
	})
	return role
}

// TestEveryRefusalIsACheckFailure: for each refusal bootstrap can make
// before it writes, pgsync check on the same databases reports the same
// item as FAIL with the same detail and fix, and bootstrap's error words
// it as check prints it (issue 30: each rule is written once). Bootstrap
// writes nothing.
func TestEveryRefusalIsACheckFailure(t *testing.T) {
	type tc struct {
		name      string
		sourceSQL string
		tuning    func(t *testing.T) string
		// setup runs on the test's databases before check (the source's
		// role, the target's tables).
		setup func(t *testing.T, e *env)
		item  string
		// fix is a part of the item's fix the operator must read.
		fix string
		// keep are the target's tables before bootstrap (schema.name).
		keep []string
	}
	none := func(*testing.T) string { return "" }
	off := func(*testing.T) string { return builtinCreator }
	cases := []tc{
		{name: "no table", sourceSQL: "", tuning: none, item: "tables", fix: "fix job.tables"},
		{name: "extension the target's server lacks", sourceSQL: `CREATE EXTENSION hstore; CREATE TABLE t (id int PRIMARY KEY, h hstore);`, tuning: none,
			setup: func(t *testing.T, e *env) {
				e.srcExec(`UPDATE pg_extension SET extname = 'pgsync_test_absent', extversion = '9.9' WHERE extname = 'hstore'`)
			},
			item: "extensions", fix: "install them on the target's server"},
		{name: "role the target lacks", sourceSQL: `CREATE TABLE t (id int PRIMARY KEY);`, tuning: none,
			setup: func(t *testing.T, e *env) { e.srcExec("ALTER TABLE t OWNER TO " + sourceOnlyRole(t, "rule_own")) },
			item:  "roles", fix: "pg_dumpall --roles-only"},
		{name: "type the built-in creator cannot make", sourceSQL: `CREATE EXTENSION citext; CREATE TABLE t (id citext PRIMARY KEY);`, tuning: off,
			item: "types", fix: "CREATE EXTENSION (or the collation) on the target"},
		{name: "function a default calls", sourceSQL: `CREATE FUNCTION next_id() RETURNS int LANGUAGE sql AS 'SELECT 1'; CREATE TABLE t (id int PRIMARY KEY DEFAULT next_id());`, tuning: off,
			item: "default functions", fix: "the built-in creator makes no functions"},
		{name: "target table without a column", sourceSQL: `CREATE TABLE t (id int PRIMARY KEY, v text);`, tuning: none,
			setup: func(t *testing.T, e *env) { e.tgtExec(`CREATE TABLE t (id int PRIMARY KEY)`) },
			item:  "table public.t", fix: "add them on the target", keep: []string{"public.t"}},
		{name: "target table not empty", sourceSQL: `CREATE TABLE t (id int PRIMARY KEY);`, tuning: none,
			setup: func(t *testing.T, e *env) { e.tgtExec(`CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (7)`) },
			item:  "table public.t", fix: "--force", keep: []string{"public.t"}},
		{name: "large object owner the target lacks", sourceSQL: `CREATE TABLE t (id int PRIMARY KEY); SELECT lo_from_bytea(424201, 'x');`, tuning: none,
			setup: func(t *testing.T, e *env) {
				e.srcExec("ALTER LARGE OBJECT 424201 OWNER TO " + sourceOnlyRole(t, "rule_lo"))
			},
			item: "large objects", fix: "pg_dumpall --roles-only"},
		{name: "large object in the way", sourceSQL: `CREATE TABLE t (id int PRIMARY KEY); SELECT lo_from_bytea(424202, 'x');`, tuning: none,
			setup: func(t *testing.T, e *env) { e.tgtExec(`SELECT lo_from_bytea(424202, 'the target''s own')`) },
			item:  "large objects", fix: "lo_unlink"},
		{name: "pg_dump older than the source, and a type only it makes", sourceSQL: `CREATE EXTENSION citext; CREATE TABLE t (id citext PRIMARY KEY);`,
			tuning: func(t *testing.T) string { return fmt.Sprintf("pg_dump = %q\n", fakePgDump(t, "12.0")) },
			item:   "schema", fix: "install pg_dump 15 or newer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.sourceSQL, c.tuning(t))
			if c.setup != nil {
				c.setup(t, e)
			}
			items, r := e.checkItems()
			it, ok := items[c.item]
			if r.code == 0 || !ok || it.Status != "FAIL" || !strings.Contains(it.Fix, c.fix) {
				t.Fatalf("check: exit %d, item %q = %+v, want FAIL with a fix naming %q\n%s", r.code, c.item, it, c.fix, r.stdout)
			}
			b := e.pgsync("bootstrap")
			if b.code != 1 || !strings.Contains(b.stderr, it.worded()) || !strings.Contains(b.stderr, "nothing was recorded") {
				t.Fatalf("bootstrap: exit %d, want 1 with check's words\n  %s\n%s", b.code, it.worded(), b.stderr)
			}
			e.assertNothingWritten(c.keep...)
			if got := queryOne[string](t, e.tgt, "SELECT coalesce(string_agg(extname, ','), '') FROM pg_extension WHERE extname <> 'plpgsql'"); got != "" {
				t.Errorf("the refused bootstrap left extension(s) %s on the target", got)
			}
		})
	}
}

// TestOlderPgDumpWarnsAndBootstrapSaysSo: a pg_dump older than the source,
// and tables the built-in creator can make: check WARNs naming the pg_dump
// needed and what the built-in creator leaves out, and bootstrap, which
// then uses the built-in creator, logs the same words (it said so only in
// an INFO line, and check said OK).
func TestOlderPgDumpWarnsAndBootstrapSaysSo(t *testing.T) {
	e := newEnv(t, `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'x');
CREATE VIEW v AS SELECT id FROM t;`, fmt.Sprintf("pg_dump = %q\n", fakePgDump(t, "12.0")))
	items, r := e.checkItems()
	it := items["schema"]
	if r.code != 0 || it.Status != "WARN" || !strings.Contains(it.Detail, "pg_dump 12, older than the source (PostgreSQL 15)") ||
		!strings.Contains(it.Detail, "leaves out views") || !strings.Contains(it.Fix, "install pg_dump 15 or newer") {
		t.Fatalf("check: exit %d, schema = %+v, want WARN naming pg_dump 15 and what the built-in creator leaves out\n%s", r.code, it, r.stdout)
	}
	b := e.mustPgsync("bootstrap")
	if !strings.Contains(b.stderr, "level=WARN") || !strings.Contains(b.stderr, "pg_dump 12, older than the source (PostgreSQL 15)") ||
		!strings.Contains(b.stderr, "install pg_dump 15 or newer") {
		t.Errorf("bootstrap did not warn as check does:\n%s", b.stderr)
	}
	if queryOne[bool](t, e.tgt, "SELECT to_regclass('public.v') IS NOT NULL") {
		t.Error("the view reached the target: the built-in creator was not used")
	}
	e.mustVerify()
}

// TestFailedRestoreLeavesNoExtension: pg_restore of the pre-data section
// fails after the extensions were created on their own (a collation of
// the target's is in the way): bootstrap drops them again and says so,
// so that no extension is left behind (issue 30: three were, while the
// error said nothing was kept).
func TestFailedRestoreLeavesNoExtension(t *testing.T) {
	e := newEnv(t, `CREATE EXTENSION citext; CREATE EXTENSION hstore; CREATE COLLATION mine FROM "C";
CREATE TABLE t (id citext PRIMARY KEY, h hstore);`, "")
	e.tgtExec(`CREATE COLLATION mine FROM "C"`)
	r := e.pgsync("bootstrap")
	if r.code == 0 || !strings.Contains(r.stderr, "pg_restore") || !strings.Contains(r.stderr, "nor the extensions created for it") {
		t.Fatalf("bootstrap: exit %d, want a pg_restore failure saying the extensions were dropped\n%s", r.code, r.stderr)
	}
	if got := queryOne[string](t, e.tgt, "SELECT coalesce(string_agg(extname, ','), '') FROM pg_extension WHERE extname <> 'plpgsql'"); got != "" {
		t.Errorf("the failed bootstrap left extension(s) %s on the target", got)
	}
	// With the collation out of the way, the rerun restores everything.
	e.tgtExec(`DROP COLLATION mine`)
	e.mustPgsync("bootstrap")
	if got := queryOne[string](t, e.tgt, "SELECT string_agg(extname, ',' ORDER BY extname) FROM pg_extension WHERE extname <> 'plpgsql'"); got != "citext,hstore" {
		t.Errorf("extensions on the target after the rerun: %q, want citext,hstore", got)
	}
	e.mustVerify()
}

// TestRolesRuleOnPostgreSQL15: a 15 target has pg_database_owner, which
// owns schema public on 15 and which the schema names: the role rule,
// which leaves out the roles a target's version cannot have (unit-tested
// for 13 in schemadump), still requires and finds it.
func TestRolesRuleOnPostgreSQL15(t *testing.T) {
	e := newEnv(t, `CREATE TABLE t (id int PRIMARY KEY); GRANT USAGE ON SCHEMA public TO pg_database_owner;`, "")
	items, r := e.checkItems()
	if it := items["roles"]; r.code != 0 || it.Status != "OK" {
		t.Fatalf("check: exit %d, roles = %+v, want OK\n%s", r.code, it, r.stdout)
	}
	e.mustPgsync("bootstrap")
	e.mustVerify()
}
