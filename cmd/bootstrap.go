package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/apply"
	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/config"
	"github.com/pgsync/pgsync/metrics"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/snapshot"
)

func (a *app) bootstrapCmd() *cobra.Command {
	var force bool
	var metricsAddr string
	c := &cobra.Command{
		Use:   "bootstrap",
		Short: "Check, create the publication and slot, create missing target tables and copy every table",
		Long: `bootstrap starts a job. It runs the checks of pgsync check and stops on a
FAIL; creates the publication pgsync_<job> and the logical slot
pgsync_<job> (pgoutput) with an exported snapshot; creates each target
table the target lacks, with the types, sequences and partitioned parents
it needs; copies every table with max_parallel_copies COPY streams that
all read under that one snapshot (a large table in block ranges); builds
the created tables' indexes and constraints after the copy; and records
the slot's consistent point in pgsync.progress on the target, where
pgsync run starts.

Existing target tables must have every source column with the same type
and be empty. A job that is already bootstrapped is refused; --force tears
it down, empties its target tables and starts over. An interrupted
bootstrap is started over by the next one.

Exit status: 0 bootstrapped, 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: a.withServers(func(ctx context.Context, sv *servers) error {
			progress := &snapshot.Progress{}
			if metricsAddr != "" {
				reg := metrics.NewRegistry()
				registerCopyMetrics(reg, progress)
				if err := metrics.Serve(ctx, metricsAddr, reg, a.log); err != nil {
					return err
				}
			}
			return a.bootstrap(ctx, sv, force, progress)
		}),
	}
	c.Flags().BoolVar(&force, "force", false, "tear down an existing job (slot, publication, progress) and start over, emptying its target tables")
	c.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics of the copy at http://ADDR/metrics; off when empty")
	return c
}

func (a *app) bootstrap(ctx context.Context, sv *servers, force bool, progress *snapshot.Progress) error {
	began := time.Now()
	cfg, src, tgt := sv.cfg, sv.src, sv.tgt
	n := names(cfg)

	// The checks of pgsync check come first; nothing is created while one
	// fails. Whether a target table must be empty, bootstrap judges below
	// (--force, an interrupted copy of this job).
	if failed := a.preflight(ctx, cfg, false).failed(); len(failed) > 0 {
		return failf(ExitFailed, "%d checks failed (pgsync check lists them all): %s", len(failed), failedItems(failed))
	}
	if err := pgconnect.ReplicaSession(ctx, tgt); err != nil {
		return err
	}
	tables, err := catalog.Resolve(ctx, src, cfg.Tables)
	if err != nil {
		return err
	}
	unlogged, err := catalog.UnloggedMatches(ctx, src, cfg.Tables)
	if err != nil {
		return err
	}
	for _, t := range unlogged {
		a.log.Warn("skipping an UNLOGGED table: logical replication cannot publish it", "table", t.String())
	}
	if len(tables) == 0 {
		return failf(ExitFailed, "no source table matches job.tables %s", strings.Join(cfg.Tables, ", "))
	}

	// The progress row is written before anything is created on the source,
	// so that a rerun knows the slot and publication are this job's own.
	if err := apply.EnsureProgressTable(ctx, tgt); err != nil {
		return err
	}
	prog, err := apply.ReadProgress(ctx, tgt, cfg.Job)
	resuming := false
	switch {
	case errors.Is(err, apply.ErrNoProgress):
		slot, pub, err := replication.Exists(ctx, src, n)
		if err != nil {
			return err
		}
		if (slot || pub) && !force {
			return failf(ExitFailed, "slot or publication %s already exists on the source but the target has no progress for job %s (another target may use it): choose another job.name, or run pgsync teardown (or bootstrap --force) to drop it", n.Slot, cfg.Job)
		}
	case err != nil:
		return err
	case prog.State == apply.StateReady && !force:
		return failf(ExitFailed, "job %s is already bootstrapped (streaming resumes at %s): run pgsync run, or pgsync teardown / bootstrap --force to start over", cfg.Job, prog.LSN)
	default:
		resuming = prog.State != apply.StateReady
		a.log.Info("starting the job over", "job", cfg.Job, "previous_state", prog.State, "force", force)
	}
	if err := replication.Drop(ctx, src, n); err != nil {
		return err
	}
	if err := apply.WriteProgress(ctx, tgt, apply.Progress{Job: cfg.Job, State: apply.StateCopying}); err != nil {
		return err
	}

	created, parents, err := a.prepareTargetTables(ctx, src, tgt, tables, force || resuming)
	if err != nil {
		return err
	}
	objects, err := a.secondaryObjects(ctx, src, tgt, tables, toBuild(tables, created, parents, resuming))
	if err != nil {
		return err
	}
	if err := replication.CreatePublication(ctx, src, n, tables); err != nil {
		return err
	}
	repl, err := pgconnect.ConnectReplication(ctx, cfg.SourceURL)
	if err != nil {
		return err
	}
	defer repl.Close(context.WithoutCancel(ctx))
	slot, err := replication.CreateSlot(ctx, repl, n)
	if err != nil {
		return err
	}
	a.log.Info("slot created", "slot", n.Slot, "consistent_point", slot.ConsistentPoint.String(), "snapshot", slot.SnapshotName, "tables", len(tables))

	results, built, failed, err := a.copyAndBuild(ctx, cfg, slot, tables, objects, progress, "rerun pgsync bootstrap to start over")
	if err != nil {
		return err
	}
	if err := apply.WriteProgress(ctx, tgt, apply.Progress{Job: cfg.Job, State: apply.StateReady, LSN: slot.ConsistentPoint}); err != nil {
		return err
	}
	var rows, bytes int64
	for _, r := range results {
		rows += r.Rows
		bytes += r.Bytes
	}
	secs := time.Since(began).Seconds()
	a.log.Info("bootstrap done", "job", cfg.Job, "tables", len(results), "rows", rows, "bytes", bytes,
		"seconds", fmt.Sprintf("%.2f", secs), "mb_per_s", fmt.Sprintf("%.1f", float64(bytes)/1e6/secs),
		"stream_from", slot.ConsistentPoint.String())
	fmt.Fprintf(a.stdout, "bootstrapped job %s: %d tables, %d rows, %s in %.1fs; pgsync run streams from %s\n",
		cfg.Job, len(results), rows, humanize.IBytes(uint64(bytes)), secs, slot.ConsistentPoint)
	if len(created) > 0 {
		fmt.Fprintf(a.stdout, "created %d tables", len(created))
		if len(parents) > 0 {
			fmt.Fprintf(a.stdout, " (and %d partitioned tables they belong to)", len(parents))
		}
		fmt.Fprintf(a.stdout, ", %d of their %d indexes and constraints", len(built)-len(failed), len(built))
		if len(failed) > 0 {
			fmt.Fprintf(a.stdout, "; not created (see the warnings): %s", strings.Join(failed, ", "))
		}
		fmt.Fprintln(a.stdout)
	}
	return nil
}

// prepareTargetTables creates the missing target tables and checks that the
// existing ones can take every source column, with the same type. Unless
// replace is set, an existing table must be empty: bootstrap never
// overwrites data it did not copy itself. With replace, the existing tables
// are emptied.
func (a *app) prepareTargetTables(ctx context.Context, srcConn, tgt *pgx.Conn, tables []catalog.Table, replace bool) (created, parents []*catalog.Table, err error) {
	var existing []*catalog.Table
	have := make([]catalog.Table, len(tables))
	exists := make([]bool, len(tables))
	for i := range tables {
		if have[i], exists[i], err = catalog.Lookup(ctx, tgt, tables[i].Schema, tables[i].Name); err != nil {
			return nil, nil, err
		}
		if !exists[i] {
			created = append(created, &tables[i])
		}
	}
	// Everything is checked before anything is created.
	missingFns, err := catalog.MissingDefaultFunctions(ctx, srcConn, tgt, created)
	if err != nil {
		return nil, nil, err
	}
	if len(missingFns) > 0 {
		return nil, nil, failf(ExitFailed, "column defaults call functions the target lacks: %s: create them on the target (pgsync creates no functions), then rerun bootstrap", strings.Join(missingFns, "; "))
	}
	for i := range tables {
		src := &tables[i]
		if !exists[i] {
			continue
		}
		have := have[i]
		if missing := catalog.MissingColumns(src, &have); len(missing) > 0 {
			return nil, nil, failf(ExitFailed, "target table %s lacks source column(s) %s: add them on the target or drop the table so that bootstrap creates it", src, strings.Join(missing, ", "))
		}
		if differ := catalog.DifferentTypes(src, &have); len(differ) > 0 {
			return nil, nil, failf(ExitFailed, "target table %s: %s: values could be refused or changed on the way; give the target columns the source's types", src, strings.Join(differ, "; "))
		}
		existing = append(existing, src)
		if replace {
			continue
		}
		var nonEmpty bool
		if err := tgt.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+src.Ident()+")").Scan(&nonEmpty); err != nil {
			return nil, nil, fmt.Errorf("check target table %s: %w", src, err)
		}
		if nonEmpty {
			return nil, nil, failf(ExitFailed, "target table %s is not empty: bootstrap copies into empty tables (empty it, or use bootstrap --force to replace its rows)", src)
		}
	}
	if err := a.createTypes(ctx, srcConn, tgt, created); err != nil {
		return nil, nil, err
	}
	if parents, err = missingParents(ctx, srcConn, tgt, created); err != nil {
		return nil, nil, err
	}
	for _, src := range append(parents, created...) {
		if err := createInSchema(ctx, tgt, src.Schema, catalog.CreateTableSQL(src)); err != nil {
			return nil, nil, fmt.Errorf("create table %s on target: %w", src, err)
		}
		a.log.Info("created", "table", src.String())
	}
	if replace && len(existing) > 0 {
		return created, parents, emptyTargetTables(ctx, tgt, existing)
	}
	return created, parents, nil
}

// missingParents returns the partitioned tables that the partitions to
// create belong to and the target lacks, loaded from the source, each
// before its own partitions (a parent that is itself a partition comes
// after its parent).
func missingParents(ctx context.Context, src, tgt *pgx.Conn, created []*catalog.Table) ([]*catalog.Table, error) {
	var parents []*catalog.Table
	seen := make(map[string]bool)
	var add func(t *catalog.Table) error
	add = func(t *catalog.Table) error {
		p := t.PartitionOf
		if p == nil || seen[p.String()] {
			return nil
		}
		seen[p.String()] = true
		if _, ok, err := catalog.Lookup(ctx, tgt, p.Schema, p.Name); err != nil || ok {
			return err
		}
		parent, ok, err := catalog.Lookup(ctx, src, p.Schema, p.Name)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("partition %s: its partitioned table %s is gone from the source", t, p)
		}
		if err := add(&parent); err != nil {
			return err
		}
		parents = append(parents, &parent)
		return nil
	}
	for _, t := range created {
		if err := add(t); err != nil {
			return nil, err
		}
	}
	return parents, nil
}

// secondaryObjects returns the indexes and constraints to build on the
// tables bootstrap created, after the copy, leaving out those the target
// already has (by name). A foreign key to a table
// outside the job, and the triggers, policies, rules, grants, comments and
// extensions, are not created: each is named in a warning, so that nothing
// is left out silently.
func (a *app) secondaryObjects(ctx context.Context, src, tgt *pgx.Conn, tables []catalog.Table, created []*catalog.Table) ([]catalog.Object, error) {
	inJob := make(map[string]bool, len(tables))
	for i := range tables {
		inJob[tables[i].String()] = true
	}
	for _, t := range created { // partitioned parents created for the job's partitions
		inJob[t.String()] = true
	}
	var objs []catalog.Object
	for _, t := range created {
		o, left, err := catalog.SecondaryObjects(ctx, src, t)
		if err != nil {
			return nil, err
		}
		for _, obj := range o {
			exists, err := catalog.ObjectExists(ctx, tgt, &obj)
			if err != nil {
				return nil, err
			}
			if exists {
				continue
			}
			if obj.Kind == "foreign key" && !inJob[obj.References] {
				a.log.Warn("not created: it references a table outside the job", "object", obj.String(), "references", obj.References)
				continue
			}
			objs = append(objs, obj)
		}
		for _, u := range left {
			msg := "not created: pgsync creates no " + u.Kind + "s"
			if u.Kind == "extension" {
				msg = "a column's type comes from an extension, which pgsync does not create: CREATE EXTENSION on the target first"
			}
			a.log.Warn(msg, "table", t.String(), u.Kind, u.Name)
		}
	}
	return objs, nil
}

// createTypes creates on the target the enum, domain, composite and range
// types that the tables to create use and the target lacks, dependencies
// first.
func (a *app) createTypes(ctx context.Context, src, tgt *pgx.Conn, tables []*catalog.Table) error {
	if len(tables) == 0 {
		return nil
	}
	types, err := catalog.UsedTypes(ctx, src, tables)
	if err != nil {
		return err
	}
	for _, u := range types {
		exists, err := catalog.TypeExists(ctx, tgt, u.Schema, u.Name)
		if err != nil {
			return err
		}
		if exists {
			continue
		}
		if err := createInSchema(ctx, tgt, u.Schema, u.SQL); err != nil {
			return fmt.Errorf("create type %s on target: %w", u, err)
		}
		a.log.Info("created", "type", u.String())
	}
	return nil
}

// createInSchema runs ddl on the target after creating its schema if
// missing.
func createInSchema(ctx context.Context, tgt *pgx.Conn, schema, ddl string) error {
	_, err := tgt.Exec(ctx, fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %s; %s", catalog.QuoteIdent(schema), ddl))
	return err
}

// emptyTargetTables empties the job's existing target tables before a copy
// starts over: one TRUNCATE of all of them, so that foreign keys among them
// do not stop it. When a table outside the job references one of them,
// TRUNCATE refuses (0A000) and the rows are deleted instead, with
// session_replication_role = replica so that no foreign-key action fires:
// rows of the other tables are left as they are, as a subscription's copy
// leaves them. tgt is a replica session (pgconnect.ReplicaSession).
func emptyTargetTables(ctx context.Context, tgt *pgx.Conn, tables []*catalog.Table) error {
	idents := catalog.RefIdents(tables)
	_, err := tgt.Exec(ctx, "TRUNCATE ONLY "+strings.Join(idents, ", "))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "0A000" {
		if err != nil {
			return fmt.Errorf("empty the job's target tables: %w", err)
		}
		return nil
	}
	err = pgx.BeginFunc(ctx, tgt, func(tx pgx.Tx) error {
		for _, ident := range idents {
			if _, err := tx.Exec(ctx, "DELETE FROM ONLY "+ident); err != nil {
				return fmt.Errorf("%s: %w", ident, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("empty the job's target tables: %w", err)
	}
	return nil
}

// showCopyProgress draws a progress bar on a terminal, and otherwise logs a
// line every 10 seconds. It returns the function that stops it.
func (a *app) showCopyProgress(p *snapshot.Progress) func() {
	done := make(chan struct{})
	finished := make(chan struct{})
	interactive := isTerminal(a.stderr)
	var bar *progressbar.ProgressBar
	every := 10 * time.Second
	if interactive {
		every = 200 * time.Millisecond
		bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(a.stderr),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription("copying"),
			progressbar.OptionThrottle(every),
			progressbar.OptionClearOnFinish())
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		began := time.Now()
		for {
			select {
			case <-done:
				if bar != nil {
					_ = bar.Finish()
				}
				return
			case <-t.C:
			}
			b, r := p.Bytes.Load(), p.Rows.Load()
			if bar != nil {
				desc := fmt.Sprintf("copied %d/%d tables", p.TablesDone.Load(), p.TablesTotal.Load())
				for _, t := range p.Active() {
					desc += fmt.Sprintf(" | %s %d rows %s %.1f MB/s", t.Table, t.Rows, humanize.IBytes(uint64(t.Bytes)), float64(t.Bytes)/1e6/max(t.Elapsed.Seconds(), 1e-3))
				}
				bar.Describe(desc)
				_ = bar.Set64(b)
				continue
			}
			a.log.Info("copying", "tables_done", p.TablesDone.Load(), "tables", p.TablesTotal.Load(), "rows", r, "bytes", b,
				"mb_per_s", fmt.Sprintf("%.1f", float64(b)/1e6/time.Since(began).Seconds()))
		}
	}()
	return func() { close(done); <-finished }
}

// toBuild returns the tables whose secondary objects to build: those just
// created and their parents, or, on a rerun after an interruption (which
// no longer sees the tables it created as created), every table, of which
// whatever is missing is built.
func toBuild(tables []catalog.Table, created, parents []*catalog.Table, rerun bool) []*catalog.Table {
	if !rerun {
		return append(parents, created...)
	}
	all := make([]*catalog.Table, len(tables))
	for i := range tables {
		all[i] = &tables[i]
	}
	return all
}

// copyAndBuild copies tables under slot's exported snapshot, closing the
// exporting connection once every stream imported it, then builds objects
// on the target, logging each. failed names the objects not built; remedy
// ends the errors.
func (a *app) copyAndBuild(ctx context.Context, cfg *config.Config, slot *replication.Slot, tables []catalog.Table, objects []catalog.Object,
	progress *snapshot.Progress, remedy string) (results []snapshot.TableResult, built []snapshot.Built, failed []string, err error) {
	stopDisplay := a.showCopyProgress(progress)
	results, err = snapshot.Copy(ctx, snapshot.Options{
		SourceURL:    cfg.SourceURL,
		TargetURL:    cfg.TargetURL,
		SnapshotName: slot.SnapshotName,
		MaxParallel:  cfg.Tuning.MaxParallelCopies,
		BufferSize:   cfg.Tuning.BufferSizeKB << 10,
		RangeBytes:   int64(cfg.Tuning.CopyRangeMB) << 20,
		// Every stream holds the snapshot now: the exporting connection
		// has done its job.
		Imported: func() { slot.Conn.Close(context.WithoutCancel(ctx)) },
		Progress: progress,
		Logger:   a.log,
	}, tables)
	stopDisplay()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("copy (%s): %w", remedy, err)
	}
	built, err = snapshot.BuildObjects(ctx, cfg.TargetURL, cfg.Tuning.MaxParallelCopies, objects)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create indexes and constraints (%s): %w", remedy, err)
	}
	for _, b := range built {
		if b.Err != nil && b.Object.Kind == "primary key" {
			// run finds rows by key: without it every UPDATE and DELETE
			// would scan the table.
			return nil, nil, nil, fmt.Errorf("%w (%s)", b.Err, remedy)
		}
		if b.Err != nil {
			a.log.Warn("not created", "object", b.Object.String(), "err", b.Err)
			failed = append(failed, b.Object.String())
			continue
		}
		a.log.Info("created", "object", b.Object.String(), "seconds", fmt.Sprintf("%.2f", b.Elapsed.Seconds()))
	}
	return results, built, failed, nil
}
