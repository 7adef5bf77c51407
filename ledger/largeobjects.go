package ledger

import (
	"context"
	"fmt"
)

// RecordLargeObject records large object oid as job's, in the transaction
// that copies it.
func RecordLargeObject(ctx context.Context, tx Execer, job string, oid uint32) error {
	if _, err := tx.Exec(ctx, `INSERT INTO pgsync.large_objects VALUES ($1, $2) ON CONFLICT DO NOTHING`, job, oid); err != nil {
		return fmt.Errorf("record large object %d as job %s's: %w", oid, job, err)
	}
	return nil
}

// RemoveLargeObject removes large object oid from the target when job
// copied it, with its record; one it did not copy stays. It reports
// whether the object was removed.
func RemoveLargeObject(ctx context.Context, conn Execer, job string, oid uint32) (bool, error) {
	tag, err := conn.Exec(ctx, `WITH gone AS (DELETE FROM pgsync.large_objects WHERE job = $1 AND oid = $2 RETURNING oid)
SELECT pg_catalog.lo_unlink(oid) FROM gone`, job, oid)
	if err != nil {
		return false, fmt.Errorf("remove large object %d: %w", oid, err)
	}
	return tag.RowsAffected() > 0, nil
}
