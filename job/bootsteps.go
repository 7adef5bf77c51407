package job

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ddl"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/schemadump"
	"github.com/pgsync/pgsync/snapshot"
)

// bootstrapShape is what decides a bootstrap's steps, read before anything
// is recorded.
type bootstrapShape struct {
	mode BootstrapMode
	// pgDump: the schema comes from pg_dump's archive, else from the
	// built-in creator.
	pgDump bool
	// archive: pg_dump's post-data objects are built after the copy, from
	// this bootstrap's archive or from an interrupted one's.
	archive bool
	// copy: tables are left to copy; unpublished: a resumed bootstrap adds
	// some of them to the publication.
	copy, unpublished bool
	largeObjects      bool
	// ddlCapture: job.ddl = "capture", installed before the slot so that
	// every statement after its consistent point is captured.
	ddlCapture bool
}

// bootstrapSteps is a bootstrap's plan: its steps, in order, for shape,
// bound to r. It only reads sh.
func bootstrapSteps(sh bootstrapShape, r *bootstrapRun) []step {
	var steps []step
	add := func(name, records string, do, record func(context.Context) error) {
		steps = append(steps, step{name: name, records: records, do: do, record: record})
	}
	add("prepare pgsync's tables", "", r.prepareLedger, nil)
	if sh.mode != Resume {
		// Recorded first: a bootstrap killed while it drops what an
		// earlier one left is then seen as unfinished (copying, no
		// position), which the next one starts over, never as ready
		// without its slot.
		add("record the start", "job copying", nil, r.recordStarted)
		add("drop what an earlier bootstrap left", "", r.dropEarlier, nil)
	}
	add("accept the tables", "tables pending", nil, r.acceptTables)
	if sh.pgDump {
		add("restore pg_dump's pre-data", "schema archive", r.restorePreData, r.recordSchema)
	} else {
		add("create the target tables", "", r.createTables, nil)
	}
	add("list the indexes and constraints", "", r.listObjects, nil)
	switch {
	case sh.mode != Resume:
		add("create the publication", "", r.createPublication, nil)
	case sh.unpublished:
		add("publish the tables left", "", r.publishTablesLeft, nil)
	}
	if sh.ddlCapture {
		add("install the DDL capture", "", r.installCapture, nil)
	}
	switch {
	case sh.mode != Resume:
		add("create the job's slot", "job copying at the slot's consistent point", r.createSlot, r.recordConsistentPoint)
	case sh.copy:
		add("create a slot for the tables left", "", r.createSlot, nil)
	}
	if sh.copy {
		add("start the copy", "tables copying", nil, r.markCopying)
		add("copy the tables, their keys and the large objects", "each table ready as its copy commits", r.copyTables, nil)
	} else {
		add("build the indexes and constraints", "", r.buildObjects, nil)
		if sh.largeObjects {
			add("copy the large objects", "each large object copied", r.copyLargeObjectsAsTheyAre, nil)
		}
	}
	if sh.archive {
		add("build pg_dump's post-data objects", "each object built", r.buildPostData, nil)
		add("count the schema's objects", "", r.countSchema, nil)
	}
	add("finish", "job ready", nil, r.recordReady)
	return steps
}

// bootstrapRun is a bootstrap's state while its steps run.
type bootstrapRun struct {
	j        *Job
	bp       *bootstrapPlan
	rep      *BootstrapReport
	force    bool
	progress *snapshot.Progress

	created, parents []*catalog.Table
	schema           *schemaBuilder   // pg_dump's post-data objects to build; nil for none
	objects          []catalog.Object // the built-in creator's indexes and constraints
	repl             *pgconn.PgConn   // holds the slot's exported snapshot
	slot             *replication.Slot
}

// close ends what the steps left open.
func (r *bootstrapRun) close(ctx context.Context) {
	if r.schema != nil {
		r.schema.close()
	}
	if r.repl != nil {
		r.repl.Close(context.WithoutCancel(ctx))
	}
}

func (r *bootstrapRun) prepareLedger(ctx context.Context) error { return ledger.Ensure(ctx, r.j.tgt) }

// dropEarlier drops what an earlier bootstrap of the job left (its slot,
// publication and schema record): this one starts over.
func (r *bootstrapRun) dropEarlier(ctx context.Context) error {
	j := r.j
	if err := j.dropSlotAndPublication(ctx); err != nil {
		return err
	}
	return ledger.DeleteSchema(ctx, j.tgt, j.opts.Job)
}

