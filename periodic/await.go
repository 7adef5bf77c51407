package periodic

import (
	"context"
	"time"

	"github.com/pgsync/pgsync/killpoint"
)

// Wait is how Await polls its condition and how often it says it still
// waits.
type Wait struct {
	// Poll is the pause between two looks at the condition.
	Poll time.Duration
	// StartPoll, when not zero, replaces Poll during the first StartFor
	// of the wait: a wait that usually ends within moments looks often
	// then, and less often once it has lasted.
	StartPoll, StartFor time.Duration
	// SayAfter is how long the wait goes before it is reported the first
	// time (zero: at the first look that finds the condition false), and
	// SayEvery the period of the reports after that.
	SayAfter, SayEvery time.Duration
}

// Await looks at done until it reports true (Await returns nil), returns
// an error (Await returns that error as it is: done names its subject), or
// ctx ends (ctx.Err()). The condition is looked at once before ctx is
// first consulted, as the loops it replaces did. While the wait goes on,
// say is called with the time waited so far, on the schedule of w, after
// a look that found the condition false: it should say what the wait is
// for and which command or event ends it. say may be nil.
func Await(ctx context.Context, w Wait, done func(ctx context.Context) (bool, error), say func(waited time.Duration)) error {
	began := time.Now()
	saidAt := time.Duration(-1) // the time waited at the last report; none yet
	// The polls are not counted by the kill models: how many there are
	// depends on timing.
	pollCtx := killpoint.Uncounted(ctx)
	for {
		ok, err := done(pollCtx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		waited := time.Since(began)
		if say != nil && w.due(waited, saidAt) {
			say(waited)
			saidAt = waited
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(w.pause(waited)):
		}
	}
}

// due reports whether a wait that has lasted waited, and was last
// reported when it had lasted saidAt (negative: never), is to be reported
// now.
func (w Wait) due(waited, saidAt time.Duration) bool {
	if waited < w.SayAfter {
		return false
	}
	return saidAt < 0 || waited-saidAt >= w.SayEvery
}

// pause is the pause before the next look of a wait that has lasted
// waited.
func (w Wait) pause(waited time.Duration) time.Duration {
	if w.StartPoll > 0 && waited < w.StartFor {
		return w.StartPoll
	}
	return w.Poll
}
