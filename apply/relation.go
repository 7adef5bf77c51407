package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
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
	// uncounted are the rows a streamed Applier applied, added to counted
	// when its transaction commits.
	uncounted [3]float64
	// copiedAt is where the table's copy was taken (0 for a table copied
	// under the job's slot): its changes in transactions committed before
	// it are in the copy already. skipAll for a table out of the job.
	copiedAt pglogrepl.LSN
	// lastRowKey and lastRowStmt are the cache key and statement of the
	// last single-row statement bound for the relation: a stream of
	// deletes or key changes finds its statement without hashing the key.
	lastRowKey  []byte
	lastRowStmt *statement
	targetFacts // partitions, composite types, triggers (target.go)
}

// Relation records a table's shape as the source now sends it and checks
// that the target table can take it: every source column must exist there,
// with a type that holds the source's, and every target column the source
// no longer sends must be one an INSERT can leave out. A source schema that
// changed during the move (issue 16) stops run with the statement that
// makes the target take it, or, with Options.AddColumns, runs it.
//
// It reads the target table's shape and its pgsync.tables row in one round
// trip; the check runs only when the source's columns or that shape differ
// from the pair that last passed it (ShapeCache, issue 23).
func (a *Applier) Relation(ctx context.Context, r *pgoutput.Relation) error {
	if err := a.sendRowSet(ctx); err != nil {
		return err
	}
	if err := a.drain(ctx); err != nil {
		return err
	}
	// The pgsync.tables row is read now, not at the session's start:
	// add-tables may have added the table since, and its copy point decides
	// which changes to skip. It is read before the shape is checked: the
	// target table of an add in progress is being written by its copy, and
	// one abandoned takes no change.
	var target catalog.Shape
	var added ledger.Table
	b := &pgx.Batch{}
	catalog.QueueShape(b, r.Schema, r.Name, &target)
	ledger.QueueReadTable(b, a.opts.Job, r.Schema, r.Name, &added)
	if err := a.conn.SendBatch(ctx, b).Close(); err != nil {
		return a.fail(ctx, fmt.Errorf("table %s at %s: %w", r, a.sourceLSN, err))
	}
	if !target.Exists {
		return a.fail(ctx, fmt.Errorf("table %s at %s: it is published on the source but missing on the target", r, a.sourceLSN))
	}
	skip := added.State == ledger.TableRemoved || added.State.Waits() && !a.opts.selected(r.Schema, r.Name)
	if added.State.Waits() && !skip {
		return a.fail(ctx, &TableBeingAddedError{Job: a.opts.Job, Table: r.String(), LSN: a.sourceLSN})
	}
	if !skip {
		if err := a.checkSchema(ctx, r, &target); err != nil {
			return a.fail(ctx, err)
		}
	}
	// Casts name the type without its modifier: a value too long for a
	// varchar(n) must fail in the assignment, not be cut by the cast.
	types := make(map[string]string, len(target.Columns))
	always := make(map[string]bool)
	for _, c := range target.Columns {
		if c.Generated == "" {
			types[c.Name] = c.BaseType
			always[c.Name] = c.Identity == 'a'
		}
	}
	rel, missing := newRelation(r, a.relations[r.ID], types, always)
	if missing >= 0 && !skip {
		// checkSchema found every column: only a column dropped on the
		// target meanwhile gets here.
		return a.fail(ctx, fmt.Errorf("table %s at %s: column %s exists on the source but not on the target", r, a.sourceLSN, r.Columns[missing].Name))
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
	rel.copiedAt = added.CopiedLSN
	if skip {
		// An abandoned add: the table's partial copy is not the source's,
		// and none of its changes are applied.
		rel.copiedAt = skipAll
	}
	rel.targetFacts = factsOf(r, &target)
	a.relations[r.ID] = rel
	return nil
}

// checkSchema runs the schema check (matchSchema) on the source's relation
// r and the target's shape target, unless they are the pair that last
// passed it (Options.Shapes). When the check changed the target (a column
// added or widened), target is read again, in one more round trip, so
// that the relation is built on the table as it now is. The pair is
// remembered only once the check passed.
func (a *Applier) checkSchema(ctx context.Context, r *pgoutput.Relation, target *catalog.Shape) error {
	if !a.opts.Shapes.needsCheck(r, target) {
		return nil
	}
	a.opts.Shapes.forget(r)
	changed, err := a.matchSchema(ctx, r, target.Columns)
	if err != nil {
		return err
	}
	if changed {
		if *target, err = catalog.ReadShape(ctx, a.conn, r.Schema, r.Name); err != nil {
			return fmt.Errorf("table %s at %s: %w", r, a.sourceLSN, err)
		}
	}
	a.opts.Shapes.remember(r, target)
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
		// The target's type decides: a json column that is jsonb on the
		// target (a wider type) is matched with jsonb's equality.
		rel.textEq = append(rel.textEq, noEquality[typ])
		rel.isKey = append(rel.isKey, c.Key)
		rel.always = append(rel.always, always[c.Name])
		rel.anyAlways = rel.anyAlways || always[c.Name]
		if c.Key {
			rel.keys = append(rel.keys, i)
		}
	}
	return rel, -1
}

