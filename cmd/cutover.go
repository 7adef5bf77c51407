package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/apply"
	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/sequences"
	"github.com/pgsync/pgsync/verify"
)

// cutoverReport is what cutover prints for the operator's records.
type cutoverReport struct {
	Job             string               `json:"job"`
	Started         time.Time            `json:"started"`
	Finished        time.Time            `json:"finished"`
	LagBytesAtStart int64                `json:"lag_bytes_at_start"`
	LockedRoles     []string             `json:"locked_roles,omitempty"`
	SourceLSN       string               `json:"source_lsn"` // the source's WAL position the target reached
	AppliedLSN      string               `json:"applied_lsn"`
	WaitSeconds     float64              `json:"wait_seconds"`
	Tables          []verify.Result      `json:"tables"`
	Sequences       []sequences.Sequence `json:"sequences_set"`
	Identical       bool                 `json:"identical"`
}

func (a *app) cutoverCmd() *cobra.Command {
	var maxLag string
	var lockRoles []string
	var unlockRoles []string
	var timeout time.Duration
	var asJSON bool
	c := &cobra.Command{
		Use:   "cutover",
		Short: "Finish a move: wait until the target has everything, set its sequences, verify, report",
		Long: `cutover ends a move while pgsync run streams: it checks that the lag is under
--max-lag, optionally makes the source read-only for the application's
roles (--lock-source), waits until the target has applied everything up to
the source's WAL position, sets the target's sequences (as pgsync
sequences does), runs verify and prints a report. Switch the application
to the target once it says identical.

--lock-source ROLE runs, on the source, ALTER ROLE ROLE SET
default_transaction_read_only = on and ends that role's sessions on the
source database, so that its reconnections can read but not write. Undo it
with pgsync cutover --unlock-source ROLE (ALTER ROLE ROLE RESET
default_transaction_read_only). Without --lock-source, writes that arrive
on the source after the wait are not on the target: stop them first.

Exit status: 0 the target has everything and verify says identical (the
report says so), 1 the lag is over --max-lag, the wait timed out, a table
differs, or an error.`,
		Args: cobra.NoArgs,
		RunE: a.withServers(func(ctx context.Context, sv *servers) error {
			if len(unlockRoles) > 0 {
				return a.unlockSource(ctx, sv.src, unlockRoles)
			}
			limit, err := humanize.ParseBytes(maxLag)
			if err != nil {
				return failf(ExitUsage, "--max-lag %q: %v", maxLag, err)
			}
			rep, err := a.cutover(ctx, sv, int64(limit), lockRoles, timeout)
			if rep != nil {
				a.printCutover(rep, asJSON)
			}
			return err
		}),
	}
	c.Flags().StringVar(&maxLag, "max-lag", "64MiB", "refuse to start while the target is further behind than this")
	c.Flags().StringSliceVar(&lockRoles, "lock-source", nil, "make the source read-only for these roles (comma-separated) before the final wait")
	c.Flags().StringSliceVar(&unlockRoles, "unlock-source", nil, "undo --lock-source for these roles, and do nothing else")
	c.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up waiting for the target after this long")
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}

