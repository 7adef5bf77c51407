package job

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dustin/go-humanize"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/replication"
)

// Status is what pgsync status shows; its JSON keys are documented.
type Status struct {
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
	// LargeObjectsSource and LargeObjectsTarget count the large objects
	// on each side: logical decoding does not carry them, so they differ
	// while the job streams, until cutover copies them.
	LargeObjectsSource int64 `json:"large_objects_source"`
	LargeObjectsTarget int64 `json:"large_objects_target"`
	// LastVerification is the job's last comparison of the two sides
	// (verify, verify --rows or cutover); null when none ran.
	LastVerification *Verification `json:"last_verification"`
	// Cutover is how far the job's cutover got (its row of
	// pgsync.cutovers: "started" ... "done"); empty when none is recorded.
	// A cutover not "done" was interrupted: a rerun of it finishes it.
	Cutover string `json:"cutover,omitempty"`
	// Problem says what stops the job from streaming and what to do, when
	// something does.
	Problem string `json:"problem,omitempty"`
	// ProblemErr is the problem as an error, which cmd words into Problem
	// with what to do.
	ProblemErr error `json:"-"`
}

// Status reads the job's state, slot, positions and lag.
func (j *Job) Status(ctx context.Context) (*Status, error) {
	slot, err := replication.Status(ctx, j.src, j.names)
	if err != nil {
		return nil, err
	}
	st := &Status{Job: j.opts.Job, Slot: j.names.Slot, SlotExists: slot.Exists, SlotActive: slot.Active, WALStatus: slot.WALStatus,
		SourceWALLSN: slot.CurrentWALLSN.String(), State: "not bootstrapped"}
	st.MaxSlotWALKeepSizeMB = slot.MaxSlotWALKeepSizeBytes
	if slot.MaxSlotWALKeepSizeBytes > 0 {
		st.MaxSlotWALKeepSizeMB = slot.MaxSlotWALKeepSizeBytes >> 20
	}
	if slot.Exists {
		st.ConfirmedFlushLSN = slot.ConfirmedFlushLSN.String()
		retained := int64(slot.CurrentWALLSN) - int64(slot.RestartLSN)
		st.RetainedWALBytes = &retained
		st.SafeWALSizeBytes = slot.SafeWALSize
		if w := retainedWALWarning(retained, slot.MaxSlotWALKeepSizeBytes); w != "" {
			st.Warnings = append(st.Warnings, w)
		}
	}
	prog, err := ledger.ReadProgress(ctx, j.tgt, j.opts.Job)
	switch {
	case errors.Is(err, ledger.ErrNoProgress):
	case err != nil:
		return nil, err
	default:
		st.State = prog.State.String()
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
	added, err := ledger.ReadTables(ctx, j.tgt, j.opts.Job)
	if err != nil {
		return nil, err
	}
	for name, t := range added {
		if t.State.Waits() {
			st.TablesBeingAdded = append(st.TablesBeingAdded, name)
		}
	}
	slices.Sort(st.TablesBeingAdded)
	st.ProblemErr = slotProblem(st)
	unlogged, err := catalog.UnloggedMatches(ctx, j.src, j.opts.Tables)
	if err != nil {
		return nil, err
	}
	for _, t := range unlogged {
		st.UnloggedSkipped = append(st.UnloggedSkipped, t.String())
	}
	if err := j.src.QueryRow(ctx, "SELECT count(*) FROM pg_largeobject_metadata").Scan(&st.LargeObjectsSource); err != nil {
		return nil, fmt.Errorf("count the source's large objects: %w", err)
	}
	if err := j.tgt.QueryRow(ctx, "SELECT count(*) FROM pg_largeobject_metadata").Scan(&st.LargeObjectsTarget); err != nil {
		return nil, fmt.Errorf("count the target's large objects: %w", err)
	}
	if st.LastVerification, err = j.lastVerification(ctx); err != nil {
		return nil, err
	}
	rec, err := ledger.ReadCutover(ctx, j.tgt, j.opts.Job)
	if err != nil {
		return nil, err
	}
	if rec.Step != ledger.CutoverNone {
		st.Cutover = rec.Step.String()
	}
	return st, nil
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

// slotProblem is what stops a bootstrapped job's slot from streaming; nil
// when nothing does.
func slotProblem(st *Status) error {
	switch {
	case st.State == "not bootstrapped":
		return nil
	case st.State == string(ledger.JobReversed):
		// Its slot is gone by design: the target holds everything, and
		// the reverse job streams the other way.
		return fmt.Errorf("job %s: %w", st.Job, ErrJobReversed)
	case !st.SlotExists:
		return fmt.Errorf("slot %s of job %s: %w", st.Slot, st.Job, ErrSlotMissing)
	case st.WALStatus == "lost":
		return fmt.Errorf("slot %s of job %s: %w", st.Slot, st.Job, ErrSlotInvalidated)
	}
	return nil
}
