package job

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/replication"
)

// The way back (issue 24): cutover --reverse ends the job at the cutover
// position and, before it reports the target ready, sets up the reverse
// job: a publication and a slot on the target, and the reverse job
// recorded ready at that slot's consistent point on the old source, which
// becomes its target. No write on the new primary is missed (the slot
// exists before the application is told to write there) and none is
// applied twice (the old source has every change up to the cutover
// position, and the forward slot is gone, so nothing echoes back).

// ReverseName is the name of job's reverse job: <job>_back, or for a job
// named <x>_back, x again (the way forward after a rollback).
func ReverseName(job string) string {
	if x, ok := strings.CutSuffix(job, "_back"); ok && x != "" {
		return x
	}
	return job + "_back"
}

// ReverseOptions are cutover --reverse's.
type ReverseOptions struct {
	// Name is the reverse job's name (ReverseName by default).
	Name string
	// CheckConfig says, before anything is done, whether the reverse
	// job's configuration can be written; WriteConfig writes it once the
	// reverse job is recorded and returns its path.
	CheckConfig func(name string) error
	WriteConfig func(name string) (string, error)
}

// reverseOptions are the options of the reverse job named name: source
// and target swapped, the same tables.
func (o Options) reverseOptions(name string) Options {
	r := o
	r.Job, r.Slot = name, "pgsync_"+name
	r.SourceURL, r.TargetURL = o.TargetURL, o.SourceURL
	return r
}

// PreflightReverse is check --reverse: whether the reverse job named name
// could stream from the target back to the source. Its items are those of
// check for the reverse job (the target's wal_level, slots and senders,
// REPLICATION and the right to publish the tables there; the source's
// pgsync schema and session_replication_role; a key or replica identity
// for every table), prefixed "reverse", and whether the source holds a
// job of that name that is not a reversed one.
func PreflightReverse(ctx context.Context, opts Options, name string) Checks {
	rev := opts.reverseOptions(name)
	c := Preflight(ctx, rev, false)
	for i := range c {
		c[i].Item = "reverse " + c[i].Item
	}
	if len(name) > 56 || name == "" {
		c.add("reverse job", CheckFail, fmt.Sprintf("job name %q is too long for a slot name (56 characters)", name), "name the reverse job with --reverse-job")
	}
	old, err := pgconnect.Connect(ctx, "source", opts.SourceURL)
	if err != nil {
		return c // the source's FAIL is among the items already
	}
	defer old.Close(context.WithoutCancel(ctx))
	switch st, err := ledger.EstablishState(ctx, old, name); {
	case err != nil:
		c.add("reverse job", CheckFail, OneLine(err.Error()), "")
	case st == ledger.JobNone || st == ledger.JobReversed:
		c.add("reverse job", CheckOK, fmt.Sprintf("job %s can be recorded on the source (state %s)", name, st), "")
	default:
		c.add("reverse job", CheckFail, fmt.Sprintf("the source already has a job %s in state %s", name, st),
			"name the reverse job with --reverse-job, or tear that job down first")
	}
	return c
}

// checkReverse refuses cutover --reverse, before the source is locked,
// when the reverse job could not be set up.
func (j *Job) checkReverse(ctx context.Context, r *ReverseOptions) error {
	if failed := PreflightReverse(ctx, j.opts, r.Name).Failed(); len(failed) > 0 {
		return fmt.Errorf("the way back cannot be set up: %w: %d (pgsync check --reverse lists them all): %s", ErrChecks, len(failed), FailedItems(failed))
	}
	if r.CheckConfig != nil {
		if err := r.CheckConfig(r.Name); err != nil {
			return fmt.Errorf("%w: %w", ErrChecks, err)
		}
	}
	return nil
}

// ReverseReport is what cutover --reverse set up.
type ReverseReport struct {
	Job string `json:"job"`
	// From is the reverse job's slot's consistent point on the target:
	// its run streams from there.
	From   pglogrepl.LSN `json:"from"`
	Config string        `json:"config"`
}

