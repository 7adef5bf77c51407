package job

import (
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/replication"
)

// The job's and each table's states, and the rules that move between them,
// are the ledger's (ledger/states.go); this file holds the decision a
// bootstrap takes from what the ledger records.

// Sentinel errors of the lifecycle: each says what happened; cmd words,
// once, what the operator can do about it (cmd/remedy.go).
var (
	// ErrAlreadyBootstrapped: bootstrap of a job that is ready.
	ErrAlreadyBootstrapped = errors.New("job is already bootstrapped")
	// ErrForeignSlot: the source has the job's slot or publication but the
	// target has no progress for it: another target may use them.
	ErrForeignSlot = errors.New("slot or publication exists on the source without progress on the target")
	// ErrNotBootstrapped: a command that needs a bootstrapped job, on a
	// target without one.
	ErrNotBootstrapped = ledger.ErrNotBootstrapped
	// ErrBootstrapUnfinished: a command that needs a ready job, on one
	// whose bootstrap did not finish.
	ErrBootstrapUnfinished = ledger.ErrBootstrapUnfinished
	// ErrJobReversed: cutover --reverse ended the job; the reverse job
	// streams the other way.
	ErrJobReversed = ledger.ErrJobReversed
	// ErrLedgerNewer: a newer pgsync migrated the target's pgsync schema
	// past what this one knows.
	ErrLedgerNewer = ledger.ErrLedgerNewer
	// ErrChecks: a preflight check failed.
	ErrChecks = errors.New("checks failed")
	// ErrTargetTable: an existing target table is in the way of the copy
	// (not empty, a column missing or of another type).
	ErrTargetTable = errors.New("target table cannot take the copy")
	// ErrLargeObjectsInTheWay: the target has large objects of its own
	// with the OIDs of the source's.
	ErrLargeObjectsInTheWay = errors.New("target large objects in the way")
	// ErrOlderTarget: the target's major version is older than the
	// source's and refuses objects of the source's schema (issue 32).
	ErrOlderTarget = errors.New("the older target cannot hold the source's schema")
	// ErrMissingExtension: an extension the job's schema needs is not
	// installed on the target's server, or a column's type or collation
	// needs one the built-in creator does not create.
	ErrMissingExtension = errors.New("the target lacks an extension the schema needs")
	// ErrMissingFunction: a column default calls a function the target
	// lacks, and the built-in creator makes no functions.
	ErrMissingFunction = errors.New("the target lacks a function the schema needs")
	// ErrMissingRole: a role the schema names is missing on the target, or
	// its user cannot give objects to it.
	ErrMissingRole = errors.New("the target lacks a role the schema needs")
	// ErrUnfinished: a copy or a build stopped before it finished; what
	// it recorded lets a rerun of the same command resume.
	ErrUnfinished = errors.New("stopped before it finished")
	// ErrSlotMissing, ErrSlotInvalidated and ErrSlotActive are the job's
	// slot gone, invalidated by the source, or held by another session.
	ErrSlotMissing     = replication.ErrSlotMissing
	ErrSlotInvalidated = replication.ErrSlotInvalidated
	ErrSlotActive      = replication.ErrSlotActive
)

// Recorded is what the target records of a job: its pgsync.progress row
// and its pgsync.tables rows, with what the source holds of it.
type Recorded struct {
	State ledger.JobState
	LSN   pglogrepl.LSN // the job slot's consistent point once it exists
	// Tables are the job's rows of pgsync.tables by "schema.name".
	Tables      map[string]ledger.Table
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
	case ledger.JobNone:
		if rec.Slot || rec.Publication {
			return p, ErrForeignSlot
		}
		p.Mode = Fresh
		return p, nil
	case ledger.JobReady:
		return p, ErrAlreadyBootstrapped
	case ledger.JobReversed:
		return p, ErrJobReversed
	case ledger.JobCopying:
	default:
		return p, fmt.Errorf("job in state %q: %w", rec.State, ledger.ErrTransition)
	}
	resume := rec.LSN != 0 && rec.Slot && rec.Publication
	p.Mode = Restart
	if resume {
		p.Mode = Resume
	}
	for name, t := range rec.Tables {
		switch {
		case t.State == ledger.TableReady && resume:
			p.Keep[name] = t.CopiedLSN
		case t.State.Owned():
			p.Owned[name] = true
		}
	}
	return p, nil
}
