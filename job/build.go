package job

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgconnect"
)

// The primary keys, indexes, constraints and other post-data objects of the
// tables bootstrap and add-tables create are built once the tables' rows
// are copied (building an index over loaded rows is faster than keeping it
// up row by row during COPY), by one path whatever made the list: the
// built-in creator (catalog.Object) or pg_dump's recorded archive
// (pendingObject). Every object is tried, and every failure is returned;
// what a failure means for the step is decided in one place (settleBuild).

// object is one object to create on the target.
type object struct {
	name       string // for the operator: "primary key big_pkey on public.big"
	primaryKey bool
	create     func(ctx context.Context, conn *pgx.Conn) error
}

// builtinObject is an object of the built-in creator: its SQL, then, for a
// foreign key added NOT VALID, its validation.
func builtinObject(o catalog.Object) object {
	return object{name: o.String(), primaryKey: o.Kind == "primary key", create: func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, o.SQL); err != nil {
			return err
		}
		if o.Validate != "" {
			if _, err := conn.Exec(ctx, o.Validate); err != nil {
				return fmt.Errorf("validate (it stays NOT VALID on the target): %w", err)
			}
		}
		return nil
	}}
}

// builtinPhases splits the built-in creator's objects in two phases: the
// keys, indexes and UNIQUE, CHECK and EXCLUDE constraints, then the
// foreign keys, which need the keys they reference.
func builtinPhases(objs []catalog.Object) [][]object {
	var first, fks []object
	for _, o := range objs {
		if o.Kind == "foreign key" {
			fks = append(fks, builtinObject(o))
		} else {
			first = append(first, builtinObject(o))
		}
	}
	return [][]object{first, fks}
}

// objectError is the failure of one object's build: the object is not on
// the target.
type objectError struct {
	object     string
	primaryKey bool
	err        error
}

// Error names the object, then what its build met.
func (e *objectError) Error() string { return fmt.Sprintf("%s: %v", e.object, e.err) }

// Unwrap is what the build met, for errors.Is and errors.As.
func (e *objectError) Unwrap() error { return e.err }

// buildOne creates o over conn and logs it with its duration; whileCopying
// marks a build while other tables copy. Its error is an *objectError.
func (j *Job) buildOne(ctx context.Context, conn *pgx.Conn, o object, whileCopying bool) error {
	began := time.Now()
	if err := o.create(ctx, conn); err != nil {
		return &objectError{object: o.name, primaryKey: o.primaryKey, err: err}
	}
	args := []any{"object", o.name, "seconds", fmt.Sprintf("%.2f", time.Since(began).Seconds())}
	if whileCopying {
		args = append(args, "while_copying", true)
	}
	j.log.Info("created", args...)
	return nil
}

// buildObjects creates objects on the target phase after phase, up to
// workers objects of a phase at a time, each worker on a target session of
// its own. One object that fails does not stop the others. It returns
// every error, joined: an *objectError for each object not built, in the
// order of phases, then the error that ended the build early (ctx ended,
// no target session), if any.
func (j *Job) buildObjects(ctx context.Context, workers int, phases [][]object) error {
	var failures []error
	for _, phase := range phases {
		if len(phase) == 0 {
			continue
		}
		errs := make([]error, len(phase)) // by object: their order does not depend on the workers'
		work := make(chan int, len(phase))
		for i := range phase {
			work <- i
		}
		close(work)
		g, gctx := errgroup.WithContext(ctx)
		for range min(max(workers, 1), len(phase)) {
			g.Go(func() error {
				conn, err := pgconnect.Connect(gctx, "target", j.buildURL())
				if err != nil {
					return err
				}
				defer conn.Close(context.WithoutCancel(gctx))
				for i := range work {
					if gctx.Err() != nil {
						return gctx.Err()
					}
					err := j.buildOne(gctx, conn, phase[i], false)
					if err != nil && gctx.Err() != nil {
						// Not the object's failure: the build ends.
						return fmt.Errorf("%s: %w", phase[i].name, gctx.Err())
					}
					errs[i] = err
				}
				return nil
			})
		}
		ended := g.Wait()
		for _, err := range errs {
			if err != nil {
				failures = append(failures, err)
			}
		}
		if ended != nil {
			return errors.Join(append(failures, ended)...)
		}
	}
	return errors.Join(failures...)
}

// buildURL is the target's url for the sessions that build keys, indexes
// and foreign keys: with tuning.build_maintenance_work_mem when set, so
// that a large table's index sorts in memory.
func (j *Job) buildURL() string {
	if j.opts.BuildMaintenanceWorkMem == "" {
		return j.opts.TargetURL
	}
	return pgconnect.WithSetting(j.opts.TargetURL, "maintenance_work_mem", j.opts.BuildMaintenanceWorkMem)
}

// settleBuild says what the errors of a build mean for its step. An object
// other than a primary key that was not built is logged as a warning and
// named in failed: the step goes on without it, and the operator sees it
// in the report. A primary key that was not built, or an error that ended
// the build, stops the step: run finds rows by key, and without it every
// UPDATE and DELETE would scan the table.
func (j *Job) settleBuild(err error) (failed []string, stop error) {
	var stops []error
	for _, e := range joined(err) {
		var oe *objectError
		if errors.As(e, &oe) && !oe.primaryKey {
			j.log.Warn("not created", "object", oe.object, "err", oe.err)
			failed = append(failed, oe.object)
			continue
		}
		stops = append(stops, e)
	}
	return failed, errors.Join(stops...)
}

// joined returns the errors err joins (errors.Join), or err alone.
func joined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
