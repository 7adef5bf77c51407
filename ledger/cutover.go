package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// A cutover changes two servers (roles locked on the source, a reverse
// job recorded there, the forward slot dropped) and is killed, like any
// command, between any two of its statements. Its progress is the job's
// row of pgsync.cutovers on the target: each step records what it made
// true before the next one runs, so that a rerun starts from the first
// step not recorded, and a rerun of a finished cutover changes nothing.

// CutoverStep is how far a job's cutover got: its row of pgsync.cutovers.
type CutoverStep string

// Cutover steps, in the order a cutover records them.
const (
	// CutoverNone: no cutover of the job changed anything yet.
	CutoverNone CutoverStep = ""
	// CutoverStarted: the roles to lock are recorded; some of them may be
	// locked already (the lock commits before its record).
	CutoverStarted CutoverStep = "started"
	// CutoverLocked: the roles are locked on the source and their
	// sessions have ended: no write of theirs commits there any more.
	CutoverLocked CutoverStep = "locked"
	// CutoverReached: the target has every change up to Goal.
	CutoverReached CutoverStep = "reached"
	// CutoverReverseSlot: the reverse job's publication and slot exist on
	// the target, the slot at ReverseFrom.
	CutoverReverseSlot CutoverStep = "reverse slot"
	// CutoverReverseRecorded: the reverse job is recorded ready at
	// ReverseFrom on the source.
	CutoverReverseRecorded CutoverStep = "reverse recorded"
	// CutoverReversed: the job is recorded reversed (pgsync.progress, in
	// the same transaction): its run applies nothing more.
	CutoverReversed CutoverStep = "reversed"
	// CutoverForwardEnded: the job's slot and publication are dropped on
	// the source.
	CutoverForwardEnded CutoverStep = "forward ended"
	// CutoverReady: the target was reported ready for the application's
	// writes, at ReadyAt.
	CutoverReady CutoverStep = "ready"
	// CutoverDone: the comparison at Goal is over (pgsync.verifications
	// has its outcome), or was given up by a rerun after ready.
	CutoverDone CutoverStep = "done"
)

var cutoverOrder = []CutoverStep{CutoverNone, CutoverStarted, CutoverLocked, CutoverReached, CutoverReverseSlot,
	CutoverReverseRecorded, CutoverReversed, CutoverForwardEnded, CutoverReady, CutoverDone}

// rank is the step's place in cutoverOrder; -1 for a step this release
// does not know.
func (s CutoverStep) rank() int { return slices.Index(cutoverOrder, s) }

// Before reports whether step s comes before step t: a cutover recorded
// at s has not done t yet.
func (s CutoverStep) Before(t CutoverStep) bool { return s.rank() < t.rank() }

// String names the step as status prints it.
func (s CutoverStep) String() string {
	if s == CutoverNone {
		return "none"
	}
	return string(s)
}

// NextCutoverStep checks that a cutover recorded at from may record to:
// steps only move forward (a step recorded again, by a rerun that did it
// again, is allowed), and a step this release does not know is refused.
func NextCutoverStep(from, to CutoverStep) (CutoverStep, error) {
	if from.rank() < 0 || to.rank() < 0 || to.rank() < from.rank() || to == CutoverNone {
		return from, fmt.Errorf("cutover step %q after %q: %w", to, from, ErrTransition)
	}
	return to, nil
}

// Cutover is a job's row of pgsync.cutovers.
type Cutover struct {
	Job  string
	Step CutoverStep
	// LockedRoles are the roles the cutover locks on the source, recorded
	// before the first of them is locked.
	LockedRoles []string
	// Goal is the source's position the target must reach, read once the
	// roles were locked (0 before CutoverReached).
	Goal pglogrepl.LSN
	// ReverseJob is the reverse job's name, "" without --reverse;
	// ReverseFrom its slot's consistent point (0 before
	// CutoverReverseSlot).
	ReverseJob  string
	ReverseFrom pglogrepl.LSN
	StartedAt   time.Time
	// ReadyAt is when the target was reported ready (zero before).
	ReadyAt time.Time
}

