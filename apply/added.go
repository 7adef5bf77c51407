package apply

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/periodic"
	"github.com/pgsync/pgsync/replication"
)

// Tables added to a running job by pgsync add-tables: a session pauses at
// the first change of a table whose copy is not on the target yet, the next
// one waits for the copy, and an abandoned add is skipped.

// skipAll is the copy position of a table whose changes are never applied:
// every transaction commits before it.
const skipAll = ^pglogrepl.LSN(0)

// addedTablesPoll is how often a paused run looks at pgsync.tables, and
// addedTablesLogEvery how often it says it is still waiting.
const (
	addedTablesPoll     = time.Second
	addedTablesLogEvery = 30 * time.Second
)

// awaitAddedTables waits while pgsync add-tables is copying a table of the
// job: the stream cannot pass that table's first change until the copy is
// on the target (TableBeingAddedError), and nothing holds the target or
// the slot meanwhile.
func (a *Applier) awaitAddedTables(ctx context.Context) error {
	log := a.opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var copying []string // the job's tables being copied at the last look
	copied := func(ctx context.Context) (bool, error) {
		added, err := ledger.ReadTables(ctx, a.conn, a.opts.Job)
		if err != nil {
			return false, err
		}
		copying = copying[:0]
		for name, t := range added {
			if t.State.Waits() && a.opts.selected(t.Schema, t.Name) {
				copying = append(copying, name)
			}
		}
		return len(copying) == 0, nil
	}
	began := time.Now()
	paused := false // said it waits: then it says when it resumes too
	say := func(waited time.Duration) {
		slices.Sort(copying)
		log.Info("paused: waiting for pgsync add-tables to copy tables (if no add-tables is running, rerun it to finish them, or take them out of job.tables to abandon them)",
			"job", a.opts.Job, "tables", strings.Join(copying, ", "), "paused_s", fmt.Sprintf("%.0f", waited.Seconds()))
		paused = true
	}
	if err := periodic.Await(ctx, periodic.Wait{Poll: addedTablesPoll, SayEvery: addedTablesLogEvery}, copied, say); err != nil {
		return err
	}
	if paused {
		log.Info("resumed: the added tables are copied", "job", a.opts.Job, "paused_s", fmt.Sprintf("%.1f", time.Since(began).Seconds()))
	}
	return nil
}

// TableBeingAddedError ends a session at the first message of a table that
// pgsync add-tables is still copying: its changes can only go on top of
// the copy. Nothing of the open group is committed; the next session
// waits for the copy (awaitAddedTables) and resumes from the durable
// position.
type TableBeingAddedError struct {
	Job, Table string
	LSN        pglogrepl.LSN // the source transaction that reached the table
}

// Error names the table, where the stream reached it, and why run pauses.
func (e *TableBeingAddedError) Error() string {
	return fmt.Sprintf("job %s: table %s, reached at %s, is being copied by pgsync add-tables: run pauses until the copy is done", e.Job, e.Table, e.LSN)
}

// Is makes the error a replication.ErrPaused: the end of the session is
// intended, and replication.Stream starts the next one at once instead of
// treating it as a failure.
func (e *TableBeingAddedError) Is(target error) bool { return target == replication.ErrPaused }
