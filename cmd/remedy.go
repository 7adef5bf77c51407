package cmd

import (
	"errors"
	"fmt"

	"github.com/pgsync/pgsync/apply"
	"github.com/pgsync/pgsync/ddl"
	"github.com/pgsync/pgsync/job"
)

// remedy adds to err what the operator can do about it, worded here once
// for each sentinel error the lifecycle returns; command is the pgsync
// command that failed (a rerun of it often resumes). An error of no known
// kind is returned as it is.
func remedy(err error, command string) error {
	var fix string
	var ddlErr *apply.DDLError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, job.ErrAlreadyBootstrapped):
		fix = "run pgsync run, or pgsync teardown / bootstrap --force to start over"
	case errors.Is(err, job.ErrForeignSlot):
		fix = "another target may use it: choose another job.name, or run pgsync teardown (or bootstrap --force) to drop it"
	case errors.Is(err, job.ErrNotBootstrapped):
		fix = "run pgsync bootstrap first"
	case errors.Is(err, job.ErrJobReversed):
		fix = "its target is now the source of the reverse job: use that job's configuration, which cutover --reverse wrote beside this one"
	case errors.Is(err, job.ErrLedgerNewer):
		fix = "use the pgsync release that migrated it, or a newer one"
	case errors.Is(err, job.ErrBootstrapUnfinished):
		fix = "rerun pgsync bootstrap: it resumes the interrupted one"
	case errors.Is(err, job.ErrSlotMissing), errors.Is(err, job.ErrSlotInvalidated):
		fix = "the job cannot resume: start over with pgsync bootstrap --force"
	case errors.Is(err, job.ErrSlotActive):
		fix = "stop the other pgsync run of this job first"
	case errors.Is(err, job.ErrTargetTable), errors.Is(err, job.ErrLargeObjectsInTheWay),
		errors.Is(err, job.ErrMissingExtension), errors.Is(err, job.ErrMissingRole), errors.Is(err, job.ErrMissingFunction),
		errors.Is(err, job.ErrOlderTarget):
		// The error names the fix, in pgsync check's words.
		fix = "nothing was recorded: fix it and rerun pgsync " + command
	case errors.Is(err, job.ErrChecks):
		fix = "nothing was recorded: fix them and rerun pgsync " + command
	case errors.Is(err, job.ErrUnfinished):
		fix = "rerun pgsync " + command + ": it resumes where this one stopped"
	case errors.Is(err, job.ErrWaitTimeout):
		fix = "is pgsync run running? (pgsync status)"
	case errors.As(err, &ddlErr) && errors.Is(err, ddl.ErrElsewhere):
		// The statement ran in the rolled back transaction; skipping this
		// record lets it run with the target's values, replaced next.
		fix = fmt.Sprintf("nothing of its source transaction was applied; run pgsync run --skip-ddl %s --until-caught-up (the statement then runs on the target, with the target's values), then copy those columns' values from the source to the target by key, then pgsync run (docs/operations.md, values that depend on where a statement runs)", ddlErr.LSN)
	case errors.As(err, &ddlErr):
		// The statement, its LSN and the target's error are in err.
		fix = fmt.Sprintf("nothing of its source transaction was applied; run what it means on the target by hand in a form the target accepts, then pgsync run --skip-ddl %s (docs/operations.md, schema changes during a move)", ddlErr.LSN)
	case errors.Is(err, job.ErrDDLCaptureMissing):
		fix = `bootstrap installs it: set job.ddl = "stop" to go on without it, or start over with pgsync bootstrap --force`
	case errors.Is(err, job.ErrTablesDiffer) && command == "cutover":
		fix = "were writes still arriving on the source? use --lock-source"
	default:
		return err
	}
	return fmt.Errorf("%w; %s", err, fix)
}
