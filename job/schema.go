package job

import (
	"context"
	"fmt"
	"os/exec"
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

// choosePgDump decides whether the schema comes from pg_dump, and why not
// when it does not: job.pg_dump is off, the target already has a table of
// the job, no pg_dump as new as the source is found, or the job selects
// only some tables of a schema (pg_dump would create the others, empty).
// An error is a refusal: the target lacks an extension the source has.
func (j *Job) choosePgDump(ctx context.Context, tables []catalog.Table, tp targetPlan) (*schemadump.Scope, string, error) {
	if j.opts.PgDump == schemadump.Off {
		return nil, "job.pg_dump is off", nil
	}
	if len(tp.existing) > 0 {
		return nil, fmt.Sprintf("the target already has %d of the job's tables (pg_dump's schema is used only for a target that has none)", len(tp.existing)), nil
	}
	path, err := exec.LookPath(j.opts.PgDump)
	if err != nil {
		return nil, fmt.Sprintf("no pg_dump %q found (set job.pg_dump to its path)", j.opts.PgDump), nil
	}
	version, err := schemadump.Version(ctx, path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err() // cancelled (a check failed): not a reason to do without pg_dump
		}
		return nil, err.Error(), nil
	}
	var srcVersion int
	if err := j.src.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&srcVersion); err != nil {
		return nil, "", fmt.Errorf("read the source's version: %w", err)
	}
	if version < srcVersion {
		return nil, fmt.Sprintf("%s is pg_dump %d, older than the source (%d): set job.pg_dump to a pg_dump %d or later", path, version, srcVersion, srcVersion), nil
	}
	d := &schemadump.Scope{Path: path, Version: version}
	restore, _, err := schemadump.RestoreProgram(ctx, path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err() // cancelled (a check failed): not a reason to do without pg_dump
		}
		return nil, err.Error(), nil
	}
	d.Restore = restore
	var why string
	if d.Schemas, d.Unlogged, why, err = schemadump.Schemas(ctx, j.src, tables); err != nil || why != "" {
		return nil, why, err
	}
	exts, err := schemadump.SourceExtensions(ctx, j.src)
	if err != nil {
		return nil, "", err
	}
	if d.Schemas != nil {
		for _, e := range exts {
			d.Extensions = append(d.Extensions, e.Name)
		}
	}
	if gaps, err := schemadump.GapsOf(ctx, j.tgt, exts); err != nil {
		return nil, "", err
	} else if refused := gaps.Refused(); len(refused) > 0 {
		return nil, "", fmt.Errorf("%s: %w", strings.Join(refused, "; "), ErrMissingExtension)
	}
	if why, err := schemadump.TargetHoldsObjects(ctx, j.tgt, d.Schemas); err != nil || why != "" {
		return nil, why, err
	}
	// The roles the schema names must exist on the target, and its user
	// must be able to give objects to their owners: refused now, before
	// anything is written.
	if problem, err := schemadump.RoleProblem(ctx, j.src, j.tgt, d.Schemas, j.names.Publication); err != nil {
		return nil, "", err
	} else if problem != "" {
		return nil, "", fmt.Errorf("%s: %w", problem, ErrMissingRole)
	}
	dumpBegan := time.Now()
	if err := d.Dump(ctx, j.opts.SourceURL); err != nil {
		return nil, "", err
	}
	// Its own line: with the source far away, the dump is most of what
	// bootstrap does before the copy (docs/benchmarks.md).
	j.log.Info("schema read with pg_dump", "format", "custom", "seconds", fmt.Sprintf("%.2f", time.Since(dumpBegan).Seconds()))
	if err := d.ReadTOC(ctx, j.src, j.tgt, j.names.Publication); err != nil {
		return nil, "", err
	}
	return d, "", nil
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
