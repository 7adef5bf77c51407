package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/replication"
)

// cutoverShape is what decides a cutover's steps: the step its record is
// at and what this cutover does. Read before anything is written.
type cutoverShape struct {
	from ledger.CutoverStep
	// lock: roles are (or are to be) locked on the source; reverse: the
	// way back is set up.
	lock, reverse bool
}

// keep says whether the cutover records its steps: once it has locked a
// role or reversed the job, a kill leaves something only a rerun can
// finish. A cutover that does neither changes nothing a rerun could
// misread, and a rerun does it all again.
func (sh cutoverShape) keep() bool { return sh.lock || sh.reverse }

// ErrCutoverFlags: a rerun of an interrupted or finished cutover was given
// flags that disagree with what that cutover recorded.
var ErrCutoverFlags = errors.New("the flags differ from the recorded cutover's")

// planCutover returns the shape of a cutover asked for with o, over the
// record rec, or refuses (ErrCutoverFlags) a rerun whose flags disagree
// with what is recorded. It only reads its arguments.
func planCutover(rec ledger.Cutover, o CutoverOptions) (cutoverShape, error) {
	sh := cutoverShape{from: rec.Step, lock: len(rec.LockedRoles) > 0 || len(o.LockRoles) > 0, reverse: o.Reverse != nil}
	if rec.Step == ledger.CutoverNone {
		return sh, nil
	}
	reverseName := ""
	if o.Reverse != nil {
		reverseName = o.Reverse.Name
	}
	switch {
	case rec.ReverseJob != "" && reverseName == "" && !rec.Step.Before(ledger.CutoverReversed):
		return sh, fmt.Errorf("job %s (cutover --reverse to job %s at %s, step %q): %w", rec.Job, rec.ReverseJob, rec.Goal, rec.Step, ErrJobReversed)
	case rec.ReverseJob != "" && reverseName != rec.ReverseJob:
		return sh, fmt.Errorf("the cutover of job %s recorded at step %q sets up the way back as job %s: rerun pgsync cutover --reverse (--reverse-job %s): %w",
			rec.Job, rec.Step, rec.ReverseJob, rec.ReverseJob, ErrCutoverFlags)
	case rec.ReverseJob == "" && reverseName != "" && !rec.Step.Before(ledger.CutoverReady):
		return sh, fmt.Errorf("the cutover of job %s was reported ready at %s without --reverse, and the target may have taken writes since: the way back set up now would miss them; bootstrap a job from the target to the source instead: %w",
			rec.Job, rec.ReadyAt.Format("2006-01-02T15:04:05Z07:00"), ErrCutoverFlags)
	}
	if !rec.Step.Before(ledger.CutoverLocked) {
		if extra := rolesNotIn(o.LockRoles, rec.LockedRoles); len(extra) > 0 {
			return sh, fmt.Errorf("the cutover of job %s locked role(s) %s and read its goal at step %q; role(s) %s would be locked after it: rerun with --lock-source %s: %w",
				rec.Job, strings.Join(rec.LockedRoles, ", "), rec.Step, strings.Join(extra, ", "), strings.Join(rec.LockedRoles, ","), ErrCutoverFlags)
		}
	}
	return sh, nil
}

// rolesNotIn returns the roles of roles that are not in of.
func rolesNotIn(roles, of []string) []string {
	var out []string
	for _, r := range roles {
		if !slices.Contains(of, r) {
			out = append(out, r)
		}
	}
	return out
}

