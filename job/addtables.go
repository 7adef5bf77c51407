package job

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/snapshot"
)

// AddTablesReport is what add-tables did.
type AddTablesReport struct {
	Job      string
	Results  []snapshot.TableResult
	CopiedAt pglogrepl.LSN
	Seconds  float64
	// Removed are the tables of an abandoned add (job.tables no longer
	// names them) taken out of the publication: their partial copy stays
	// on the target, and run applies none of their changes.
	Removed []string
	// Unmatched are published tables job.tables no longer names; they
	// stay in the job.
	Unmatched []string
	// Failed are the indexes and constraints of the added tables that
	// could not be created (each logged as a warning with its error).
	Failed []string
}

// AddTables adds to a ready job the tables job.tables names and its
// publication lacks, and finishes an interrupted add. Tables whose add was
// abandoned (left half copied, then taken out of job.tables) are removed
// from the job. Every check passes before a table is recorded; a table is
// recorded (pending) before the source publishes it, so that a running run
// pauses at its first change until its copy is recorded (ready). force
// empties a new table's target copy even when pgsync did not copy its
// rows.
func (j *Job) AddTables(ctx context.Context, force bool) (*AddTablesReport, error) {
	began := time.Now()
	ap, err := j.planAddTables(ctx, force)
	if err != nil {
		return nil, err
	}
	rep := &AddTablesReport{Job: j.opts.Job, Unmatched: ap.unmatched}
	for _, t := range ap.abandoned {
		rep.Removed = append(rep.Removed, t.String())
	}
	slices.Sort(rep.Removed)
	run := &addTablesRun{j: j, ap: ap, rep: rep}
	defer run.close(ctx)
	if err := runSteps(ctx, j.log, "add-tables", addTablesSteps(ap.shape(), run)); err != nil {
		return nil, err
	}
	if len(ap.fresh) > 0 {
		rep.Seconds = time.Since(began).Seconds()
		j.log.Info("tables added", "job", j.opts.Job, "tables", len(rep.Results), "copied_at", rep.CopiedAt.String(), "seconds", fmt.Sprintf("%.2f", rep.Seconds))
	}
	return rep, nil
}

// addTablesPlan is what add-tables reads and checks before it records
// anything.
type addTablesPlan struct {
	// fresh are the tables to add: named and not published, or published
	// by an add that did not finish its copy; unpublished those of them
	// the publication lacks; owned those whose target rows pgsync copied.
	fresh, unpublished []catalog.Table
	owned              map[string]bool
	// abandoned are the tables of an add whose copy never finished that
	// job.tables no longer names; isPublished says which the publication
	// holds.
	abandoned   []catalog.Table
	isPublished map[string]bool
	// unmatched are published tables job.tables no longer names.
	unmatched []string
	tp        targetPlan
}

// shape is what decides add-tables' steps (addTablesSteps).
func (ap *addTablesPlan) shape() addTablesShape {
	return addTablesShape{abandoned: len(ap.abandoned) > 0, add: len(ap.fresh) > 0, unpublished: len(ap.unpublished) > 0}
}

// planAddTables reads what the source publishes, what job.tables names and
// what the target records, sorts the tables, and runs every check: it
// changes nothing on either server.
func (j *Job) planAddTables(ctx context.Context, force bool) (*addTablesPlan, error) {
	if _, err := ledger.ReadReady(ctx, j.tgt, j.opts.Job); err != nil {
		return nil, err
	}
	if slot, err := replication.Status(ctx, j.src, j.names); err != nil {
		return nil, err
	} else if !slot.Exists {
		return nil, fmt.Errorf("job %s: %w", j.opts.Job, ErrSlotMissing)
	}
	published, err := replication.PublishedTables(ctx, j.src, j.names.Publication)
	if err != nil {
		return nil, err
	}
	matched, err := catalog.Resolve(ctx, j.src, j.opts.Tables)
	if err != nil {
		return nil, err
	}
	recorded, err := ledger.ReadTables(ctx, j.tgt, j.opts.Job)
	if err != nil {
		return nil, err
	}
	ap := sortAddedTables(published, matched, recorded)
	if len(ap.unmatched) > 0 {
		j.log.Warn("published tables no longer match job.tables; they stay in the job (not dropped)", "tables", ap.unmatched)
	}
	// Every check comes before the first write: a refused add-tables
	// records nothing, not even the removals.
	if len(ap.fresh) == 0 {
		return ap, nil
	}
	if failed := Preflight(ctx, j.opts, false).Failed(); len(failed) > 0 {
		return nil, fmt.Errorf("%w: %d (pgsync check lists them all): %s", ErrChecks, len(failed), FailedItems(failed))
	}
	if err := pgconnect.ReplicaSession(ctx, j.tgt); err != nil {
		return nil, err
	}
	if ap.tp, err = j.planTarget(ctx, tablePtrs(ap.fresh), ap.owned, force); err != nil {
		return nil, err
	}
	// The tables to add are made by the built-in creator: the target has
	// the job's other tables (the schema rule of check says the same).
	return ap, j.settle(ruleBuiltinCreator(ctx, j.src, j.tgt, ap.tp.create,
		pgDumpAdvice))
}

