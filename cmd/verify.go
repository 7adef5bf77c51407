package cmd

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/job"
)

func (a *app) verifyCmd() *cobra.Command {
	var rows, asJSON bool
	var only []string
	var maxDiffs int
	c := &cobra.Command{
		Use:   "verify",
		Short: "Compare row counts and content hashes of every table on source and target",
		Long: `verify counts the rows of every table of the job on both sides and hashes
their content (an order-independent sum of per-row hashes, so it needs no
key and no sort), then prints one line per table, and compares the large
objects by a hash of each (they are named when they differ). It also lists the
sequences that are behind the source, which is expected while the job
streams (pgsync sequences sets them). Run it while run is caught up and
writes are paused, or use pgsync cutover.

--rows names the rows that differ instead: each table's rows are grouped by
a hash of their primary key (of the whole row without one), each side sums
a hash of each group in one pass, and only the rows of the groups that
differ are read and compared, by key and by a hash of each column. Each
differing row is printed with its key and its kind: only on the source,
only on the target, or values differ (with the columns). --table limits
it to some tables, --json prints the rows as JSON.

Exit status: 0 every table and large object identical, 1 a table, a row
or a large object differs (named) or an error.`,
		Args: cobra.NoArgs,
		RunE: a.withJob(func(ctx context.Context, j *job.Job) error {
			rep, err := j.Verify(ctx, job.VerifyOptions{Rows: rows, Tables: only, MaxRows: maxDiffs})
			if errors.Is(err, job.ErrUnknownTable) {
				return failf(ExitUsage, "%v", err)
			}
			if rep != nil {
				rep.Print(a.stdout, asJSON)
			}
			return err
		}),
	}
	c.Flags().BoolVar(&rows, "rows", false, "name the rows that differ, by key")
	c.Flags().StringSliceVar(&only, "table", nil, "only these tables (schema.name, comma-separated or repeated)")
	c.Flags().BoolVar(&asJSON, "json", false, "with --rows: print the differing rows as JSON")
	c.Flags().IntVar(&maxDiffs, "max-rows", 1000, "with --rows: stop naming rows of a table after this many")
	return c
}