// recordStarted records the job copying, with no position yet, in place of
// what an earlier bootstrap recorded of it and its tables.
func (r *bootstrapRun) recordStarted(ctx context.Context) error {
	return ledger.StartOver(ctx, r.j.tgt, r.j.opts.Job, r.force)
}

func (r *bootstrapRun) acceptTables(ctx context.Context) error {
	return r.j.markTables(ctx, r.bp.toCopy, ledger.Accepted, 0)
}

func (r *bootstrapRun) restorePreData(ctx context.Context) error {
	d := r.bp.dump
	r.rep.Schema = "pg_dump " + strconv.Itoa(d.Version) + ", " + d.String()
	if err := r.j.restorePreData(ctx, d); err != nil {
		return err
	}
	if err := r.j.emptyExtensionTables(ctx, r.bp.tp.create); err != nil {
		return err
	}
	r.created = r.bp.tp.create
	r.rep.Created = len(r.created)
	return nil
}

func (r *bootstrapRun) recordSchema(ctx context.Context) error {
	return r.bp.dump.Record(ctx, r.j.tgt, r.j.opts.Job)
}

func (r *bootstrapRun) createTables(ctx context.Context) (err error) {
	r.rep.Schema = "built-in"
	r.created, r.parents, err = r.j.prepareTarget(ctx, r.bp.tp)
	r.rep.Created, r.rep.Parents = len(r.created), len(r.parents)
	return err
}

// listObjects finds what is built after the copy: pg_dump's post-data
// objects, recorded by this bootstrap or an interrupted one, in place of
// the built-in creator's indexes and constraints.
func (r *bootstrapRun) listObjects(ctx context.Context) (err error) {
	if r.schema, err = r.j.openSchemaBuilder(ctx); err != nil || r.schema != nil {
		return err
	}
	tables := r.bp.tables
	r.objects, err = r.j.secondaryObjects(ctx, r.j.src, r.j.tgt, tables, toBuild(tables, r.created, r.parents, r.bp.plan.Mode != Fresh))
	return err
}

func (r *bootstrapRun) createPublication(ctx context.Context) error {
	return replication.CreatePublication(ctx, r.j.primary, r.j.names, r.bp.tables)
}

// installCapture installs (or replaces) the job's DDL capture on the
// source (package ddl); check's "ddl capture" item passed.
func (r *bootstrapRun) installCapture(ctx context.Context) error {
	return ddl.Install(ctx, r.j.primary, r.j.opts.Job, r.j.names.Publication, r.j.opts.Tables, r.j.opts.DDLTablePath)
}

func (r *bootstrapRun) publishTablesLeft(ctx context.Context) error {
	return replication.AddToPublication(ctx, r.j.primary, r.j.names, r.bp.unpublished)
}

// createSlot creates the job's slot, or for a resumed bootstrap a
// temporary one whose snapshot the tables left are copied under (the job's
// slot stays where it is).
func (r *bootstrapRun) createSlot(ctx context.Context) (err error) {
	temporary := ""
	if r.bp.plan.Mode == Resume {
		temporary = fmt.Sprintf("pgsync_resume_%d", os.Getpid())
	}
	r.repl, r.slot, err = r.j.createSlot(ctx, temporary, len(r.bp.toCopy))
	return err
}

func (r *bootstrapRun) recordConsistentPoint(ctx context.Context) error {
	r.rep.StreamFrom = r.slot.ConsistentPoint
	_, err := ledger.MoveJob(ctx, r.j.tgt, r.j.opts.Job, ledger.JobCopying, ledger.BootstrapStarted, r.force, r.slot.ConsistentPoint)
	return err
}

func (r *bootstrapRun) markCopying(ctx context.Context) error {
	return r.j.markTables(ctx, r.bp.toCopy, ledger.CopyStarted, 0)
}

