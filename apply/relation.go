package apply

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgoutput"
)

// The relation cache: the apply-side view of each published table, built
// from the source's Relation message and the target's columns, and the
// checks of each row against it.

// relation is the apply-side view of a published table.
type relation struct {
	src    *pgoutput.Relation
	ident  string   // quoted schema.table
	cols   []string // quoted column names
	types  []string // the target's type of each column, for casts
	keys   []int    // indexes of replica identity columns
	isKey  []bool   // per column: part of the replica identity
	always []bool   // per column: GENERATED ALWAYS AS IDENTITY on the target
	// anyAlways: INSERTs need OVERRIDING SYSTEM VALUE.
	anyAlways bool
	full      bool   // REPLICA IDENTITY FULL: match the whole old row
	textEq    []bool // compare as text: the type has no equality operator
	gen       uint32 // bumped on each Relation message, part of statement keys
	// counted are the row counters by operation, in rowOpIndex order
	// (Options.Metrics); nil without metrics. An array, not a map: it is
	// read for every row.
	counted *[3]prometheus.Counter
	// copiedAt is where the table's copy was taken (0 for a table copied
	// under the job's slot): its changes in transactions committed before
	// it are in the copy already. skipAll for a table out of the job.
	copiedAt pglogrepl.LSN
	// lastRowKey and lastRowStmt are the cache key and statement of the
	// last single-row statement bound for the relation: a stream of
	// deletes or key changes finds its statement without hashing the key.
	lastRowKey  []byte
	lastRowStmt *statement
}

// Relation records a table's shape as the source now sends it and checks
// that the target table can take it: every source column must exist there.
func (a *Applier) Relation(ctx context.Context, r *pgoutput.Relation) error {
	if err := a.flushRun(ctx); err != nil {
		return err
	}
	if err := a.drain(ctx); err != nil {
		return err
	}
	target, ok, err := catalog.Lookup(ctx, a.conn, r.Schema, r.Name)
	if err != nil {
		return a.fail(ctx, err)
	}
	if !ok {
		return a.fail(ctx, fmt.Errorf("table %s at %s: it is published on the source but missing on the target", r, a.sourceLSN))
	}
	// Casts name the type without its modifier: a value too long for a
	// varchar(n) must fail in the assignment, not be cut by the cast.
	types := make(map[string]string, len(target.Columns))
	always := make(map[string]bool)
	for _, c := range target.Columns {
		if c.Generated == "" {
			types[c.Name] = c.BaseType
			always[c.Name] = c.IdentityAlways
		}
	}
	rel, missing := newRelation(r, a.relations[r.ID], types, always)
	if missing >= 0 {
		c := r.Columns[missing]
		var typ string
		if err := a.conn.QueryRow(ctx, "SELECT format_type($1::oid, $2::int)", c.TypeOID, c.TypMod).Scan(&typ); err != nil {
			typ = "oid " + strconv.FormatUint(uint64(c.TypeOID), 10)
		}
		return a.fail(ctx, fmt.Errorf("table %s at %s: column %s (%s) exists on the source but not on the target; add it on the target (ALTER TABLE %s ADD COLUMN %s %s) and rerun pgsync run",
			r, a.sourceLSN, c.Name, typ, rel.ident, catalog.QuoteIdent(c.Name), typ))
	}
	if a.relations[r.ID] != nil {
		if err := a.deallocate(ctx, r.ID); err != nil {
			return a.fail(ctx, err)
		}
	}
	if m := a.opts.Metrics; m != nil {
		rel.counted = &[3]prometheus.Counter{
			m.RowCounter(r.String(), "insert"),
			m.RowCounter(r.String(), "update"),
			m.RowCounter(r.String(), "delete"),
		}
	}
	// Read now, not at the session's start: add-tables may have added the
	// table since, and its copy point decides which changes to skip.
	added, err := readAddedTable(ctx, a.conn, a.opts.Job, r.Schema, r.Name)
	if err != nil {
		return a.fail(ctx, err)
	}
	switch {
	case added.State == TableRemoved, Waits(added.State) && !a.opts.selected(r.Schema, r.Name):
		// An abandoned add: the table's partial copy is not the source's,
		// and none of its changes are applied.
		rel.copiedAt = skipAll
	case Waits(added.State):
		return a.fail(ctx, &TableBeingAddedError{Job: a.opts.Job, Table: r.String(), LSN: a.sourceLSN})
	default:
		rel.copiedAt = added.CopiedLSN
	}
	a.relations[r.ID] = rel
	return nil
}

