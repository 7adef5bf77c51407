package job

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/largeobject"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/schemadump"
	"github.com/pgsync/pgsync/snapshot"
)

// BootstrapReport is what a bootstrap did.
type BootstrapReport struct {
	Job  string
	Mode BootstrapMode
	// Schema says what made the target's schema: "built-in", or the
	// pg_dump and its scope.
	Schema string
	// Results are the tables copied now; Kept the tables an interrupted
	// bootstrap had copied, which this one kept.
	Results []snapshot.TableResult
	Kept    []string
	Seconds float64
	// StreamFrom is where pgsync run starts.
	StreamFrom pglogrepl.LSN
	// Created and Parents count the tables created on the target and the
	// partitioned tables created for them; Built the indexes and
	// constraints attempted after the copy, of which Failed were not
	// created.
	Created, Parents int
	Built            int
	Failed           []string
	// LargeObjects is how many large objects were copied.
	LargeObjects int
}

// readRecorded reads what the target and the source hold of the job.
func (j *Job) readRecorded(ctx context.Context) (Recorded, error) {
	var rec Recorded
	prog, err := ledger.ReadProgress(ctx, j.tgt, j.opts.Job)
	switch {
	case errors.Is(err, ledger.ErrNoProgress):
	case err != nil:
		return rec, err
	default:
		rec.State, rec.LSN = prog.State, prog.LSN
	}
	if rec.Tables, err = ledger.ReadTables(ctx, j.tgt, j.opts.Job); err != nil {
		return rec, err
	}
	rec.Slot, rec.Publication, err = replication.Exists(ctx, j.src, j.names)
	return rec, err
}

// Bootstrap starts the job: checks, then the publication and slot, the
// target tables and the copy under the slot's snapshot. An interrupted
// bootstrap is resumed when its slot is still there: the tables whose copy
// committed are kept and the others copied under a new snapshot with their
// own position, as add-tables does. force starts over, emptying every
// existing target table of the job. Nothing is recorded before every check
// passed.
func (j *Job) Bootstrap(ctx context.Context, force bool, progress *snapshot.Progress) (*BootstrapReport, error) {
	began := time.Now()
	// The checks run on connections of their own while the plan is read:
	// both only read, and with the source far away each of their queries
	// is a round trip, as is each of pg_dump's. Checks that fail cancel
	// the plan and are what is reported.
	planCtx, cancelPlan := context.WithCancel(ctx)
	defer cancelPlan()
	checked := make(chan []CheckItem, 1)
	go func() {
		failed := Preflight(ctx, j.opts, false).Failed()
		if len(failed) > 0 {
			cancelPlan()
		}
		checked <- failed
	}()
	bp, err := j.planBootstrap(planCtx, force)
	if failed := <-checked; len(failed) > 0 {
		return nil, fmt.Errorf("%w: %d (pgsync check lists them all): %s", ErrChecks, len(failed), FailedItems(failed))
	}
	if err != nil {
		return nil, err
	}
	rep := &BootstrapReport{Job: j.opts.Job, Mode: bp.plan.Mode, Kept: bp.kept}
	if bp.plan.Mode == Resume {
		rep.StreamFrom = bp.rec.LSN
	}
	// Every check passed: from here on each step records what it did.
	j.log.Info("bootstrap", "job", j.opts.Job, "mode", bp.plan.Mode.String(), "previous_state", bp.rec.State,
		"tables_to_copy", len(bp.toCopy), "tables_kept", len(rep.Kept), "force", force)
	run := &bootstrapRun{j: j, bp: bp, rep: rep, force: force, progress: progress}
	defer run.close(ctx)
	if err := runSteps(ctx, j.log, "bootstrap", bootstrapSteps(bp.shape(), run)); err != nil {
		return nil, err
	}
	rep.Seconds = time.Since(began).Seconds()
	var rows, bytes int64
	for _, r := range rep.Results {
		rows += r.Rows
		bytes += r.Bytes
	}
	j.log.Info("bootstrap done", "job", j.opts.Job, "mode", bp.plan.Mode.String(), "tables", len(rep.Results), "tables_kept", len(rep.Kept),
		"rows", rows, "bytes", bytes, "seconds", fmt.Sprintf("%.2f", rep.Seconds),
		"mb_per_s", fmt.Sprintf("%.1f", float64(bytes)/1e6/rep.Seconds), "stream_from", rep.StreamFrom.String())
	return rep, nil
}

