//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// assertNothingWritten fails unless a refused command left nothing: no
// slot, no publication, no pgsync schema on the target, and no table of the
// target's schemas but those it had (want, as schema.name).
func (e *env) assertNothingWritten(want ...string) {
	e.t.Helper()
	if e.slotExists() {
		e.t.Error("the refused command created the slot")
	}
	if queryOne[bool](e.t, e.src, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", "pgsync_"+e.job) {
		e.t.Error("the refused command created the publication")
	}
	if queryOne[bool](e.t, e.tgt, "SELECT to_regnamespace('pgsync') IS NOT NULL") {
		e.t.Errorf("the refused command created the pgsync schema on the target (recorded %q)", e.recorded())
	}
	got := queryOne[string](e.t, e.tgt, `SELECT coalesce(string_agg(n.nspname || '.' || c.relname, ',' ORDER BY 1), '')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'`)
	if got != strings.Join(want, ",") {
		e.t.Errorf("the target's tables after a refused command: %q, want %q", got, strings.Join(want, ","))
	}
}

// TestRefusedForExtensionMissingOnTargetServer: the source has an
// extension that the target's server has not installed. check names it,
// its version and what to install; bootstrap refuses before any write.
// (Both test clusters share one installation: the source's extension is
// renamed in its catalog to one no server has.)
func TestRefusedForExtensionMissingOnTargetServer(t *testing.T) {
	e := newEnv(t, `CREATE EXTENSION hstore; CREATE TABLE t (id int PRIMARY KEY, h hstore); INSERT INTO t VALUES (1, 'a=>1');`, "")
	e.srcExec(`UPDATE pg_extension SET extname = 'pgsync_test_absent', extversion = '9.9' WHERE extname = 'hstore'`)
	r := e.pgsync("check")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "extension pgsync_test_absent 9.9 (schema public) is not installed on the target's server") {
		t.Fatalf("check: exit %d, want a failure naming the extension, its version and what to install\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for i := 0; i < 2; i++ {
		r = e.pgsync("bootstrap")
		if r.code != 1 || !strings.Contains(r.stderr, "pgsync_test_absent 9.9") || !strings.Contains(r.stderr, "nothing was recorded") {
			t.Fatalf("bootstrap %d: exit %d, want 1 naming the extension\n%s", i+1, r.code, r.stderr)
		}
		e.assertNothingWritten()
	}
}

// TestRefusedForRoleMissingOnTarget: the schema names roles the target
// lacks (an owner, a grantee of a column, default privileges, a policy).
// check lists each; bootstrap refuses before any write; with the roles
// created, bootstrap carries their grants and policy.
func TestRefusedForRoleMissingOnTarget(t *testing.T) {
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	owner, reader, auditor := "own_"+suffix, "rd_"+suffix, "aud_"+suffix
	admin := mustConnect(t, adminURL(sourcePort))
	for _, r := range []string{owner, reader, auditor} {
		if _, err := admin.Exec(context.Background(), "CREATE ROLE "+r); err != nil {
			t.Fatal(err)
		}
	}
	admin.Close(context.Background())
	t.Cleanup(func() {
		for _, port := range []string{sourcePort, targetPort} {
			if a, err := mustConnectErr(adminURL(port)); err == nil {
				for _, r := range []string{owner, reader, auditor} {
					_, _ = a.Exec(context.Background(), "DROP ROLE IF EXISTS "+r)
				}
				a.Close(context.Background())
			}
		}
	})
	e := newEnv(t, fmt.Sprintf(`CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'x');
ALTER TABLE t OWNER TO %[1]s;
GRANT SELECT (v) ON t TO %[2]s;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO %[2]s;
ALTER TABLE t ENABLE ROW LEVEL SECURITY;
CREATE POLICY p ON t FOR SELECT TO %[3]s USING (true);`, owner, reader, auditor), "")
	t.Cleanup(func() {
		for _, r := range []string{owner, reader, auditor} {
			_, _ = e.src.Exec(context.Background(), "DROP OWNED BY "+r)
		}
	})
	r := e.pgsync("check")
	for _, role := range []string{owner, reader, auditor} {
		if r.code == 0 || !strings.Contains(r.stdout, role) {
			t.Fatalf("check: exit %d, want a failure naming role %s\n%s\n%s", r.code, role, r.stdout, r.stderr)
		}
	}
	r = e.pgsync("bootstrap")
	if r.code != 1 || !strings.Contains(r.stderr, "roles:") || !strings.Contains(r.stderr, owner) {
		t.Fatalf("bootstrap: exit %d, want 1 naming the roles\n%s", r.code, r.stderr)
	}
	e.assertNothingWritten()
	admin = mustConnect(t, adminURL(targetPort))
	for _, role := range []string{owner, reader, auditor} {
		if _, err := admin.Exec(context.Background(), "CREATE ROLE "+role); err != nil {
			t.Fatal(err)
		}
	}
	admin.Close(context.Background())
	t.Cleanup(func() {
		for _, r := range []string{owner, reader, auditor} {
			_, _ = e.tgt.Exec(context.Background(), "DROP OWNED BY "+r)
		}
	})
	e.mustPgsync("bootstrap")
	if got := queryOne[string](t, e.tgt, "SELECT tableowner::text FROM pg_tables WHERE tablename = 't'"); got != owner {
		t.Errorf("the target's table is owned by %s, want %s", got, owner)
	}
	if !queryOne[bool](t, e.tgt, "SELECT has_column_privilege($1, 'public.t', 'v', 'SELECT')", reader) {
		t.Error("the column grant did not reach the target")
	}
	if !queryOne[bool](t, e.tgt, "SELECT EXISTS (SELECT 1 FROM pg_policy WHERE polname = 'p')") {
		t.Error("the policy did not reach the target")
	}
	e.mustVerify()
}

// TestRefusedForTypeBuiltInCreatorCannotMake: with the built-in creator
// (job.pg_dump off) and a target database without the extension whose
// type a column uses, check names the column and its type and bootstrap
// refuses before any write (it failed half-way with "type citext does not
// exist"). With the extension created, bootstrap runs.
func TestRefusedForTypeBuiltInCreatorCannotMake(t *testing.T) {
	e := newEnv(t, `CREATE EXTENSION citext; CREATE DOMAIN email AS citext CHECK (VALUE ~ '@');
CREATE TABLE people (login citext PRIMARY KEY, mail email); INSERT INTO people VALUES ('Bob', 'bob@x');
CREATE TABLE plain (id int PRIMARY KEY); INSERT INTO plain VALUES (1);`, builtinCreator)
	r := e.pgsync("check")
	if r.code == 0 || !strings.Contains(r.stdout, "public.people.login: type public.citext (extension citext)") ||
		!strings.Contains(r.stdout, "public.people.mail: type public.citext (extension citext)") {
		t.Fatalf("check: exit %d, want a failure naming each column and the type\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = e.pgsync("bootstrap")
	if r.code != 1 || !strings.Contains(r.stderr, "type public.citext (extension citext)") || !strings.Contains(r.stderr, "nothing was recorded") {
		t.Fatalf("bootstrap: exit %d, want 1 naming the type\n%s", r.code, r.stderr)
	}
	e.assertNothingWritten()
	e.tgtExec("CREATE EXTENSION citext")
	e.mustPgsync("bootstrap")
	e.mustVerify()
}
