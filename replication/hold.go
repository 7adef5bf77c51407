package replication

import (
	"context"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/periodic"
)

// holdPoll is how often a held session looks whether its hold ended.
const holdPoll = 10 * time.Millisecond

// holdBefore waits, when an online verify asks the session to hold at a
// position at or before commit (the commit LSN of the source transaction
// about to be applied), until the hold ends or moves past commit: the open
// group is committed first, so that the target has every transaction
// committed before the hold's position and none after it, and the verify
// is told so. The reader goes on receiving meanwhile; a hold lasts the
// moments the verify needs to make its source snapshot and take the
// target's.
func (d *dispatcher) holdBefore(ctx context.Context, commit pglogrepl.LSN) error {
	if d.holdAt == nil {
		return nil
	}
	// A hold may move while it is held (an online verify first pauses run,
	// then names its position): each is looked at in turn.
	for {
		at := d.holdAt()
		if at == 0 || commit < at {
			return nil
		}
		durable, err := d.app.Flush(ctx)
		if err != nil {
			return err
		}
		d.pos.AdvanceApplied(durable)
		if err := d.held(ctx, at); err != nil {
			return err
		}
		d.log.Info("holding for an online verify", "at", at.String(), "next_commit", commit.String(),
			"ends", "when the verify has its snapshots (a hold older than 60 s is ignored)")
		ended := func(context.Context) (bool, error) { return d.holdAt() != at, nil }
		if err := periodic.Await(ctx, periodic.Wait{Poll: holdPoll}, ended, nil); err != nil {
			return err
		}
	}
}
