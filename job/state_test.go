package job

import (
	"errors"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/ledger"
)

func TestPlanBootstrap(t *testing.T) {
	const c1, c2 = pglogrepl.LSN(100), pglogrepl.LSN(200)
	tables := map[string]ledger.Table{
		"public.done":    {State: ledger.TableReady, CopiedLSN: c1},
		"public.later":   {State: ledger.TableReady, CopiedLSN: c2},
		"public.half":    {State: ledger.TableCopying},
		"public.waiting": {State: ledger.TablePending},
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
		{name: "ready", rec: Recorded{State: ledger.JobReady, LSN: c1, Slot: true, Publication: true}, err: ErrAlreadyBootstrapped},
		{name: "ready, forced", rec: Recorded{State: ledger.JobReady, LSN: c1, Slot: true}, force: true, mode: Restart, all: true},
		{name: "nothing recorded, forced", rec: Recorded{Slot: true}, force: true, mode: Restart, all: true},
		{name: "interrupted with its slot", rec: Recorded{State: ledger.JobCopying, LSN: c1, Slot: true, Publication: true, Tables: tables},
			mode: Resume, keep: []string{"public.done", "public.later"}, owned: []string{"public.half"}},
		{name: "interrupted before the slot", rec: Recorded{State: ledger.JobCopying, Tables: tables},
			mode: Restart, owned: []string{"public.done", "public.half", "public.later"}},
		{name: "interrupted, slot dropped", rec: Recorded{State: ledger.JobCopying, LSN: c1, Publication: true, Tables: tables},
			mode: Restart, owned: []string{"public.done", "public.half", "public.later"}},
		{name: "reversed by cutover --reverse", rec: Recorded{State: ledger.JobReversed, LSN: c1, Publication: false}, err: ErrJobReversed},
		{name: "reversed, forced", rec: Recorded{State: ledger.JobReversed, LSN: c1}, force: true, mode: Restart, all: true},
		{name: "rerun after a refused fresh bootstrap (checks, a table in the way, a missing extension, role or function): nothing recorded", rec: Recorded{}, mode: Fresh},
		{name: "rerun after a refused resume: still copying with its slot", rec: Recorded{State: ledger.JobCopying, LSN: c1, Slot: true, Publication: true, Tables: tables},
			mode: Resume, keep: []string{"public.done", "public.later"}, owned: []string{"public.half"}},
		{name: "unknown state", rec: Recorded{State: "bogus"}, err: ledger.ErrTransition},
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
