package job

import (
	"slices"
	"strings"
	"testing"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
)

// TestBootstrapSteps: each mode's steps, in order. A fresh or restarted
// bootstrap drops what an earlier one left and records its start before
// anything else; a resumed one keeps its slot and copies the tables left
// under a temporary one; the job is recorded ready last, and only there.
func TestBootstrapSteps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape bootstrapShape
		want  []string
	}{
		{"fresh, built-in creator", bootstrapShape{mode: Fresh, copy: true}, []string{
			"prepare pgsync's tables", "record the start", "drop what an earlier bootstrap left", "accept the tables", "create the target tables",
			"list the indexes and constraints", "create the publication", "create the job's slot", "start the copy",
			"copy the tables, their keys and the large objects", "finish"}},
		{"fresh, pg_dump", bootstrapShape{mode: Fresh, pgDump: true, archive: true, copy: true, largeObjects: true}, []string{
			"prepare pgsync's tables", "record the start", "drop what an earlier bootstrap left", "accept the tables", "restore pg_dump's pre-data",
			"list the indexes and constraints", "create the publication", "create the job's slot", "start the copy",
			"copy the tables, their keys and the large objects", "build pg_dump's post-data objects", "count the schema's objects", "finish"}},
		{"restart (--force, or interrupted before its slot)", bootstrapShape{mode: Restart, copy: true}, []string{
			"prepare pgsync's tables", "record the start", "drop what an earlier bootstrap left", "accept the tables", "create the target tables",
			"list the indexes and constraints", "create the publication", "create the job's slot", "start the copy",
			"copy the tables, their keys and the large objects", "finish"}},
		{"resume, tables left, some unpublished", bootstrapShape{mode: Resume, copy: true, unpublished: true}, []string{
			"prepare pgsync's tables", "accept the tables", "create the target tables", "list the indexes and constraints",
			"publish the tables left", "create a slot for the tables left", "start the copy",
			"copy the tables, their keys and the large objects", "finish"}},
		{"resume, pg_dump's objects left to build", bootstrapShape{mode: Resume, archive: true}, []string{
			"prepare pgsync's tables", "accept the tables", "create the target tables", "list the indexes and constraints",
			"build the indexes and constraints", "build pg_dump's post-data objects", "count the schema's objects", "finish"}},
		{"fresh, DDL capture: installed before the slot", bootstrapShape{mode: Fresh, copy: true, ddlCapture: true}, []string{
			"prepare pgsync's tables", "record the start", "drop what an earlier bootstrap left", "accept the tables", "create the target tables",
			"list the indexes and constraints", "create the publication", "install the DDL capture", "create the job's slot", "start the copy",
			"copy the tables, their keys and the large objects", "finish"}},
		{"resume, every table copied, large objects left", bootstrapShape{mode: Resume, largeObjects: true}, []string{
			"prepare pgsync's tables", "accept the tables", "create the target tables", "list the indexes and constraints",
			"build the indexes and constraints", "copy the large objects", "finish"}},
	} {
		steps := bootstrapSteps(tc.shape, &bootstrapRun{})
		if got := stepNames(steps); !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, strings.Join(got, " | "), strings.Join(tc.want, " | "))
		}
		for i, st := range steps {
			if st.do == nil && st.record == nil {
				t.Errorf("%s: step %q does nothing", tc.name, st.name)
			}
			// A step that records says what; one that records per item as
			// it goes (each table as its copy commits) has no record of
			// its own.
			if st.record != nil && st.records == "" {
				t.Errorf("%s: step %q records without saying what", tc.name, st.name)
			}
			if ready := st.records == "job ready"; ready != (i == len(steps)-1) {
				t.Errorf("%s: step %d %q records the job ready: %t", tc.name, i, st.name, ready)
			}
		}
	}
}

// TestAddTablesSteps: add-tables' steps for each case, the abandoned
// tables removed first, the added ones recorded ready last.
func TestAddTablesSteps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape addTablesShape
		want  []string
	}{
		{"nothing to do", addTablesShape{}, nil},
		{"abandoned only", addTablesShape{abandoned: true}, []string{"take the abandoned tables out of the publication"}},
		{"new tables", addTablesShape{add: true, unpublished: true}, []string{
			"prepare pgsync's tables", "accept the tables", "create the target tables", "publish the tables",
			"create a slot for the copy", "start the copy", "copy the tables and build their indexes"}},
		{"an interrupted add finished, one abandoned", addTablesShape{abandoned: true, add: true}, []string{
			"take the abandoned tables out of the publication", "prepare pgsync's tables", "accept the tables",
			"create the target tables", "create a slot for the copy", "start the copy", "copy the tables and build their indexes"}},
	} {
		if got := stepNames(addTablesSteps(tc.shape, &addTablesRun{})); !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, strings.Join(got, " | "), strings.Join(tc.want, " | "))
		}
	}
}

// TestSortAddedTables: what add-tables does with each table, from what is
// published, named and recorded, including a rerun after an add that was
// interrupted (pending, copying) or refused (nothing recorded).
func TestSortAddedTables(t *testing.T) {
	tbl := func(name string) catalog.Table { return catalog.Table{Schema: "public", Name: name} }
	pub := func(name string) catalog.TableName { return catalog.TableName{Schema: "public", Name: name} }
	published := []catalog.TableName{pub("old"), pub("halfway"), pub("gone"), pub("dropped")}
	matched := []catalog.Table{tbl("old"), tbl("halfway"), tbl("new"), tbl("refused"), tbl("readded")}
	recorded := map[string]ledger.Table{
		"public.halfway": {Schema: "public", Name: "halfway", State: ledger.TableCopying},
		"public.gone":    {Schema: "public", Name: "gone", State: ledger.TablePending},
		"public.readded": {Schema: "public", Name: "readded", State: ledger.TableReady},
	}
	ap := sortAddedTables(published, matched, recorded)
	names := func(ts []catalog.Table) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	if got, want := names(ap.fresh), []string{"halfway", "new", "refused", "readded"}; !slices.Equal(got, want) {
		t.Errorf("fresh %v, want %v", got, want)
	}
	if got, want := names(ap.unpublished), []string{"new", "refused", "readded"}; !slices.Equal(got, want) {
		t.Errorf("unpublished %v, want %v", got, want)
	}
	if got, want := names(ap.abandoned), []string{"gone"}; !slices.Equal(got, want) {
		t.Errorf("abandoned %v, want %v", got, want)
	}
	if got, want := ap.unmatched, []string{"public.dropped"}; !slices.Equal(got, want) {
		t.Errorf("unmatched %v, want %v", got, want)
	}
	// Only rows pgsync copied may be emptied without --force.
	for name, want := range map[string]bool{"public.halfway": true, "public.new": false, "public.refused": false, "public.readded": true} {
		if ap.owned[name] != want {
			t.Errorf("owned[%s] = %t, want %t", name, ap.owned[name], want)
		}
	}
}

// TestReverseName: <job>_back, and back again.
func TestReverseName(t *testing.T) {
	for in, want := range map[string]string{"move": "move_back", "move_back": "move", "_back": "_back_back", "a_back_back": "a_back"} {
		if got := ReverseName(in); got != want {
			t.Errorf("ReverseName(%q) = %q, want %q", in, got, want)
		}
	}
}
