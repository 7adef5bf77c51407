package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
)

// Table is a table of the job in pgsync.tables: one of its bootstrap's,
// resumed, or one added by add-tables.
type Table struct {
	Schema, Name string
	State        TableState
	// CopiedLSN is the consistent point of the snapshot the table was
	// copied under: the target has every transaction committed before it.
	CopiedLSN pglogrepl.LSN
}

// ReadTables returns the job's tables by "schema.name"; none when
// pgsync.tables does not exist: status and bootstrap's plan read it from a
// target that may have no ledger yet, or one a release before pgsync.tables
// left (hasTable).
func ReadTables(ctx context.Context, conn Querier, job string) (map[string]Table, error) {
	out := make(map[string]Table)
	if exists, err := hasTable(ctx, conn, "tables"); err != nil || !exists {
		return out, err
	}
	rows, err := conn.Query(ctx, `SELECT schema_name, table_name, state, coalesce(copied_lsn, '0/0') FROM pgsync.tables WHERE job = $1`, job)
	if err != nil {
		return nil, fmt.Errorf("read pgsync.tables for job %s: %w", job, err)
	}
	defer rows.Close()
	for rows.Next() {
		var t Table
		if err := rows.Scan(&t.Schema, &t.Name, &t.State, &t.CopiedLSN); err != nil {
			return nil, fmt.Errorf("read pgsync.tables for job %s: %w", job, err)
		}
		out[t.Schema+"."+t.Name] = t
	}
	return out, rows.Err()
}

// QueueReadTable queues on b the read of the pgsync.tables row of one
// table of the job into t: the zero Table when it has none (a table of the
// job's bootstrap). Queued, so that the applier reads it in the round trip
// that reads the table's shape (catalog.QueueShape; issue 23); the batch's
// Close returns its error. pgsync.tables exists (run ensured the ledger):
// an error would abort the target transaction the caller may have open.
func QueueReadTable(b *pgx.Batch, job, schema, name string, t *Table) {
	b.Queue(`SELECT state, coalesce(copied_lsn, '0/0') FROM pgsync.tables WHERE job = $1 AND schema_name = $2 AND table_name = $3`,
		job, schema, name).QueryRow(func(row pgx.Row) error {
		*t = Table{Schema: schema, Name: name}
		err := row.Scan(&t.State, &t.CopiedLSN)
		if errors.Is(err, pgx.ErrNoRows) {
			*t = Table{}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read pgsync.tables for %s.%s: %w", schema, name, err)
		}
		return nil
	})
}

// MarkTables records tables of job in state, in one transaction, with
// their copy position (0 for none).
func MarkTables(ctx context.Context, conn *pgx.Conn, job string, tables []catalog.TableName, state TableState, copied pglogrepl.LSN) error {
	var lsn any
	if copied != 0 {
		lsn = copied
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, t := range tables {
			if _, err := tx.Exec(ctx, `INSERT INTO pgsync.tables (job, schema_name, table_name, state, copied_lsn) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (job, schema_name, table_name) DO UPDATE SET state = excluded.state, copied_lsn = excluded.copied_lsn`,
				job, t.Schema, t.Name, string(state), lsn); err != nil {
				return fmt.Errorf("record table %s as %s in pgsync.tables: %w", t, state, err)
			}
		}
		return nil
	})
}
