// Package job owns a pgsync job's lifecycle: the preflight checks, the
// target's preparation, bootstrap (fresh, resumed or started over),
// add-tables, cutover's wait and lock, status and teardown. Its states and
// the rules between them are in state.go; every step checks first and
// records its state only once what the state says is true, so that a step
// that refuses or is killed leaves nothing a rerun could misread.
package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ddl"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/snapshot"
)

// Options are what the lifecycle takes from the configuration.
type Options struct {
	Job       string
	SourceURL string
	// SourcePrimaryURL is the primary of a SourceURL that is a hot
	// standby, "" when SourceURL is the primary: the publication, the DDL
	// capture and cutover's lock and goal are its (Job.primary).
	SourcePrimaryURL string
	TargetURL        string
	// Tables are job.tables' patterns.
	Tables []string
	// Slot names the job's slot and its publication (pgsync_<job>
	// unless the configuration says otherwise).
	Slot              string
	MaxParallelCopies int
	BufferSizeBytes   int
	CopyRangeBytes    int64
	// BuildMaintenanceWorkMem is maintenance_work_mem on the sessions that
	// build keys, indexes and foreign keys (buildURL); empty: the server's.
	BuildMaintenanceWorkMem string
	// PgDump is the pg_dump that bootstrap takes the schema from when the
	// target has none of the job's tables; "off" keeps the built-in
	// creator.
	PgDump string
	// DDLCapture (job.ddl = "capture"): bootstrap installs the DDL capture
	// on the source, check says whether it can, and run applies the
	// captured statements in order (package ddl). Off, the source's schema
	// changes stop run as before.
	DDLCapture bool
	// DDLTablePath makes bootstrap install the capture's table path
	// (rows of pgsync.ddl) on a source of PostgreSQL 14 or later too,
	// where messages are the default: PGSYNC_DDL_TABLE_PATH=1, so that
	// tests cover the path of older sources on any server.
	DDLTablePath bool
}

// Job is one job with a connection to each side. A Job is used by one
// goroutine.
type Job struct {
	opts  Options
	names replication.Names // the job's slot and publication
	src   *pgx.Conn
	// primary is the source's primary: src itself, or, when src is a
	// hot standby (Options.SourcePrimaryURL), a connection to its
	// primary, where every write to the source and cutover's lock go.
	primary *pgx.Conn
	tgt     *pgx.Conn
	log     *slog.Logger
	// ShowCopy, when set, shows a copy's progress until the function it
	// returns is called.
	ShowCopy func(*snapshot.Progress) (stop func())
}

// New returns the job of opts over src and tgt, which the caller closes.
func New(opts Options, src, tgt *pgx.Conn, log *slog.Logger) *Job {
	if log == nil {
		log = slog.Default()
	}
	names := replication.Names{Job: opts.Job, Slot: opts.Slot, Publication: opts.Slot}
	return &Job{opts: opts, names: names, src: src, primary: src, tgt: tgt, log: log}
}

// Tables returns the job's tables: those its publication holds, or, before
// there is one, those job.tables names. Either way their definitions are
// read in one query, not one per table (issue 33).
func (j *Job) Tables(ctx context.Context) ([]catalog.Table, error) {
	published, err := replication.PublishedTables(ctx, j.src, j.names.Publication)
	if err != nil {
		return nil, err
	}
	var tables []catalog.Table
	if len(published) == 0 {
		tables, err = catalog.Resolve(ctx, j.src, j.opts.Tables)
	} else {
		// A published table dropped since is left out, as before.
		tables, err = catalog.LookupAll(ctx, j.src, published)
	}
	if err != nil {
		return nil, err
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("job %s has no tables", j.opts.Job)
	}
	return tables, nil
}

// Teardown ends the job: it drops the slot, the publication and the DDL
// capture (job.ddl = "capture") on the source and every record of the job on the target (ledger.DeleteJob).
// The target tables and their rows stay; a target without the pgsync
// schema is left as it is.
func (j *Job) Teardown(ctx context.Context) error {
	if err := j.dropSlotAndPublication(ctx); err != nil {
		return err
	}
	// Whatever job.ddl says now: it may have been "capture" at bootstrap.
	if err := ddl.Remove(ctx, j.primary, j.opts.Job); err != nil {
		return err
	}
	present, err := ledger.Upgrade(ctx, j.tgt)
	if err != nil || !present {
		return err
	}
	return ledger.DeleteJob(ctx, j.tgt, j.opts.Job)
}

// ErrUnknownTable: a table named on the command line is not one of the
// job's.
var ErrUnknownTable = errors.New("not a table of the job")

// selectTables keeps the tables named (schema.name); a name that is not a
// table of tables is an error.
func selectTables(tables []catalog.Table, names []string) ([]catalog.Table, error) {
	var out []catalog.Table
	for _, n := range names {
		i := slices.IndexFunc(tables, func(t catalog.Table) bool { return t.String() == n })
		if i < 0 {
			return nil, fmt.Errorf("--table %s: %w (schema.name)", n, ErrUnknownTable)
		}
		out = append(out, tables[i])
	}
	return out, nil
}

// dropSlotAndPublication drops the job's slot where it lives (src, a
// standby source's own) and its publication on the primary.
func (j *Job) dropSlotAndPublication(ctx context.Context) error {
	if err := replication.DropSlot(ctx, j.src, j.names); err != nil {
		return err
	}
	return replication.DropPublication(ctx, j.primary, j.names)
}