// newRelation builds the apply-side view of r. types maps the target's
// column names to their types (for casts), always marks its GENERATED
// ALWAYS identity columns; missing is the index of the first source
// column the target lacks, or -1.
func newRelation(r *pgoutput.Relation, prev *relation, types map[string]string, always map[string]bool) (rel *relation, missing int) {
	rel = &relation{src: r, ident: pgx.Identifier{r.Schema, r.Name}.Sanitize(), full: r.ReplicaIdentity == 'f'}
	if prev != nil {
		rel.gen = prev.gen + 1
	}
	for i, c := range r.Columns {
		typ, ok := types[c.Name]
		if !ok {
			return rel, i
		}
		rel.cols = append(rel.cols, catalog.QuoteIdent(c.Name))
		rel.types = append(rel.types, typ)
		rel.textEq = append(rel.textEq, noEquality[c.TypeOID])
		rel.isKey = append(rel.isKey, c.Key)
		rel.always = append(rel.always, always[c.Name])
		rel.anyAlways = rel.anyAlways || always[c.Name]
		if c.Key {
			rel.keys = append(rel.keys, i)
		}
	}
	return rel, -1
}

// noEquality lists built-in types without a default equality operator: a
// REPLICA IDENTITY FULL match compares them as text.
var noEquality = map[uint32]bool{
	114: true, 199: true, // json, json[]
	142: true, 143: true, // xml, xml[]
	600: true, 601: true, 602: true, 603: true, 604: true, 628: true, 718: true, // geometric
	1017: true, 1018: true, 1019: true, 1020: true, 1027: true, 629: true, 719: true,
}

// checkValues refuses rows pgsync cannot express: an INSERT with an
// unchanged value, or an identity value that was not sent.
func (a *Applier) checkValues(rel *relation, c *pgoutput.Change) error {
	if c.Op == pgoutput.MsgInsert {
		for i, kind := range c.New.Kinds {
			if kind == pgoutput.ValueUnchanged {
				return fmt.Errorf("INSERT on %s at %s: column %s sent as unchanged", rel.src, a.sourceLSN, rel.src.Columns[i].Name)
			}
		}
		return nil
	}
	if !rel.full && len(rel.keys) == 0 {
		return fmt.Errorf("%s on %s at %s: the table has no replica identity on the source", opName(c.Op), rel.src, a.sourceLSN)
	}
	if c.Op == pgoutput.MsgUpdate && rel.anyAlways {
		for i := range rel.cols {
			known := c.OldKind == 'O' || c.OldKind == 'K' && rel.isKey[i]
			if rel.always[i] && known && c.New.Kinds[i] != pgoutput.ValueUnchanged && columnMayChange(rel, c, i) {
				return fmt.Errorf("UPDATE on %s at %s changes column %s, which is GENERATED ALWAYS AS IDENTITY on the target: an UPDATE cannot set it (make it GENERATED BY DEFAULT on the target)",
					rel.src, a.sourceLSN, rel.src.Columns[i].Name)
			}
		}
	}
	key := identityTuple(c)
	for _, i := range rel.keys {
		if key.Kinds[i] == pgoutput.ValueUnchanged {
			return fmt.Errorf("%s on %s at %s: identity column %s was not sent (unchanged TOAST value)", opName(c.Op), rel.src, a.sourceLSN, rel.src.Columns[i].Name)
		}
	}
	return nil
}

// identityTuple is the row image that identifies the target row: the old
// key or row when the source sent one, else the new row (key unchanged).
func identityTuple(c *pgoutput.Change) *pgoutput.Tuple {
	if c.OldKind != 0 {
		return &c.Old
	}
	return &c.New
}
