package job

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pgsync/pgsync/periodic"
	"github.com/pgsync/pgsync/pgconnect"
)

// When a slot is being created and the creation waits, the first notice
// comes after waitNoticeAfter and then every waitNoticeEvery.
var (
	waitNoticeAfter = 10 * time.Second
	waitNoticeEvery = 30 * time.Second
)

// announceSlotWait says, while a slot is being created on the replication
// connection of backend replPID, which source transactions the creation
// waits for: creating a logical slot waits until every transaction running
// when it began that has an xid has ended, and says nothing meanwhile. It
// uses j.primary (the transactions that matter are the primary's, on a
// standby source too), which the caller leaves alone until stop returns.
func (j *Job) announceSlotWait(ctx context.Context, slot string, replPID uint32) (stop func()) {
	began := time.Now()
	return periodic.StartAfter(ctx, waitNoticeAfter, waitNoticeEvery, func(ctx context.Context) bool {
		// Not under ctx: a cancelled query would close j.primary.
		blockers, err := j.transactionsOlderThan(context.WithoutCancel(ctx), began, replPID)
		if err != nil {
			j.log.Warn("creating the slot is taking long, and the source transactions it waits for cannot be read", "slot", slot,
				"waited_s", fmt.Sprintf("%.0f", time.Since(began).Seconds()), "err", err)
			return true
		}
		j.log.Warn("waiting: creating the slot waits until every source transaction that was running when it began, and has written, ends; end them (COMMIT or ROLLBACK in their application, or SELECT pg_terminate_backend(pid) on the source) or let them finish",
			"slot", slot, "waited_s", fmt.Sprintf("%.0f", time.Since(began).Seconds()), "transactions", blockers)
		return true
	})
}

// sayWhile says, after waitNoticeAfter and every waitNoticeEvery until stop
// is called, that pgsync is still doing what (a step that can take long
// and prints nothing of its own) and what ends it, so that no command
// waits without saying why.
func (j *Job) sayWhile(ctx context.Context, what, ends string) (stop func()) {
	began := time.Now()
	return periodic.StartAfter(ctx, waitNoticeAfter, waitNoticeEvery, func(context.Context) bool {
		j.log.Info("still "+what, "seconds", fmt.Sprintf("%.0f", time.Since(began).Seconds()), "ends", ends)
		return true
	})
}

// transactionsOlderThan describes the source sessions with a transaction
// that has an xid and began before t, oldest first: "pid 123
// (application_name psql, user app, database db, 42s, idle in
// transaction)".
func (j *Job) transactionsOlderThan(ctx context.Context, t time.Time, exceptPID uint32) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := j.primary.Query(ctx, `SELECT format('pid %s (application_name %s, user %s, database %s, %ss, %s)',
       pid, coalesce(nullif(application_name, ''), '-'), coalesce(usename::text, '-'), coalesce(datname::text, '-'),
       round(extract(epoch FROM now() - xact_start)), coalesce(state, '-'))
FROM pg_stat_activity
WHERE backend_xid IS NOT NULL AND xact_start < $1 AND pid <> $2 AND pid <> pg_backend_pid()
ORDER BY xact_start LIMIT 20`, t, int64(exceptPID))
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return "", err
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(out) == 0 {
		return "none found in pg_stat_activity (prepared transactions? see pg_prepared_xacts)", nil
	}
	return strings.Join(out, "; "), nil
}

// logStandbySnapshots makes the primary of a standby source log a
// running-transactions record soon after a slot's creation on the
// standby began, then every second until stop: the creation waits for
// such a record, which the primary otherwise logs every 15 s at most
// (pg_log_standby_snapshot, PostgreSQL 16+). It uses a connection of its
// own, closed by stop. The function is for superusers unless granted:
// without it the creation waits for the primary's own records, which the
// one warning says.
func (j *Job) logStandbySnapshots(ctx context.Context) (stop func()) {
	if j.primary == j.src {
		return func() {}
	}
	conn, err := pgconnect.Connect(ctx, "source primary", j.opts.SourcePrimaryURL)
	if err != nil {
		j.log.Warn("creating the slot on the standby waits for the primary's next running-transactions record (up to 15 s): the primary cannot be asked to log one", "err", err)
		return func() {}
	}
	stopTicks := periodic.StartAfter(ctx, 200*time.Millisecond, time.Second, func(ctx context.Context) bool {
		if _, err := conn.Exec(ctx, "SELECT pg_log_standby_snapshot()"); err != nil {
			if ctx.Err() == nil {
				j.log.Warn("creating the slot on the standby waits for the primary's next running-transactions record (up to 15 s): SELECT pg_log_standby_snapshot() on the primary failed", "err", err)
			}
			return false
		}
		return true
	})
	return func() {
		stopTicks()
		conn.Close(context.WithoutCancel(ctx))
	}
}
