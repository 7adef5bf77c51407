package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// A hold is how an online verify compares both sides at one source
// position while run applies (issue 24, point 7): verify asks run to stop
// applying before the first source transaction committing at or after At,
// run says it has (Held, with everything before At committed on the
// target), verify takes the target's snapshot and ends the hold. A hold
// older than MaxHoldSeconds is ignored, so that a verify that died cannot
// stop run.

// MaxHoldSeconds bounds how long a hold request is honoured.
const MaxHoldSeconds = 60

// Hold is a job's hold request as run reads it.
type Hold struct {
	At   pglogrepl.LSN
	Held bool
}

// RequestHold asks run to hold job before the first source transaction
// committing at or after at, in place of any earlier request. The ledger
// is at the latest version (Upgrade).
func RequestHold(ctx context.Context, conn Execer, job string, at pglogrepl.LSN) error {
	if _, err := conn.Exec(ctx, `INSERT INTO pgsync.holds (job, at) VALUES ($1, $2)
ON CONFLICT (job) DO UPDATE SET at = excluded.at, held = false, requested_at = now()`, job, at); err != nil {
		return fmt.Errorf("request a hold of job %s at %s: %w", job, at, err)
	}
	return nil
}

// ReadHold returns job's hold request younger than MaxHoldSeconds; the
// zero Hold when there is none. run reads it every 50 ms: one query, of a
// table Ensure made before run started (a query of a missing table would
// be an ERROR in the server's log at every read).
func ReadHold(ctx context.Context, conn Querier, job string) (Hold, error) {
	var h Hold
	err := conn.QueryRow(ctx, `SELECT at, held FROM pgsync.holds
WHERE job = $1 AND requested_at > now() - interval '`+strconv.Itoa(MaxHoldSeconds)+` seconds'`, job).Scan(&h.At, &h.Held)
	if errors.Is(err, pgx.ErrNoRows) {
		return Hold{}, nil
	}
	if err != nil {
		return Hold{}, fmt.Errorf("read pgsync.holds: %w", err)
	}
	return h, nil
}

// MarkHeld records that run holds job at at: the target has every source
// transaction committed before at, and none after.
func MarkHeld(ctx context.Context, conn Execer, job string, at pglogrepl.LSN) error {
	if _, err := conn.Exec(ctx, `UPDATE pgsync.holds SET held = true WHERE job = $1 AND at = $2`, job, at); err != nil {
		return fmt.Errorf("record the hold of job %s at %s: %w", job, at, err)
	}
	return nil
}

// ReleaseHold ends job's hold.
func ReleaseHold(ctx context.Context, conn Execer, job string) error {
	return deleteJobRows(ctx, conn, "holds", job)
}
