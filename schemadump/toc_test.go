package schemadump

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The listings in testdata are pg_restore -l of pg_dump 15.18 archives of
// schemas made for them (testdata/README.md has their SQL): several schemas, extensions with
// comments (whose owner is empty), a tablespace, default privileges, a
// function whose body holds a line beginning with a backslash, partitions,
// a publication, and names with spaces, quotes and semicolons.
func readListing(t *testing.T, name string) (string, []Entry) {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ParseTOC(string(b))
	if err != nil {
		t.Fatalf("ParseTOC(%s): %v", name, err)
	}
	return string(b), entries
}

func TestParseTOCReadsEveryEntry(t *testing.T) {
	for _, name := range []string{"erp-pre-data.toc", "erp-post-data.toc", "odd.toc"} {
		listing, entries := readListing(t, name)
		var lines []string
		for _, l := range strings.Split(listing, "\n") {
			if l != "" && l[0] != ';' {
				lines = append(lines, l)
			}
		}
		if len(entries) != len(lines) {
			t.Fatalf("%s: %d entries of %d lines", name, len(entries), len(lines))
		}
		for i, e := range entries {
			// The list line pg_restore -L reads is the listing's line.
			if got := e.ListLine(); got != lines[i] {
				t.Errorf("%s: ListLine() = %q, want %q", name, got, lines[i])
			}
			again, err := ParseTOCLine(e.ListLine())
			if err != nil || again != e {
				t.Errorf("%s: %q does not read back: %+v, %v", name, lines[i], again, err)
			}
		}
	}
}

func TestParseTOCDescs(t *testing.T) {
	want := map[string]Entry{
		// An extension's comment: no catalog identity and an empty owner,
		// which pg_dump's plain text gave as "Owner: " (issue 22).
		"3815": {DumpID: 3815, Desc: "COMMENT", Rest: "- EXTENSION citext "},
		"2":    {DumpID: 2, CatalogOID: catPgExtension, OID: 16386, Desc: "EXTENSION", Rest: "- citext "},
		"230":  {DumpID: 230, CatalogOID: catPgClass, OID: 16974, Desc: "MATERIALIZED VIEW", Rest: "sales totals postgres"},
		"3636": {DumpID: 3636, Desc: "TABLE ATTACH", Rest: "sales readings_2025 postgres"},
		"3656": {DumpID: 3656, CatalogOID: catPgConstraint, OID: 16932, Desc: "FK CONSTRAINT", Rest: "sales orders orders_login_fkey postgres"},
		"3654": {DumpID: 3654, Desc: "INDEX ATTACH", Rest: "sales readings_2025_pkey postgres"},
		"2462": {DumpID: 2462, CatalogOID: 826, OID: 16938, Desc: "DEFAULT ACL", Rest: "sales DEFAULT PRIVILEGES FOR TABLES postgres"},
		"3807": {DumpID: 3807, CatalogOID: 6106, OID: 16981, Desc: "PUBLICATION TABLE", Rest: "person pgsync_erp people postgres"},
		"3803": {DumpID: 3803, OID: 16924, Desc: "ROW SECURITY", Rest: "sales orders postgres"},
		"2037": {DumpID: 2037, CatalogOID: 3602, OID: 16998, Desc: "TEXT SEARCH CONFIGURATION", Rest: "My Schema cfg postgres"},
		"3201": {DumpID: 3201, CatalogOID: catPgClass, OID: 16995, Desc: "INDEX", Rest: "My Schema idx; with semicolon postgres"},
	}
	seen := 0
	for _, name := range []string{"erp-pre-data.toc", "erp-post-data.toc", "odd.toc"} {
		_, entries := readListing(t, name)
		for _, e := range entries {
			w, ok := want[strconv.Itoa(e.DumpID)]
			if !ok {
				continue
			}
			seen++
			if e != w {
				t.Errorf("%s: entry %d = %+v, want %+v", name, e.DumpID, e, w)
			}
		}
	}
	if seen != len(want) {
		t.Fatalf("found %d of the %d entries looked for", seen, len(want))
	}
}

func TestTOCEntryString(t *testing.T) {
	tests := []struct {
		line, want string
	}{
		{"3815; 0 0 COMMENT - EXTENSION citext ", "comment EXTENSION citext"},
		{"222; 1259 16913 TABLE person people postgres", "table person.people"},
		{"3642; 2606 16920 CONSTRAINT person people people_pkey postgres", "constraint person.people people_pkey"},
		{"11; 2615 16897 SCHEMA - person postgres", "schema person"},
	}
	for _, tt := range tests {
		e, err := ParseTOCLine(tt.line)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.String(); got != tt.want {
			t.Errorf("String() of %q = %q, want %q", tt.line, got, tt.want)
		}
	}
}

func TestParseTOCRefusesWhatIsNotAnEntry(t *testing.T) {
	for _, line := range []string{
		"CREATE TABLE x (id int);",
		"x; 1259 1 TABLE public t postgres",
		"12; 1259 TABLE",
		"12; a b TABLE public t postgres",
		`\restrict abc`,
	} {
		if _, err := ParseTOC(line + "\n"); err == nil {
			t.Errorf("ParseTOC(%q) read an entry", line)
		}
	}
}

func TestPostDataPhases(t *testing.T) {
	_, entries := readListing(t, "erp-post-data.toc")
	last := map[string]int{}
	for _, e := range entries {
		last[e.Desc] = PostDataPhase(e.Desc)
	}
	if PostDataPhase("PUBLICATION") >= PostDataPhase("PUBLICATION TABLE") || PostDataPhase("PUBLICATION") >= PostDataPhase("PUBLICATION TABLES IN SCHEMA") {
		t.Error("a publication is not built before its tables and schemas")
	}
	want := map[string]int{"CONSTRAINT": 0, "INDEX": 0, "INDEX ATTACH": 1, "FK CONSTRAINT": 2, "TRIGGER": 2, "POLICY": 2, "COMMENT": 3, "DEFAULT ACL": 2}
	for desc, phase := range want {
		if got, ok := last[desc]; !ok || got != phase {
			t.Errorf("phase of %s = %d (present %v), want %d", desc, got, ok, phase)
		}
	}
}