// bootstrapPlan is what bootstrap reads before it records anything.
type bootstrapPlan struct {
	tables      []catalog.Table
	rec         Recorded
	plan        BootstrapPlan
	kept        []string // tables an interrupted bootstrap copied, kept
	toCopy      []catalog.Table
	unpublished []catalog.Table // of toCopy, those a resumed bootstrap adds to the publication
	tp          targetPlan
	dump        *schemadump.Scope // nil: the built-in creator
	// largeObjects are the source's large objects, copied beside the
	// tables under the same snapshot.
	largeObjects []largeobject.Object
	// archivePending: an interrupted bootstrap recorded pg_dump's archive
	// and some of its post-data objects are not built yet (Resume).
	archivePending bool
	// ddlCapture: job.ddl = "capture" (Options.DDLCapture).
	ddlCapture bool
}

// shape is what decides the bootstrap's steps (bootstrapSteps).
func (bp *bootstrapPlan) shape() bootstrapShape {
	return bootstrapShape{
		mode:         bp.plan.Mode,
		pgDump:       bp.dump != nil,
		archive:      bp.dump != nil || bp.plan.Mode == Resume && bp.archivePending,
		copy:         len(bp.toCopy) > 0,
		unpublished:  len(bp.unpublished) > 0,
		largeObjects: len(bp.largeObjects) > 0,
		ddlCapture:   bp.ddlCapture,
	}
}

// planBootstrap reads, and changes nothing on either server: the job's
// tables, what is recorded of the job, the target's plan and, for a
// target without the job's tables, pg_dump's schema.
func (j *Job) planBootstrap(ctx context.Context, force bool) (*bootstrapPlan, error) {
	if err := pgconnect.ReplicaSession(ctx, j.tgt); err != nil {
		return nil, err
	}
	tables, err := catalog.Resolve(ctx, j.src, j.opts.Tables)
	if err != nil {
		return nil, err
	}
	unlogged, err := catalog.UnloggedMatches(ctx, j.src, j.opts.Tables)
	if err != nil {
		return nil, err
	}
	for _, t := range unlogged {
		j.log.Warn("skipping an UNLOGGED table: logical replication cannot publish it", "table", t.String())
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("no source table matches job.tables %s", strings.Join(j.opts.Tables, ", "))
	}
	rec, err := j.readRecorded(ctx)
	if err != nil {
		return nil, err
	}
	plan, err := PlanBootstrap(rec, force)
	switch {
	case errors.Is(err, ErrAlreadyBootstrapped):
		return nil, fmt.Errorf("job %s: %w (streaming resumes at %s)", j.opts.Job, err, rec.LSN)
	case errors.Is(err, ErrForeignSlot):
		return nil, fmt.Errorf("job %s: %w: %s", j.opts.Job, err, j.names.Slot)
	case err != nil:
		return nil, err
	}
	bp := &bootstrapPlan{tables: tables, rec: rec, plan: plan, ddlCapture: j.opts.DDLCapture}
	if err := j.planTables(ctx, bp); err != nil {
		return nil, err
	}
	if bp.tp, err = j.planTarget(ctx, tablePtrs(bp.toCopy), plan.Owned, plan.EmptyAll); err != nil {
		return nil, err
	}
	if err := j.planSchema(ctx, bp); err != nil {
		return nil, err
	}
	if bp.largeObjects, err = j.planLargeObjects(ctx, plan); err != nil {
		return nil, err
	}
	return bp, nil
}

