package largeobject

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestDiffer(t *testing.T) {
	base := Object{OID: 7, Owner: "app", Grants: []Grant{{"SELECT", "reader"}}, Comment: "contract"}
	with := func(f func(*Object)) Object {
		o := base
		o.Grants = slices.Clone(base.Grants)
		f(&o)
		return o
	}
	for _, tc := range []struct {
		name        string
		target      Object
		sameContent bool
		want        string // "" when nothing differs
		content     bool
	}{
		{"identical", base, true, "", false},
		{"content only", base, false, "content differs", true},
		{"owner", with(func(o *Object) { o.Owner = "postgres" }), true, "owner differs (source app, target postgres)", false},
		{"grant missing", with(func(o *Object) { o.Grants = nil }), true, "grants differ (source SELECT to reader, target none)", false},
		{"grant other privilege", with(func(o *Object) { o.Grants = []Grant{{"UPDATE", "reader"}} }), true,
			"grants differ (source SELECT to reader, target UPDATE to reader)", false},
		{"comment changed", with(func(o *Object) { o.Comment = "old" }), true, `comment differs (source "contract", target "old")`, false},
		{"comment missing", with(func(o *Object) { o.Comment = "" }), true, `comment differs (source "contract", target none)`, false},
		{"content and comment", with(func(o *Object) { o.Comment = "old" }), false,
			`content differs; comment differs (source "contract", target "old")`, true},
		{"all four", Object{OID: 7, Owner: "x", Grants: []Grant{{"UPDATE", "PUBLIC"}}}, false,
			`content differs; owner differs (source app, target x); grants differ (source SELECT to reader, target UPDATE to PUBLIC); comment differs (source "contract", target none)`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := differ(base, tc.target, tc.sameContent)
			if ok != (tc.want != "") {
				t.Fatalf("differ: ok %v, want %v (%+v)", ok, tc.want != "", d)
			}
			if !ok {
				return
			}
			if d.OID != 7 || d.Kind != tc.want || d.Content != tc.content {
				t.Errorf("differ: %+v, want OID 7, kind %q, content %v", d, tc.want, tc.content)
			}
		})
	}
}

func TestCommentText(t *testing.T) {
	long := strings.Repeat("é", commentTextRunes+5)
	for in, want := range map[string]string{
		"":           "none",
		`say "hi"`:   `"say \"hi\""`,
		long:         `"` + strings.Repeat("é", commentTextRunes) + `"...`,
		"two\nlines": `"two\nlines"`,
	} {
		if got := commentText(in); got != want {
			t.Errorf("commentText(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCmpOID(t *testing.T) {
	// OIDs past 2^31: int(a)-int(b), the order used before, turns them
	// negative where int has 32 bits.
	oids := []uint32{4000000000, 1, 3000000000, 2}
	slices.SortFunc(oids, cmpOID)
	if !slices.Equal(oids, []uint32{1, 2, 3000000000, 4000000000}) {
		t.Errorf("sorted: %v", oids)
	}
}

// execRecorder is a Querier that records the statements Exec is given.
type execRecorder struct{ sql []string }

func (r *execRecorder) Exec(_ context.Context, sql string, _ ...any) (pgconn.CommandTag, error) {
	r.sql = append(r.sql, sql)
	return pgconn.CommandTag{}, nil
}
func (r *execRecorder) Query(context.Context, string, ...any) (pgx.Rows, error) { panic("not used") }
func (r *execRecorder) QueryRow(context.Context, string, ...any) pgx.Row        { panic("not used") }

func TestSetMetadata(t *testing.T) {
	want := Object{OID: 9, Owner: "app", Grants: []Grant{{"SELECT", `"Reader"`}}, Comment: "it's"}
	for _, tc := range []struct {
		name string
		have Object
		sql  []string
	}{
		{"same: nothing to do", want, nil},
		{"created anew: all three", Object{OID: 9}, []string{
			`ALTER LARGE OBJECT 9 OWNER TO "app"`,
			`GRANT SELECT ON LARGE OBJECT 9 TO "Reader"`,
			`COMMENT ON LARGE OBJECT 9 IS 'it''s'`}},
		{"comment only", Object{OID: 9, Owner: "app", Grants: want.Grants, Comment: "old"}, []string{
			`COMMENT ON LARGE OBJECT 9 IS 'it''s'`}},
		// The target's grantee becomes the owner: its grants are revoked
		// before, so that the revoke leaves the owner's privileges alone.
		{"grantee becomes owner", Object{OID: 9, Owner: "old", Grants: []Grant{{"UPDATE", "app"}}, Comment: "it's"}, []string{
			`REVOKE ALL ON LARGE OBJECT 9 FROM app`,
			`ALTER LARGE OBJECT 9 OWNER TO "app"`,
			`GRANT SELECT ON LARGE OBJECT 9 TO "Reader"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r execRecorder
			if err := setMetadata(context.Background(), &r, want, tc.have); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.sql, tc.sql) {
				t.Errorf("statements:\n%s\nwant:\n%s", strings.Join(r.sql, "\n"), strings.Join(tc.sql, "\n"))
			}
		})
	}

	// A comment removed on the source is removed on the target.
	var r execRecorder
	if err := setMetadata(context.Background(), &r, Object{OID: 9, Owner: "app"}, Object{OID: 9, Owner: "app", Comment: "gone"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.sql, []string{"COMMENT ON LARGE OBJECT 9 IS NULL"}) {
		t.Errorf("removed comment: %v", r.sql)
	}
}
