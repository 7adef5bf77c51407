package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/config"
	"github.com/pgsync/pgsync/job"
)

func (a *app) cutoverCmd() *cobra.Command {
	var maxLag string
	var lockRoles []string
	var unlockRoles []string
	var timeout time.Duration
	var asJSON, reverse bool
	var reverseJob string
	c := &cobra.Command{
		Use:   "cutover",
		Short: "Finish a move: wait until the target has everything, set its sequences, report it ready, then verify",
		Long: `cutover ends a move while pgsync run streams: it checks that the lag is under
--max-lag, optionally makes the source read-only for the application's
roles (--lock-source), waits until the target has applied everything up to
the source's WAL position, takes a snapshot of each side there, sets the
target's sequences (as pgsync sequences does) and prints "ready": switch
the application to the target then. Only after that does it compare the
tables, the locked source against the target's snapshot, so the write
gap does not grow with the database; the verdict is the report's last
line.

--lock-source ROLE runs, on the source, ALTER ROLE ROLE SET
default_transaction_read_only = on and ends that role's sessions on the
source database, all at once, waiting until each has exited (up to 5 s),
so that its reconnections can read but not write. Several roles are locked
together or not at all. Undo it with pgsync cutover --unlock-source ROLE
(ALTER ROLE ROLE RESET default_transaction_read_only). Whatever the
outcome, cutover prints its report, and an error after the lock names the
locked roles and the undo. Without --lock-source, writes that arrive on
the source after the wait are not on the target: stop them first.

--reverse also sets up the way back before it reports the target ready: it
ends the job's slot and publication on the source (nothing echoes back),
records the job as reversed, creates a publication and a slot on the
target, records the reverse job (<job>_back, or --reverse-job) on the
source as ready at that slot's consistent point with the roles it locked,
and writes its configuration beside this one (<job>_back.toml: source and
target swapped). pgsync run -c <job>_back.toml then streams the new
primary's writes back to the old database; pgsync cutover -c
<job>_back.toml is the rollback, which also unlocks exactly the roles this
cutover locked there (and with --reverse, sets up the way forward again).
It refuses before the lock when pgsync check --reverse has a FAIL.

Exit status: 0 the target has everything and the comparison says
identical (the report says so), 1 the lag is over --max-lag, the wait
timed out, a table differs at the cutover position (named; the target was
already reported ready: decide whether to go on), or an error.`,
		Args: cobra.NoArgs,
		RunE: a.withJob(func(ctx context.Context, j *job.Job) error {
			if len(unlockRoles) > 0 {
				if err := j.UnlockSource(ctx, unlockRoles); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "role(s) %s may write on the source again (new sessions)\n", strings.Join(unlockRoles, ", "))
				return nil
			}
			limit, err := humanize.ParseBytes(maxLag)
			if err != nil {
				return failf(ExitUsage, "--max-lag %q: %v", maxLag, err)
			}
			ready := func(rep *job.CutoverReport) {
				if asJSON {
					return // the report below says when
				}
				a.printCutoverReady(rep)
			}
			o := job.CutoverOptions{MaxLagBytes: int64(limit), LockRoles: lockRoles, Timeout: timeout, Ready: ready}
			if reverse {
				cfg, err := a.loadConfig()
				if err != nil {
					return err
				}
				o.Reverse = &job.ReverseOptions{
					Name:        reverseName(cfg, reverseJob),
					CheckConfig: func(name string) error { return config.CheckReverse(a.configPath, cfg, name) },
					WriteConfig: func(name string) (string, error) { return config.WriteReverse(a.configPath, cfg, name) },
				}
			}
			rep, err := j.Cutover(ctx, o)
			a.printCutover(rep, asJSON)
			return err
		}),
	}
	c.Flags().StringVar(&maxLag, "max-lag", "64MiB", "refuse to start while the target is further behind than this")
	c.Flags().StringSliceVar(&lockRoles, "lock-source", nil, "make the source read-only for these roles (comma-separated) before the final wait")
	c.Flags().StringSliceVar(&unlockRoles, "unlock-source", nil, "undo --lock-source for these roles, and do nothing else")
	c.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up waiting for the target after this long")
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	c.Flags().BoolVar(&reverse, "reverse", false, "set up the way back (a reverse job from the target to the source) before reporting ready")
	c.Flags().StringVar(&reverseJob, "reverse-job", "", "the reverse job's name (default <job>_back; <x> for a job named <x>_back)")
	return c
}

