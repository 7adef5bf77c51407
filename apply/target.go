package apply

import (
	"context"
	"fmt"
	"slices"

	"github.com/pgsync/pgsync/catalog"
)

// What the statements need to know of a target table beyond its columns:
// whether it is partitioned (TRUNCATE) and which columns are of a
// composite type (key casts). Relation reads it with one query (issue 16).

// targetFacts is what Relation reads of the target table for the
// statements of a relation.
type targetFacts struct {
	// partitioned: the target table is partitioned, so a TRUNCATE of it
	// takes its partitions (as the native apply worker does), while any
	// other is truncated ONLY.
	partitioned bool
	// composite marks, per column, a target type that is composite (or a
	// domain over one): compared with an untyped parameter, such a column
	// makes it a record, whose input is not implemented, so its key
	// parameters are cast to the column's type. Nil when there is none.
	composite []bool
}

// isComposite reports whether column i's target type is composite.
func (f *targetFacts) isComposite(i int) bool { return i < len(f.composite) && f.composite[i] }

// compositeColumnsSQL returns the columns of table $1 whose type is
// composite, directly or through domains.
const compositeColumnsSQL = `WITH RECURSIVE base(name, typ) AS (
  SELECT a.attname::text, a.atttypid FROM pg_attribute a
  WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT b.name, t.typbasetype FROM base b JOIN pg_type t ON t.oid = b.typ WHERE t.typtype = 'd')
SELECT coalesce(array_agg(b.name), '{}') FROM base b JOIN pg_type t ON t.oid = b.typ WHERE t.typtype = 'c'`

// describeTarget reads what the statements of rel need to know of its
// target table, target, beyond the columns: one query.
func (a *Applier) describeTarget(ctx context.Context, rel *relation, target *catalog.Table) error {
	var composite []string
	if err := a.conn.QueryRow(ctx, compositeColumnsSQL, rel.ident).Scan(&composite); err != nil {
		return fmt.Errorf("read the column types of %s on the target: %w", rel.src, err)
	}
	rel.partitioned = target.PartitionKey != ""
	for i, c := range rel.src.Columns {
		if slices.Contains(composite, c.Name) {
			if rel.composite == nil {
				rel.composite = make([]bool, len(rel.src.Columns))
			}
			rel.composite[i] = true
		}
	}
	return nil
}
