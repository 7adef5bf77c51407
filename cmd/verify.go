package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/job"
	"github.com/pgsync/pgsync/largeobject"
	"github.com/pgsync/pgsync/sequences"
	"github.com/pgsync/pgsync/verify"
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
		RunE: a.withServers(func(ctx context.Context, sv *servers) error {
			src, tgt := sv.src, sv.tgt
			j := job.New(jobOptions(sv.cfg), src, tgt, a.log)
			tables, err := j.Tables(ctx)
			if err != nil {
				return err
			}
			if len(only) > 0 {
				if tables, err = job.SelectTables(tables, only); err != nil {
					return failf(ExitUsage, "%v", err)
				}
			}
			if rows {
				results, err := verify.CompareRows(ctx, src, tgt, tables, maxDiffs)
				verdict := a.printRows(results, err, asJSON)
				if err != nil {
					return verdict
				}
				return recordVerification(ctx, j, "verify --rows", verdict)
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
			var verdict error
			switch {
			case len(differ) > 0:
				verdict = failf(ExitFailed, "%d of %d tables differ: %s", len(differ), len(results), strings.Join(differ, ", "))
			case !los.Identical():
				verdict = failf(ExitFailed, "%d large object(s) differ (pgsync cutover copies them)", len(los.Differ))
			default:
				fmt.Fprintf(a.stdout, "all %d tables identical\n", len(results))
			}
			return recordVerification(ctx, j, "verify", verdict)
		}),
	}
	c.Flags().BoolVar(&rows, "rows", false, "name the rows that differ, by key")
	c.Flags().StringSliceVar(&only, "table", nil, "only these tables (schema.name, comma-separated or repeated)")
	c.Flags().BoolVar(&asJSON, "json", false, "with --rows: print the differing rows as JSON")
	c.Flags().IntVar(&maxDiffs, "max-rows", 1000, "with --rows: stop naming rows of a table after this many")
	return c
}

// recordVerification records verify's verdict (nil: identical) as the
// job's last comparison, which status shows, and returns the verdict.
func recordVerification(ctx context.Context, j *job.Job, kind string, verdict error) error {
	v := job.Verification{Kind: kind, Identical: verdict == nil}
	if verdict != nil {
		v.Found = verdict.Error()
	}
	if err := j.RecordVerification(ctx, v); err != nil {
		return errors.Join(verdict, err)
	}
	return verdict
}

// printRows prints verify --rows' results and words its verdict.
func (a *app) printRows(results []verify.RowsResult, err error, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(results)
	} else {
		verify.PrintRows(a.stdout, results)
	}
	if err != nil {
		return err
	}
	var differ []string
	for _, r := range results {
		if len(r.Diffs) > 0 {
			differ = append(differ, r.Table)
		}
	}
	if len(differ) > 0 {
		return failf(ExitFailed, "rows differ in %d of %d tables: %s", len(differ), len(results), strings.Join(differ, ", "))
	}
	if !asJSON {
		fmt.Fprintf(a.stdout, "all %d tables identical, row by row\n", len(results))
	}
	return nil
}
