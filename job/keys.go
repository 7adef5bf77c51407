package job

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/snapshot"
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

	mu    sync.Mutex
	built []snapshot.Built // the built-in creator's objects it built
}

// startKeyBuilder starts the builder; add hands it a copied table and wait
// stops it.
func (j *Job) startKeyBuilder(ctx context.Context, objects []catalog.Object, schema *schemaBuilder) *keyBuilder {
	kb := &keyBuilder{j: j, objects: objects, schema: schema, tables: make(chan string, 1024), done: make(chan struct{})}
	go func() {
		defer close(kb.done)
		for table := range kb.tables {
			if ctx.Err() != nil || kb.stopped.Load() {
				continue // drain: built after the copy, or failing anyway
			}
			kb.build(ctx, table)
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

// wait stops the builder and returns the built-in creator's objects it
// built; the caller builds the others.
func (kb *keyBuilder) wait() []snapshot.Built {
	kb.stopped.Store(true)
	close(kb.tables)
	<-kb.done
	return kb.built
}

func (kb *keyBuilder) build(ctx context.Context, table string) {
	if kb.schema != nil {
		kb.schema.buildTable(ctx, table, &kb.stopped)
		return
	}
	var objs []catalog.Object
	for _, o := range kb.objects {
		if o.Kind != "foreign key" && o.Table.String() == table {
			objs = append(objs, o)
		}
	}
	for _, o := range objs {
		if kb.stopped.Load() {
			return
		}
		built, err := snapshot.BuildObjects(ctx, kb.j.opts.TargetURL, 1, []catalog.Object{o})
		if err != nil || built[0].Err != nil {
			continue // built again, and reported, after the copy
		}
		kb.mu.Lock()
		kb.built = append(kb.built, built[0])
		kb.mu.Unlock()
	}
}

// remaining returns the objects of all that the builder did not build.
func remaining(all []catalog.Object, built []snapshot.Built) []catalog.Object {
	done := make(map[string]bool, len(built))
	for _, b := range built {
		done[b.Object.String()] = true
	}
	var out []catalog.Object
	for _, o := range all {
		if !done[o.String()] {
			out = append(out, o)
		}
	}
	return out
}
