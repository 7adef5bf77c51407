package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Verification is the record of one comparison of the two sides: verify,
// verify --rows, or cutover's.
type Verification struct {
	At time.Time `json:"at"`
	// Kind is "verify", "verify --rows" or "cutover".
	Kind string `json:"kind"`
	// LSN is the source position the target held when it was compared:
	// cutover's position, or for verify the position the target had
	// applied (verify reads both sides as they are).
	LSN       pglogrepl.LSN `json:"lsn"`
	Identical bool          `json:"identical"`
	// Found says what differed, in one line ("" when nothing did).
	Found string `json:"found,omitempty"`
}

// MarshalJSON writes the position as PostgreSQL writes it ("0/16B3748"),
// as status's other positions are.
func (v Verification) MarshalJSON() ([]byte, error) {
	type plain Verification
	return json.Marshal(struct {
		plain
		LSN string `json:"lsn"`
	}{plain(v), v.LSN.String()})
}

// RecordVerification records v as job's last comparison. A target without
// pgsync's schema (a job never bootstrapped) records nothing: verify
// compares any two databases.
func RecordVerification(ctx context.Context, conn *pgx.Conn, job string, v Verification) error {
	if present, err := Upgrade(ctx, conn); err != nil || !present {
		return err
	}
	_, err := conn.Exec(ctx, `INSERT INTO pgsync.verifications VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (job) DO UPDATE SET at = excluded.at, kind = excluded.kind, lsn = excluded.lsn, identical = excluded.identical, found = excluded.found`,
		job, v.At, v.Kind, v.LSN, v.Identical, v.Found)
	if err != nil {
		return fmt.Errorf("record the comparison in pgsync.verifications: %w", err)
	}
	return nil
}

// LastVerification reads job's last comparison; nil when none was
// recorded. status reads it from a target that may have no ledger, or
// one an earlier release left without the table (hasTable).
func LastVerification(ctx context.Context, conn Querier, job string) (*Verification, error) {
	if exists, err := hasTable(ctx, conn, "verifications"); err != nil || !exists {
		return nil, err
	}
	v := &Verification{}
	err := conn.QueryRow(ctx, `SELECT at, kind, lsn, identical, found FROM pgsync.verifications WHERE job = $1`, job).
		Scan(&v.At, &v.Kind, &v.LSN, &v.Identical, &v.Found)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pgsync.verifications: %w", err)
	}
	return v, nil
}
