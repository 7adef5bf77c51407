package job

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"

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
	if _, err := ledger.ReadReady(ctx, j.tgt, j.opts.Job); err != nil {
		return nil, err
	}
	slot, err := replication.Status(ctx, j.src, j.names)
	if err != nil {
		return nil, err
	}
	if !slot.Exists {
		return nil, fmt.Errorf("job %s: %w", j.opts.Job, replication.ErrSlotMissing)
	}
	published, err := replication.PublishedTables(ctx, j.src, j.names.Publication)
	if err != nil {
		return nil, err
	}
	isPublished := make(map[string]bool, len(published))
	for _, p := range published {
		isPublished[p[0]+"."+p[1]] = true
	}
	matched, err := catalog.Resolve(ctx, j.src, j.opts.Tables)
	if err != nil {
		return nil, err
	}
	recorded, err := ledger.ReadTables(ctx, j.tgt, j.opts.Job)
	if err != nil {
		return nil, err
	}
	rep := &AddTablesReport{Job: j.opts.Job}
	// New: named and not published, or published by an add that did not
	// finish its copy.
	var fresh, unpublished []catalog.Table
	owned := map[string]bool{}
	isMatched := make(map[string]bool, len(matched))
	for _, t := range matched {
		isMatched[t.String()] = true
		state := recorded[t.String()].State
		switch {
		case !isPublished[t.String()]:
			fresh, unpublished = append(fresh, t), append(unpublished, t)
			owned[t.String()] = state == ledger.TableCopying || state == ledger.TableReady
		case state.Waits():
			fresh = append(fresh, t)
			owned[t.String()] = state == ledger.TableCopying
		}
	}
	var abandoned []catalog.Table
	for name, t := range recorded {
		if t.State.Waits() && !isMatched[name] {
			abandoned = append(abandoned, catalog.Table{Schema: t.Schema, Name: t.Name})
		}
	}
	for _, p := range published {
		name := p[0] + "." + p[1]
		if !isMatched[name] && !recorded[name].State.Waits() {
			rep.Unmatched = append(rep.Unmatched, name)
		}
	}
	slices.Sort(rep.Unmatched)
	if len(rep.Unmatched) > 0 {
		j.log.Warn("published tables no longer match job.tables; they stay in the job (not dropped)", "tables", rep.Unmatched)
	}
	// Every check comes before the first write: a refused add-tables
	// records nothing, not even the removals.
	var tp targetPlan
	if len(fresh) > 0 {
		if failed := Preflight(ctx, j.opts, false).Failed(); len(failed) > 0 {
			return nil, fmt.Errorf("%w: %d (pgsync check lists them all): %s", ErrChecks, len(failed), FailedItems(failed))
		}
		if err := pgconnect.ReplicaSession(ctx, j.tgt); err != nil {
			return nil, err
		}
		if tp, err = j.planTarget(ctx, tablePtrs(fresh), owned, force); err != nil {
			return nil, err
		}
		if err := j.checkUncreatable(ctx, tp); err != nil {
			return nil, err
		}
	}
	if len(abandoned) > 0 {
		if err := j.removeAbandoned(ctx, abandoned, isPublished); err != nil {
			return nil, err
		}
		for _, t := range abandoned {
			rep.Removed = append(rep.Removed, t.String())
		}
		slices.Sort(rep.Removed)
	}
	if len(fresh) == 0 {
		return rep, nil
	}
	// Every check passed. Recorded before the source publishes the
	// tables: a running run pauses at a table's first change until the
	// copy is recorded below.
	if err := ledger.Ensure(ctx, j.tgt); err != nil {
		return nil, err
	}
	if err := j.markTables(ctx, fresh, ledger.Accepted, 0); err != nil {
		return nil, err
	}
	created, parents, err := j.prepareTarget(ctx, tp)
	if err != nil {
		return nil, err
	}
	objects, err := j.secondaryObjects(ctx, j.src, j.tgt, fresh, toBuild(fresh, created, parents, len(owned) > 0))
	if err != nil {
		return nil, err
	}
	if len(unpublished) > 0 {
		if err := replication.AddToPublication(ctx, j.src, j.names, unpublished); err != nil {
			return nil, err
		}
	}
	// The slot is created after the publication took the tables: it waits
	// for the transactions running then, so a transaction that changed a
	// table before it was published ends before the consistent point and is
	// in the copy; every later one is streamed by the job's slot.
	repl, err := pgconnect.ConnectReplication(ctx, j.opts.SourceURL)
	if err != nil {
		return nil, err
	}
	defer repl.Close(context.WithoutCancel(ctx))
	stop := j.announceSlotWait(ctx, j.names.Slot, repl.PID())
	tmp, err := replication.CreateTemporarySlot(ctx, repl, fmt.Sprintf("pgsync_add_%d", os.Getpid()))
	stop()
	if err != nil {
		return nil, err
	}
	if err := j.markTables(ctx, fresh, ledger.CopyStarted, 0); err != nil {
		return nil, err
	}
	// The tables become ready together, once their indexes are built too:
	// run applies nothing to them before their keys exist.
	results, failed, err := j.copyAndBuild(ctx, tmp, fresh, objects, &snapshot.Progress{}, nil)
	if err != nil {
		return nil, err
	}
	rep.Failed = failed
	if err := j.markTables(ctx, fresh, ledger.Copied, tmp.ConsistentPoint); err != nil {
		return nil, err
	}
	rep.Results, rep.CopiedAt, rep.Seconds = results, tmp.ConsistentPoint, time.Since(began).Seconds()
	j.log.Info("tables added", "job", j.opts.Job, "tables", len(results), "copied_at", tmp.ConsistentPoint.String(), "seconds", fmt.Sprintf("%.2f", rep.Seconds))
	return rep, nil
}

// removeAbandoned takes the tables of an abandoned add out of the
// publication, then records them as removed.
func (j *Job) removeAbandoned(ctx context.Context, tables []catalog.Table, isPublished map[string]bool) error {
	var drop []catalog.Table
	for _, t := range tables {
		if isPublished[t.String()] {
			drop = append(drop, t)
		}
	}
	if len(drop) > 0 {
		if err := replication.DropFromPublication(ctx, j.src, j.names, drop); err != nil {
			return err
		}
	}
	if err := j.markTables(ctx, tables, ledger.Abandoned, 0); err != nil {
		return err
	}
	for _, t := range tables {
		j.log.Warn("removed from the job: job.tables no longer names it and its copy never finished; its partial copy stays on the target", "table", t.String())
	}
	return nil
}
