package job

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgsync/pgsync/ledger"
)

// TestCutoverStepsInvariants: from every recorded step, with and without
// the lock and the way back, the plan starts after what is recorded, locks
// only after recording the roles, records the reverse job before it drops
// the forward slot, reports ready once, and records something only when
// the cutover keeps records.
func TestCutoverStepsInvariants(t *testing.T) {
	steps := []ledger.CutoverStep{ledger.CutoverNone, ledger.CutoverStarted, ledger.CutoverLocked, ledger.CutoverReached,
		ledger.CutoverReverseSlot, ledger.CutoverReverseRecorded, ledger.CutoverReversed, ledger.CutoverForwardEnded,
		ledger.CutoverReady, ledger.CutoverDone}
	for _, from := range steps {
		for _, lock := range []bool{false, true} {
			for _, reverse := range []bool{false, true} {
				sh := cutoverShape{from: from, lock: lock, reverse: reverse}
				names := stepNames(cutoverSteps(sh, &cutoverRun{}))
				at := func(name string) int { return slices.Index(names, name) }
				label := string(from) + "/" + strings.Join(names, " | ")
				if from == ledger.CutoverDone {
					if !slices.Equal(names, []string{"report the finished cutover"}) {
						t.Errorf("done: %s", label)
					}
					continue
				}
				if lock && from.Before(ledger.CutoverLocked) {
					if at("lock the source") < 0 || (from == ledger.CutoverNone && at("record the start") > at("lock the source")) {
						t.Errorf("the roles are not recorded before the lock: %s", label)
					}
				} else if at("lock the source") >= 0 {
					t.Errorf("locks again or without roles: %s", label)
				}
				if reverse && from.Before(ledger.CutoverForwardEnded) {
					if e, d := at("record the reverse job on the source"), at("end the job's slot on the source"); e >= 0 && d >= 0 && e > d {
						t.Errorf("drops the forward slot before recording the reverse job: %s", label)
					}
					if rv, d := at("record the job reversed"), at("end the job's slot on the source"); rv >= 0 && rv > d {
						t.Errorf("drops the forward slot before recording the job reversed: %s", label)
					}
				}
				if !reverse && at("create the reverse job's slot") >= 0 {
					t.Errorf("sets up a way back not asked for: %s", label)
				}
				if !from.Before(ledger.CutoverReached) && at("wait for the target") >= 0 {
					t.Errorf("waits again once the goal was reached: %s", label)
				}
				ready := at("report ready")
				if from.Before(ledger.CutoverReady) != (ready >= 0) {
					t.Errorf("ready reported %v from %s: %s", ready >= 0, from, label)
				}
				if ready >= 0 && ready != len(names)-2 {
					t.Errorf("ready is not the step before the comparison: %s", label)
				}
			}
		}
	}
}

// TestPlanCutoverRefusesOtherFlags: a rerun of a recorded cutover keeps its
// way back and its roles; a plain cutover reported ready cannot grow a way
// back.
func TestPlanCutoverRefusesOtherFlags(t *testing.T) {
	rev := &ReverseOptions{Name: "j_back"}
	for _, tc := range []struct {
		name    string
		rec     ledger.Cutover
		o       CutoverOptions
		refused bool
	}{
		{"nothing recorded", ledger.Cutover{Job: "j"}, CutoverOptions{Reverse: rev, LockRoles: []string{"app"}}, false},
		{"same flags", ledger.Cutover{Job: "j", Step: ledger.CutoverLocked, LockedRoles: []string{"app"}, ReverseJob: "j_back"},
			CutoverOptions{Reverse: rev, LockRoles: []string{"app"}}, false},
		{"roles left out of the rerun", ledger.Cutover{Job: "j", Step: ledger.CutoverReached, LockedRoles: []string{"app"}}, CutoverOptions{}, false},
		{"way back left out", ledger.Cutover{Job: "j", Step: ledger.CutoverReverseSlot, ReverseJob: "j_back"}, CutoverOptions{}, true},
		{"way back left out once reversed", ledger.Cutover{Job: "j", Step: ledger.CutoverForwardEnded, ReverseJob: "j_back"}, CutoverOptions{}, true},
		{"another reverse job", ledger.Cutover{Job: "j", Step: ledger.CutoverStarted, ReverseJob: "other"}, CutoverOptions{Reverse: rev}, true},
		{"a role added after the goal", ledger.Cutover{Job: "j", Step: ledger.CutoverLocked, LockedRoles: []string{"app"}},
			CutoverOptions{LockRoles: []string{"app", "batch"}}, true},
		{"a role added before the lock", ledger.Cutover{Job: "j", Step: ledger.CutoverStarted, LockedRoles: []string{"app"}},
			CutoverOptions{LockRoles: []string{"app", "batch"}}, false},
		{"a way back after a plain ready", ledger.Cutover{Job: "j", Step: ledger.CutoverDone, ReadyAt: time.Now()}, CutoverOptions{Reverse: rev}, true},
		{"a way back added before ready", ledger.Cutover{Job: "j", Step: ledger.CutoverReached}, CutoverOptions{Reverse: rev}, false},
	} {
		sh, err := planCutover(tc.rec, tc.o)
		if refused := errors.Is(err, ErrCutoverFlags) || errors.Is(err, ErrJobReversed); refused != tc.refused {
			t.Errorf("%s: refused %v (%v), want %v", tc.name, refused, err, tc.refused)
		}
		if err == nil && sh.from != tc.rec.Step {
			t.Errorf("%s: plans from %q, want %q", tc.name, sh.from, tc.rec.Step)
		}
	}
}