// setUpReverse ends the job at position at and sets up the reverse job.
// Each step records only once it has done its work: the forward slot and
// publication are ended first (so nothing streams into the target any
// more), then the job is recorded reversed, then the reverse publication
// and slot are created on the target (any left by an interrupted attempt
// replaced), the reverse job is recorded on the source, and its
// configuration written. A rerun of cutover --reverse on the reversed job
// does the steps after the first two again.
func (j *Job) setUpReverse(ctx context.Context, r *ReverseOptions, tables []catalog.Table, at pglogrepl.LSN, locked []string) (*ReverseReport, error) {
	prog, err := ledger.ReadProgress(ctx, j.tgt, j.opts.Job)
	if err != nil {
		return nil, err
	}
	if prog.State != ledger.JobReversed {
		if err := replication.End(ctx, j.src, j.names); err != nil {
			return nil, fmt.Errorf("end the job's slot on the source: %w", err)
		}
		if _, err := ledger.MoveJob(ctx, j.tgt, j.opts.Job, prog.State, ledger.Reversed, false, at); err != nil {
			return nil, err
		}
	}
	back := replication.Names{Job: r.Name, Slot: "pgsync_" + r.Name, Publication: "pgsync_" + r.Name}
	if err := replication.Drop(ctx, j.tgt, back); err != nil {
		return nil, fmt.Errorf("the reverse job's slot on the target: %w", err)
	}
	if err := replication.CreatePublication(ctx, j.tgt, back, tables); err != nil {
		return nil, fmt.Errorf("the reverse job's publication on the target: %w", err)
	}
	repl, err := pgconnect.ConnectReplication(ctx, j.opts.TargetURL)
	if err != nil {
		return nil, err
	}
	slot, err := replication.CreateSlot(ctx, repl, back)
	repl.Close(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("the reverse job's slot on the target: %w", err)
	}
	if err := ledger.Establish(ctx, j.src, r.Name, slot.ConsistentPoint, locked); err != nil {
		return nil, err
	}
	rep := &ReverseReport{Job: r.Name, From: slot.ConsistentPoint}
	if r.WriteConfig != nil {
		if rep.Config, err = r.WriteConfig(r.Name); err != nil {
			return rep, fmt.Errorf("the reverse job %s is recorded, its configuration is not: %w", r.Name, err)
		}
	}
	j.log.Info("the way back is set up", "job", j.opts.Job, "reverse_job", r.Name, "from", slot.ConsistentPoint.String(), "config", rep.Config)
	return rep, nil
}

// unlockRecorded gives back their writes on the target to the roles the
// cutover that made this job locked there (a reverse job's: the old
// source's application roles), and forgets them. It returns them.
func (j *Job) unlockRecorded(ctx context.Context) ([]string, error) {
	roles, err := ledger.LockedRoles(ctx, j.tgt, j.opts.Job)
	if err != nil || len(roles) == 0 {
		return nil, err
	}
	if err := unlockRoles(ctx, j.tgt, roles); err != nil {
		return nil, err
	}
	if err := ledger.ForgetLockedRoles(ctx, j.tgt, j.opts.Job); err != nil {
		return nil, err
	}
	j.log.Info("target unlocked for the roles the forward cutover locked", "roles", strings.Join(roles, ","))
	return roles, nil
}

// unlockRoles undoes cutover's lock for roles on conn: they may write there
// again (new sessions).
func unlockRoles(ctx context.Context, conn *pgx.Conn, roles []string) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, role := range roles {
			if _, err := tx.Exec(ctx, "ALTER ROLE "+catalog.QuoteIdent(role)+" RESET default_transaction_read_only"); err != nil {
				return fmt.Errorf("unlock role %s: %w", role, err)
			}
		}
		return nil
	})
}

// resumeReverse finishes the way back of a job an interrupted cutover
// --reverse already recorded reversed: there is nothing to wait for (its
// slot is gone), only the reverse job to set up. done is false for a job
// that is not reversed.
func (j *Job) resumeReverse(ctx context.Context, r *ReverseOptions, rep *CutoverReport, ready func(*CutoverReport)) (done bool, err error) {
	prog, err := ledger.ReadProgress(ctx, j.tgt, j.opts.Job)
	if err != nil || prog.State != ledger.JobReversed {
		return false, nil // the cutover's own reads say what is wrong
	}
	if err := j.checkReverse(ctx, r); err != nil {
		return true, err
	}
	tables, err := catalog.Resolve(ctx, j.src, j.opts.Tables)
	if err != nil {
		return true, err
	}
	j.log.Info("the job was reversed by an interrupted cutover --reverse: setting up the way back", "job", j.opts.Job, "at", prog.LSN.String())
	if rep.Reverse, err = j.setUpReverse(ctx, r, tables, prog.LSN, nil); err != nil {
		return true, err
	}
	rep.Resumed, rep.SourceLSN, rep.AppliedLSN = true, prog.LSN.String(), prog.LSN.String()
	rep.ReadyAt = time.Now().UTC()
	if ready != nil {
		ready(rep)
	}
	return true, nil
}