func (a *app) printCutover(rep *job.CutoverReport, asJSON bool) {
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
	if len(rep.Tables) > 0 {
		job.PrintTables(a.stdout, rep.Tables)
	}
	if rep.AlreadyDone {
		if r := rep.Reverse; r != nil {
			fmt.Fprintf(a.stdout, "way back:        job %s streams the target back to the source from %s: pgsync run -c %s (rollback: pgsync cutover -c %s)\n", r.Job, r.From, r.Config, r.Config)
		}
		verdict := "the comparison at the cutover position was interrupted: pgsync verify compares"
		if rep.Identical {
			verdict = "all tables were identical at the cutover position"
		}
		fmt.Fprintf(a.stdout, "finished:        done before, ready at %s (%s); nothing changed\n", rep.ReadyAt.Format(time.RFC3339), verdict)
		return
	}
	if rep.Resumed && rep.Identical {
		fmt.Fprintf(a.stdout, "finished:        %s: an interrupted cutover finished; all %d tables identical at the cutover position\n", rep.Finished.Format(time.RFC3339), len(rep.Tables))
		return
	}
	if rep.Resumed && len(rep.Tables) == 0 && !rep.ReadyAt.IsZero() {
		fmt.Fprintf(a.stdout, "finished:        %s: an interrupted cutover finished; it had been reported ready at %s, and its comparison was interrupted: pgsync verify compares\n", rep.Finished.Format(time.RFC3339), rep.ReadyAt.Format(time.RFC3339))
		return
	}
	if !rep.Finished.IsZero() && !rep.Identical {
		fmt.Fprintf(a.stdout, "finished:        %s: not done (the error below says why)\n", rep.Finished.Format(time.RFC3339))
	}
	if rep.Identical {
		fmt.Fprintf(a.stdout, "finished:        %s: all %d tables identical at the cutover position (compared in %.1f s, after ready)\n", rep.Finished.Format(time.RFC3339), len(rep.Tables), rep.VerifySeconds)
	}
}

// printCutoverReady is cutover's first verdict, printed as soon as the
// target may take the application's writes.
func (a *app) printCutoverReady(rep *job.CutoverReport) {
	for _, s := range rep.Sequences {
		fmt.Fprintf(a.stdout, "sequence set:    %s = %d (was %d)\n", s.Target, s.SourceLast, s.TargetLast)
	}
	if len(rep.UnlockedRoles) > 0 {
		fmt.Fprintf(a.stdout, "target unlocked: %s (locked by the cutover that made this job)\n", strings.Join(rep.UnlockedRoles, ", "))
	}
	if r := rep.Reverse; r != nil {
		fmt.Fprintf(a.stdout, "way back:        job %s streams the target back to the source from %s: pgsync run -c %s (rollback: pgsync cutover -c %s)\n", r.Job, r.From, r.Config, r.Config)
	}
	if lo := rep.LargeObjects; lo != nil {
		fmt.Fprintf(a.stdout, "large objects:   %d on the source; %d created or changed since bootstrap copied, %d removed, in %.2f s\n", lo.Source, lo.Copied, lo.Removed, lo.Seconds)
	}
	gap := ""
	if !rep.LockedAt.IsZero() {
		gap = fmt.Sprintf(" (the source took no writes for %.3f s)", rep.WriteGapSeconds)
	}
	fmt.Fprintf(a.stdout, "ready:           %s: the target has every change up to %s and its sequences; switch the application to it now%s\n",
		rep.ReadyAt.Format(time.RFC3339Nano), rep.SourceLSN, gap)
	fmt.Fprintln(a.stdout, "verifying:       the locked source against the target's snapshot at that position ...")
}
