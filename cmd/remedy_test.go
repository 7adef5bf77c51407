package cmd

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pgsync/pgsync/job"
)

// TestRemedy: each sentinel of the lifecycle gets its remedy, worded once,
// wherever it is wrapped; the error itself stays matchable; an error of no
// known kind is left as it is.
func TestRemedy(t *testing.T) {
	for _, tc := range []struct {
		sentinel error
		command  string
		want     string
	}{
		{job.ErrAlreadyBootstrapped, "bootstrap", "bootstrap --force to start over"},
		{job.ErrForeignSlot, "bootstrap", "choose another job.name"},
		{job.ErrNotBootstrapped, "run", "run pgsync bootstrap first"},
		{job.ErrBootstrapUnfinished, "cutover", "rerun pgsync bootstrap: it resumes"},
		{job.ErrJobReversed, "run", "use that job's configuration, which cutover --reverse wrote"},
		{job.ErrLedgerNewer, "run", "use the pgsync release that migrated it"},
		{job.ErrSlotMissing, "run", "start over with pgsync bootstrap --force"},
		{job.ErrSlotInvalidated, "status", "start over with pgsync bootstrap --force"},
		{job.ErrSlotActive, "run", "stop the other pgsync run"},
		{job.ErrMissingFunction, "bootstrap", "nothing was recorded: fix it and rerun pgsync bootstrap"},
		{job.ErrMissingExtension, "bootstrap", "nothing was recorded: fix it and rerun pgsync bootstrap"},
		{job.ErrMissingRole, "add-tables", "nothing was recorded: fix it and rerun pgsync add-tables"},
		{job.ErrTargetTable, "bootstrap", "nothing was recorded: fix it and rerun pgsync bootstrap"},
		{job.ErrLargeObjectsInTheWay, "bootstrap", "nothing was recorded"},
		{job.ErrChecks, "add-tables", "fix them and rerun pgsync add-tables"},
		{job.ErrUnfinished, "add-tables", "rerun pgsync add-tables: it resumes"},
		{job.ErrWaitTimeout, "cutover", "is pgsync run running?"},
		{job.ErrTablesDiffer, "cutover", "use --lock-source"},
	} {
		err := fmt.Errorf("table public.t: %w", tc.sentinel)
		got := remedy(err, tc.command)
		if !errors.Is(got, tc.sentinel) || !strings.Contains(got.Error(), tc.want) || !strings.HasPrefix(got.Error(), err.Error()) {
			t.Errorf("%v in %s: %q, want it to keep the error and add %q", tc.sentinel, tc.command, got, tc.want)
		}
	}
	plain := errors.New("connection refused")
	if got := remedy(plain, "run"); got != plain {
		t.Errorf("an error of no known kind became %q", got)
	}
	if got := remedy(job.ErrTablesDiffer, "verify"); got != job.ErrTablesDiffer {
		t.Errorf("verify's difference got cutover's remedy: %q", got)
	}
	if remedy(nil, "run") != nil {
		t.Error("no error became one")
	}
}