// planTables splits the job's tables into those an interrupted bootstrap
// copied (kept) and those to copy, and for a resumed bootstrap finds those
// to copy that its publication lacks, and refuses a published table
// job.tables no longer names.
func (j *Job) planTables(ctx context.Context, bp *bootstrapPlan) error {
	matched := make(map[string]bool, len(bp.tables))
	for _, t := range bp.tables {
		matched[t.String()] = true
		if _, ok := bp.plan.Keep[t.String()]; ok {
			bp.kept = append(bp.kept, t.String())
			continue
		}
		bp.toCopy = append(bp.toCopy, t)
	}
	if bp.plan.Mode != Resume {
		return nil
	}
	published, err := replication.PublishedTables(ctx, j.src, j.names.Publication)
	if err != nil {
		return err
	}
	isPublished := make(map[string]bool, len(published))
	for _, p := range published {
		name := p.String()
		isPublished[name] = true
		if !matched[name] {
			return fmt.Errorf("job.tables no longer names %s, published by the interrupted bootstrap: name it again, or start over with bootstrap --force", name)
		}
	}
	for _, t := range bp.toCopy {
		if !isPublished[t.String()] {
			bp.unpublished = append(bp.unpublished, t)
		}
	}
	archive, err := ledger.PendingArchive(ctx, j.tgt, j.opts.Job)
	bp.archivePending = archive != nil
	return err
}

// planLargeObjects reads the source's large objects and refuses, before
// anything is written, those the target could not take (ruleLargeObjects):
// an owner or grantee it lacks, or an object of its own with a source
// object's OID (only --force replaces it; a resumed bootstrap replaces its
// own).
func (j *Job) planLargeObjects(ctx context.Context, plan BootstrapPlan) ([]largeobject.Object, error) {
	objs, found := ruleLargeObjects(ctx, j.src, j.tgt, plan.Mode != Resume && !plan.EmptyAll)
	if found.Status == CheckFail {
		return nil, refusal(found)
	}
	return objs, nil
}

// copyLargeObjects copies the source's large objects that the target
// lacks or holds otherwise, as the snapshot (when not "") shows them, on
// sessions of its own; imported (when not nil) is closed once its session
// holds the snapshot. It runs beside the tables' copy.
func (j *Job) copyLargeObjects(ctx context.Context, snapshotName string, imported chan<- struct{}) (n int, err error) {
	began := time.Now()
	src, err := pgconnect.Connect(ctx, "source", j.opts.SourceURL)
	if err != nil {
		return 0, err
	}
	defer src.Close(context.WithoutCancel(ctx))
	if snapshotName != "" {
		if _, err := src.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
			return 0, err
		}
		if _, err := src.Exec(ctx, "SET TRANSACTION SNAPSHOT "+catalog.QuoteLiteral(snapshotName)); err != nil {
			return 0, fmt.Errorf("large objects: import snapshot %s: %w", snapshotName, err)
		}
	}
	if imported != nil {
		close(imported)
	}
	tgt, err := pgconnect.Connect(ctx, "target", j.opts.TargetURL)
	if err != nil {
		return 0, err
	}
	defer tgt.Close(context.WithoutCancel(ctx))
	stop := j.sayWhile(ctx, "copying the large objects", "when each is copied (each in a transaction of its own: a rerun copies the rest)")
	found, copied, _, err := largeobject.Sync(ctx, src, tgt, j.opts.Job)
	stop()
	if err != nil {
		return copied, err
	}
	j.log.Info("large objects copied", "source", found.Source, "copied", copied, "seconds", fmt.Sprintf("%.2f", time.Since(began).Seconds()))
	return copied, nil
}

// markTables moves tables through ev (NextTableState) and records their
// new state, with the copy position copied.
func (j *Job) markTables(ctx context.Context, tables []catalog.Table, ev ledger.TableEvent, copied pglogrepl.LSN) error {
	if len(tables) == 0 {
		return nil
	}
	rec, err := ledger.ReadTables(ctx, j.tgt, j.opts.Job)
	if err != nil {
		return err
	}
	byState := map[ledger.TableState][]catalog.TableName{}
	for _, t := range tables {
		to, err := ledger.NextTableState(rec[t.String()].State, ev)
		if err != nil {
			return fmt.Errorf("table %s: %w", t.String(), err)
		}
		byState[to] = append(byState[to], t.TableName())
	}
	for state, pairs := range byState {
		if err := ledger.MarkTables(ctx, j.tgt, j.opts.Job, pairs, state, copied); err != nil {
			return err
		}
	}
	return nil
}

// tablePtrs points at each of tables.
func tablePtrs(tables []catalog.Table) []*catalog.Table {
	out := make([]*catalog.Table, len(tables))
	for i := range tables {
		out[i] = &tables[i]
	}
	return out
}
