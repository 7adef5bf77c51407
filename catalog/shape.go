package catalog

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Shape is what applying a table's replicated changes needs to know of it
// on the target, read by one query (QueueShape; issue 23): its columns,
// whether it is partitioned, which of its columns are of a composite type,
// and the row triggers that may skip a replicated change.
type Shape struct {
	// Exists is false when the target has no such table (ordinary or
	// partitioned); the other fields are then empty.
	Exists bool
	// Columns are the table's columns in their order, generated ones
	// included. Collation, VolatileDefault and Existing are not read: they
	// describe a column to add elsewhere, and this is the table added to.
	Columns []ShapeColumn
	// Partitioned: the table is partitioned (relkind 'p').
	Partitioned bool
	// ReplicaTriggers are the pg_trigger.tgtype bits of the BEFORE row
	// triggers that fire in a session_replication_role = replica session
	// (enabled REPLICA or ALWAYS) on the table or any of its partitions,
	// OR-ed together; 0 when there is none.
	ReplicaTriggers int
}

// ShapeColumn is a column of a Shape.
type ShapeColumn struct {
	ColumnDef
	// Composite marks a composite type, or a domain over one: compared
	// with an untyped parameter such a column makes it a record, whose
	// input is not implemented.
	Composite bool
}

// Equal reports whether s and o describe the same table: what was checked
// against one holds for the other.
func (s *Shape) Equal(o *Shape) bool {
	return s.Exists == o.Exists && s.Partitioned == o.Partitioned && s.ReplicaTriggers == o.ReplicaTriggers &&
		slices.Equal(s.Columns, o.Columns)
}

// shapeSQL reads the Shape of table $1.$2: one row per column (one row
// with NULL columns for a table without any), none when there is no such
// table. The triggers' bits and the composite columns are computed once
// per table, in the CTEs, not once per row.
const shapeSQL = `WITH RECURSIVE t AS (
  SELECT c.oid, c.relkind = 'p' AS partitioned FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')),
triggers AS (
  SELECT coalesce(bit_or(g.tgtype::int), 0) AS ops FROM pg_trigger g
  WHERE g.tgrelid IN (SELECT t.oid::regclass FROM t UNION SELECT p.relid FROM t CROSS JOIN LATERAL pg_partition_tree(t.oid) p)
    AND g.tgenabled IN ('R', 'A') AND g.tgtype & 3 = 3),
base(attnum, typ) AS (
  SELECT a.attnum, a.atttypid FROM t JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT b.attnum, ty.typbasetype FROM base b JOIN pg_type ty ON ty.oid = b.typ WHERE ty.typtype = 'd'),
composite AS (
  SELECT DISTINCT b.attnum FROM base b JOIN pg_type ty ON ty.oid = b.typ WHERE ty.typtype = 'c')
SELECT t.partitioned, triggers.ops, a.attname IS NOT NULL,
       coalesce(a.attname::text, ''), coalesce(format_type(a.atttypid, a.atttypmod), ''), coalesce(a.atttypid, 0::oid), coalesce(a.atttypmod, -1),
       coalesce(format_type(a.atttypid, NULL), ''), coalesce(pg_get_expr(d.adbin, d.adrelid), ''),
       coalesce(a.attnotnull, false), coalesce(a.attgenerated::text, ''), coalesce(a.attidentity::text, ''),
       EXISTS (SELECT 1 FROM composite k WHERE k.attnum = a.attnum)
FROM t CROSS JOIN triggers
LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped -- a table may have no column
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
ORDER BY a.attnum`

// QueueShape queues on b the query that reads the Shape of schema.table
// into s, so that it shares its round trip with the batch's other
// queries: the applier reads it with the table's pgsync.tables row (issue
// 23). The batch's Close returns its error.
func QueueShape(b *pgx.Batch, schema, table string, s *Shape) {
	b.Queue(shapeSQL, schema, table).Query(func(rows pgx.Rows) error {
		*s = Shape{}
		for rows.Next() {
			var c ShapeColumn
			var hasColumn bool
			var expr, generated, identity string
			if err := rows.Scan(&s.Partitioned, &s.ReplicaTriggers, &hasColumn, &c.Name, &c.Type, &c.TypeOID, &c.TypMod,
				&c.BaseType, &expr, &c.NotNull, &generated, &identity, &c.Composite); err != nil {
				return fmt.Errorf("read the shape of %s.%s: %w", schema, table, err)
			}
			s.Exists = true
			if !hasColumn {
				continue
			}
			c.setAttributes(expr, generated, identity)
			s.Columns = append(s.Columns, c)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read the shape of %s.%s: %w", schema, table, err)
		}
		return nil
	})
}

// BatchSender sends a batch of queries in one round trip: a connection or
// a transaction.
type BatchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ReadShape reads the Shape of schema.table on its own, in one round trip.
func ReadShape(ctx context.Context, q BatchSender, schema, table string) (Shape, error) {
	var s Shape
	b := &pgx.Batch{}
	QueueShape(b, schema, table, &s)
	return s, q.SendBatch(ctx, b).Close()
}
