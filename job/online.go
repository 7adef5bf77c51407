package job

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/periodic"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/replication"
)

// An online verify (issue 24, point 7) compares both sides at one source
// position P while run applies under writes, so that writes in flight
// never show as a difference: the source is read in the snapshot a
// temporary slot exports at P, the target in a snapshot taken while run
// holds before the first source transaction committing at or after P.
// The target transaction that applied the last one before P recorded it,
// so the target's snapshot is the source at P.

// holdWait bounds each wait for run to hold; the error at its end says
// what was waited for.
const holdWait = 10 * time.Second

// views are the two sessions of an online verify, each in a REPEATABLE
// READ transaction whose snapshot is the source at at.
type views struct {
	src, tgt *pgx.Conn
	at       pglogrepl.LSN
}

func (v *views) close(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if v.src != nil {
		v.src.Close(ctx)
	}
	if v.tgt != nil {
		v.tgt.Close(ctx)
	}
}

// holdViews takes both snapshots. run is first paused (a hold at 0/1: it
// stops before its next transaction), so that it cannot pass the position
// the temporary slot then gives; the hold moves to that position, run
// applies up to it and holds, the target's snapshot is taken, and the hold
// ends. run is held for the time the slot and the snapshots take. Every
// exit ends the hold.
func (j *Job) holdViews(ctx context.Context) (v *views, err error) {
	// run made pgsync.holds at its start; an earlier release's run did
	// not.
	if _, err := ledger.Upgrade(ctx, j.tgt); err != nil {
		return nil, err
	}
	v = &views{}
	defer func() {
		if rerr := ledger.ReleaseHold(context.WithoutCancel(ctx), j.tgt, j.opts.Job); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			v.close(ctx)
			v = nil
		}
	}()
	began := time.Now()
	if err := j.awaitHold(ctx, 1); err != nil {
		return v, err
	}
	repl, err := pgconnect.ConnectReplication(ctx, j.opts.SourceURL)
	if err != nil {
		return v, err
	}
	defer repl.Close(context.WithoutCancel(ctx))
	stopLogging := j.logStandbySnapshots(ctx)
	slot, err := replication.CreateTemporarySlot(ctx, repl, fmt.Sprintf("pgsync_verify_%d", os.Getpid()))
	stopLogging()
	if err != nil {
		return v, err
	}
	if v.src, err = pgconnect.Connect(ctx, "source", j.opts.SourceURL); err != nil {
		return v, err
	}
	if _, err := v.src.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return v, fmt.Errorf("source snapshot: %w", err)
	}
	if _, err := v.src.Exec(ctx, "SET TRANSACTION SNAPSHOT "+catalog.QuoteLiteral(slot.SnapshotName)); err != nil {
		return v, fmt.Errorf("source snapshot at %s: %w", slot.ConsistentPoint, err)
	}
	v.at = slot.ConsistentPoint
	// run holds at a commit at or after the slot's consistent point, or
	// once the source reports its WAL past it; on an idle source neither
	// may come before holdWait (PostgreSQL 12 reported the position only
	// every wal_sender_timeout / 2 in the test of issue 32), so a commit
	// after it is made, as cutover does for its goal (on the primary of a
	// standby source, whose replay brings it to the standby).
	if _, err := replication.CommittedHead(ctx, j.primary); err != nil {
		return v, err
	}
	if err := j.awaitHold(ctx, v.at); err != nil {
		return v, err
	}
	if v.tgt, err = pgconnect.Connect(ctx, "target", j.opts.TargetURL); err != nil {
		return v, err
	}
	if _, err := v.tgt.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return v, fmt.Errorf("target snapshot: %w", err)
	}
	// The snapshot is taken by the transaction's first query, while run
	// still holds.
	if _, err := v.tgt.Exec(ctx, "SELECT 1"); err != nil {
		return v, fmt.Errorf("target snapshot at %s: %w", v.at, err)
	}
	j.log.Info("online verify: both sides read at one source position", "at", v.at.String(), "run_held_s", fmt.Sprintf("%.3f", time.Since(began).Seconds()))
	return v, nil
}

// awaitHold asks run to hold at at and waits until it says it does.
func (j *Job) awaitHold(ctx context.Context, at pglogrepl.LSN) error {
	if err := ledger.RequestHold(ctx, j.tgt, j.opts.Job, at); err != nil {
		return err
	}
	deadline := time.Now().Add(holdWait)
	held := func(ctx context.Context) (bool, error) {
		h, err := ledger.ReadHold(ctx, j.tgt, j.opts.Job)
		if err != nil {
			return false, err
		}
		if h.At == at && h.Held {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("pgsync run did not hold at %s within %s for the online verify (is it applying a long transaction? stop run to verify offline)", at, holdWait)
		}
		return false, nil
	}
	return periodic.Await(ctx, periodic.Wait{Poll: 5 * time.Millisecond}, held, nil)
}
