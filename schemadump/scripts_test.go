package schemadump

import (
	"strings"
	"testing"
)

const prologue = "--\n-- PostgreSQL database dump\n--\n\nSET statement_timeout = 0;\nSELECT pg_catalog.set_config('search_path', '', false);\n\n"

func header(name, typ string) string {
	return "--\n-- Name: " + name + "; Type: " + typ + "; Schema: public; Owner: app\n--\n\n"
}

// TestCutScript: a script of several entries is cut into one per entry,
// each with the prologue; a script with a header too many or too few, or
// of another type, is not cut.
func TestCutScript(t *testing.T) {
	entries := []Entry{{DumpID: 7, Desc: "CONSTRAINT"}, {DumpID: 9, Desc: "INDEX"}, {DumpID: 11, Desc: "COMMENT"}}
	pk := "ALTER TABLE ONLY public.t\n    ADD CONSTRAINT t_pkey PRIMARY KEY (id);\n\n\n"
	idx := "CREATE INDEX t_v ON public.t USING btree (v);\n\n\n"
	comment := "COMMENT ON INDEX public.t_v IS 'a -- Name: x; Type: INDEX; Schema: y';\n\n\n"
	end := "--\n-- PostgreSQL database dump complete\n--\n\n"
	script := prologue + header("t t_pkey", "CONSTRAINT") + pk + header("t_v", "INDEX") + idx + header("INDEX t_v", "COMMENT") + comment + end
	pieces, ok := cutScript(script, entries)
	if !ok || len(pieces) != 3 {
		t.Fatalf("cutScript: %d pieces, ok %v", len(pieces), ok)
	}
	want := []string{prologue + header("t t_pkey", "CONSTRAINT") + pk, prologue + header("t_v", "INDEX") + idx,
		prologue + header("INDEX t_v", "COMMENT") + comment + end}
	for i := range want {
		if pieces[i] != want[i] {
			t.Errorf("piece %d:\n%s\nwant\n%s", i, pieces[i], want[i])
		}
	}
	if _, ok := cutScript(script, entries[:2]); ok {
		t.Error("a script with a header more than its entries was cut")
	}
	forged := prologue + header("t t_pkey", "CONSTRAINT") + "COMMENT ON TABLE t IS '\n" + header("x", "INDEX") + "';\n" + header("t_v", "INDEX") + idx
	if _, ok := cutScript(forged, entries[:2]); ok {
		t.Error("a script whose comment holds a header was cut")
	}
	other := []Entry{{DumpID: 7, Desc: "CONSTRAINT"}, {DumpID: 9, Desc: "FK CONSTRAINT"}, {DumpID: 11, Desc: "COMMENT"}}
	if _, ok := cutScript(script, other); ok {
		t.Error("a script whose header names another type was cut")
	}
	if !strings.HasPrefix(pieces[1], prologue) {
		t.Error("a piece lacks the prologue")
	}
}