// matchSchema compares the source's shape r with the target table's
// columns, cols. A source column the target lacks, or one whose type the
// target's column cannot hold, is added or widened on the target with
// Options.AddColumns (changed is then true), in the open target
// transaction; otherwise it is an error that names the statement to run.
// A NOT NULL target column without a default that the source no longer
// sends is an error either way: every INSERT would fail on it.
func (a *Applier) matchSchema(ctx context.Context, r *pgoutput.Relation, cols []catalog.ShapeColumn) (changed bool, err error) {
	onTarget := make(map[string]*catalog.ColumnDef, len(cols))
	for i := range cols {
		onTarget[cols[i].Name] = &cols[i].ColumnDef
	}
	sent := make(map[string]bool, len(r.Columns))
	var missing []string
	var retyped []*pgoutput.Column
	for i := range r.Columns {
		c := &r.Columns[i]
		sent[c.Name] = true
		t, ok := onTarget[c.Name]
		switch {
		case !ok:
			missing = append(missing, c.Name)
		case t.Generated == "" && (t.TypeOID != c.TypeOID || t.TypMod != c.TypMod) && c.TypeOID < firstNormalOID:
			// A built-in type has the same oid on both servers; another
			// type's oid means nothing on the target, and its values are
			// left, as before, to their assignment.
			retyped = append(retyped, c)
		}
	}
	narrow, err := a.narrowTypes(ctx, r, onTarget, retyped)
	if err != nil {
		return false, err
	}
	ident := pgx.Identifier{r.Schema, r.Name}.Sanitize()
	if len(missing) > 0 {
		if err := a.addColumns(ctx, r, ident, onTarget, missing); err != nil {
			return false, err
		}
		changed = true
	}
	if len(narrow) > 0 {
		if err := a.widenColumns(ctx, r, ident, narrow); err != nil {
			return false, err
		}
		changed = true
	}
	for i := range cols {
		c := &cols[i]
		if !sent[c.Name] && c.NotNull && !c.Filled() {
			name := catalog.QuoteIdent(c.Name)
			return changed, fmt.Errorf("table %s at %s: column %s is NOT NULL without a default on the target and the source no longer sends it (dropped there?): every INSERT would fail; on the target, drop the constraint (ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL) or give it a default (ALTER TABLE %s ALTER COLUMN %s SET DEFAULT ...), and rerun pgsync run",
				r, a.sourceLSN, c.Name, ident, name, ident, name)
		}
	}
	return changed, nil
}

