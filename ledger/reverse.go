package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Establish records job, made by cutover --reverse of the opposite job, as
// ready to stream from lsn (its new slot's consistent point), with the
// roles that cutover locked on this server; in one transaction, in place
// of what a reversed job of the same name left. A job of that name that is
// not reversed is refused (ErrTransition): nothing is written.
func Establish(ctx context.Context, conn *pgx.Conn, job string, lsn pglogrepl.LSN, lockedRoles []string) error {
	if err := Ensure(ctx, conn); err != nil {
		return err
	}
	from := JobNone
	switch p, err := ReadProgress(ctx, conn, job); {
	case errors.Is(err, ErrNoProgress):
	case err != nil:
		return err
	default:
		from = p.State
	}
	if _, err := NextJobState(from, Established, false); err != nil {
		return fmt.Errorf("job %s: %w", job, err)
	}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := DeleteJob(ctx, tx, job); err != nil {
			return err
		}
		if err := writeProgress(ctx, tx, Progress{Job: job, State: JobReady, LSN: lsn}); err != nil {
			return err
		}
		for _, r := range lockedRoles {
			if _, err := tx.Exec(ctx, `INSERT INTO pgsync.locked_roles VALUES ($1, $2) ON CONFLICT DO NOTHING`, job, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record the reverse job %s: %w", job, err)
	}
	return nil
}

// EstablishState returns the state of job on conn, for a check that
// cutover --reverse may establish it there (JobNone or JobReversed).
func EstablishState(ctx context.Context, conn Querier, job string) (JobState, error) {
	p, err := ReadProgress(ctx, conn, job)
	if errors.Is(err, ErrNoProgress) {
		return JobNone, nil
	}
	return p.State, err
}

// LockedRoles returns the roles recorded for job by the cutover that made
// it (Establish); none when nothing was recorded. The ledger is at the
// latest version (Upgrade).
func LockedRoles(ctx context.Context, conn Querier, job string) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT role FROM pgsync.locked_roles WHERE job = $1 ORDER BY role`, job)
	if err != nil {
		return nil, fmt.Errorf("read pgsync.locked_roles: %w", err)
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read pgsync.locked_roles: %w", err)
	}
	return roles, nil
}

// ForgetLockedRoles deletes what Establish recorded of job's locked roles.
func ForgetLockedRoles(ctx context.Context, conn Execer, job string) error {
	return deleteJobRows(ctx, conn, "locked_roles", job)
}
