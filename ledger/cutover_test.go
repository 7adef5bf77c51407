package ledger

import (
	"errors"
	"testing"
)

// TestNextCutoverStep: steps move forward or are recorded again; never
// back, never to none, never to or from a step this release does not know.
func TestNextCutoverStep(t *testing.T) {
	for _, tc := range []struct {
		from, to CutoverStep
		ok       bool
	}{
		{CutoverNone, CutoverStarted, true},
		{CutoverStarted, CutoverLocked, true},
		{CutoverLocked, CutoverLocked, true},
		{CutoverLocked, CutoverReached, true},
		{CutoverNone, CutoverReached, true}, // a cutover that locks nothing records from its wait on
		{CutoverReached, CutoverReverseSlot, true},
		{CutoverReverseRecorded, CutoverReversed, true},
		{CutoverForwardEnded, CutoverReady, true},
		{CutoverReady, CutoverDone, true},
		{CutoverReached, CutoverLocked, false},
		{CutoverDone, CutoverReady, false},
		{CutoverReversed, CutoverReverseSlot, false},
		{CutoverStarted, CutoverNone, false},
		{CutoverStep("paused"), CutoverDone, false},
		{CutoverStarted, CutoverStep("paused"), false},
	} {
		got, err := NextCutoverStep(tc.from, tc.to)
		if tc.ok != (err == nil) || tc.ok && got != tc.to || !tc.ok && (got != tc.from || !errors.Is(err, ErrTransition)) {
			t.Errorf("%q -> %q: got %q, %v; want ok=%v", tc.from, tc.to, got, err, tc.ok)
		}
	}
	if !CutoverLocked.Before(CutoverReached) || CutoverDone.Before(CutoverReady) || CutoverNone.Before(CutoverNone) {
		t.Error("Before does not follow the order")
	}
}
