// Package job owns a pgsync job's lifecycle: the preflight checks, the
// target's preparation, bootstrap (fresh, resumed or started over),
// add-tables, cutover's wait and lock, status and teardown. Its states and
// the rules between them are in state.go; every step checks first and
// records its state only once what the state says is true, so that a step
// that refuses or is killed leaves nothing a rerun could misread.
package job

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/snapshot"
)

// Options are what the lifecycle takes from the configuration.
type Options struct {
	Job       string
	SourceURL string
	TargetURL string
	// Tables are job.tables' patterns.
	Tables []string
	// Names are the job's slot and publication.
	Names             replication.Names
	MaxParallelCopies int
	BufferSizeBytes   int
	CopyRangeBytes    int64
	// PgDump is the pg_dump that bootstrap takes the schema from when the
	// target has none of the job's tables; "off" keeps the built-in
	// creator.
	PgDump string
}

// Job is one job with a connection to each side. A Job is used by one
// goroutine.
type Job struct {
	opts Options
	src  *pgx.Conn
	tgt  *pgx.Conn
	log  *slog.Logger
	// ShowCopy, when set, shows a copy's progress until the function it
	// returns is called.
	ShowCopy func(*snapshot.Progress) (stop func())
}

// New returns the job of opts over src and tgt, which the caller closes.
func New(opts Options, src, tgt *pgx.Conn, log *slog.Logger) *Job {
	if log == nil {
		log = slog.Default()
	}
	return &Job{opts: opts, src: src, tgt: tgt, log: log}
}

// Tables returns the job's tables: those its publication holds, or, before
// there is one, those job.tables names.
func (j *Job) Tables(ctx context.Context) ([]catalog.Table, error) {
	published, err := replication.PublishedTables(ctx, j.src, j.opts.Names.Publication)
	if err != nil {
		return nil, err
	}
	var tables []catalog.Table
	if len(published) == 0 {
		if tables, err = catalog.Resolve(ctx, j.src, j.opts.Tables); err != nil {
			return nil, err
		}
	}
	for _, p := range published {
		t, ok, err := catalog.Lookup(ctx, j.src, p[0], p[1])
		if err != nil {
			return nil, err
		}
		if ok {
			tables = append(tables, t)
		}
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("job %s has no tables", j.opts.Job)
	}
	return tables, nil
}

// Teardown ends the job: it drops the slot and the publication on the
// source and every record of the job on the target (ledger.DeleteJob).
// The target tables and their rows stay.
func (j *Job) Teardown(ctx context.Context) error {
	if err := replication.Drop(ctx, j.src, j.opts.Names); err != nil {
		return err
	}
	return ledger.DeleteJob(ctx, j.tgt, j.opts.Job)
}

// SelectTables keeps the tables named (schema.name); a name that is not a
// table of tables is an error.
func SelectTables(tables []catalog.Table, names []string) ([]catalog.Table, error) {
	var out []catalog.Table
	for _, n := range names {
		i := slices.IndexFunc(tables, func(t catalog.Table) bool { return t.String() == n })
		if i < 0 {
			return nil, fmt.Errorf("--table %s: not a table of the job (schema.name)", n)
		}
		out = append(out, tables[i])
	}
	return out, nil
}
