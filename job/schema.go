package job

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/schemadump"
)

// When the target has none of the job's tables, bootstrap takes the schema
// from one pg_dump archive (custom format, schema only), as pgcopydb does,
// and reads it through its table of contents, never through its SQL text
// (package schemadump): the pre-data section (extensions, schemas, types,
// functions, sequences, tables, views) is restored with pg_restore before
// the copy, in one transaction, and each post-data entry (keys, indexes,
// constraints, triggers, rules, policies, foreign keys, default
// privileges) after it, in parallel, by its dump id, so that a rerun
// builds those not built yet. pg_dump knows how to write every object of
// every PostgreSQL version; the built-in creator (prepare.go) knows
// tables, their types and their indexes and constraints only.

// planSchema chooses where the schema comes from (chooseSchema, the rule
// check applies too) and refuses, before any write, on what it fails;
// for pg_dump it also refuses an extension the target's server lacks, then
// dumps the schema and reads the archive's table of contents. A resumed
// bootstrap keeps the interrupted one's choice: only what the built-in
// creator must still make is judged.
func (j *Job) planSchema(ctx context.Context, bp *bootstrapPlan) error {
	if bp.plan.Mode == Resume {
		return j.settle(ruleBuiltinCreator(ctx, j.src, j.tgt, bp.tp.create,
			pgDumpAdvice))
	}
	ch, err := chooseSchema(ctx, schemaInput{opts: j.opts, src: j.src, tgt: j.tgt, tables: bp.tables,
		create: bp.tp.create, existing: len(bp.tp.existing), publication: j.names.Publication})
	if err != nil {
		return err
	}
	if err := j.settle(ch.findings); err != nil {
		return err
	}
	if ch.dump == nil {
		if len(bp.tp.create) > 0 {
			j.log.Info("the built-in creator makes the missing tables, their types, keys, indexes and constraints (not "+builtinLeavesOut+")", "why_not_pg_dump", ch.why)
		}
		return nil
	}
	if _, ext := ruleExtensions(ctx, j.src, j.tgt); ext.Status == CheckFail {
		return refusal(ext)
	}
	d := ch.dump
	dumpBegan := time.Now()
	if err := d.Dump(ctx, j.opts.SourceURL); err != nil {
		return err
	}
	// Its own line: with the source far away, the dump is most of what
	// bootstrap does before the copy (docs/benchmarks.md).
	j.log.Info("schema read with pg_dump", "format", "custom", "seconds", fmt.Sprintf("%.2f", time.Since(dumpBegan).Seconds()))
	if err := d.ReadTOC(ctx, j.src, j.tgt, j.names.Publication); err != nil {
		return err
	}
	bp.dump = d
	return nil
}

// settle refuses on the findings that failed, with check's words, and
// logs those that warn, as check prints them.
func (j *Job) settle(findings Checks) error {
	if failed := findings.Failed(); len(failed) > 0 {
		return refusal(failed...)
	}
	for _, f := range findings {
		if f.Status == CheckWarn {
			j.log.Warn(f.Item+": "+f.Detail, "fix", f.Fix)
		}
	}
	return nil
}

// restorePreData restores pg_dump's pre-data section (schemadump), saying
// what it waits for while it does.
func (j *Job) restorePreData(ctx context.Context, d *schemadump.Scope) error {
	began := time.Now()
	exts, err := schemadump.SourceExtensions(ctx, j.src)
	if err != nil {
		return err
	}
	stop := j.sayWhile(ctx, "restoring pg_dump's pre-data section on the target", "when pg_restore has run every entry, in one transaction (interrupted, it keeps nothing)")
	err = d.RestorePreData(ctx, j.tgt, j.opts.TargetURL, exts)
	stop()
	if err != nil {
		return fmt.Errorf("restore pg_dump's pre-data section on the target: %w", err)
	}
	if len(d.SkippedSchemas) > 0 {
		j.log.Info("schemas the target has already are kept as they are (owner, privileges)", "schemas", strings.Join(d.SkippedSchemas, ", "))
	}
	if differ, err := schemadump.VersionsDiffer(ctx, j.tgt, exts); err != nil {
		return err
	} else if len(differ) > 0 {
		j.log.Warn("extension created at the target's version, not the source's: the target's server lacks the source's version", "extensions", strings.Join(differ, ", "))
	}
	j.log.Info("schema restored from pg_dump", "section", "pre-data", "scope", d.String(), "pg_dump", d.Path, "entries", len(d.PreData),
		"seconds", fmt.Sprintf("%.2f", time.Since(began).Seconds()))
	return nil
}

