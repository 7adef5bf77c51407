package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/snapshot"
)

// targetTable is what the target has of one source table.
type targetTable struct {
	exists bool
	// problem says why the table cannot take the copy, fix what to do;
	// both empty when it can.
	problem, fix string
	// warn names columns whose wider target type takes the source's values
	// with a change worth knowing (timestamp read in a time zone).
	warn []string
}

// inspectTargetTables looks at the target's table for each of srcs:
// missing, or present with every source column of the same type and,
// where mustBeEmpty says so, empty. It writes nothing; check and
// bootstrap share it. The definitions are read in one query and the
// emptiness in one per emptyChunk tables, whatever the number of tables
// (issue 33). The result has one entry per table, also with an error, so
// that check can put the error on each table's line.
func inspectTargetTables(ctx context.Context, tgt *pgx.Conn, srcs []*catalog.Table, mustBeEmpty func(*catalog.Table) bool) ([]targetTable, error) {
	out := make([]targetTable, len(srcs))
	found, err := catalog.LookupAll(ctx, tgt, catalog.RefNames(srcs))
	if err != nil {
		return out, err
	}
	targets := catalog.ByName(found)
	var toCheck []*catalog.Table
	var at []int
	for i, src := range srcs {
		out[i] = judgeTargetTable(src, targets[src.TableName()])
		if out[i].exists && out[i].problem == "" && mustBeEmpty(src) {
			toCheck = append(toCheck, src)
			at = append(at, i)
		}
	}
	nonEmpty, err := nonEmptyTables(ctx, tgt, toCheck)
	if err != nil {
		return out, err
	}
	for _, k := range nonEmpty {
		tt := &out[at[k]]
		tt.problem = "not empty on the target, and pgsync did not copy its rows: bootstrap and add-tables copy into empty tables"
		tt.fix = "empty it, or rerun with --force to replace its rows"
	}
	return out, nil
}

// judgeTargetTable says whether have, the target's table for src (nil
// when there is none), can take src's rows: every source column, of a
// type that holds its values.
func judgeTargetTable(src, have *catalog.Table) targetTable {
	if have == nil {
		return targetTable{}
	}
	tt := targetTable{exists: true}
	if missing := catalog.MissingColumns(src, have); len(missing) > 0 {
		tt.problem = "the target lacks source column(s) " + strings.Join(missing, ", ")
		tt.fix = "add them on the target, or drop the table so that bootstrap creates it"
		return tt
	}
	if differ := catalog.DifferentTypes(src, have); len(differ) > 0 {
		tt.problem = strings.Join(differ, "; ")
		tt.fix = "give the target columns the source's types, or types that hold every value of them (docs/reference.md)"
		return tt
	}
	tt.warn = catalog.TypeWarnings(src, have)
	return tt
}

// emptyChunk is how many tables one statement of nonEmptyTables reads:
// each holds its lock on every table it reads until it ends, and the
// server's lock table is sized for 64 per connection by default
// (max_locks_per_transaction).
const emptyChunk = 500

// nonEmptyTables returns the indexes in tables of those that have a row.
func nonEmptyTables(ctx context.Context, tgt *pgx.Conn, tables []*catalog.Table) ([]int, error) {
	var nonEmpty []int
	for start := 0; start < len(tables); start += emptyChunk {
		chunk := tables[start:min(start+emptyChunk, len(tables))]
		parts := make([]string, len(chunk))
		for i, t := range chunk {
			parts[i] = fmt.Sprintf("SELECT %d WHERE EXISTS (SELECT 1 FROM %s)", start+i, t.Ident())
		}
		rows, err := tgt.Query(ctx, strings.Join(parts, " UNION ALL "))
		if err != nil {
			return nil, fmt.Errorf("check target tables %s (and %d more) are empty: %w", chunk[0], len(chunk)-1, err)
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return nil, fmt.Errorf("check target tables %s (and %d more) are empty: %w", chunk[0], len(chunk)-1, err)
		}
		for _, i := range found {
			nonEmpty = append(nonEmpty, int(i))
		}
	}
	return nonEmpty, nil
}

// targetPlan is what preparing the target will do; deciding it writes
// nothing.
type targetPlan struct {
	create   []*catalog.Table // missing on the target
	existing []*catalog.Table // present and compatible
	empty    []*catalog.Table // existing tables to empty before the copy
}

// planTarget checks every table's target copy before anything is written.
// A table that exists must be empty unless owned names it (rows pgsync
// copied itself) or emptyAll is set (--force): bootstrap never overwrites
// rows it did not copy.
func (j *Job) planTarget(ctx context.Context, tables []*catalog.Table, owned map[string]bool, emptyAll bool) (targetPlan, error) {
	var p targetPlan
	mayEmpty := func(t *catalog.Table) bool { return emptyAll || owned[t.String()] }
	inspected, err := inspectTargetTables(ctx, j.tgt, tables, func(t *catalog.Table) bool { return !mayEmpty(t) })
	if err != nil {
		return p, err
	}
	for i, t := range tables {
		switch tt := inspected[i]; {
		case !tt.exists:
			p.create = append(p.create, t)
		case tt.problem != "":
			return p, refusal(targetTableFinding(t, tt, nil))
		default:
			p.existing = append(p.existing, t)
			if mayEmpty(t) {
				p.empty = append(p.empty, t)
			}
		}
	}
	return p, nil
}

