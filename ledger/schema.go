package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SchemaObject is one post-data entry of the archive, as recorded.
type SchemaObject struct {
	// Seq is its place in the archive's list, from 1.
	Seq int
	// Phase orders the building: keys first, then what needs them.
	Phase int
	// Entry is its line in pg_restore's list (pg_restore -L reads it).
	Entry string
	// Kind is pg_dump's description of it ("INDEX", "FK CONSTRAINT").
	Kind string
	// Table is the table (schema.name) of a key, index, constraint,
	// trigger, rule or policy, and Name its name there; both empty for
	// other entries.
	Table, Name string
	// PrimaryKey: a failure stops bootstrap (run finds rows by key).
	PrimaryKey bool
}

// RecordSchema records the archive and its post-data objects of job, in
// place of any an earlier bootstrap of the job recorded, in one
// transaction.
func RecordSchema(ctx context.Context, conn *pgx.Conn, job string, archive []byte, objects []SchemaObject) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := DeleteSchema(ctx, tx, job); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO pgsync.schema_archive VALUES ($1, $2)`, job, archive); err != nil {
			return err
		}
		for _, o := range objects {
			if _, err := tx.Exec(ctx, `INSERT INTO pgsync.schema_objects VALUES ($1, $2, $3, $4, $5, $6, $7, $8, false)`,
				job, o.Seq, o.Phase, o.Entry, o.Kind, o.Table, o.Name, o.PrimaryKey); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record pg_dump's archive on the target: %w", err)
	}
	return nil
}

// DeleteSchema deletes what a bootstrap of job recorded of its schema.
func DeleteSchema(ctx context.Context, q Execer, job string) error {
	for _, t := range []string{"schema_archive", "schema_objects"} {
		if err := deleteJobRows(ctx, q, t, job); err != nil {
			return err
		}
	}
	return nil
}

// PendingArchive returns the job's recorded archive when some of its
// objects are not built yet; nil otherwise. bootstrap reads it while it
// plans, before it writes: on a ledger an earlier release left, the table
// may be missing (hasTable).
func PendingArchive(ctx context.Context, conn Querier, job string) ([]byte, error) {
	if exists, err := hasTable(ctx, conn, "schema_objects"); err != nil || !exists {
		return nil, err
	}
	var archive []byte
	err := conn.QueryRow(ctx, `SELECT a.archive FROM pgsync.schema_archive a
WHERE a.job = $1 AND EXISTS (SELECT 1 FROM pgsync.schema_objects o WHERE o.job = $1 AND NOT o.done)`, job).Scan(&archive)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pgsync.schema_archive: %w", err)
	}
	return archive, nil
}

// PendingObjects returns the objects of job not built yet, in the order to
// build them; table, when set, keeps the first phase's objects of that
// table only.
func PendingObjects(ctx context.Context, conn Querier, job, table string) ([]SchemaObject, error) {
	rows, err := conn.Query(ctx, `SELECT seq, phase, entry, kind, tbl, name, primary_key FROM pgsync.schema_objects
WHERE job = $1 AND NOT done AND ($2 = '' OR (phase = 0 AND tbl = $2)) ORDER BY phase, seq`, job, table)
	if err != nil {
		return nil, fmt.Errorf("read pgsync.schema_objects: %w", err)
	}
	defer rows.Close()
	var out []SchemaObject
	for rows.Next() {
		var o SchemaObject
		if err := rows.Scan(&o.Seq, &o.Phase, &o.Entry, &o.Kind, &o.Table, &o.Name, &o.PrimaryKey); err != nil {
			return nil, fmt.Errorf("read pgsync.schema_objects: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read pgsync.schema_objects: %w", err)
	}
	return out, nil
}

// MarkBuilt records object seq of job as built.
func MarkBuilt(ctx context.Context, conn Execer, job string, seq int) error {
	if _, err := conn.Exec(ctx, `UPDATE pgsync.schema_objects SET done = true WHERE job = $1 AND seq = $2`, job, seq); err != nil {
		return fmt.Errorf("record object %d of the schema as built: %w", seq, err)
	}
	return nil
}

// SchemaCounts returns how many of the job's recorded objects are built,
// and the list lines of those that are not.
func SchemaCounts(ctx context.Context, conn Querier, job string) (built int, notBuilt []string, err error) {
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE done), coalesce(array_agg(entry ORDER BY seq) FILTER (WHERE NOT done), '{}')
FROM pgsync.schema_objects WHERE job = $1`, job).Scan(&built, &notBuilt)
	if err != nil {
		return 0, nil, fmt.Errorf("count pgsync.schema_objects: %w", err)
	}
	return built, notBuilt, nil
}
