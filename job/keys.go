package job

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgconnect"
)

// keyBuilder builds a table's primary key, indexes and other constraints
// (not its foreign keys) as soon as its copy commits, one build at a time,
// while the other tables copy: an interrupted bootstrap then leaves the
// tables it copied with their keys, and its rerun need not build them
// again. What it has not built when the copy ends is built after it, with
// the foreign keys, as before.
type keyBuilder struct {
	j       *Job
	objects []catalog.Object // the built-in creator's objects to build
	schema  *schemaBuilder   // pg_dump's recorded post-data objects instead
	tables  chan string      // tables whose copy committed, schema.name
	done    chan struct{}
	// stopped is set when the copy ends: what is still queued is built
	// after it, max_parallel_copies at a time, not one by one here.
	stopped atomic.Bool
	// conn is the builder's target session for the built-in creator's
	// objects, opened at the first build (pg_dump's use schema.conn).
	conn *pgx.Conn

	mu    sync.Mutex
	built []string // the built-in creator's objects it built
}

// startKeyBuilder starts the builder; add hands it a copied table and wait
// stops it.
func (j *Job) startKeyBuilder(ctx context.Context, objects []catalog.Object, schema *schemaBuilder) *keyBuilder {
	kb := &keyBuilder{j: j, objects: objects, schema: schema, tables: make(chan string, 1024), done: make(chan struct{})}
	go func() {
		defer close(kb.done)
		defer func() {
			if kb.conn != nil {
				kb.conn.Close(context.WithoutCancel(ctx))
			}
		}()
		for table := range kb.tables {
			if ctx.Err() != nil || kb.stopped.Load() {
				continue // drain: built after the copy, or failing anyway
			}
			// Its errors are not the copy's, on purpose: every object
			// this builder did not build is built again after the copy
			// (buildCreated, buildPostData), whose errors are returned and
			// reported; reporting them here as well would say each twice.
			_ = kb.build(ctx, table)
		}
	}()
	return kb
}

// add queues table (schema.name), whose copy committed.
func (kb *keyBuilder) add(table string) {
	select {
	case kb.tables <- table:
	default: // a full queue: the table's keys are built after the copy
	}
}

// wait stops the builder and returns the names of the built-in creator's
// objects it built; the caller builds the others.
func (kb *keyBuilder) wait() []string {
	kb.stopped.Store(true)
	close(kb.tables)
	<-kb.done
	return kb.built
}

// build builds the first-phase objects of table, one at a time, on the
// path of every build (buildOne), until the copy ends, and returns every
// error.
func (kb *keyBuilder) build(ctx context.Context, table string) error {
	objs, conn, err := kb.tableObjects(ctx, table)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		if kb.stopped.Load() || ctx.Err() != nil {
			break
		}
		if err := kb.j.buildOne(ctx, conn, o, true); err != nil {
			errs = append(errs, err)
			continue
		}
		if kb.schema == nil {
			kb.mu.Lock()
			kb.built = append(kb.built, o.name)
			kb.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// tableObjects returns table's objects to build now, and the session to
// build them on.
func (kb *keyBuilder) tableObjects(ctx context.Context, table string) ([]object, *pgx.Conn, error) {
	if kb.schema != nil {
		objs, err := kb.schema.tableObjects(ctx, table)
		return objs, kb.schema.conn(), err
	}
	var objs []object
	for _, o := range kb.objects {
		if o.Kind != "foreign key" && o.Table.String() == table {
			objs = append(objs, builtinObject(o))
		}
	}
	if len(objs) == 0 {
		return nil, nil, nil
	}
	if kb.conn == nil {
		conn, err := pgconnect.Connect(ctx, "target", kb.j.buildURL())
		if err != nil {
			return nil, nil, err
		}
		kb.conn = conn
	}
	return objs, kb.conn, nil
}

// remaining returns the objects of all that the builder did not build.
func remaining(all []catalog.Object, built []string) []catalog.Object {
	done := make(map[string]bool, len(built))
	for _, b := range built {
		done[b] = true
	}
	var out []catalog.Object
	for _, o := range all {
		if !done[o.String()] {
			out = append(out, o)
		}
	}
	return out
}
