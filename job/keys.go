package job

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/snapshot"
)

// keyBuilder builds a table's primary key, indexes and other constraints
// (not its foreign keys) as soon as its copy commits, one build at a time,
// while the other tables copy: an interrupted bootstrap then leaves the
// tables it copied with their keys, and its rerun need not build them
// again. What it has not built when the copy ends is built after it, with
// the foreign keys, as before.
type keyBuilder struct {
	j        *Job
	objects  []catalog.Object // the built-in creator's objects to build
	postData bool             // pg_dump's recorded post-data objects instead
	tables   chan string      // tables whose copy committed, schema.name
	done     chan struct{}
	// stopped is set when the copy ends: what is still queued is built
	// after it, max_parallel_copies at a time, not one by one here.
	stopped atomic.Bool

	mu    sync.Mutex
	built []snapshot.Built // the built-in creator's objects it built
}

// startKeyBuilder starts the builder; add hands it a copied table and wait
// stops it.
func (j *Job) startKeyBuilder(ctx context.Context, objects []catalog.Object, postData bool) *keyBuilder {
	kb := &keyBuilder{j: j, objects: objects, postData: postData, tables: make(chan string, 1024), done: make(chan struct{})}
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
	if kb.postData {
		kb.j.buildPostDataOf(ctx, table, &kb.stopped)
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

// ident matches one identifier as pg_dump writes it: quoted when it must
// be.
const ident = `(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)`

// postDataTableRe finds the table of a key, index or constraint in pg_dump's
// post-data SQL.
var postDataTableRe = regexp.MustCompile(`^(?:CREATE (?:UNIQUE )?INDEX ` + ident + ` ON (?:ONLY )?|ALTER TABLE ONLY )(` + ident + `)\.(` + ident + `)`)

// postDataTable returns the table, as schema.name, a post-data statement
// of the first phase (a key, an index, a constraint) is on; "" when it
// cannot tell.
func postDataTable(sql string) string {
	m := postDataTableRe.FindStringSubmatch(sql)
	if m == nil {
		return ""
	}
	return unquoteIdent(m[1]) + "." + unquoteIdent(m[2])
}

// buildPostDataOf builds the recorded first-phase post-data objects of
// table, each marked built as it is. A failure is left for the build after
// the copy, which reports it.
func (j *Job) buildPostDataOf(ctx context.Context, table string, stopped *atomic.Bool) {
	conn, err := pgconnect.Connect(ctx, "target", j.opts.TargetURL)
	if err != nil {
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var preamble string
	if err := conn.QueryRow(ctx, `SELECT sql FROM pgsync.post_data WHERE job = $1 AND seq = 0`, j.opts.Job).Scan(&preamble); err != nil {
		return
	}
	if _, err := conn.Exec(ctx, preamble); err != nil {
		return
	}
	rows, err := conn.Query(ctx, `SELECT seq, kind, name, sql FROM pgsync.post_data WHERE job = $1 AND phase = 0 AND NOT done ORDER BY seq`, j.opts.Job)
	if err != nil {
		return
	}
	type item struct {
		seq             int
		kind, name, sql string
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (item, error) {
		var it item
		err := r.Scan(&it.seq, &it.kind, &it.name, &it.sql)
		return it, err
	})
	if err != nil {
		return
	}
	for _, it := range items {
		if postDataTable(it.sql) != table {
			continue
		}
		if stopped.Load() {
			return
		}
		began := time.Now()
		if _, err := conn.Exec(ctx, it.sql); err != nil {
			continue
		}
		if _, err := conn.Exec(ctx, `UPDATE pgsync.post_data SET done = true WHERE job = $1 AND seq = $2`, j.opts.Job, it.seq); err != nil {
			return
		}
		j.log.Info("created", "object", strings.ToLower(it.kind)+" "+it.name, "seconds", fmt.Sprintf("%.2f", time.Since(began).Seconds()), "while_copying", true)
	}
}
