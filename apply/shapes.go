package apply

import (
	"slices"
	"sync"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgoutput"
)

// The schema check's memory (issue 23): a Relation message reads the
// target table's shape in one round trip, and the schema check
// (matchSchema: columns to add, types to widen, NOT NULL columns the
// source no longer sends) runs only when the source's columns or that
// shape differ from the pair that last passed it. A reconnect makes the
// source send every Relation again; with the memory kept across sessions,
// it checks no table again.

// ShapeCache remembers, by table, the source's columns and the target's
// shape that last passed the schema check together. It never stands in
// for the target: Relation reads the shape every time and compares it with
// the one remembered, so a target changed since (by pgsync, by the
// operator, or by a rolled-back ALTER) is checked again. Create one per
// pgsync run (job.Run) and give it to every Applier (Options.Shapes); it
// is safe for concurrent use, by the main Applier and a streamed one.
type ShapeCache struct {
	mu     sync.Mutex
	passed map[tableKey]checkedPair
}

// NewShapeCache returns an empty ShapeCache.
func NewShapeCache() *ShapeCache {
	return &ShapeCache{passed: make(map[tableKey]checkedPair)}
}

// tableKey names a table in the cache.
type tableKey struct{ schema, name string }

// checkedPair is a source relation's columns and a target table's shape
// that passed the schema check together.
type checkedPair struct {
	source []pgoutput.Column
	target catalog.Shape
}

// needsCheck decides whether the schema check runs for the source's
// relation r and the target's shape target, given the pair that last
// passed it for the table (ok false: none did). Any difference runs it:
// a column added, dropped, renamed or retyped on either side, a key or a
// default changed, a trigger added.
func needsCheck(last checkedPair, ok bool, r *pgoutput.Relation, target *catalog.Shape) bool {
	return !ok || !slices.Equal(last.source, r.Columns) || !last.target.Equal(target)
}

// needsCheck reports whether r and target must go through the schema
// check: they are not the pair that last passed it.
func (c *ShapeCache) needsCheck(r *pgoutput.Relation, target *catalog.Shape) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.passed[tableKey{r.Schema, r.Name}]
	return needsCheck(last, ok, r, target)
}

// forget drops what the cache remembers of r's table: its check is under
// way, and a failure, or an ALTER that a rollback undoes, must leave
// nothing that could pass for checked.
func (c *ShapeCache) forget(r *pgoutput.Relation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.passed, tableKey{r.Schema, r.Name})
}

// remember records that r and target passed the schema check. Both are
// copied: neither is the cache's to keep.
func (c *ShapeCache) remember(r *pgoutput.Relation, target *catalog.Shape) {
	p := checkedPair{source: slices.Clone(r.Columns), target: *target}
	p.target.Columns = slices.Clone(target.Columns)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.passed[tableKey{r.Schema, r.Name}] = p
}
