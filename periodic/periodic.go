// Package periodic holds the two timing mechanisms the other packages
// share: a call repeated on a period in a goroutine of its own, whose stop
// waits for that goroutine (Start), and a poll that waits for a condition
// while saying what it waits for (Await). Each was written out by hand in
// several places before (issue 23, point 5).
package periodic

import (
	"context"
	"time"
)

// Start calls tick every interval, in a goroutine of its own, until ctx
// ends, tick returns false, or stop is called. stop cancels the context
// tick is given and waits for the goroutine to exit: once it returns, tick
// does not run and nothing it uses is touched, so the caller may close or
// finish what tick used. stop may be called after the loop ended by
// itself, but only once.
func Start(ctx context.Context, interval time.Duration, tick func(ctx context.Context) (more bool)) (stop func()) {
	return StartAfter(ctx, interval, interval, tick)
}

// StartAfter is Start with a first call after first instead of after
// interval: a notice that waits a while before it speaks the first time,
// then repeats less often. With first 0, the first call is at once.
func StartAfter(ctx context.Context, first, interval time.Duration, tick func(ctx context.Context) (more bool)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		if first <= 0 {
			if !tick(ctx) {
				return
			}
			first = interval
		}
		// A ticker rather than a timer per call: the calls keep to the
		// period whatever tick takes, which rates per period rely on.
		t := time.NewTicker(first)
		defer t.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if ctx.Err() != nil {
				return // both were ready, and select took the tick
			}
			if n == 0 && first != interval {
				t.Reset(interval)
			}
			if !tick(ctx) {
				return
			}
		}
	}()
	return func() {
		cancel()
		<-exited
	}
}
