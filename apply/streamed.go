package apply

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/periodic"
	"github.com/pgsync/pgsync/replication"
)

// A streamed transaction applied as it arrives (issue 18): the source sends
// a transaction larger than its logical_decoding_work_mem in segments while
// it runs; a second Applier, on a target connection of its own, applies
// each segment as it comes, in a target transaction that commits at Stream
// Commit, after the main Applier has committed every transaction before it.
// So at the source's COMMIT most of the rows are on the target already, as
// with PostgreSQL 16's parallel apply. The replication side spools the
// transaction all the same and applies the spool at commit, as before,
// whenever this one gives up: the commit LSN is not known while the
// changes arrive, so a table add-tables copied at a position, a
// subtransaction, or a change the target refuses sends it back to the spool.
//
// Lock waits: the two target transactions are open at once, and the
// server's deadlock detector cannot see a wait that goes through pgsync (the
// main Applier waiting for a row the streamed one holds, while the streamed
// one can only commit after the main one's). watchLocks ends it: when either
// backend waits for a lock the other holds, it terminates the streamed
// one's backend, whose locks go with it, and the transaction is applied from
// its spool at commit.

// lockWatchEvery is how often the watch looks for a lock wait between the
// two target backends.
const lockWatchEvery = 250 * time.Millisecond

// OpenStreamed opens an Applier for one streamed transaction, on a target
// connection of its own (Options.Connect), with a watch on the lock waits
// between it and a. It returns nil, nil when Options.Connect is nil
// (tuning.apply_streamed = "at-commit").
func (a *Applier) OpenStreamed(ctx context.Context) (replication.StreamedApplier, error) {
	if a.opts.Connect == nil {
		return nil, nil
	}
	conn, err := a.opts.Connect(ctx)
	if err != nil {
		return nil, err
	}
	watch, err := a.opts.Connect(ctx)
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	opts := a.opts
	opts.AddColumns = false // an ALTER TABLE would lock the main Applier out until the commit
	opts.Prepared = nil     // its statements go with its connection
	s := New(conn, opts)
	s.streamed = true
	s.stopWatch = watchLocks(ctx, watch, a.conn.PgConn().PID(), conn.PgConn().PID(), a.logger())
	return s, nil
}

// Push sends the statements queued so far, so that the target applies them
// while the source prepares the next segment.
func (a *Applier) Push(ctx context.Context) error {
	if err := a.sendRowSet(ctx); err != nil {
		return err
	}
	return a.send(ctx)
}

// watchLocks looks, every lockWatchEvery, whether the backend main waits
// for a lock streamed holds or the other way round, over conn, which it
// owns; streamed's backend is terminated at the first wait of main, or at
// the second look in a row that finds streamed waiting (main commits its
// group within a second when nothing holds it). The watch ends there, at
// a look that fails, or when ctx ends; the returned function ends it
// sooner, waits for it, and closes conn.
func watchLocks(ctx context.Context, conn *pgx.Conn, main, streamed uint32, log *slog.Logger) (stop func()) {
	streamedWaited := false
	look := func(ctx context.Context) bool {
		var mainWaits, streamedWaits bool
		err := conn.QueryRow(ctx, "SELECT $2::int = ANY(pg_blocking_pids($1::int)), $1::int = ANY(pg_blocking_pids($2::int))",
			int32(main), int32(streamed)).Scan(&mainWaits, &streamedWaits)
		if err != nil {
			if ctx.Err() == nil {
				// Without the watch a wait between the two sessions
				// would hold run with nothing said: say it now.
				log.Warn("cannot watch the two target sessions for lock waits any more: if run stops applying, end the streamed transaction's session (SELECT pg_terminate_backend(streamed_pid) on the target)",
					"main_pid", main, "streamed_pid", streamed, "err", err)
			}
			conn.Close(context.WithoutCancel(ctx))
			return false
		}
		if mainWaits || streamedWaits && streamedWaited {
			who := "the main target session waits for a lock the streamed transaction's session holds"
			if !mainWaits {
				who = "the streamed transaction's session waits for a lock the main target session holds"
			}
			log.Info(who+": ending the streamed transaction's session; it is applied at commit from its spool",
				"main_pid", main, "streamed_pid", streamed)
			_, _ = conn.Exec(ctx, "SELECT pg_terminate_backend($1::int)", int32(streamed))
			// Closed now, not at stop: the watch has nothing left to do.
			conn.Close(context.WithoutCancel(ctx))
			return false
		}
		streamedWaited = streamedWaits
		return true
	}
	stopWatch := periodic.Start(ctx, lockWatchEvery, look)
	return func() {
		stopWatch()
		// A second Close of a closed pgx.Conn does nothing.
		conn.Close(context.WithoutCancel(ctx))
	}
}

// notAsArrived is the error of a change a streamed Applier leaves to the
// spool.
func notAsArrived(why string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(why, args...), replication.ErrAppliedAtCommit)
}
