package job

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	// The reverse job would stream into source.url, a read-only standby.
	if j.opts.SourcePrimaryURL != "" {
		return fmt.Errorf("the way back cannot be set up: %w: source.url is a standby (source.primary_url is set), which cannot take the reverse job's writes; cut over without --reverse", ErrChecks)
	}
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

// createReverseSlot creates the reverse job's publication and slot on the
// target, in place of any left by a cutover killed before it recorded
// them: nothing has written on the target since the goal was reached but
// pgsync, so a new slot misses nothing.
func (r *cutoverRun) createReverseSlot(ctx context.Context) error {
	j := r.j
	if err := replication.Drop(ctx, j.tgt, r.back); err != nil {
		return fmt.Errorf("the reverse job's slot on the target: %w", err)
	}
	if err := replication.CreatePublication(ctx, j.tgt, r.back, r.tables); err != nil {
		return fmt.Errorf("the reverse job's publication on the target: %w", err)
	}
	repl, err := pgconnect.ConnectReplication(ctx, j.opts.TargetURL)
	if err != nil {
		return err
	}
	slot, err := replication.CreateSlot(ctx, repl, r.back)
	repl.Close(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("the reverse job's slot on the target: %w", err)
	}
	r.rec.ReverseFrom = slot.ConsistentPoint
	return nil
}

// establishReverse records the reverse job on the source, ready at its
// slot's consistent point, with the roles this cutover locks there (its
// own cutover, the rollback, unlocks exactly those). A rerun finds it
// recorded already at that point and leaves it.
func (r *cutoverRun) establishReverse(ctx context.Context) error {
	name := r.o.Reverse.Name
	switch p, err := ledger.ReadProgress(ctx, r.j.src, name); {
	case err == nil && p.State == ledger.JobReady && p.LSN == r.rec.ReverseFrom:
		return nil
	case err != nil && !errors.Is(err, ledger.ErrNoProgress):
		return err
	}
	return ledger.Establish(ctx, r.j.src, name, r.rec.ReverseFrom, r.roles)
}

// recordReversed records the job reversed at the goal, with the step, in
// one transaction on the target.
func (r *cutoverRun) recordReversed(ctx context.Context) error {
	next := r.rec
	next.Step, next.LockedRoles, next.ReverseJob = ledger.CutoverReversed, r.roles, r.o.Reverse.Name
	if err := ledger.RecordReversed(ctx, r.j.tgt, r.rec.Step, next); err != nil {
		return err
	}
	r.rec = next
	return nil
}

// endForward drops the job's slot and publication on the source (its run,
// if it streams, is ended): nothing it streams can echo the reverse job's
// writes back.
func (r *cutoverRun) endForward(ctx context.Context) error {
	if err := replication.End(ctx, r.j.src, r.j.names); err != nil {
		return fmt.Errorf("end the job's slot on the source: %w", err)
	}
	return nil
}

// writeReverseConfig writes the reverse job's configuration (a file
// already the reverse job's is left as it is).
func (r *cutoverRun) writeReverseConfig(context.Context) error {
	name := r.o.Reverse.Name
	r.rep.Reverse = &ReverseReport{Job: name, From: r.rec.ReverseFrom}
	if r.o.Reverse.WriteConfig != nil {
		path, err := r.o.Reverse.WriteConfig(name)
		if err != nil {
			return fmt.Errorf("the reverse job %s is recorded, its configuration is not: %w", name, err)
		}
		r.rep.Reverse.Config = path
	}
	r.j.log.Info("the way back is set up", "job", r.j.opts.Job, "reverse_job", name, "from", r.rec.ReverseFrom.String(), "config", r.rep.Reverse.Config)
	return nil
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
