package ledger

import (
	"errors"
	"fmt"
)

// The job's states are its row of pgsync.progress (none, copying, ready);
// each table's are its row of pgsync.tables (none, pending, copying, ready,
// removed). The functions below are the only rules that move between
// them. A state is recorded only after the step that makes it true
// succeeded, and never by a step that refused.

// JobState is a job's state: its row of pgsync.progress.
type JobState string

// Job states.
const (
	// JobNone: the target has no row for the job.
	JobNone JobState = ""
	// JobCopying marks a bootstrap that has not finished its copy: a rerun
	// of bootstrap resumes it or starts it over.
	JobCopying JobState = "copying"
	// JobReady marks a bootstrapped job: pgsync run streams from its LSN.
	JobReady JobState = "ready"
	// JobReversed marks a job that cutover --reverse ended: its slot is
	// gone, and its target is the source of the reverse job.
	JobReversed JobState = "reversed"
)

// String names the state as status prints it.
func (s JobState) String() string {
	if s == JobNone {
		return "not bootstrapped"
	}
	return string(s)
}

// JobEvent is what happens to the job.
type JobEvent string

// Job events.
const (
	// BootstrapStarted: a bootstrap passed its checks and starts writing
	// (fresh, resumed, or started over).
	BootstrapStarted JobEvent = "bootstrap started"
	// BootstrapDone: every table is copied and the keys are built.
	BootstrapDone JobEvent = "bootstrap done"
	// TornDown: teardown removed the job.
	TornDown JobEvent = "torn down"
	// Reversed: cutover --reverse ended the job and set up the reverse
	// one.
	Reversed JobEvent = "reversed"
	// Established: cutover --reverse of the opposite job made this one,
	// ready at its new slot's consistent point (over a job of the same
	// name that was reversed before, when it goes forward again).
	Established JobEvent = "established"
)

// NextJobState returns the state a job in state from moves to on ev. A
// bootstrap starts over a ready job only when forced (PlanBootstrap
// refuses it otherwise, before anything is recorded).
func NextJobState(from JobState, ev JobEvent, force bool) (JobState, error) {
	switch ev {
	case BootstrapStarted:
		if from == JobNone || from == JobCopying || force {
			return JobCopying, nil
		}
	case BootstrapDone:
		if from == JobCopying {
			return JobReady, nil
		}
	case TornDown:
		return JobNone, nil
	case Reversed:
		if from == JobReady || from == JobReversed {
			return JobReversed, nil
		}
	case Established:
		if from == JobNone || from == JobReversed {
			return JobReady, nil
		}
	}
	return from, fmt.Errorf("job in state %q on %s: %w", from, ev, ErrTransition)
}

// TableState is a table's state: its row of pgsync.tables.
type TableState string

// Table states in pgsync.tables: a table of the job's bootstrap or one
// added by add-tables.
const (
	// TableNone: the table has no row (a table of the job's bootstrap
	// copied under the job's slot, or one never named).
	TableNone TableState = ""
	// TablePending marks a table whose checks passed and whose copy has not
	// started: run pauses at its first change; its target table holds
	// nothing pgsync copied.
	TablePending TableState = "pending"
	// TableCopying marks a table pgsync is copying (or was, when it was
	// interrupted): run pauses at its first change, and a rerun may empty
	// it without --force, since every row in it is pgsync's.
	TableCopying TableState = "copying"
	// TableReady marks a table copied at its CopiedLSN: run applies its
	// changes from transactions committed at or after it.
	TableReady TableState = "ready"
	// TableRemoved marks a table whose add was abandoned (job.tables no
	// longer names it): run applies none of its changes.
	TableRemoved TableState = "removed"
)

// Waits says whether run must pause at a change of a table in state s: its
// copy is not on the target yet.
func (s TableState) Waits() bool { return s == TablePending || s == TableCopying }

// Owned says whether the rows of a table in state s are pgsync's: a rerun
// may empty it without --force.
func (s TableState) Owned() bool { return s == TableCopying || s == TableReady }

// TableEvent is what happens to one table of the job.
type TableEvent string

// Table events.
const (
	// Accepted: the table's checks passed and its copy is about to be
	// prepared. Recorded before the source publishes the table, so that a
	// running run pauses at its first change.
	Accepted TableEvent = "accepted"
	// CopyStarted: pgsync starts writing into the target table.
	CopyStarted TableEvent = "copy started"
	// Copied: the table's copy is committed on the target.
	Copied TableEvent = "copied"
	// Abandoned: job.tables no longer names a table whose copy never
	// finished.
	Abandoned TableEvent = "abandoned"
)

// ErrTransition is a move the lifecycle does not allow; it means a bug or
// a pgsync table edited by hand.
var ErrTransition = errors.New("transition not allowed")

// NextTableState returns the state a table in state from moves to on ev.
func NextTableState(from TableState, ev TableEvent) (TableState, error) {
	switch ev {
	case Accepted:
		// A table is accepted when it is new, when it was removed and is
		// named again, when an interrupted copy starts over, or when a
		// copied table left the publication and is added again.
		switch from {
		case TableNone, TableRemoved, TablePending, TableCopying, TableReady:
			return TablePending, nil
		}
	case CopyStarted:
		if from == TablePending {
			return TableCopying, nil
		}
	case Copied:
		if from == TableCopying {
			return TableReady, nil
		}
	case Abandoned:
		if from.Waits() {
			return TableRemoved, nil
		}
	}
	return from, fmt.Errorf("table in state %q on %s: %w", from, ev, ErrTransition)
}
