package job

import (
	"errors"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/apply"
)

func TestNextTableState(t *testing.T) {
	states := []string{StateNone, apply.TablePending, apply.TableCopying, apply.TableReady, apply.TableRemoved}
	events := []TableEvent{Accepted, CopyStarted, Copied, Abandoned}
	// want[state][event]; "" with ok false: refused.
	type out struct {
		to string
		ok bool
	}
	want := map[string]map[TableEvent]out{
		StateNone:          {Accepted: {apply.TablePending, true}},
		apply.TablePending: {Accepted: {apply.TablePending, true}, CopyStarted: {apply.TableCopying, true}, Abandoned: {apply.TableRemoved, true}},
		apply.TableCopying: {Accepted: {apply.TablePending, true}, Copied: {apply.TableReady, true}, Abandoned: {apply.TableRemoved, true}},
		apply.TableReady:   {Accepted: {apply.TablePending, true}},
		apply.TableRemoved: {Accepted: {apply.TablePending, true}},
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

func TestPlanBootstrap(t *testing.T) {
	const c1, c2 = pglogrepl.LSN(100), pglogrepl.LSN(200)
	tables := map[string]apply.AddedTable{
		"public.done":    {State: apply.TableReady, CopiedLSN: c1},
		"public.later":   {State: apply.TableReady, CopiedLSN: c2},
		"public.half":    {State: apply.TableCopying},
		"public.waiting": {State: apply.TablePending},
	}
	tests := []struct {
		name  string
		rec   Recorded
		force bool
		err   error
		mode  BootstrapMode
		keep  []string
		owned []string
		all   bool
	}{
		{name: "nothing recorded", rec: Recorded{}, mode: Fresh},
		{name: "slot of another target", rec: Recorded{Slot: true}, err: ErrForeignSlot},
		{name: "publication of another target", rec: Recorded{Publication: true}, err: ErrForeignSlot},
		{name: "ready", rec: Recorded{State: apply.StateReady, LSN: c1, Slot: true, Publication: true}, err: ErrAlreadyBootstrapped},
		{name: "ready, forced", rec: Recorded{State: apply.StateReady, LSN: c1, Slot: true}, force: true, mode: Restart, all: true},
		{name: "nothing recorded, forced", rec: Recorded{Slot: true}, force: true, mode: Restart, all: true},
		{name: "interrupted with its slot", rec: Recorded{State: apply.StateCopying, LSN: c1, Slot: true, Publication: true, Tables: tables},
			mode: Resume, keep: []string{"public.done", "public.later"}, owned: []string{"public.half"}},
		{name: "interrupted before the slot", rec: Recorded{State: apply.StateCopying, Tables: tables},
			mode: Restart, owned: []string{"public.done", "public.half", "public.later"}},
		{name: "interrupted, slot dropped", rec: Recorded{State: apply.StateCopying, LSN: c1, Publication: true, Tables: tables},
			mode: Restart, owned: []string{"public.done", "public.half", "public.later"}},
		{name: "unknown state", rec: Recorded{State: "bogus"}, err: ErrTransition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanBootstrap(tt.rec, tt.force)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Mode != tt.mode || p.EmptyAll != tt.all {
				t.Errorf("mode %s, empty all %t; want %s, %t", p.Mode, p.EmptyAll, tt.mode, tt.all)
			}
			if len(p.Keep) != len(tt.keep) {
				t.Errorf("keep %v, want %v", p.Keep, tt.keep)
			}
			for _, k := range tt.keep {
				if p.Keep[k] != tt.rec.Tables[k].CopiedLSN {
					t.Errorf("keep %s at %s, want %s", k, p.Keep[k], tt.rec.Tables[k].CopiedLSN)
				}
			}
			if len(p.Owned) != len(tt.owned) {
				t.Errorf("owned %v, want %v", p.Owned, tt.owned)
			}
			for _, o := range tt.owned {
				if !p.Owned[o] {
					t.Errorf("%s not owned", o)
				}
			}
			// A pending table never had a row copied: it is never owned.
			if p.Owned["public.waiting"] {
				t.Error("a pending table is owned")
			}
		})
	}
}
