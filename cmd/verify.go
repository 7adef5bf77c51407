package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/job"
	"github.com/pgsync/pgsync/largeobject"
	"github.com/pgsync/pgsync/sequences"
	"github.com/pgsync/pgsync/verify"
)

func (a *app) verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Compare row counts and content hashes of every table on source and target",
		Long: `verify counts the rows of every table of the job on both sides and hashes
their content (an order-independent sum of per-row hashes, so it needs no
key and no sort), then prints one line per table, and compares the large
objects by a hash of each (they are named when they differ). It also lists the
sequences that are behind the source, which is expected while the job
streams (pgsync sequences sets them). Run it while run is caught up and
writes are paused, or use pgsync cutover.

Exit status: 0 every table and large object identical, 1 a table or a
large object differs (named) or an error.`,
		Args: cobra.NoArgs,
		RunE: a.withServers(func(ctx context.Context, sv *servers) error {
			src, tgt := sv.src, sv.tgt
			tables, err := job.New(jobOptions(sv.cfg), src, tgt, a.log).Tables(ctx)
			if err != nil {
				return err
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
			// Sequences behind are reported, not failed: logical
			// replication does not carry them, so they are behind for as
			// long as the job streams, until pgsync sequences or cutover.
			seqs, err := sequences.List(ctx, src, tgt, tables)
			if err != nil {
				return err
			}
			behind := 0
			for _, s := range seqs {
				switch {
				case s.Target == "":
					fmt.Fprintf(a.stdout, "sequence %s (%s.%s): missing on the target\n", s.Source, s.Table, s.Column)
				case s.Behind():
					behind++
					fmt.Fprintf(a.stdout, "sequence %s: target %d behind source %d\n", s.Target, s.TargetLast, s.SourceLast)
				}
			}
			if behind > 0 {
				fmt.Fprintf(a.stdout, "%d of %d sequences behind the source: pgsync sequences (or cutover) sets them\n", behind, len(seqs))
			}
			// Large objects: logical decoding does not carry them, bootstrap
			// and cutover copy them; compared by a hash of each.
			los, err := largeobject.Compare(ctx, src, tgt)
			if err != nil {
				return err
			}
			if los.Source > 0 || los.Target > 0 {
				for i, d := range los.Differ {
					if i == 20 {
						fmt.Fprintf(a.stdout, "large object ...: %d more differ\n", len(los.Differ)-20)
						break
					}
					fmt.Fprintf(a.stdout, "large object %d: %s\n", d.OID, d.Kind)
				}
				fmt.Fprintf(a.stdout, "large objects: %d on the source, %d on the target, %d differ\n", los.Source, los.Target, len(los.Differ))
			}
			switch {
			case len(differ) > 0:
				return failf(ExitFailed, "%d of %d tables differ: %s", len(differ), len(results), strings.Join(differ, ", "))
			case !los.Identical():
				return failf(ExitFailed, "%d large object(s) differ (pgsync cutover copies them)", len(los.Differ))
			}
			fmt.Fprintf(a.stdout, "all %d tables identical\n", len(results))
			return nil
		}),
	}
}
