package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Progress is the job's row of pgsync.progress.
type Progress struct {
	Job   string
	State JobState
	LSN   pglogrepl.LSN
	// SourceCommitTime is the source commit time of the last transaction
	// applied (nil before the first), for lag in seconds.
	SourceCommitTime *time.Time
}

// ErrNoProgress is returned by ReadProgress when the job has no row.
var ErrNoProgress = errors.New("no progress row")

// ErrNotBootstrapped and ErrBootstrapUnfinished say why a job cannot
// stream: the target has no progress for it, or its bootstrap did not
// finish.
var (
	ErrNotBootstrapped     = errors.New("job is not bootstrapped")
	ErrBootstrapUnfinished = errors.New("bootstrap did not finish")
	// ErrJobReversed: cutover --reverse ended the job; the reverse job
	// streams the other way.
	ErrJobReversed = errors.New("job was reversed by cutover --reverse")
)

// ProgressSQL moves the job's durable position ($2, an LSN in text) and
// the source commit time of its last transaction ($3) inside the target
// transaction that applied up to it ($1 is the job). The applier sends it
// in its pipeline, before the COMMIT it belongs with.
const ProgressSQL = "UPDATE pgsync.progress SET lsn = $2::pg_lsn, source_commit_time = $3::timestamptz, updated_at = now() WHERE job = $1"

// ReadProgress returns the job's progress row, or ErrNoProgress.
func ReadProgress(ctx context.Context, conn Querier, job string) (Progress, error) {
	p := Progress{Job: job}
	// Asked first, not after a failed read: status and check read it from
	// targets with no ledger, and bootstrap before it makes one, where a
	// query of the missing table would be an ERROR in the server's log.
	if exists, err := hasTable(ctx, conn, "progress"); err != nil || !exists {
		return p, cmp.Or(err, ErrNoProgress)
	}
	return ReadPosition(ctx, conn, job)
}

// ReadPosition is ReadProgress where pgsync.progress is known to exist
// (Ensure or Upgrade found the ledger): one round trip, for the polls of
// cutover's wait, which the write gap holds.
func ReadPosition(ctx context.Context, conn Querier, job string) (Progress, error) {
	p := Progress{Job: job}
	// Through to_jsonb, so that a table an earlier release made, without
	// source_commit_time, reads too (status does not migrate the ledger).
	err := conn.QueryRow(ctx, `SELECT state, lsn, (to_jsonb(p) ->> 'source_commit_time')::timestamptz
FROM pgsync.progress p WHERE job = $1`, job).Scan(&p.State, &p.LSN, &p.SourceCommitTime)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, ErrNoProgress
	}
	if err != nil {
		return p, fmt.Errorf("read pgsync.progress for job %s: %w", job, err)
	}
	return p, nil
}

// MoveJob records the state job in state from moves to on ev
// (NextJobState), at position lsn, and returns it; a move the lifecycle
// does not allow records nothing.
func MoveJob(ctx context.Context, conn Execer, job string, from JobState, ev JobEvent, force bool, lsn pglogrepl.LSN) (JobState, error) {
	to, err := NextJobState(from, ev, force)
	if err != nil {
		return from, fmt.Errorf("job %s: %w", job, err)
	}
	return to, writeProgress(ctx, conn, Progress{Job: job, State: to, LSN: lsn})
}

// StartOver records job copying with no position, in place of what was
// recorded of it and its tables, in one transaction: a bootstrap starting
// over (after NextJobState allows it) is never seen half recorded.
func StartOver(ctx context.Context, conn *pgx.Conn, job string, force bool) error {
	to, err := NextJobState(JobNone, BootstrapStarted, force)
	if err != nil {
		return fmt.Errorf("job %s: %w", job, err)
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := DeleteProgress(ctx, tx, job); err != nil {
			return err
		}
		return writeProgress(ctx, tx, Progress{Job: job, State: to})
	})
}

// writeProgress inserts or replaces the job's progress row.
func writeProgress(ctx context.Context, conn Execer, p Progress) error {
	_, err := conn.Exec(ctx, `
INSERT INTO pgsync.progress (job, state, lsn) VALUES ($1, $2, $3)
ON CONFLICT (job) DO UPDATE SET state = excluded.state, lsn = excluded.lsn, updated_at = now()`,
		p.Job, string(p.State), p.LSN)
	if err != nil {
		return fmt.Errorf("write pgsync.progress for job %s at %s: %w", p.Job, p.LSN, err)
	}
	return nil
}

// DeleteProgress removes the job's row and its tables' rows.
func DeleteProgress(ctx context.Context, conn Execer, job string) error {
	for _, t := range []string{"progress", "tables"} {
		if err := deleteJobRows(ctx, conn, t, job); err != nil {
			return err
		}
	}
	return nil
}

// ReadReady returns the progress of a job ready to stream; otherwise an
// error wrapping ErrNotBootstrapped or ErrBootstrapUnfinished.
func ReadReady(ctx context.Context, conn Querier, job string) (Progress, error) {
	p, err := ReadProgress(ctx, conn, job)
	switch {
	case errors.Is(err, ErrNoProgress):
		return p, fmt.Errorf("job %s (no row in pgsync.progress on the target): %w", job, ErrNotBootstrapped)
	case err != nil:
		return p, err
	case p.State == JobReversed:
		return p, fmt.Errorf("job %s (at %s): %w", job, p.LSN, ErrJobReversed)
	case p.State != JobReady:
		return p, fmt.Errorf("job %s (pgsync.progress state %q): %w", job, p.State, ErrBootstrapUnfinished)
	}
	return p, nil
}