// addColumns adds the source columns named missing to the target table,
// with their definitions on the source (Options.SourceColumns), and the
// source's generated columns the target lacks, which the stream never
// carries and often compute from the new ones; without
// Options.AddColumns it returns the error that names the statement.
func (a *Applier) addColumns(ctx context.Context, r *pgoutput.Relation, ident string, onTarget map[string]*catalog.ColumnDef, missing []string) error {
	var source []catalog.ColumnDef
	var unread error
	if a.opts.SourceColumns != nil {
		source, unread = a.opts.SourceColumns(ctx, r.Schema, r.Name)
	} else {
		unread = errors.New("no source connection")
	}
	if unread != nil && a.opts.AddColumns {
		return fmt.Errorf("table %s at %s: read the definition of column %s on the source: %w", r, a.sourceLSN, missing[0], unread)
	}
	bySource := make(map[string]*catalog.ColumnDef, len(source))
	for i := range source {
		bySource[source[i].Name] = &source[i]
	}
	var defs []catalog.ColumnDef
	var notes []string
	for _, name := range missing {
		if d, ok := bySource[name]; ok {
			defs = append(defs, *d)
			continue
		}
		// Dropped on the source since, or not read: the stream's type.
		var oid uint32
		var mod int32
		for _, c := range r.Columns {
			if c.Name == name {
				oid, mod = c.TypeOID, c.TypMod
			}
		}
		d := catalog.ColumnDef{Name: name, TypeOID: oid, TypMod: mod}
		if err := a.conn.QueryRow(ctx, "SELECT format_type($1::oid, $2::int)", oid, mod).Scan(&d.Type); err != nil {
			return fmt.Errorf("table %s at %s: name the type of column %s: %w", r, a.sourceLSN, name, err)
		}
		defs = append(defs, d)
		if unread == nil {
			notes = append(notes, fmt.Sprintf("the source no longer has column %s: its type only", name))
		}
	}
	for i := range source {
		if c := &source[i]; c.Generated != "" && onTarget[c.Name] == nil {
			defs = append(defs, *c)
		}
	}
	if unread != nil {
		notes = append(notes, fmt.Sprintf("the source's definition could not be read (%v): its type only", unread))
	}
	// A NOT NULL column that nothing fills can be added only to an empty
	// table: its values for the target's rows are still in the stream. A
	// volatile default (issue 31, point 4) gave each of the source's rows
	// a value no change message carries, that the target's rows would not
	// get: added only to an empty table.
	empty := true
	for i := range defs {
		if d := &defs[i]; d.NotNull && !d.Filled() || elsewhere(d) {
			if err := a.conn.QueryRow(ctx, "SELECT NOT EXISTS (SELECT 1 FROM "+ident+")").Scan(&empty); err != nil {
				return fmt.Errorf("table %s at %s: %w", r, a.sourceLSN, err)
			}
			break
		}
	}
	clauses := make([]string, len(defs))
	described := make([]string, len(defs))
	for i := range defs {
		d := &defs[i]
		var dropped bool
		clauses[i], dropped = d.AddClauses(empty)
		described[i] = fmt.Sprintf("%s (%s)", d.Name, d.Definition())
		if dropped {
			notes = append(notes, fmt.Sprintf("%s without NOT NULL, which the target's rows would break until the source's values arrive: set it then", d.Name))
		}
		if elsewhere(d) {
			notes = append(notes, fmt.Sprintf("%s's default gave each source row a value of its own, which the target's rows will not have: copy its values from the source by key", d.Name))
		}
	}
	stmt := "ALTER TABLE " + ident + " " + strings.Join(clauses, ", ")
	if a.opts.AddColumns && !empty {
		for i := range defs {
			if d := &defs[i]; elsewhere(d) {
				return fmt.Errorf("table %s at %s: column %s (%s) exists on the source but not on the target, and its default gave each existing source row a value of its own that no change message carries: %w; add it on the target by hand (%s), run pgsync run --until-caught-up, then copy its values from the source to the target by key, then pgsync run (docs/operations.md, values that depend on where a statement runs)",
					r, a.sourceLSN, d.Name, d.Definition(), ErrVolatileDefault, stmt)
			}
		}
	}
	if !a.opts.AddColumns {
		note := ""
		if len(notes) > 0 {
			note = " (" + strings.Join(notes, "; ") + ")"
		}
		verb, them := "column %s exists", "it"
		if len(defs) > 1 {
			verb, them = "columns %s exist", "them"
		}
		return fmt.Errorf("table %s at %s: "+verb+" on the source but not on the target; add %s on the target (%s)%s and rerun pgsync run, or set job.add_columns",
			r, a.sourceLSN, strings.Join(described, ", "), them, stmt, note)
	}
	if _, err := a.conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("table %s at %s: add %s on the target (%s): %w", r, a.sourceLSN, strings.Join(described, ", "), stmt, err)
	}
	log := a.logger()
	for i := range defs {
		log.Info("added a column on the target, as the source defines it", "table", r.String(), "column", defs[i].Name, "definition", defs[i].Definition(), "lsn", a.sourceLSN.String())
	}
	for _, n := range notes {
		log.Warn("added a column on the target: "+n, "table", r.String())
	}
	return nil
}

// ErrVolatileDefault is the cause of the stop at a column the source
// gained with a volatile default, with Options.AddColumns and rows on the
// target.
var ErrVolatileDefault = errors.New("a volatile default's values for existing rows cannot be reproduced on the target")

// elsewhere says whether the source's rows older than column d hold values
// that d's definition would not give the target's rows: its default is
// volatile (or it is an identity) and the source stored no single value
// for them (Existing). With Existing, AddClauses gives the target's rows
// that value, as a stable default such as now() gave the source's.
func elsewhere(d *catalog.ColumnDef) bool {
	return d.VolatileDefault && d.Existing == "" && d.Generated == ""
}

// firstNormalOID is FirstNormalObjectId: below it, the oids of the
// built-in types, the same on every server.
const firstNormalOID = 16384

// typeChange is a target column whose type does not hold every value of
// the type the source now sends (to); widens says whether that type holds
// every value of the target's, so that the target column can take it.
type typeChange struct {
	col    *catalog.ColumnDef
	to     catalog.ColumnType
	why    string // catalog.Narrowing's words
	widens bool
	warn   string // what the widening changes, from catalog.Holds
}