// copyTables copies the tables left under the slot's snapshot, each
// recorded ready as it commits, with its keys built as soon as its copy
// commits (keyBuilder) and the large objects copied beside them under the
// same snapshot; then the indexes and constraints not built yet.
func (r *bootstrapRun) copyTables(ctx context.Context) error {
	j, slot := r.j, r.slot
	byName := make(map[string]catalog.TableName, len(r.bp.toCopy))
	for _, t := range r.bp.toCopy {
		byName[t.String()] = t.TableName()
	}
	keys := j.startKeyBuilder(ctx, r.objects, r.schema)
	var mu sync.Mutex
	copied := func(res snapshot.TableResult) error {
		mu.Lock()
		defer mu.Unlock()
		if err := ledger.MarkTables(ctx, j.tgt, j.opts.Job, []catalog.TableName{byName[res.Table]}, ledger.TableReady, slot.ConsistentPoint); err != nil {
			return err
		}
		keys.add(res.Table)
		return nil
	}
	// The large objects' session imports the snapshot before the copy's
	// streams let the exporting connection go.
	loDone := make(chan error, 1)
	if len(r.bp.largeObjects) > 0 {
		loImported := make(chan struct{})
		go func() {
			n, err := j.copyLargeObjects(ctx, slot.SnapshotName, loImported)
			r.rep.LargeObjects = n
			loDone <- err
		}()
		select {
		case <-loImported:
		case err := <-loDone:
			return err
		}
	} else {
		loDone <- nil
	}
	results, _, err := j.copyAndBuild(ctx, slot, r.bp.toCopy, nil, r.progress, copied)
	early := keys.wait()
	loErr := <-loDone
	if err != nil {
		return err
	}
	if loErr != nil {
		return fmt.Errorf("copy large objects: %w: %w", ErrUnfinished, loErr)
	}
	failed, err := j.buildCreated(ctx, remaining(r.objects, early))
	if err != nil {
		return err
	}
	// Built counts those built while the copy ran too.
	r.rep.Results, r.rep.Built, r.rep.Failed = results, len(r.objects), failed
	return nil
}

// buildObjects builds the built-in creator's indexes and constraints of a
// resumed bootstrap with no table left to copy.
func (r *bootstrapRun) buildObjects(ctx context.Context) error {
	if len(r.objects) == 0 {
		return nil
	}
	failed, err := r.j.buildCreated(ctx, r.objects)
	r.rep.Built, r.rep.Failed = len(r.objects), failed
	return err
}

// copyLargeObjectsAsTheyAre copies, for a resumed bootstrap with no table
// left to copy (and so no snapshot), the large objects an interrupted one
// did not copy, as the source has them now: cutover brings them in line
// anyway.
func (r *bootstrapRun) copyLargeObjectsAsTheyAre(ctx context.Context) (err error) {
	if r.rep.LargeObjects, err = r.j.copyLargeObjects(ctx, "", nil); err != nil {
		return fmt.Errorf("copy large objects: %w: %w", ErrUnfinished, err)
	}
	return nil
}

func (r *bootstrapRun) buildPostData(ctx context.Context) error {
	if r.schema == nil {
		return nil
	}
	return r.schema.buildPostData(ctx)
}

// countSchema counts pg_dump's objects from the record, built now or by an
// interrupted run, during the copy or after it: the same on every run.
func (r *bootstrapRun) countSchema(ctx context.Context) (err error) {
	if r.rep.Built, r.rep.Failed, err = schemadump.Counts(ctx, r.j.tgt, r.j.opts.Job); err != nil {
		return err
	}
	if err := schemadump.RefreshMaterializedViews(ctx, r.j.tgt, r.j.log); err != nil {
		r.j.log.Warn("materialized view not refreshed: it stays empty until REFRESH MATERIALIZED VIEW", "err", err)
	}
	return nil
}

func (r *bootstrapRun) recordReady(ctx context.Context) error {
	_, err := ledger.MoveJob(ctx, r.j.tgt, r.j.opts.Job, ledger.JobCopying, ledger.BootstrapDone, r.force, r.rep.StreamFrom)
	return err
}

// createSlot creates the job's slot, or the temporary slot named
// temporary when set, on a replication connection of its own, saying what
// the creation waits for while it waits. The connection stays open for
// the caller to close: it holds the slot's exported snapshot.
func (j *Job) createSlot(ctx context.Context, temporary string, tables int) (*pgconn.PgConn, *replication.Slot, error) {
	repl, err := pgconnect.ConnectReplication(ctx, j.opts.SourceURL)
	if err != nil {
		return nil, nil, err
	}
	stop := j.announceSlotWait(ctx, j.names.Slot, repl.PID())
	stopLogging := j.logStandbySnapshots(ctx)
	var slot *replication.Slot
	if temporary != "" {
		slot, err = replication.CreateTemporarySlot(ctx, repl, temporary)
	} else {
		slot, err = replication.CreateSlot(ctx, repl, j.names)
	}
	stopLogging()
	stop()
	if err != nil {
		repl.Close(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	j.log.Info("slot created", "temporary", temporary != "", "consistent_point", slot.ConsistentPoint.String(), "snapshot", slot.SnapshotName, "tables", tables)
	return repl, slot, nil
}
