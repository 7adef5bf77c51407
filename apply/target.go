package apply

import (
	"context"

	"github.com/pgsync/pgsync/catalog"
)

// What the statements need to know of a target table beyond its columns:
// whether it is partitioned (TRUNCATE). Relation reads it (issue 16).

// targetFacts is what Relation reads of the target table for the
// statements of a relation.
type targetFacts struct {
	// partitioned: the target table is partitioned, so a TRUNCATE of it
	// takes its partitions (as the native apply worker does), while any
	// other is truncated ONLY.
	partitioned bool
}

// describeTarget reads what the statements of rel need to know of its
// target table, target, beyond the columns.
func (a *Applier) describeTarget(ctx context.Context, rel *relation, target *catalog.Table) error {
	rel.partitioned = target.PartitionKey != ""
	return nil
}