// narrowTypes returns the columns of retyped whose target type does not
// hold the source's under catalog.Holds, the rule bootstrap applies to a
// wider target column.
func (a *Applier) narrowTypes(ctx context.Context, r *pgoutput.Relation, onTarget map[string]*catalog.ColumnDef, retyped []*pgoutput.Column) ([]typeChange, error) {
	if len(retyped) == 0 {
		return nil, nil
	}
	oids := make([]uint32, len(retyped))
	mods := make([]int32, len(retyped))
	for i, c := range retyped {
		oids[i], mods[i] = c.TypeOID, c.TypMod
	}
	source := make([]catalog.ColumnType, 0, len(retyped))
	rows, err := a.conn.Query(ctx, "SELECT format_type(o, m), format_type(o, NULL) FROM unnest($1::oid[], $2::int[]) WITH ORDINALITY AS u(o, m, n) ORDER BY n", oids, mods)
	if err == nil {
		for rows.Next() {
			var ct catalog.ColumnType
			if err = rows.Scan(&ct.Type, &ct.BaseType); err != nil {
				break
			}
			source = append(source, ct)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("table %s at %s: name the source's column types: %w", r, a.sourceLSN, err)
	}
	var narrow []typeChange
	for i, c := range retyped {
		t := onTarget[c.Name]
		ok, _, counterexample := catalog.Holds(source[i], t.ColumnType())
		if ok {
			continue
		}
		widens, warn, _ := catalog.Holds(t.ColumnType(), source[i])
		narrow = append(narrow, typeChange{col: t, to: source[i], why: catalog.Narrowing(source[i], t.ColumnType(), counterexample), widens: widens, warn: warn})
	}
	return narrow, nil
}

// widenColumns changes the type of the target columns to the source's
// (ALTER COLUMN TYPE there) with Options.AddColumns when each is a
// widening; otherwise it returns the error that names both types.
func (a *Applier) widenColumns(ctx context.Context, r *pgoutput.Relation, ident string, narrow []typeChange) error {
	clauses := make([]string, len(narrow))
	described := make([]string, len(narrow))
	for i, n := range narrow {
		if !n.widens {
			return fmt.Errorf("table %s at %s: column %s is %s on the source and %s on the target, and neither type holds every value of the other (%s); change the column on the target and rerun pgsync run",
				r, a.sourceLSN, n.col.Name, n.to.Type, n.col.Type, n.why)
		}
		clauses[i] = fmt.Sprintf("ALTER COLUMN %s TYPE %s", catalog.QuoteIdent(n.col.Name), n.to.Type)
		described[i] = fmt.Sprintf("column %s is %s on the source but %s on the target, which does not hold every value of it (%s)", n.col.Name, n.to.Type, n.col.Type, n.why)
	}
	stmt := "ALTER TABLE " + ident + " " + strings.Join(clauses, ", ")
	if !a.opts.AddColumns {
		them := "it"
		if len(narrow) > 1 {
			them = "them"
		}
		return fmt.Errorf("table %s at %s: %s; widen %s on the target (%s) and rerun pgsync run, or set job.add_columns",
			r, a.sourceLSN, strings.Join(described, "; "), them, stmt)
	}
	if _, err := a.conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("table %s at %s: widen %s on the target (%s): %w", r, a.sourceLSN, strings.Join(described, "; "), stmt, err)
	}
	log := a.logger()
	for _, n := range narrow {
		log.Info("widened a column on the target to the source's type", "table", r.String(), "column", n.col.Name, "from", n.col.Type, "to", n.to.Type, "lsn", a.sourceLSN.String())
		if n.warn != "" {
			// pgsync's target session runs in UTC (pgconnect).
			log.Warn("widened a column on the target: "+n.warn, "table", r.String(), "column", n.col.Name, "time_zone", "UTC")
		}
	}
	return nil
}

// logger is Options.Logger, or slog.Default() when it is nil.
func (a *Applier) logger() *slog.Logger {
	if a.opts.Logger != nil {
		return a.opts.Logger
	}
	return slog.Default()
}

// noEquality lists the built-in types, by the name format_type gives them
// without a modifier (catalog.Column.BaseType), that have no default
// equality operator: a REPLICA IDENTITY FULL match compares them as text.
var noEquality = map[string]bool{
	"json": true, "json[]": true, "xml": true, "xml[]": true,
	"point": true, "lseg": true, "path": true, "box": true, "polygon": true, "line": true, "circle": true,
	"point[]": true, "lseg[]": true, "path[]": true, "box[]": true, "polygon[]": true, "line[]": true, "circle[]": true,
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
