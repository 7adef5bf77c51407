package apply

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgoutput"
	"github.com/pgsync/pgsync/replication"
)

// The rows a statement was to change but did not: a row trigger enabled
// for replicas that returns NULL skips a change, and PostgreSQL's own
// apply worker goes on, so pgsync does too, counting and logging it; a row
// that is missing is divergence, as before (issue 16). The hot path pays
// nothing for it: a statement that changed its rows is not looked at
// again, and only the statements of a table whose triggers may skip
// count the rows they find (targetFacts.checked, checkedSQL).

// shortfall splits the rows a statement was to change, expect, but did
// not into those a trigger skipped and those missing on the target, from
// the rows it changed and, when the statement counted them, existing, the
// rows it found (-1 when it did not). An INSERT has no row to find: every
// row it did not insert was skipped. An UPDATE or DELETE that did not count
// knows of no trigger that could skip it: every row is missing.
func shortfall(op byte, expect, affected, existing int64) (skipped, missing int64) {
	switch {
	case op == pgoutput.MsgInsert:
		return expect - affected, 0
	case existing < 0:
		return 0, expect - affected
	}
	return existing - affected, expect - existing
}

// rowsShort decides on a statement that changed affected rows instead of
// pd.expect; existing is the rows it found, or -1 (shortfall). Rows a
// trigger skipped are counted for the group's report; a missing row is
// errNoRow, unless the table has gained a trigger that may skip it since
// its relation was described: then the group is applied again, by a new
// session, with statements that tell the two apart.
func (a *Applier) rowsShort(ctx context.Context, pd *pending, affected, existing int64) error {
	if pd.kind != pendingRows || affected > int64(pd.expect) {
		return errNoRow
	}
	skipped, missing := shortfall(pd.op, int64(pd.expect), affected, existing)
	if missing != 0 || skipped < 0 {
		if existing < 0 && a.triggerSince(ctx, pd) {
			return &TriggerAddedError{Table: pd.rel.src.String(), Op: opName(pd.op)}
		}
		return errNoRow
	}
	i := rowOpIndex(pd.op)
	if pd.rel.skipped == [3]int64{} {
		a.skips = append(a.skips, pd.rel)
	}
	pd.rel.skipped[i] += skipped
	return nil
}

// checkedResult reads the result of a statement of checkedSQL: the rows it
// changed and the rows it found.
func (a *Applier) checkedResult(ctx context.Context, pd *pending, r *pgconn.ResultReader) error {
	var counts [2]int64
	var perr error
	rows := 0
	for r.NextRow() {
		rows++
		for i, v := range r.Values() {
			var err error
			if i < len(counts) {
				counts[i], err = strconv.ParseInt(string(v), 10, 64)
			}
			perr = cmp.Or(perr, err)
		}
	}
	if _, err := r.Close(); err != nil {
		return err
	}
	if perr != nil || rows != 1 {
		return fmt.Errorf("unexpected result of a checked statement (%d rows): %v", rows, perr)
	}
	if counts[0] == int64(pd.expect) {
		return nil
	}
	return a.rowsShort(ctx, pd, counts[0], counts[1])
}

// triggerSince reports whether the target table of pd has, now, a trigger
// that may skip its operation although it had none when the relation was
// described. It abandons the pipeline: the group is rolled back whatever
// the answer (on no answer, false).
func (a *Applier) triggerSince(ctx context.Context, pd *pending) bool {
	if p := a.pipeline; p != nil {
		// Every request must be synced for Close to read the rest.
		if n := len(a.batchEnds); n == 0 || a.batchEnds[n-1] != len(a.pending) {
			if p.Sync() != nil {
				return false
			}
		}
		a.pipeline = nil
		var pgErr *pgconn.PgError
		if err := p.Close(); err != nil && !errors.As(err, &pgErr) {
			return false
		}
	}
	if _, err := a.conn.Exec(ctx, "ROLLBACK"); err != nil {
		return false
	}
	now, err := catalog.ReadShape(ctx, a.conn, pd.rel.src.Schema, pd.rel.src.Name)
	if err != nil {
		return false
	}
	return mayTriggerSkip(pd.op, now.ReplicaTriggers, pd.rel.partitioned)
}

// TriggerAddedError ends a session whose target table has gained, since
// its relation was described, a trigger enabled for replicas that may have
// skipped a change: the next session applies the group again with
// statements that tell a skipped row from a missing one.
type TriggerAddedError struct {
	Table string
	Op    string
}

func (e *TriggerAddedError) Error() string {
	return fmt.Sprintf("fewer rows matched than sent, and %s has gained a trigger enabled for replicas that may skip its %ss: applying the transaction again with row checks", e.Table, e.Op)
}

// Is makes the error a replication.ErrPaused: the next session starts at once.
func (e *TriggerAddedError) Is(target error) bool { return target == replication.ErrPaused }

// reportSkips counts and logs the rows triggers skipped in the target
// transaction that has just committed, one line per table and operation.
func (a *Applier) reportSkips() {
	if len(a.skips) == 0 {
		return
	}
	log := a.opts.Logger
	if log == nil {
		log = slog.Default()
	}
	for _, rel := range a.skips {
		for i, n := range rel.skipped {
			if n == 0 {
				continue
			}
			op := [3]string{"insert", "update", "delete"}[i]
			if m := a.opts.Metrics; m != nil {
				m.SkippedCounter(rel.src.String(), op).Add(float64(n))
			}
			log.Info("rows skipped by a trigger on the target", "table", rel.src.String(), "op", op, "rows", n, "lsn", a.groupEnd.String())
		}
	}
	a.dropSkips()
}

// dropSkips forgets the skipped rows of the open target transaction.
func (a *Applier) dropSkips() {
	for _, rel := range a.skips {
		rel.skipped = [3]int64{}
	}
	clear(a.skips)
	a.skips = a.skips[:0]
}
