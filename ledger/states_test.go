package ledger

import (
	"errors"
	"testing"
)

func TestNextTableState(t *testing.T) {
	states := []TableState{TableNone, TablePending, TableCopying, TableReady, TableRemoved}
	events := []TableEvent{Accepted, CopyStarted, Copied, Abandoned}
	// want[state][event]; "" with ok false: refused.
	type out struct {
		to TableState
		ok bool
	}
	want := map[TableState]map[TableEvent]out{
		TableNone:    {Accepted: {TablePending, true}},
		TablePending: {Accepted: {TablePending, true}, CopyStarted: {TableCopying, true}, Abandoned: {TableRemoved, true}},
		TableCopying: {Accepted: {TablePending, true}, Copied: {TableReady, true}, Abandoned: {TableRemoved, true}},
		TableReady:   {Accepted: {TablePending, true}},
		TableRemoved: {Accepted: {TablePending, true}},
	}
	for _, from := range states {
		for _, ev := range events {
			w := want[from][ev]
			got, err := NextTableState(from, ev)
			if w.ok {
				if err != nil || got != w.to {
					t.Errorf("%q on %s = %q, %v; want %q", from, ev, got, err, w.to)
				}
				continue
			}
			if !errors.Is(err, ErrTransition) || got != from {
				t.Errorf("%q on %s = %q, %v; want refused, state unchanged", from, ev, got, err)
			}
		}
	}
}

func TestNextJobState(t *testing.T) {
	states := []JobState{JobNone, JobCopying, JobReady, JobReversed}
	events := []JobEvent{BootstrapStarted, BootstrapDone, TornDown, Reversed, Established}
	type out struct {
		to JobState
		ok bool
	}
	for _, force := range []bool{false, true} {
		want := map[JobState]map[JobEvent]out{
			JobNone:     {BootstrapStarted: {JobCopying, true}, TornDown: {JobNone, true}, Established: {JobReady, true}},
			JobCopying:  {BootstrapStarted: {JobCopying, true}, BootstrapDone: {JobReady, true}, TornDown: {JobNone, true}},
			JobReady:    {TornDown: {JobNone, true}, Reversed: {JobReversed, true}},
			JobReversed: {TornDown: {JobNone, true}, Reversed: {JobReversed, true}, Established: {JobReady, true}},
		}
		if force { // bootstrap --force starts a ready or reversed job over
			want[JobReady][BootstrapStarted] = out{JobCopying, true}
			want[JobReversed][BootstrapStarted] = out{JobCopying, true}
		}
		for _, from := range states {
			for _, ev := range events {
				w := want[from][ev]
				got, err := NextJobState(from, ev, force)
				if w.ok {
					if err != nil || got != w.to {
						t.Errorf("%q on %s (force %t) = %q, %v; want %q", from, ev, force, got, err, w.to)
					}
					continue
				}
				if !errors.Is(err, ErrTransition) || got != from {
					t.Errorf("%q on %s (force %t) = %q, %v; want refused, state unchanged", from, ev, force, got, err)
				}
			}
		}
	}
}