// prepareTarget carries out p: it creates the missing types, partitioned
// parents and tables, and empties the tables p names. tgt is a replica
// session.
func (j *Job) prepareTarget(ctx context.Context, p targetPlan) (created, parents []*catalog.Table, err error) {
	if err := j.createTypes(ctx, j.src, j.tgt, p.create); err != nil {
		return nil, nil, err
	}
	if parents, err = missingParents(ctx, j.src, j.tgt, p.create); err != nil {
		return nil, nil, err
	}
	for _, t := range append(parents, p.create...) {
		if err := createInSchema(ctx, j.tgt, t.Schema, catalog.CreateTableSQL(t)); err != nil {
			return nil, nil, fmt.Errorf("create table %s on target: %w", t, err)
		}
		j.log.Info("created", "table", t.String())
	}
	if len(p.empty) > 0 {
		if err := emptyTargetTables(ctx, j.tgt, p.empty); err != nil {
			return nil, nil, err
		}
	}
	return p.create, parents, nil
}

// missingParents returns the partitioned tables that the partitions to
// create belong to and the target lacks, loaded from the source, each
// before its own partitions (a parent that is itself a partition comes
// after its parent).
func missingParents(ctx context.Context, src, tgt *pgx.Conn, created []*catalog.Table) ([]*catalog.Table, error) {
	var parents []*catalog.Table
	seen := make(map[string]bool)
	var add func(t *catalog.Table) error
	add = func(t *catalog.Table) error {
		p := t.PartitionOf
		if p == nil || seen[p.String()] {
			return nil
		}
		seen[p.String()] = true
		if _, ok, err := catalog.Lookup(ctx, tgt, p.Schema, p.Name); err != nil || ok {
			return err
		}
		parent, ok, err := catalog.Lookup(ctx, src, p.Schema, p.Name)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("partition %s: its partitioned table %s is gone from the source", t, p)
		}
		if err := add(&parent); err != nil {
			return err
		}
		parents = append(parents, &parent)
		return nil
	}
	for _, t := range created {
		if err := add(t); err != nil {
			return nil, err
		}
	}
	return parents, nil
}

// secondaryObjects returns the indexes and constraints to build on the
// tables bootstrap created, after the copy, leaving out those the target
// already has (by name). A foreign key to a table
// outside the job, and the triggers, policies, rules, grants, comments and
// extensions, are not created: each is named in a warning, so that nothing
// is left out silently.
func (j *Job) secondaryObjects(ctx context.Context, src, tgt *pgx.Conn, tables []catalog.Table, created []*catalog.Table) ([]catalog.Object, error) {
	inJob := make(map[string]bool, len(tables))
	for i := range tables {
		inJob[tables[i].String()] = true
	}
	for _, t := range created { // partitioned parents created for the job's partitions
		inJob[t.String()] = true
	}
	var objs []catalog.Object
	// What the built-in creator leaves out is said once per kind, with
	// its count and names, not once per object.
	leftOut, err := catalog.LeftOut(ctx, src, created)
	if err != nil {
		return nil, err
	}
	for _, t := range created {
		o, left, err := catalog.SecondaryObjects(ctx, src, t)
		if err != nil {
			return nil, err
		}
		for _, obj := range o {
			exists, err := catalog.ObjectExists(ctx, tgt, &obj)
			if err != nil {
				return nil, err
			}
			if exists {
				continue
			}
			if obj.Kind == "foreign key" && !inJob[obj.References] {
				j.log.Warn("not created: it references a table outside the job", "object", obj.String(), "references", obj.References)
				continue
			}
			objs = append(objs, obj)
		}
		for _, u := range left {
			if u.Kind == "extension" {
				j.log.Warn("a column's type comes from an extension, which pgsync does not create: CREATE EXTENSION on the target first", "table", t.String(), u.Kind, u.Name)
				continue
			}
			leftOut[u.Kind] = append(leftOut[u.Kind], u.Name+" on "+t.String())
		}
	}
	kinds := make([]string, 0, len(leftOut))
	for k := range leftOut {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		j.log.Warn("not created by the built-in creator (pg_dump's schema into an empty target creates them)", "kind", k, "count", len(leftOut[k]), "objects", strings.Join(leftOut[k], ", "))
	}
	return objs, nil
}

