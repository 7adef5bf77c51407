package periodic

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAwait: Await ends when the condition holds, when it fails (with its
// error, unwrapped), and when ctx ends, and it says it waits on the
// schedule of its Wait.
func TestAwait(t *testing.T) {
	errLook := errors.New("look failed")
	for _, tt := range []struct {
		name      string
		wait      Wait
		doneAt    int   // the look that finds the condition true; 0: none
		failAt    int   // the look that fails; 0: none
		cancelAt  int   // the look after which ctx ends; 0: never
		wantErr   error // nil: the condition held
		wantLooks int
		wantSaid  int
	}{
		{"holds at once", Wait{Poll: time.Millisecond}, 1, 0, 0, nil, 1, 0},
		{"holds at the third look, said at once", Wait{Poll: time.Millisecond, SayEvery: time.Hour}, 3, 0, 0, nil, 3, 1},
		{"holds before the first report", Wait{Poll: time.Millisecond, SayAfter: time.Hour}, 3, 0, 0, nil, 3, 0},
		{"said at every look", Wait{Poll: time.Millisecond}, 4, 0, 0, nil, 4, 3},
		{"start poll", Wait{Poll: time.Hour, StartPoll: time.Millisecond, StartFor: time.Hour, SayAfter: time.Hour}, 3, 0, 0, nil, 3, 0},
		{"the look fails", Wait{Poll: time.Millisecond}, 0, 2, 0, errLook, 2, 1},
		{"ctx ends", Wait{Poll: time.Hour}, 0, 0, 1, context.Canceled, 1, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			looks, said := 0, 0
			err := Await(ctx, tt.wait, func(context.Context) (bool, error) {
				looks++
				if looks == tt.cancelAt {
					cancel()
				}
				if looks == tt.failAt {
					return false, errLook
				}
				return looks == tt.doneAt, nil
			}, func(time.Duration) { said++ })
			if err != tt.wantErr {
				t.Errorf("err %v, want %v", err, tt.wantErr)
			}
			if looks != tt.wantLooks || said != tt.wantSaid {
				t.Errorf("%d looks and %d reports, want %d and %d", looks, said, tt.wantLooks, tt.wantSaid)
			}
		})
	}
}

// TestWaitDue: the report schedule of each wait pgsync has: the first
// report once SayAfter has passed, the next ones SayEvery after the last.
func TestWaitDue(t *testing.T) {
	s := time.Second
	slot := Wait{SayAfter: 5 * s, SayEvery: 10 * s}
	added := Wait{SayEvery: 30 * s}
	for _, tt := range []struct {
		name           string
		w              Wait
		waited, saidAt time.Duration
		want           bool
	}{
		{"slot: too early", slot, 4 * s, -1, false},
		{"slot: first report", slot, 5 * s, -1, true},
		{"slot: just reported", slot, 9 * s, 5 * s, false},
		{"slot: next report", slot, 15 * s, 5 * s, true},
		{"added: at the first look", added, 0, -1, true},
		{"added: not again at once", added, s, 0, false},
		{"added: after 30s", added, 30 * s, 0, true},
	} {
		if got := tt.w.due(tt.waited, tt.saidAt); got != tt.want {
			t.Errorf("%s: due(%s, %s) = %v, want %v", tt.name, tt.waited, tt.saidAt, got, tt.want)
		}
	}
}

// TestWaitPause: StartPoll applies during StartFor only.
func TestWaitPause(t *testing.T) {
	w := Wait{Poll: 100 * time.Millisecond, StartPoll: 5 * time.Millisecond, StartFor: time.Second}
	for _, tt := range []struct {
		waited, want time.Duration
	}{
		{0, 5 * time.Millisecond},
		{999 * time.Millisecond, 5 * time.Millisecond},
		{time.Second, 100 * time.Millisecond},
		{time.Minute, 100 * time.Millisecond},
	} {
		if got := w.pause(tt.waited); got != tt.want {
			t.Errorf("pause after %s = %s, want %s", tt.waited, got, tt.want)
		}
	}
	if got := (Wait{Poll: time.Second}).pause(0); got != time.Second {
		t.Errorf("no StartPoll: pause %s, want 1s", got)
	}
}