// sortAddedTables sorts the tables job.tables names (matched), those the
// publication holds and those the target records into the tables to add,
// those whose add was abandoned, and those published and no longer named.
func sortAddedTables(published []catalog.TableName, matched []catalog.Table, recorded map[string]ledger.Table) *addTablesPlan {
	ap := &addTablesPlan{owned: map[string]bool{}, isPublished: make(map[string]bool, len(published))}
	for _, p := range published {
		ap.isPublished[p.String()] = true
	}
	isMatched := make(map[string]bool, len(matched))
	for _, t := range matched {
		isMatched[t.String()] = true
		state := recorded[t.String()].State
		switch {
		case !ap.isPublished[t.String()]:
			ap.fresh, ap.unpublished = append(ap.fresh, t), append(ap.unpublished, t)
			ap.owned[t.String()] = state.Owned()
		case state.Waits():
			ap.fresh = append(ap.fresh, t)
			ap.owned[t.String()] = state == ledger.TableCopying
		}
	}
	for name, t := range recorded {
		if t.State.Waits() && !isMatched[name] {
			ap.abandoned = append(ap.abandoned, catalog.Table{Schema: t.Schema, Name: t.Name})
		}
	}
	for _, p := range published {
		name := p.String()
		if !isMatched[name] && !recorded[name].State.Waits() {
			ap.unmatched = append(ap.unmatched, name)
		}
	}
	slices.Sort(ap.unmatched)
	return ap
}

// addTablesShape is what decides add-tables' steps.
type addTablesShape struct {
	abandoned, add, unpublished bool
}

// addTablesSteps is add-tables' plan: its steps, in order, for shape,
// bound to r. It only reads sh.
func addTablesSteps(sh addTablesShape, r *addTablesRun) []step {
	var steps []step
	add := func(name, records string, do, record func(context.Context) error) {
		steps = append(steps, step{name: name, records: records, do: do, record: record})
	}
	if sh.abandoned {
		add("take the abandoned tables out of the publication", "tables removed", r.unpublishAbandoned, r.recordAbandoned)
	}
	if !sh.add {
		return steps
	}
	// Recorded before the source publishes the tables: a running run
	// pauses at a table's first change until the copy is recorded.
	add("prepare pgsync's tables", "", r.prepareLedger, nil)
	add("accept the tables", "tables pending", nil, r.acceptTables)
	add("create the target tables", "", r.createTables, nil)
	if sh.unpublished {
		add("publish the tables", "", r.publishTables, nil)
	}
	add("create a slot for the copy", "", r.createSlot, nil)
	add("start the copy", "tables copying", nil, r.markCopying)
	// The tables become ready together, once their indexes are built too:
	// run applies nothing to them before their keys exist.
	add("copy the tables and build their indexes", "tables ready at the slot's consistent point", r.copyTables, r.recordCopied)
	return steps
}

// addTablesRun is add-tables' state while its steps run.
type addTablesRun struct {
	j       *Job
	ap      *addTablesPlan
	rep     *AddTablesReport
	objects []catalog.Object
	repl    *pgconn.PgConn // holds the slot's exported snapshot
	slot    *replication.Slot
}

// close ends what the steps left open.
func (r *addTablesRun) close(ctx context.Context) {
	if r.repl != nil {
		r.repl.Close(context.WithoutCancel(ctx))
	}
}

func (r *addTablesRun) unpublishAbandoned(ctx context.Context) error {
	var drop []catalog.Table
	for _, t := range r.ap.abandoned {
		if r.ap.isPublished[t.String()] {
			drop = append(drop, t)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	return replication.DropFromPublication(ctx, r.j.primary, r.j.names, drop)
}

func (r *addTablesRun) recordAbandoned(ctx context.Context) error {
	if err := r.j.markTables(ctx, r.ap.abandoned, ledger.Abandoned, 0); err != nil {
		return err
	}
	for _, t := range r.ap.abandoned {
		r.j.log.Warn("removed from the job: job.tables no longer names it and its copy never finished; its partial copy stays on the target", "table", t.String())
	}
	return nil
}

func (r *addTablesRun) prepareLedger(ctx context.Context) error { return ledger.Ensure(ctx, r.j.tgt) }

func (r *addTablesRun) acceptTables(ctx context.Context) error {
	return r.j.markTables(ctx, r.ap.fresh, ledger.Accepted, 0)
}

// createTables creates the tables the target lacks and lists the indexes
// and constraints to build after the copy.
func (r *addTablesRun) createTables(ctx context.Context) error {
	j, fresh := r.j, r.ap.fresh
	created, parents, err := j.prepareTarget(ctx, r.ap.tp)
	if err != nil {
		return err
	}
	r.objects, err = j.secondaryObjects(ctx, j.src, j.tgt, fresh, toBuild(fresh, created, parents, len(r.ap.owned) > 0))
	return err
}

func (r *addTablesRun) publishTables(ctx context.Context) error {
	return replication.AddToPublication(ctx, r.j.primary, r.j.names, r.ap.unpublished)
}

// createSlot creates the temporary slot the tables are copied under. It is
// created after the publication took the tables: it waits for the
// transactions running then, so a transaction that changed a table before
// it was published ends before the consistent point and is in the copy;
// every later one is streamed by the job's slot.
func (r *addTablesRun) createSlot(ctx context.Context) (err error) {
	r.repl, r.slot, err = r.j.createSlot(ctx, fmt.Sprintf("pgsync_add_%d", os.Getpid()), len(r.ap.fresh))
	return err
}

func (r *addTablesRun) markCopying(ctx context.Context) error {
	return r.j.markTables(ctx, r.ap.fresh, ledger.CopyStarted, 0)
}

func (r *addTablesRun) copyTables(ctx context.Context) error {
	results, failed, err := r.j.copyAndBuild(ctx, r.slot, r.ap.fresh, r.objects, &snapshot.Progress{}, nil)
	r.rep.Results, r.rep.Failed = results, failed
	return err
}

func (r *addTablesRun) recordCopied(ctx context.Context) error {
	r.rep.CopiedAt = r.slot.ConsistentPoint
	return r.j.markTables(ctx, r.ap.fresh, ledger.Copied, r.slot.ConsistentPoint)
}
