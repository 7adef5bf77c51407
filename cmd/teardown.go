package cmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/apply"
	"github.com/pgsync/pgsync/replication"
)

func (a *app) teardownCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "teardown",
		Short: "Drop the slot and publication on the source and the job's progress on the target",
		Long: `teardown ends a job: it drops the slot and the publication on the source
and the job's rows in pgsync.progress and pgsync.tables on the target.
The target tables and their rows are kept. It is safe to run twice, and it
refuses while pgsync run holds the slot.

Exit status: 0 torn down (or nothing left to drop), 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: a.withServers(func(ctx context.Context, sv *servers) error {
			cfg, src, tgt := sv.cfg, sv.src, sv.tgt
			n := names(cfg)
			if err := replication.Drop(ctx, src, n); err != nil {
				return err
			}
			if err := apply.DeleteProgress(ctx, tgt, cfg.Job); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "job %s torn down: slot and publication %s dropped, progress removed (target tables kept)\n", cfg.Job, n.Slot)
			return nil
		}),
	}
}
