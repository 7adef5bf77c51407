//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgsync/pgsync/largeobject"
)

// TestLargeObjectsWhole: large objects arrive whole (issue 30, point 4):
// their comments with their content, owner and grants at bootstrap; a
// comment changed, added or removed on the source since bootstrap is
// carried by cutover; and a comment, grant or owner changed by hand on
// the target is reported by verify and by the compare cutover runs,
// naming the large object and both sides' values.
func TestLargeObjectsWhole(t *testing.T) {
	e := newEnv(t, "", "")
	role := "lo_" + e.db
	for _, port := range []string{sourcePort, targetPort} {
		admin := mustConnect(t, adminURL(port))
		if _, err := admin.Exec(context.Background(), "CREATE ROLE "+role); err != nil {
			t.Fatal(err)
		}
		admin.Close(context.Background())
	}
	t.Cleanup(func() {
		// The databases go first (e.cleanup, registered before), and
		// with them every large object the role owns or is granted.
		for _, port := range []string{sourcePort, targetPort} {
			if admin, err := mustConnectErr(adminURL(port)); err == nil {
				_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
				admin.Close(context.Background())
			}
		}
	})
	e.srcExec(`CREATE TABLE docs (id int PRIMARY KEY, body oid);
SELECT lo_from_bytea(2001, 'signed contract');
SELECT lo_from_bytea(2002, decode(repeat('00ff', 600000), 'hex'));
SELECT lo_from_bytea(2003, 'no comment yet');
INSERT INTO docs VALUES (1, 2001), (2, 2002), (3, 2003);
ALTER LARGE OBJECT 2001 OWNER TO ` + role + `;
GRANT SELECT ON LARGE OBJECT 2002 TO ` + role + `;
COMMENT ON LARGE OBJECT 2001 IS 'the contract, signed';
COMMENT ON LARGE OBJECT 2002 IS 'a scan: it''s 1.2 MB';`)
	// The test's premise: the comments are where List reads them.
	if got := queryOne[string](t, e.src, "SELECT obj_description(2001, 'pg_largeobject')"); got != "the contract, signed" {
		t.Fatalf("source comment of 2001: %q", got)
	}

	e.mustPgsync("bootstrap")
	wantSame := func(when string) {
		t.Helper()
		const meta = `SELECT string_agg(format('%s %s %s %s', oid, pg_get_userbyid(lomowner), lomacl, obj_description(oid, 'pg_largeobject')), E'\n' ORDER BY oid) FROM pg_largeobject_metadata`
		if s, g := queryOne[string](t, e.src, meta), queryOne[string](t, e.tgt, meta); s != g {
			t.Errorf("%s: the target's large objects:\n%s\nthe source's:\n%s", when, g, s)
		}
	}
	wantSame("after bootstrap")
	if got := queryOne[string](t, e.tgt, "SELECT obj_description(2002, 'pg_largeobject')"); got != "a scan: it's 1.2 MB" {
		t.Errorf("after bootstrap, the target's comment of 2002: %q", got)
	}
	e.mustVerify()

	// Changed since bootstrap on the source: a comment changed, one
	// added, one removed.
	e.srcExec(`COMMENT ON LARGE OBJECT 2001 IS 'the contract, countersigned';
COMMENT ON LARGE OBJECT 2003 IS 'a comment now';
COMMENT ON LARGE OBJECT 2002 IS NULL`)
	v := e.pgsync("verify")
	for _, want := range []string{
		`large object 2001: comment differs (source "the contract, countersigned", target "the contract, signed")`,
		`large object 2002: comment differs (source none, target "a scan: it's 1.2 MB")`,
		`large object 2003: comment differs (source "a comment now", target none)`,
	} {
		if v.code != 1 || !strings.Contains(v.stdout, want) {
			t.Errorf("verify after the source's comments changed: exit %d, want 1 and %q\n%s\n%s", v.code, want, v.stdout, v.stderr)
		}
	}
	bg := e.start("run")
	cut := e.mustPgsync("cutover", "--timeout", "60s")
	if !strings.Contains(cut.stdout, "3 created or changed since bootstrap copied, 0 removed") {
		t.Errorf("cutover's large objects:\n%s", cut.stdout)
	}
	sigtermWithin(t, bg, 10*time.Second)
	wantSame("after cutover")
	e.mustVerify()

	// Changed by hand on the target: verify and the compare name each
	// large object and what differs.
	e.tgtExec(`COMMENT ON LARGE OBJECT 2003 IS 'by hand';
REVOKE SELECT ON LARGE OBJECT 2002 FROM ` + role + `;
ALTER LARGE OBJECT 2001 OWNER TO postgres`)
	wants := []string{
		`large object 2001: owner differs (source ` + role + `, target postgres)`,
		`large object 2002: grants differ (source SELECT to ` + role + `, target none)`,
		`large object 2003: comment differs (source "a comment now", target "by hand")`,
	}
	v = e.pgsync("verify")
	for _, want := range wants {
		if v.code != 1 || !strings.Contains(v.stdout, want) {
			t.Errorf("verify after the target was changed by hand: exit %d, want 1 and %q\n%s\n%s", v.code, want, v.stdout, v.stderr)
		}
	}
	if !strings.Contains(v.stderr+v.stdout, "3 large object(s) differ (first: 2001, owner differs") {
		t.Errorf("verify's verdict does not name the first large object:\n%s\n%s", v.stdout, v.stderr)
	}
	c, err := largeobject.Compare(context.Background(), e.src, e.tgt)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range c.Differ {
		got = append(got, fmt.Sprintf("large object %d: %s", d.OID, d.Kind))
	}
	if strings.Join(got, "\n") != strings.Join(wants, "\n") {
		t.Errorf("compare:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wants, "\n"))
	}
}
