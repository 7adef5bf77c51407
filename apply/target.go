package apply

import (
	"context"
	"fmt"
	"slices"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgoutput"
)

// What the statements need to know of a target table beyond its columns:
// whether it is partitioned (TRUNCATE), which columns are of a composite
// type (key casts), and whether a trigger may skip a replicated change
// (skip.go). Relation reads it with one query (issue 16).

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
	// checked says, per operation (rowOpIndex), that a BEFORE row trigger
	// enabled for replicas may skip the operation's rows: its statements
	// also count the rows they were to match (checkedSQL), so that a row
	// the trigger skipped is told from a missing one.
	checked [3]bool
	// skipped counts, per operation, the rows a trigger skipped in the
	// open target transaction; reported once it commits.
	skipped [3]int64
}

// checks reports whether the statements of op on rel count the rows they
// were to match.
func (f *targetFacts) checks(op byte) bool {
	return op != pgoutput.MsgInsert && f.checked[rowOpIndex(op)]
}

// isComposite reports whether column i's target type is composite.
func (f *targetFacts) isComposite(i int) bool { return i < len(f.composite) && f.composite[i] }

// Bits of pg_trigger.tgtype.
const (
	tgDelete = 1 << 3
	tgUpdate = 1 << 4
)

// replicaTriggersSQL returns the operations of the BEFORE row triggers
// that fire for pgsync's session (session_replication_role = replica:
// those enabled REPLICA or ALWAYS) on table $1 or, when it is partitioned,
// on any of its partitions, as tgtype bits.
const replicaTriggersSQL = `SELECT coalesce(bit_or(t.tgtype::int), 0) FROM pg_trigger t
WHERE t.tgrelid IN (SELECT $1::regclass UNION SELECT relid FROM pg_partition_tree($1::regclass))
  AND t.tgenabled IN ('R', 'A') AND t.tgtype & 3 = 3`

// targetFactsSQL returns replicaTriggersSQL's bits and the columns of
// table $1 whose type is composite, directly or through domains.
const targetFactsSQL = `SELECT (` + replicaTriggersSQL + `),
  (WITH RECURSIVE base(name, typ) AS (
     SELECT a.attname::text, a.atttypid FROM pg_attribute a
     WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
     UNION ALL
     SELECT b.name, t.typbasetype FROM base b JOIN pg_type t ON t.oid = b.typ WHERE t.typtype = 'd')
   SELECT coalesce(array_agg(b.name), '{}') FROM base b JOIN pg_type t ON t.oid = b.typ WHERE t.typtype = 'c')`

// describeTarget reads what the statements of rel need to know of its
// target table, target, beyond the columns: one query.
func (a *Applier) describeTarget(ctx context.Context, rel *relation, target *catalog.Table) error {
	var ops int
	var composite []string
	if err := a.conn.QueryRow(ctx, targetFactsSQL, rel.ident).Scan(&ops, &composite); err != nil {
		return fmt.Errorf("read the triggers and column types of %s on the target: %w", rel.src, err)
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
	rel.checked[rowOpIndex(pgoutput.MsgUpdate)] = mayTriggerSkip(pgoutput.MsgUpdate, ops, rel.partitioned)
	rel.checked[rowOpIndex(pgoutput.MsgDelete)] = mayTriggerSkip(pgoutput.MsgDelete, ops, rel.partitioned)
	return nil
}

// mayTriggerSkip reports whether triggers of the tgtype bits ops may skip
// an UPDATE or DELETE of a table (partitioned or not): a BEFORE row
// trigger of the operation, or for an UPDATE of a partitioned table one
// of DELETE too, which fires when the row moves to another partition.
func mayTriggerSkip(op byte, ops int, partitioned bool) bool {
	if op == pgoutput.MsgUpdate {
		return ops&tgUpdate != 0 || partitioned && ops&tgDelete != 0
	}
	return op == pgoutput.MsgDelete && ops&tgDelete != 0
}
