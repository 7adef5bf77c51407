package cmd

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/apply"
	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/snapshot"
)

func (a *app) addTablesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "add-tables",
		Short: "Add the tables job.tables now matches to a running job, without starting over",
		Long: `add-tables adds the tables that job.tables matches and the job's publication
lacks, while pgsync run keeps running (or while it is stopped). It checks
them, creates the missing ones on the target, adds them to the
publication, copies them under a snapshot taken after that (a temporary
slot's), and records that snapshot's position for each in pgsync.tables.

run applies their changes from transactions committed after the copy,
exactly once. The job's other tables keep streaming until run reaches the
first change of an added table; run then pauses (it logs "pausing" and,
when the copy is done, "resumed" with the seconds paused) and carries on
from where it was. The pause is at most as long as add-tables, which
prints how long it took.

Published tables that job.tables no longer matches are listed, never
dropped. An interrupted add-tables is finished by running it again.

Exit status: 0 the tables are added (or none is new), 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: a.withServers(func(ctx context.Context, sv *servers) error {
			return a.addTables(ctx, sv)
		}),
	}
}

func (a *app) addTables(ctx context.Context, sv *servers) error {
	began := time.Now()
	cfg, src, tgt := sv.cfg, sv.src, sv.tgt
	n := names(cfg)

	prog, err := apply.ReadProgress(ctx, tgt, cfg.Job)
	if err != nil {
		return err
	}
	if prog.State != apply.StateReady {
		return failf(ExitFailed, "job %s is not bootstrapped (state %s): run pgsync bootstrap", cfg.Job, prog.State)
	}
	slot, err := replication.Status(ctx, src, n)
	if err != nil {
		return err
	}
	if !slot.Exists {
		return withSlotRemedy(fmt.Errorf("job %s: %w", cfg.Job, replication.ErrSlotMissing))
	}

	published, err := replication.PublishedTables(ctx, src, n.Publication)
	if err != nil {
		return err
	}
	isPublished := make(map[string]bool, len(published))
	for _, p := range published {
		isPublished[p[0]+"."+p[1]] = true
	}
	matched, err := catalog.Resolve(ctx, src, cfg.Tables)
	if err != nil {
		return err
	}
	added, err := apply.ReadAddedTables(ctx, tgt, cfg.Job)
	if err != nil {
		return err
	}
	// New: matched and not published, or published by an add-tables that
	// did not finish its copy.
	var fresh []catalog.Table
	var unpublished []catalog.Table
	interrupted := false
	isMatched := make(map[string]bool, len(matched))
	for _, t := range matched {
		isMatched[t.String()] = true
		switch {
		case !isPublished[t.String()]:
			fresh, unpublished = append(fresh, t), append(unpublished, t)
		case added[t.String()].State == apply.TableCopying:
			fresh = append(fresh, t)
			interrupted = true
		}
	}
	var gone []string
	for _, p := range published {
		if !isMatched[p[0]+"."+p[1]] {
			gone = append(gone, p[0]+"."+p[1])
		}
	}
	if len(gone) > 0 {
		a.log.Warn("published tables no longer match job.tables; they stay in the job (not dropped)", "tables", strings.Join(gone, ", "))
	}
	if len(fresh) == 0 {
		fmt.Fprintf(a.stdout, "job %s: no new table matches job.tables", cfg.Job)
		if len(gone) > 0 {
			fmt.Fprintf(a.stdout, "; still replicated though no longer matched: %s", strings.Join(gone, ", "))
		}
		fmt.Fprintln(a.stdout)
		return nil
	}

	if failed := a.preflight(ctx, cfg, false).failed(); len(failed) > 0 {
		return failf(ExitFailed, "%d checks failed (pgsync check lists them all): %s", len(failed), failedItems(failed))
	}
	if err := pgconnect.ReplicaSession(ctx, tgt); err != nil {
		return err
	}
	if err := apply.EnsureProgressTable(ctx, tgt); err != nil {
		return err
	}
	pairs := make([][2]string, len(fresh))
	for i, t := range fresh {
		pairs[i] = [2]string{t.Schema, t.Name}
	}
	// Recorded before the source publishes the tables: a running run
	// pauses at a table's first change until the copy is recorded below.
	if err := apply.MarkTablesCopying(ctx, tgt, cfg.Job, pairs); err != nil {
		return err
	}
	created, parents, err := a.prepareTargetTables(ctx, src, tgt, fresh, interrupted)
	if err != nil {
		return err
	}
	objects, err := a.secondaryObjects(ctx, src, tgt, fresh, toBuild(fresh, created, parents, interrupted))
	if err != nil {
		return err
	}
	if len(unpublished) > 0 {
		if err := replication.AddToPublication(ctx, src, n, unpublished); err != nil {
			return err
		}
	}
	// The slot is created after the publication took the tables: it waits
	// for the transactions running then, so a transaction that changed a
	// table before it was published ends before the consistent point and is
	// in the copy; every later one is streamed by the job's slot.
	repl, err := pgconnect.ConnectReplication(ctx, cfg.SourceURL)
	if err != nil {
		return err
	}
	defer repl.Close(context.WithoutCancel(ctx))
	tmp, err := replication.CreateTemporarySlot(ctx, repl, fmt.Sprintf("pgsync_add_%d", os.Getpid()))
	if err != nil {
		return err
	}
	results, _, _, err := a.copyAndBuild(ctx, cfg, tmp, fresh, objects, &snapshot.Progress{}, "rerun pgsync add-tables to finish")
	if err != nil {
		return err
	}
	if err := apply.MarkTablesReady(ctx, tgt, cfg.Job, pairs, tmp.ConsistentPoint); err != nil {
		return err
	}
	var rows, bytes int64
	names := make([]string, len(results))
	for i, r := range results {
		rows += r.Rows
		bytes += r.Bytes
		names[i] = r.Table
	}
	secs := time.Since(began).Seconds()
	a.log.Info("tables added", "job", cfg.Job, "tables", strings.Join(names, ", "), "copied_at", tmp.ConsistentPoint.String(), "seconds", fmt.Sprintf("%.2f", secs))
	fmt.Fprintf(a.stdout, "added %d tables to job %s (%s): %d rows, %s copied at %s; add-tables took %.1fs: a running pgsync run paused at most that long, from the first change of an added table (its log says how long)\n",
		len(results), cfg.Job, strings.Join(names, ", "), rows, humanize.IBytes(uint64(bytes)), tmp.ConsistentPoint, secs)
	if len(gone) > 0 {
		fmt.Fprintf(a.stdout, "still replicated though no longer matched by job.tables: %s\n", strings.Join(gone, ", "))
	}
	return nil
}
