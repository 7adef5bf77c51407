package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/job"
)

func (a *app) statusCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the slot, the applied position and the lag",
		Long: `status shows the job's state, its slot (present, active, invalidated), the
position confirmed to the source and applied on the target, the lag in
bytes and in seconds, the WAL the slot retains and how much more the
source allows (max_slot_wal_keep_size), with a warning past half of it,
and the tables pgsync add-tables is still copying.
--json prints the same as one object (keys in docs/reference.md).

Exit status: 0 when both servers answered (a job not bootstrapped, or a
slot missing or invalidated, is shown under state and problem, with the
remedy), 1 when a server cannot be reached.`,
		Args: cobra.NoArgs,
		RunE: a.withJob(func(ctx context.Context, j *job.Job) error {
			st, err := j.Status(ctx)
			if err != nil {
				return err
			}
			if st.ProblemErr != nil {
				st.Problem = remedy(st.ProblemErr, "status").Error()
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			fmt.Fprintf(a.stdout, "job:                 %s (%s)\n", st.Job, st.State)
			fmt.Fprintf(a.stdout, "slot:                %s (exists: %t, active: %t, wal_status: %s)\n", st.Slot, st.SlotExists, st.SlotActive, st.WALStatus)
			fmt.Fprintf(a.stdout, "confirmed_flush_lsn: %s\n", st.ConfirmedFlushLSN)
			fmt.Fprintf(a.stdout, "applied_lsn:         %s\n", st.AppliedLSN)
			fmt.Fprintf(a.stdout, "source_wal_lsn:      %s\n", st.SourceWALLSN)
			if st.LagBytes != nil {
				fmt.Fprintf(a.stdout, "lag_bytes:           %d\n", *st.LagBytes)
			}
			if st.LagSeconds != nil {
				fmt.Fprintf(a.stdout, "lag_seconds:         %.1f\n", *st.LagSeconds)
			}
			if st.RetainedWALBytes != nil {
				fmt.Fprintf(a.stdout, "retained_wal_bytes:  %d\n", *st.RetainedWALBytes)
			}
			if st.SafeWALSizeBytes != nil {
				fmt.Fprintf(a.stdout, "safe_wal_size_bytes: %d\n", *st.SafeWALSizeBytes)
			}
			for _, w := range st.Warnings {
				fmt.Fprintf(a.stdout, "warning:             %s\n", w)
			}
			if len(st.UnloggedSkipped) > 0 {
				fmt.Fprintf(a.stdout, "unlogged_skipped:    %s (logical replication cannot publish UNLOGGED tables)\n", strings.Join(st.UnloggedSkipped, ", "))
			}
			if len(st.TablesBeingAdded) > 0 {
				fmt.Fprintf(a.stdout, "tables_being_added:  %s (run pauses at their first change until pgsync add-tables has copied them)\n", strings.Join(st.TablesBeingAdded, ", "))
			}
			if st.LargeObjectsSource > 0 || st.LargeObjectsTarget > 0 {
				fmt.Fprintf(a.stdout, "large_objects:       %d on the source, %d on the target (not streamed: pgsync cutover copies those created or changed since bootstrap)\n", st.LargeObjectsSource, st.LargeObjectsTarget)
			}
			if st.Cutover != "" {
				fmt.Fprintf(a.stdout, "cutover:             %s\n", st.Cutover)
			}
			if v := st.LastVerification; v != nil {
				verdict := "identical"
				if !v.Identical {
					verdict = "differ: " + v.Found
				}
				fmt.Fprintf(a.stdout, "last_verification:   %s, %s at %s: %s\n", v.At.Format(time.RFC3339), v.Kind, v.LSN, verdict)
			}
			if st.Problem != "" {
				fmt.Fprintf(a.stdout, "problem:             %s\n", st.Problem)
			}
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the status as one JSON object")
	return c
}
