package ledger

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// RecordDDLSkip records that run must not apply job's captured DDL
// statement whose message is at lsn (pgsync run --skip-ddl): the operator
// ran what it meant on the target by hand, or wants none of it. The
// ledger is at the latest version (Upgrade).
func RecordDDLSkip(ctx context.Context, conn Execer, job string, lsn pglogrepl.LSN) error {
	if _, err := conn.Exec(ctx, `INSERT INTO pgsync.ddl_skips (job, lsn) VALUES ($1, $2) ON CONFLICT DO NOTHING`, job, lsn); err != nil {
		return fmt.Errorf("record the skip of the DDL at %s of job %s: %w", lsn, job, err)
	}
	return nil
}

// ReadDDLSkips returns the positions of job's DDL statements recorded as
// skipped.
func ReadDDLSkips(ctx context.Context, conn Querier, job string) (map[pglogrepl.LSN]bool, error) {
	rows, err := conn.Query(ctx, `SELECT lsn FROM pgsync.ddl_skips WHERE job = $1`, job)
	if err != nil {
		return nil, fmt.Errorf("read the DDL skips of job %s: %w", job, err)
	}
	lsns, err := pgx.CollectRows(rows, pgx.RowTo[pglogrepl.LSN])
	if err != nil {
		return nil, fmt.Errorf("read the DDL skips of job %s: %w", job, err)
	}
	skips := make(map[pglogrepl.LSN]bool, len(lsns))
	for _, l := range lsns {
		skips[l] = true
	}
	return skips, nil
}