// emptyExtensionTables empties the job's tables that the pre-data
// restore's CREATE EXTENSION filled (schemadump.EmptyExtensionTables).
func (j *Job) emptyExtensionTables(ctx context.Context, created []*catalog.Table) error {
	emptied, err := schemadump.EmptyExtensionTables(ctx, j.tgt, created)
	if err != nil {
		return err
	}
	if len(emptied) > 0 {
		j.log.Info("emptied the rows CREATE EXTENSION put in its configuration tables: the copy brings the source's, once", "tables", strings.Join(emptied, ", "))
	}
	return nil
}

// schemaBuilder builds the job's recorded post-data objects on the build
// path (build.go): max_parallel_copies at a time, each failure settled in
// one place.
type schemaBuilder struct {
	j *Job
	b *schemadump.Builder
}

// openSchemaBuilder opens the job's builder; nil when it has no
// post-data objects left to build.
func (j *Job) openSchemaBuilder(ctx context.Context) (*schemaBuilder, error) {
	b, err := schemadump.OpenBuilder(ctx, j.tgt, j.opts.TargetURL, j.opts.PgDump, j.opts.Job)
	if err != nil || b == nil {
		return nil, err
	}
	objects, runs := b.Scripts()
	j.log.Info("read the post-data objects' scripts", "objects", objects, "pg_restore_runs", runs)
	return &schemaBuilder{j: j, b: b}, nil
}

func (s *schemaBuilder) close() { s.b.Close() }

// conn is the builder's own target session.
func (s *schemaBuilder) conn() *pgx.Conn { return s.b.Conn() }

// object is o for the build path.
func (s *schemaBuilder) object(o schemadump.Pending) object {
	return object{name: o.String(), primaryKey: o.PrimaryKey, create: func(ctx context.Context, conn *pgx.Conn) error {
		return s.b.Build(ctx, conn, o)
	}}
}

// buildPostData builds the recorded post-data objects not built yet, phase
// by phase, max_parallel_copies at a time, each logged with its duration.
// A primary key that fails stops bootstrap (run finds rows by key); any
// other failure is a warning (settleBuild), and the object stays not
// built in the record, which schemaCounts reports.
func (s *schemaBuilder) buildPostData(ctx context.Context) error {
	objs, err := s.b.Pending(ctx, "")
	if err != nil {
		return err
	}
	byPhase := map[int][]object{}
	for _, o := range objs {
		byPhase[o.Phase] = append(byPhase[o.Phase], s.object(o))
	}
	phases := make([][]object, schemadump.PostDataPhases)
	for phase := range phases {
		phases[phase] = byPhase[phase]
	}
	if _, err := s.j.settleBuild(s.j.buildObjects(ctx, s.j.opts.MaxParallelCopies, phases)); err != nil {
		return fmt.Errorf("create pg_dump's post-data objects: %w: %w", ErrUnfinished, err)
	}
	return nil
}

// tableObjects returns the first-phase objects (keys, indexes) of table
// not built yet, for the key builder while other tables copy.
func (s *schemaBuilder) tableObjects(ctx context.Context, table string) ([]object, error) {
	objs, err := s.b.Pending(ctx, table)
	if err != nil {
		return nil, err
	}
	out := make([]object, len(objs))
	for i, o := range objs {
		out[i] = s.object(o)
	}
	return out, nil
}
