package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/verify"
)

func (a *app) verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Compare row counts and content hashes of every table on source and target",
		Args:  cobra.NoArgs,
		RunE: a.withServers(func(ctx context.Context, sv *servers) error {
			cfg, src, tgt := sv.cfg, sv.src, sv.tgt

			// The job's tables are those of its publication; before a
			// bootstrap, those the patterns select.
			published, err := replication.PublishedTables(ctx, src, names(cfg).Publication)
			if err != nil {
				return err
			}
			var tables []catalog.Table
			if len(published) == 0 {
				if tables, err = catalog.Resolve(ctx, src, cfg.Tables); err != nil {
					return err
				}
			}
			for _, p := range published {
				t, ok, err := catalog.Lookup(ctx, src, p[0], p[1])
				if err != nil {
					return err
				}
				if ok {
					tables = append(tables, t)
				}
			}
			if len(tables) == 0 {
				return failf(ExitFailed, "job %s has no tables to verify", cfg.Job)
			}
			results, err := verify.Compare(ctx, src, tgt, tables)
			verify.Print(a.stdout, results)
			if err != nil {
				return err
			}
			var differ []string
			for _, r := range results {
				if !r.Match() {
					differ = append(differ, r.Table)
				}
			}
			if len(differ) > 0 {
				return failf(ExitFailed, "%d of %d tables differ: %s", len(differ), len(results), strings.Join(differ, ", "))
			}
			fmt.Fprintf(a.stdout, "all %d tables identical\n", len(results))
			return nil
		}),
	}
}