// ReadCutover returns job's cutover record; one at CutoverNone when there
// is none.
func ReadCutover(ctx context.Context, conn Querier, job string) (Cutover, error) {
	c := Cutover{Job: job}
	if exists, err := hasTable(ctx, conn, "cutovers"); err != nil || !exists {
		return c, err
	}
	var goal, from *pglogrepl.LSN
	var reverse *string
	var ready *time.Time
	err := conn.QueryRow(ctx, `SELECT step, locked_roles, goal, reverse_job, reverse_from, started_at, ready_at
FROM pgsync.cutovers WHERE job = $1`, job).Scan(&c.Step, &c.LockedRoles, &goal, &reverse, &from, &c.StartedAt, &ready)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Cutover{Job: job}, nil
	case err != nil:
		return c, fmt.Errorf("read pgsync.cutovers for job %s: %w", job, err)
	}
	if goal != nil {
		c.Goal = *goal
	}
	if from != nil {
		c.ReverseFrom = *from
	}
	if reverse != nil {
		c.ReverseJob = *reverse
	}
	if ready != nil {
		c.ReadyAt = *ready
	}
	if c.Step.rank() < 0 {
		return c, fmt.Errorf("job %s: pgsync.cutovers records step %q, which this release does not know: %w", job, c.Step, ErrTransition)
	}
	return c, nil
}

// RecordCutover records c, whose Step is the step the cutover just
// made true, over the record at step from (NextCutoverStep). The ledger
// is at the latest version (Ensure or Upgrade).
func RecordCutover(ctx context.Context, conn Execer, from CutoverStep, c Cutover) error {
	if _, err := NextCutoverStep(from, c.Step); err != nil {
		return fmt.Errorf("job %s: %w", c.Job, err)
	}
	roles := c.LockedRoles
	if roles == nil {
		roles = []string{}
	}
	var goal, revFrom *pglogrepl.LSN
	if c.Goal != 0 {
		goal = &c.Goal
	}
	if c.ReverseFrom != 0 {
		revFrom = &c.ReverseFrom
	}
	var reverse *string
	if c.ReverseJob != "" {
		reverse = &c.ReverseJob
	}
	var ready *time.Time
	if !c.ReadyAt.IsZero() {
		ready = &c.ReadyAt
	}
	_, err := conn.Exec(ctx, `INSERT INTO pgsync.cutovers (job, step, locked_roles, goal, reverse_job, reverse_from, ready_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (job) DO UPDATE SET step = excluded.step, locked_roles = excluded.locked_roles, goal = excluded.goal,
  reverse_job = excluded.reverse_job, reverse_from = excluded.reverse_from, ready_at = excluded.ready_at, updated_at = now()`,
		c.Job, string(c.Step), roles, goal, reverse, revFrom, ready)
	if err != nil {
		return fmt.Errorf("record step %q of the cutover of job %s: %w", c.Step, c.Job, err)
	}
	return nil
}

// RecordReversed records c's job reversed at c.Goal (NextJobState) and
// its cutover at c.Step (CutoverReversed), over the record at step from,
// in one transaction: a rerun never sees one without the other.
func RecordReversed(ctx context.Context, conn *pgx.Conn, from CutoverStep, c Cutover) error {
	prog, err := ReadProgress(ctx, conn, c.Job)
	if err != nil {
		return err
	}
	lsn := c.Goal
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if prog.State != JobReversed {
			if _, err := MoveJob(ctx, tx, c.Job, prog.State, Reversed, false, lsn); err != nil {
				return err
			}
		}
		return RecordCutover(ctx, tx, from, c)
	})
}

// ForgetCutover deletes job's cutover record: the roles it locked were
// given back their writes, so the next cutover starts from the beginning.
func ForgetCutover(ctx context.Context, conn Execer, job string) error {
	return deleteJobRows(ctx, conn, "cutovers", job)
}
