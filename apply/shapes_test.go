package apply

import (
	"slices"
	"testing"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgoutput"
)

// testShapePair returns a relation public.t (id bigint key, v text) and the
// target shape that matches it.
func testShapePair() (*pgoutput.Relation, *catalog.Shape) {
	r := &pgoutput.Relation{ID: 1, Schema: "public", Name: "t", ReplicaIdentity: 'd', Columns: []pgoutput.Column{
		{Name: "id", TypeOID: 20, TypMod: -1, Key: true},
		{Name: "v", TypeOID: 25, TypMod: -1},
	}}
	s := &catalog.Shape{Exists: true, Columns: []catalog.ShapeColumn{
		{ColumnDef: catalog.ColumnDef{Name: "id", Type: "bigint", TypeOID: 20, TypMod: -1, BaseType: "bigint", NotNull: true}},
		{ColumnDef: catalog.ColumnDef{Name: "v", Type: "text", TypeOID: 25, TypMod: -1, BaseType: "text"}},
	}}
	return r, s
}

// TestNeedsCheck: the schema check is skipped only for the very pair that
// last passed it; any difference on either side runs it again.
func TestNeedsCheck(t *testing.T) {
	r0, s0 := testShapePair()
	last := checkedPair{source: slices.Clone(r0.Columns), target: *s0}
	last.target.Columns = slices.Clone(s0.Columns)
	tests := []struct {
		name   string
		none   bool // nothing passed yet
		source func(r *pgoutput.Relation)
		target func(s *catalog.Shape)
		want   bool
	}{
		{name: "never checked", none: true, want: true},
		{name: "same pair", want: false},
		{name: "another relation id, same columns", source: func(r *pgoutput.Relation) { r.ID = 7 }, want: false},
		{name: "source column added", source: func(r *pgoutput.Relation) {
			r.Columns = append(r.Columns, pgoutput.Column{Name: "w", TypeOID: 23, TypMod: -1})
		}, want: true},
		{name: "source column dropped", source: func(r *pgoutput.Relation) { r.Columns = r.Columns[:1] }, want: true},
		{name: "source column retyped", source: func(r *pgoutput.Relation) { r.Columns[1].TypeOID = 1043 }, want: true},
		{name: "source typmod changed", source: func(r *pgoutput.Relation) { r.Columns[1].TypMod = 24 }, want: true},
		{name: "source key changed", source: func(r *pgoutput.Relation) { r.Columns[1].Key = true }, want: true},
		{name: "source column renamed", source: func(r *pgoutput.Relation) { r.Columns[1].Name = "w" }, want: true},
		{name: "target column added", target: func(s *catalog.Shape) {
			s.Columns = append(s.Columns, catalog.ShapeColumn{ColumnDef: catalog.ColumnDef{Name: "w", Type: "integer", NotNull: true}})
		}, want: true},
		{name: "target column widened", target: func(s *catalog.Shape) {
			s.Columns[0].Type, s.Columns[0].TypeOID = "numeric", 1700
		}, want: true},
		{name: "target NOT NULL dropped", target: func(s *catalog.Shape) { s.Columns[0].NotNull = false }, want: true},
		{name: "target default set", target: func(s *catalog.Shape) { s.Columns[1].Default = "'x'::text" }, want: true},
		{name: "target trigger added", target: func(s *catalog.Shape) { s.ReplicaTriggers = 3 | tgUpdate }, want: true},
		{name: "target partitioned", target: func(s *catalog.Shape) { s.Partitioned = true }, want: true},
		{name: "target composite", target: func(s *catalog.Shape) { s.Columns[1].Composite = true }, want: true},
		{name: "target dropped", target: func(s *catalog.Shape) { *s = catalog.Shape{} }, want: true},
	}
	for _, tt := range tests {
		r, s := testShapePair()
		if tt.source != nil {
			tt.source(r)
		}
		if tt.target != nil {
			tt.target(s)
		}
		if got := needsCheck(last, !tt.none, r, s); got != tt.want {
			t.Errorf("%s: needsCheck %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestShapeCacheRules walks the cache through a table's life: checked,
// unchanged over a reconnect, changed by pgsync (forgotten while the check
// runs, remembered with the shape read after it), and a failed check,
// which leaves nothing that could pass for checked.
func TestShapeCacheRules(t *testing.T) {
	c := NewShapeCache()
	r, s := testShapePair()
	if !c.needsCheck(r, s) {
		t.Fatal("a table never checked skips the check")
	}
	c.remember(r, s)
	// The cache keeps copies: what the caller changes later is not what
	// passed.
	s.Columns[1].Type = "character varying"
	r.Columns[1].TypMod = 10
	if !c.needsCheck(r, s) {
		t.Fatal("the cache shares its pair with the caller")
	}
	r, s = testShapePair()
	r.ID = 99 // a new session numbers relations anew
	if c.needsCheck(r, s) {
		t.Fatal("an unchanged table is checked again after a reconnect")
	}
	// The source gains a column; the check starts by forgetting the table,
	// and pgsync adds the column on the target.
	r.Columns = append(r.Columns, pgoutput.Column{Name: "w", TypeOID: 23, TypMod: -1})
	if !c.needsCheck(r, s) {
		t.Fatal("a source column added skips the check")
	}
	c.forget(r)
	old := *s
	old.Columns = slices.Clone(s.Columns)
	s.Columns = append(s.Columns, catalog.ShapeColumn{ColumnDef: catalog.ColumnDef{Name: "w", Type: "integer", TypeOID: 23, TypMod: -1, BaseType: "integer"}})
	c.remember(r, s)
	if c.needsCheck(r, s) {
		t.Fatal("the shape pgsync made is checked again")
	}
	// The group that added it rolled back: the target has the old shape.
	if !c.needsCheck(r, &old) {
		t.Fatal("a rolled-back ALTER passes for checked")
	}
	// A check that fails after forgetting leaves nothing.
	c.forget(r)
	if !c.needsCheck(r, s) {
		t.Fatal("a forgotten table skips the check")
	}
	// Another table is another entry.
	other, os := testShapePair()
	other.Name = "u"
	c.remember(r, s)
	if !c.needsCheck(other, os) {
		t.Fatal("a table passes for another of the same columns")
	}
}

// TestFactsOf: the statements' facts come from the shape, by the source's
// column order.
func TestFactsOf(t *testing.T) {
	r, s := testShapePair()
	s.Columns[0], s.Columns[1] = s.Columns[1], s.Columns[0] // the target's order differs
	s.Columns[0].Composite = true                           // v
	s.Partitioned = true
	s.ReplicaTriggers = 3 | tgDelete
	f := factsOf(r, s)
	if !slices.Equal(f.composite, []bool{false, true}) {
		t.Errorf("composite %v, want [false true]", f.composite)
	}
	if !f.partitioned || !f.checks(pgoutput.MsgUpdate) || !f.checks(pgoutput.MsgDelete) || f.checks(pgoutput.MsgInsert) {
		t.Errorf("facts %+v: want partitioned, UPDATE and DELETE checked (a row moved to another partition fires DELETE)", f)
	}
	_, plain := testShapePair()
	if f := factsOf(r, plain); f.composite != nil || f.partitioned || f.checked != [3]bool{} {
		t.Errorf("facts of a plain table %+v", f)
	}
}