// cutoverSteps is a cutover's plan: its steps from the first one not
// recorded, in order, for shape sh, bound to r. It only reads sh. The
// reverse job is recorded before the forward slot is dropped, so that a
// kill between the two leaves a job the rerun can end, never a job without
// its slot and nothing to stream from.
func cutoverSteps(sh cutoverShape, r *cutoverRun) []step {
	var steps []step
	add := func(name, records string, do, record func(context.Context) error) {
		steps = append(steps, step{name: name, records: records, do: do, record: record})
	}
	from := sh.from
	if from == ledger.CutoverDone {
		add("report the finished cutover", "", r.reportDone, nil)
		return steps
	}
	if from.Before(ledger.CutoverLocked) {
		add("check the lag and the way back", "", r.check, nil)
	}
	add("read the job's tables", "", r.readTables, nil)
	if from.Before(ledger.CutoverReady) {
		// Opened before the lock: the write gap does not include them.
		add("open the comparison's sessions", "", r.openViews, nil)
	}
	if sh.keep() && from == ledger.CutoverNone {
		add("record the start", "cutover started, with the roles to lock", nil, r.recordStep(ledger.CutoverStarted))
	}
	if sh.lock && from.Before(ledger.CutoverLocked) {
		add("lock the source", "cutover locked", r.lock, r.recordStep(ledger.CutoverLocked))
	}
	if from.Before(ledger.CutoverReached) {
		add("wait for the target", "cutover reached, with the goal", r.wait, r.recordStep(ledger.CutoverReached))
	}
	if from.Before(ledger.CutoverReady) {
		add("copy the large objects", "", r.largeObjects, nil)
		add("hold the comparison's snapshots", "", r.holdSnapshots, nil)
		add("set the sequences", "", r.sequences, nil)
		add("unlock the roles the cutover that made this job locked", "", r.unlockRecorded, nil)
	}
	if sh.reverse {
		if from.Before(ledger.CutoverReverseSlot) {
			add("create the reverse job's slot", "cutover reverse slot", r.createReverseSlot, r.recordStep(ledger.CutoverReverseSlot))
		}
		if from.Before(ledger.CutoverReverseRecorded) {
			add("record the reverse job on the source", "cutover reverse recorded", r.establishReverse, r.recordStep(ledger.CutoverReverseRecorded))
		}
		if from.Before(ledger.CutoverReversed) {
			add("record the job reversed", "job reversed", nil, r.recordReversed)
		}
		if from.Before(ledger.CutoverForwardEnded) {
			add("end the job's slot on the source", "cutover forward ended", r.endForward, r.recordStep(ledger.CutoverForwardEnded))
		}
		if from.Before(ledger.CutoverReady) {
			add("write the reverse job's configuration", "", r.writeReverseConfig, nil)
		}
	}
	if from.Before(ledger.CutoverReady) {
		add("report ready", "cutover ready", r.readyAt, r.recordReady)
		add("compare at the cutover position", "cutover done", r.compare, r.recordStep(ledger.CutoverDone))
	} else {
		// Killed while it compared: the snapshots are gone and the
		// application may write on the target; pgsync verify compares.
		add("give up the interrupted comparison", "cutover done", r.comparisonInterrupted, r.recordStep(ledger.CutoverDone))
	}
	return steps
}

// cutoverRun is one cutover's state, shared by its steps.
type cutoverRun struct {
	j     *Job
	o     CutoverOptions
	rep   *CutoverReport
	sh    cutoverShape
	rec   ledger.Cutover // as recorded so far
	roles []string       // the roles to lock: the recorded ones and o's

	tables           []catalog.Table
	srcView, tgtView *pgx.Conn
	back             replication.Names
	// found is what the comparison found different ("" when nothing):
	// returned as ErrTablesDiffer once the step is recorded.
	found string
}

// recordStep returns a step's record of s, when the cutover keeps its
// records.
func (r *cutoverRun) recordStep(s ledger.CutoverStep) func(context.Context) error {
	return func(ctx context.Context) error {
		if !r.sh.keep() {
			return nil
		}
		next := r.rec
		next.Step, next.LockedRoles = s, r.roles
		if r.sh.reverse {
			next.ReverseJob = r.o.Reverse.Name
		}
		if err := ledger.RecordCutover(ctx, r.j.tgt, r.rec.Step, next); err != nil {
			return err
		}
		r.rec = next
		return nil
	}
}

// closeViews ends the comparison's sessions.
func (r *cutoverRun) closeViews(ctx context.Context) {
	for _, c := range []*pgx.Conn{r.srcView, r.tgtView} {
		if c != nil {
			c.Close(context.WithoutCancel(ctx))
		}
	}
}
