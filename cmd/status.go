package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/apply"
	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/replication"
)

// jobStatus is the output of pgsync status; its JSON keys are documented.
type jobStatus struct {
	Job               string `json:"job"`
	Slot              string `json:"slot"`
	SlotExists        bool   `json:"slot_exists"`
	SlotActive        bool   `json:"slot_active"`
	WALStatus         string `json:"wal_status"`
	ConfirmedFlushLSN string `json:"confirmed_flush_lsn"`
	State             string `json:"state"`
	AppliedLSN        string `json:"applied_lsn"`
	SourceWALLSN      string `json:"source_wal_lsn"`
	LagBytes          *int64 `json:"lag_bytes"`
	// LagSeconds is the source's clock minus the source commit time of the
	// last transaction applied, 0 when nothing is left to send, null when
	// unknown (nothing applied since bootstrap).
	LagSeconds       *float64 `json:"lag_seconds"`
	RetainedWALBytes *int64   `json:"retained_wal_bytes"`
	// SafeWALSizeBytes is how much more WAL the source may write before it
	// invalidates the slot; null when max_slot_wal_keep_size is unlimited.
	SafeWALSizeBytes     *int64 `json:"safe_wal_size_bytes"`
	MaxSlotWALKeepSizeMB int64  `json:"max_slot_wal_keep_size_mb"` // -1: unlimited
	// Warnings are conditions to act on before they stop the job.
	Warnings []string `json:"warnings,omitempty"`
	// UnloggedSkipped lists the UNLOGGED tables the patterns match, which
	// logical replication cannot carry.
	UnloggedSkipped []string `json:"unlogged_skipped,omitempty"`
	// TablesBeingAdded lists the tables pgsync add-tables is copying (or
	// left half copied): run pauses at their first change until the copy
	// is recorded.
	TablesBeingAdded []string `json:"tables_being_added,omitempty"`
	// Problem says what stops the job from streaming and what to do, when
	// something does.
	Problem string `json:"problem,omitempty"`
}

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
		RunE: a.withServers(func(ctx context.Context, sv *servers) error {
			cfg, src, tgt := sv.cfg, sv.src, sv.tgt
			n := names(cfg)
			slot, err := replication.Status(ctx, src, n)
			if err != nil {
				return err
			}
			st := jobStatus{Job: cfg.Job, Slot: n.Slot, SlotExists: slot.Exists, SlotActive: slot.Active, WALStatus: slot.WALStatus,
				SourceWALLSN: slot.CurrentWALLSN.String(), State: "not bootstrapped"}
			st.MaxSlotWALKeepSizeMB = slot.MaxSlotWALKeepSize
			if slot.MaxSlotWALKeepSize > 0 {
				st.MaxSlotWALKeepSizeMB = slot.MaxSlotWALKeepSize >> 20
			}
			if slot.Exists {
				st.ConfirmedFlushLSN = slot.ConfirmedFlushLSN.String()
				retained := int64(slot.CurrentWALLSN) - int64(slot.RestartLSN)
				st.RetainedWALBytes = &retained
				st.SafeWALSizeBytes = slot.SafeWALSize
				if w := retainedWALWarning(retained, slot.MaxSlotWALKeepSize); w != "" {
					st.Warnings = append(st.Warnings, w)
				}
			}
			prog, err := apply.ReadProgress(ctx, tgt, cfg.Job)
			switch {
			case errors.Is(err, apply.ErrNoProgress):
			case err != nil:
				return err
			default:
				st.State = prog.State
				st.AppliedLSN = prog.LSN.String()
				// The slot may be ahead of the progress row when it skipped
				// WAL without changes for the job: lag is what the source
				// still has to send.
				applied := max(prog.LSN, slot.ConfirmedFlushLSN)
				lag := max(int64(slot.CurrentWALLSN)-int64(applied), 0)
				st.LagBytes = &lag
				switch {
				case lag == 0:
					st.LagSeconds = new(float64)
				case prog.SourceCommitTime != nil:
					secs := max(slot.SourceNow.Sub(*prog.SourceCommitTime).Seconds(), 0)
					st.LagSeconds = &secs
				}
			}
			added, err := apply.ReadAddedTables(ctx, tgt, cfg.Job)
			if err != nil {
				return err
			}
			for name, t := range added {
				if t.State == apply.TableCopying {
					st.TablesBeingAdded = append(st.TablesBeingAdded, name)
				}
			}
			slices.Sort(st.TablesBeingAdded)
			st.Problem = slotProblem(st)
			unlogged, err := catalog.UnloggedMatches(ctx, src, cfg.Tables)
			if err != nil {
				return err
			}
			for _, t := range unlogged {
				st.UnloggedSkipped = append(st.UnloggedSkipped, t.String())
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
			if st.Problem != "" {
				fmt.Fprintf(a.stdout, "problem:             %s\n", st.Problem)
			}
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the status as one JSON object")
	return c
}

// retainedWALWarning warns when the slot retains more than half of what
// max_slot_wal_keep_size (limit, -1: unlimited) allows.
func retainedWALWarning(retained, limit int64) string {
	if limit <= 0 || retained <= limit/2 {
		return ""
	}
	return fmt.Sprintf("the slot retains %s of WAL, more than half of max_slot_wal_keep_size (%s): past it the source invalidates the slot and the job must start over; find why run is behind (a stopped run, a slow or locked target)",
		humanize.IBytes(uint64(retained)), humanize.IBytes(uint64(limit)))
}

// slotProblem describes a bootstrapped job whose slot cannot stream.
func slotProblem(st jobStatus) string {
	if st.State == "not bootstrapped" {
		return ""
	}
	switch {
	case !st.SlotExists:
		return withSlotRemedy(fmt.Errorf("slot %s of job %s: %w", st.Slot, st.Job, replication.ErrSlotMissing)).Error()
	case st.WALStatus == "lost":
		return withSlotRemedy(fmt.Errorf("slot %s of job %s: %w", st.Slot, st.Job, replication.ErrSlotInvalidated)).Error()
	}
	return ""
}
