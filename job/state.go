package job

import (
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/apply"
)

// The job's states are its row of pgsync.progress (none, copying, ready);
// each table's are its row of pgsync.tables (none, pending, copying, ready,
// removed). apply owns both tables and names the states; this file holds
// the only rules that move between them. A state is recorded only after
// the step that makes it true succeeded, and never by a step that refused.

// Job states: apply.StateCopying, apply.StateReady, or StateNone.
const StateNone = ""

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
// a pgsync.tables edited by hand.
var ErrTransition = errors.New("transition not allowed")

// NextTableState returns the state a table in state from moves to on ev.
func NextTableState(from string, ev TableEvent) (string, error) {
	switch ev {
	case Accepted:
		// A table is accepted when it is new, when it was removed and is
		// named again, when an interrupted copy starts over, or when a
		// copied table left the publication and is added again.
		switch from {
		case StateNone, apply.TableRemoved, apply.TablePending, apply.TableCopying, apply.TableReady:
			return apply.TablePending, nil
		}
	case CopyStarted:
		if from == apply.TablePending {
			return apply.TableCopying, nil
		}
	case Copied:
		if from == apply.TableCopying {
			return apply.TableReady, nil
		}
	case Abandoned:
		if apply.Waits(from) {
			return apply.TableRemoved, nil
		}
	}
	return from, fmt.Errorf("table in state %q on %s: %w", from, ev, ErrTransition)
}

// Sentinel errors of the lifecycle; cmd words the remedy from them.
var (
	// ErrAlreadyBootstrapped: bootstrap of a job that is ready.
	ErrAlreadyBootstrapped = errors.New("job is already bootstrapped")
	// ErrForeignSlot: the source has the job's slot or publication but the
	// target has no progress for it: another target may use them.
	ErrForeignSlot = errors.New("slot or publication exists on the source without progress on the target")
	// ErrNotBootstrapped: a command that needs a ready job.
	ErrNotBootstrapped = errors.New("job is not bootstrapped")
	// ErrChecks: a preflight check failed.
	ErrChecks = errors.New("checks failed")
	// ErrTargetTable: an existing target table cannot take the copy (not
	// empty, a column missing or of another type).
	ErrTargetTable = errors.New("target table cannot take the copy")
	// ErrTargetLacks: the target lacks what the job's schema needs and
	// pgsync does not create: an extension its server has not installed,
	// a role, a type the built-in creator cannot make.
	ErrTargetLacks = errors.New("the target lacks what the schema needs")
)

// Recorded is what the target records of a job: its pgsync.progress row
// and its pgsync.tables rows, with what the source holds of it.
type Recorded struct {
	State string        // StateNone, apply.StateCopying or apply.StateReady
	LSN   pglogrepl.LSN // the job slot's consistent point once it exists
	// Tables are the job's rows of pgsync.tables by "schema.name".
	Tables      map[string]apply.AddedTable
	Slot        bool // the source has the job's slot
	Publication bool // the source has the job's publication
}

// BootstrapMode is what a bootstrap does with what an earlier one left.
type BootstrapMode int

// Bootstrap modes.
const (
	// Fresh: nothing of the job exists.
	Fresh BootstrapMode = iota
	// Resume: an interrupted bootstrap whose slot is still there: the
	// tables whose copy committed are kept, the others are copied under a
	// new snapshot, each with its own position.
	Resume
	// Restart: start over (--force, or an interrupted bootstrap whose
	// slot is gone): drop the slot and publication, copy every table.
	Restart
)

func (m BootstrapMode) String() string {
	return [...]string{"fresh", "resume", "restart"}[m]
}

// BootstrapPlan is the decision a bootstrap takes from what is recorded.
type BootstrapPlan struct {
	Mode BootstrapMode
	// Keep holds the tables whose copy committed and stays, by
	// "schema.name", with their copy positions (Resume).
	Keep map[string]pglogrepl.LSN
	// Owned holds the tables whose target rows pgsync copied, which it may
	// empty without --force. With EmptyAll, every existing table is
	// emptied.
	Owned    map[string]bool
	EmptyAll bool
}

// PlanBootstrap decides, in one place, what bootstrap does: start, resume
// an interrupted copy, start over, or refuse. It only reads rec.
func PlanBootstrap(rec Recorded, force bool) (BootstrapPlan, error) {
	p := BootstrapPlan{Keep: map[string]pglogrepl.LSN{}, Owned: map[string]bool{}}
	if force {
		p.Mode, p.EmptyAll = Restart, true
		return p, nil
	}
	switch rec.State {
	case StateNone:
		if rec.Slot || rec.Publication {
			return p, ErrForeignSlot
		}
		p.Mode = Fresh
		return p, nil
	case apply.StateReady:
		return p, ErrAlreadyBootstrapped
	case apply.StateCopying:
	default:
		return p, fmt.Errorf("job in state %q: %w", rec.State, ErrTransition)
	}
	resume := rec.LSN != 0 && rec.Slot && rec.Publication
	p.Mode = Restart
	if resume {
		p.Mode = Resume
	}
	for name, t := range rec.Tables {
		switch {
		case t.State == apply.TableReady && resume:
			p.Keep[name] = t.CopiedLSN
		case t.State == apply.TableReady, t.State == apply.TableCopying:
			p.Owned[name] = true
		}
	}
	return p, nil
}
