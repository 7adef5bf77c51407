package periodic

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestStart: the loop calls tick until stop, ctx's end, or tick's false;
// in every case stop returns, and tick is not called after it.
func TestStart(t *testing.T) {
	for _, tt := range []struct {
		name  string
		ticks int32 // tick returns false at this call; 0: never
		end   func(cancel context.CancelFunc, stop func())
	}{
		{"stop", 0, func(_ context.CancelFunc, stop func()) { stop() }},
		{"ctx ends", 0, func(cancel context.CancelFunc, stop func()) { cancel(); stop() }},
		{"tick ends it", 3, func(_ context.CancelFunc, stop func()) { stop() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var calls atomic.Int32
			reached := make(chan struct{})
			stop := Start(ctx, time.Millisecond, func(ctx context.Context) bool {
				n := calls.Add(1)
				if n == 3 {
					close(reached)
				}
				return tt.ticks == 0 || n < tt.ticks
			})
			<-reached
			tt.end(cancel, stop)
			after := calls.Load()
			if tt.ticks != 0 && after != tt.ticks {
				t.Errorf("tick called %d times, want %d: false must end the loop", after, tt.ticks)
			}
			time.Sleep(5 * time.Millisecond) // a loop still running would tick in this time
			if n := calls.Load(); n != after {
				t.Errorf("tick called %d times after stop returned", n-after)
			}
		})
	}
}

// TestStopWaits: stop cancels the context tick is given and returns only
// once tick has returned, so that the caller may close what tick uses.
func TestStopWaits(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var finished, sawCancel atomic.Bool
	stop := Start(context.Background(), time.Millisecond, func(ctx context.Context) bool {
		close(entered)
		<-release
		sawCancel.Store(ctx.Err() != nil)
		finished.Store(true)
		return true
	})
	<-entered
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while tick was running")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-stopped
	if !finished.Load() {
		t.Error("stop returned before tick finished")
	}
	if !sawCancel.Load() {
		t.Error("tick's context was not cancelled by stop")
	}
}

// TestStartAfter: the first call comes after first, the others after
// interval; a first longer than the test never calls tick.
func TestStartAfter(t *testing.T) {
	for _, tt := range []struct {
		name            string
		first, interval time.Duration
		wantCalls       bool
	}{
		{"short first, long interval", time.Millisecond, time.Hour, true},
		{"first at once, long interval", 0, time.Hour, true},
		{"long first, short interval", time.Hour, time.Millisecond, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			called := make(chan struct{}, 10)
			stop := StartAfter(context.Background(), tt.first, tt.interval, func(context.Context) bool {
				calls.Add(1)
				called <- struct{}{}
				return true
			})
			if tt.wantCalls {
				<-called
			}
			time.Sleep(10 * time.Millisecond) // ten short intervals
			stop()
			want := int32(0)
			if tt.wantCalls {
				want = 1 // the second call waits an hour
			}
			if n := calls.Load(); n != want {
				t.Errorf("tick called %d times, want %d", n, want)
			}
		})
	}
}
