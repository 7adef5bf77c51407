package apply

import (
	"slices"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgoutput"
)

// What the statements need to know of a target table beyond its columns:
// whether it is partitioned (TRUNCATE), which columns are of a composite
// type (key casts), and whether a trigger may skip a replicated change
// (skip.go). Relation takes it from the table's catalog.Shape, read in its
// one round trip (issue 23).

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

// factsOf returns what the statements of the source's relation src need
// to know of its target table, whose shape is target.
func factsOf(src *pgoutput.Relation, target *catalog.Shape) targetFacts {
	f := targetFacts{partitioned: target.Partitioned}
	for i, c := range src.Columns {
		j := slices.IndexFunc(target.Columns, func(t catalog.ShapeColumn) bool { return t.Name == c.Name })
		if j >= 0 && target.Columns[j].Composite {
			if f.composite == nil {
				f.composite = make([]bool, len(src.Columns))
			}
			f.composite[i] = true
		}
	}
	f.checked[rowOpIndex(pgoutput.MsgUpdate)] = mayTriggerSkip(pgoutput.MsgUpdate, target.ReplicaTriggers, f.partitioned)
	f.checked[rowOpIndex(pgoutput.MsgDelete)] = mayTriggerSkip(pgoutput.MsgDelete, target.ReplicaTriggers, f.partitioned)
	return f
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