func (a *app) cutover(ctx context.Context, sv *servers, maxLag int64, lockRoles []string, timeout time.Duration) (*cutoverReport, error) {
	cfg, src, tgt := sv.cfg, sv.src, sv.tgt
	rep := &cutoverReport{Job: cfg.Job, Started: time.Now().UTC()}
	n := names(cfg)
	applied, head, err := appliedAndHead(ctx, src, tgt, n, cfg.Job)
	if err != nil {
		return nil, err
	}
	rep.LagBytesAtStart = max(int64(head)-int64(applied), 0)
	if rep.LagBytesAtStart > maxLag {
		return nil, failf(ExitFailed, "job %s is %s behind the source, over --max-lag %s: let pgsync run catch up first",
			cfg.Job, humanize.IBytes(uint64(rep.LagBytesAtStart)), humanize.IBytes(uint64(maxLag)))
	}
	tables, err := jobTables(ctx, cfg, src)
	if err != nil {
		return nil, err
	}
	for _, role := range lockRoles {
		if err := lockRole(ctx, src, role); err != nil {
			return nil, err
		}
		rep.LockedRoles = append(rep.LockedRoles, role)
		a.log.Info("source locked for role", "role", role, "undo", "pgsync cutover --unlock-source "+role)
	}
	// Everything committed on the source up to now must reach the target.
	if err := src.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&rep.SourceLSN); err != nil {
		return nil, fmt.Errorf("read the source's WAL position: %w", err)
	}
	goal, _ := pglogrepl.ParseLSN(rep.SourceLSN)
	waitStart := time.Now()
	deadline := waitStart.Add(timeout)
	for {
		applied, _, err = appliedAndHead(ctx, src, tgt, n, cfg.Job)
		if err != nil {
			return nil, err
		}
		if applied >= goal {
			break
		}
		if time.Now().After(deadline) {
			return nil, failf(ExitFailed, "the target reached %s, not the source's %s, within --timeout %s: is pgsync run running? (pgsync status)", applied, goal, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	rep.AppliedLSN = applied.String()
	rep.WaitSeconds = time.Since(waitStart).Seconds()

	seqs, err := sequences.List(ctx, src, tgt, tables)
	if err != nil {
		return nil, err
	}
	moved, err := sequences.Sync(ctx, tgt, seqs)
	rep.Sequences = moved
	if err != nil && !errors.Is(err, sequences.ErrMissing) {
		return rep, err
	}
	if err != nil {
		a.log.Warn("sequences", "err", err)
	}
	rep.Tables, err = verify.Compare(ctx, src, tgt, tables)
	if err != nil {
		return rep, err
	}
	rep.Identical = true
	var differ []string
	for _, r := range rep.Tables {
		if !r.Match() {
			rep.Identical = false
			differ = append(differ, r.Table)
		}
	}
	rep.Finished = time.Now().UTC()
	if !rep.Identical {
		return rep, failf(ExitFailed, "%d of %d tables differ after the wait: %s (were writes still arriving on the source? use --lock-source)", len(differ), len(rep.Tables), strings.Join(differ, ", "))
	}
	return rep, nil
}

// appliedAndHead returns the position the target has applied (or the slot
// confirmed, when that is further: WAL without the job's changes) and the
// source's current WAL position.
func appliedAndHead(ctx context.Context, src, tgt *pgx.Conn, n replication.Names, job string) (applied, head pglogrepl.LSN, err error) {
	slot, err := replication.Status(ctx, src, n)
	if err != nil {
		return 0, 0, err
	}
	if !slot.Exists {
		return 0, 0, failf(ExitFailed, "job %s: %v", job, replication.ErrSlotMissing)
	}
	prog, err := apply.ReadProgress(ctx, tgt, job)
	if err != nil {
		return 0, 0, err
	}
	if prog.State != apply.StateReady {
		return 0, 0, failf(ExitFailed, "job %s is not bootstrapped (state %s)", job, prog.State)
	}
	return max(prog.LSN, slot.ConfirmedFlushLSN), slot.CurrentWALLSN, nil
}

// lockRole makes role read-only on the source for new sessions and ends
// its current sessions on the source database.
func lockRole(ctx context.Context, src *pgx.Conn, role string) error {
	q := catalog.QuoteIdent(role)
	if _, err := src.Exec(ctx, "ALTER ROLE "+q+" SET default_transaction_read_only = on"); err != nil {
		return fmt.Errorf("lock the source for role %s: %w", role, err)
	}
	if _, err := src.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE usename = $1 AND datname = current_database() AND pid <> pg_backend_pid()`, role); err != nil {
		return fmt.Errorf("end the sessions of role %s on the source (it is read-only for new ones; undo with pgsync cutover --unlock-source %s): %w", role, role, err)
	}
	return nil
}

func (a *app) unlockSource(ctx context.Context, src *pgx.Conn, roles []string) error {
	for _, role := range roles {
		if _, err := src.Exec(ctx, "ALTER ROLE "+catalog.QuoteIdent(role)+" RESET default_transaction_read_only"); err != nil {
			return fmt.Errorf("unlock the source for role %s: %w", role, err)
		}
		fmt.Fprintf(a.stdout, "role %s may write on the source again (new sessions)\n", role)
	}
	return nil
}

func (a *app) printCutover(rep *cutoverReport, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return
	}
	fmt.Fprintf(a.stdout, "job:             %s\n", rep.Job)
	fmt.Fprintf(a.stdout, "started:         %s\n", rep.Started.Format(time.RFC3339))
	fmt.Fprintf(a.stdout, "lag at start:    %s\n", humanize.IBytes(uint64(rep.LagBytesAtStart)))
	if len(rep.LockedRoles) > 0 {
		fmt.Fprintf(a.stdout, "source locked:   %s (undo: pgsync cutover --unlock-source %s)\n", strings.Join(rep.LockedRoles, ", "), strings.Join(rep.LockedRoles, ","))
	}
	if rep.SourceLSN != "" {
		fmt.Fprintf(a.stdout, "source WAL:      %s, applied %s after %.1f s\n", rep.SourceLSN, rep.AppliedLSN, rep.WaitSeconds)
	}
	for _, s := range rep.Sequences {
		fmt.Fprintf(a.stdout, "sequence set:    %s = %d (was %d)\n", s.Target, s.SourceLast, s.TargetLast)
	}
	if len(rep.Tables) > 0 {
		verify.Print(a.stdout, rep.Tables)
	}
	if rep.Identical {
		fmt.Fprintf(a.stdout, "finished:        %s: all %d tables identical; switch the application to the target\n", rep.Finished.Format(time.RFC3339), len(rep.Tables))
	}
}