// createTypes creates on the target the enum, domain, composite and range
// types that the tables to create use and the target lacks, dependencies
// first.
func (j *Job) createTypes(ctx context.Context, src, tgt *pgx.Conn, tables []*catalog.Table) error {
	if len(tables) == 0 {
		return nil
	}
	types, err := catalog.UsedTypes(ctx, src, tables)
	if err != nil {
		return err
	}
	for _, u := range types {
		exists, err := catalog.TypeExists(ctx, tgt, u.Schema, u.Name)
		if err != nil {
			return err
		}
		if exists {
			continue
		}
		if err := createInSchema(ctx, tgt, u.Schema, u.SQL); err != nil {
			return fmt.Errorf("create type %s on target: %w", u, err)
		}
		j.log.Info("created", "type", u.String())
	}
	return nil
}

// createInSchema runs ddl on the target after creating its schema if
// missing.
func createInSchema(ctx context.Context, tgt *pgx.Conn, schema, ddl string) error {
	_, err := tgt.Exec(ctx, fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %s; %s", catalog.QuoteIdent(schema), ddl))
	return err
}

// emptyTargetTables empties the job's existing target tables before a copy
// starts over: one TRUNCATE of all of them, so that foreign keys among them
// do not stop it. When a table outside the job references one of them,
// TRUNCATE refuses (0A000) and the rows are deleted instead, with
// session_replication_role = replica so that no foreign-key action fires:
// rows of the other tables are left as they are, as a subscription's copy
// leaves them. tgt is a replica session (pgconnect.ReplicaSession).
func emptyTargetTables(ctx context.Context, tgt *pgx.Conn, tables []*catalog.Table) error {
	idents := catalog.RefIdents(tables)
	_, err := tgt.Exec(ctx, "TRUNCATE ONLY "+strings.Join(idents, ", "))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "0A000" {
		if err != nil {
			return fmt.Errorf("empty the job's target tables: %w", err)
		}
		return nil
	}
	err = pgx.BeginFunc(ctx, tgt, func(tx pgx.Tx) error {
		for _, ident := range idents {
			if _, err := tx.Exec(ctx, "DELETE FROM ONLY "+ident); err != nil {
				return fmt.Errorf("%s: %w", ident, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("empty the job's target tables: %w", err)
	}
	return nil
}

// toBuild returns the tables whose secondary objects to build: those just
// created and their parents, or, on a rerun after an interruption (which
// no longer sees the tables it created as created), every table, of which
// whatever is missing is built.
func toBuild(tables []catalog.Table, created, parents []*catalog.Table, rerun bool) []*catalog.Table {
	if !rerun {
		return append(parents, created...)
	}
	all := make([]*catalog.Table, len(tables))
	for i := range tables {
		all[i] = &tables[i]
	}
	return all
}

// copyAndBuild copies tables under slot's exported snapshot, closing the
// exporting connection once every stream imported it, then builds objects
// on the target, logging each. copied is called as each table's copy
// commits. failed names the objects not built; an error that stops it
// wraps ErrUnfinished (a rerun resumes).
func (j *Job) copyAndBuild(ctx context.Context, slot *replication.Slot, tables []catalog.Table, objects []catalog.Object,
	progress *snapshot.Progress, copied func(snapshot.TableResult) error) (results []snapshot.TableResult, failed []string, err error) {
	stop := func() {}
	if j.ShowCopy != nil {
		stop = j.ShowCopy(progress)
	}
	results, err = snapshot.Copy(ctx, snapshot.Options{
		SourceURL:    j.opts.SourceURL,
		TargetURL:    j.opts.TargetURL,
		SnapshotName: slot.SnapshotName,
		MaxParallel:  j.opts.MaxParallelCopies,
		BufferSize:   j.opts.BufferSizeBytes,
		RangeBytes:   j.opts.CopyRangeBytes,
		// Every stream holds the snapshot now: the exporting connection
		// has done its job.
		Imported: func() { slot.Conn.Close(context.WithoutCancel(ctx)) },
		Progress: progress,
		Logger:   j.log,
		Copied:   copied,
	}, tables)
	stop()
	if err != nil {
		return nil, nil, fmt.Errorf("copy: %w: %w", ErrUnfinished, err)
	}
	if failed, err = j.buildCreated(ctx, objects); err != nil {
		return nil, nil, err
	}
	return results, failed, nil
}

// buildCreated builds the built-in creator's objects on the target,
// max_parallel_copies at a time (build.go), each logged. failed names the
// objects not built, each also logged as a warning; a primary key that
// fails stops the step (settleBuild).
func (j *Job) buildCreated(ctx context.Context, objects []catalog.Object) (failed []string, err error) {
	failed, err = j.settleBuild(j.buildObjects(ctx, j.opts.MaxParallelCopies, builtinPhases(objects)))
	if err != nil {
		return nil, fmt.Errorf("create indexes and constraints: %w: %w", ErrUnfinished, err)
	}
	return failed, nil
}
