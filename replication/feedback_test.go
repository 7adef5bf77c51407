package replication

import (
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/position"
)

func TestFeedbackDecide(t *testing.T) {
	tests := []struct {
		name     string
		in       feedback
		wantAt   pglogrepl.LSN
		wantSend bool
	}{
		{"idle, nothing new", feedback{applied: 100, reported: 100, drained: true}, 100, false},
		{"applied moved", feedback{applied: 200, reported: 100}, 200, true},
		{"applied moved while more is queued", feedback{applied: 200, reported: 100, drained: false}, 200, true},
		{"never backwards", feedback{applied: 50, reported: 100}, 100, false},
		{"never backwards even when asked", feedback{applied: 50, reported: 100, mustSend: true}, 100, true},
		{"server asked, position unchanged", feedback{applied: 100, reported: 100, mustSend: true}, 100, true},
		{"keepalive past the applied position, drained", feedback{applied: 100, reported: 100, serverEnd: 500, drained: true}, 500, true},
		{"keepalive past the applied position, work in flight", feedback{applied: 100, reported: 100, serverEnd: 500}, 100, false},
		{"keepalive in flight, server asked", feedback{applied: 100, reported: 100, serverEnd: 500, mustSend: true}, 100, true},
		{"keepalive in flight, applied moved", feedback{applied: 300, reported: 100, serverEnd: 500}, 300, true},
		{"keepalive behind the reported position", feedback{applied: 100, reported: 400, serverEnd: 300, drained: true}, 400, false},
		{"keepalive equal to the applied position", feedback{applied: 500, reported: 100, serverEnd: 500, drained: true}, 500, true},
		{"waiting reader keeps alive", feedback{applied: 100, reported: 100, mustSend: true}, 100, true},
		{"behind and quiet for the keepalive period", feedback{applied: 100, reported: 100, quiet: keepAliveEvery}, 100, true},
		{"behind, recently reported", feedback{applied: 100, reported: 100, quiet: keepAliveEvery - time.Millisecond}, 100, false},
		{"idle and quiet for long: the walsender pings", feedback{applied: 100, reported: 100, drained: true, quiet: time.Hour}, 100, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, send := tt.in.decide()
			if at != tt.wantAt || send != tt.wantSend {
				t.Errorf("decide(%+v) = (%s, %t), want (%s, %t)", tt.in, at, send, tt.wantAt, tt.wantSend)
			}
		})
	}
}

func TestAppliedBefore(t *testing.T) {
	tests := []struct {
		commit, resume pglogrepl.LSN
		want           bool
	}{
		{commit: 0x100, resume: 0x200, want: true},  // an older commit
		{commit: 0x1F0, resume: 0x200, want: true},  // the last applied commit: it ends at resume
		{commit: 0x200, resume: 0x200, want: false}, // the first commit after the resume point
		{commit: 0x300, resume: 0x200, want: false}, // a later one
		{commit: 0x100, resume: 0, want: false},     // no resume point: nothing applied
		{commit: 0, resume: 0, want: false},         // degenerate, still not skipped
		{commit: 0x16B3748, resume: 0x16B3778, want: true},
	}
	for _, tt := range tests {
		if got := appliedBefore(tt.commit, tt.resume); got != tt.want {
			t.Errorf("appliedBefore(%s, %s) = %t, want %t", tt.commit, tt.resume, got, tt.want)
		}
	}
}

// TestLagCountsAcknowledgedWAL: WAL after the last published commit, once
// acknowledged because everything received was applied, is not lag; WAL
// announced past the acknowledged position is, and so is the age of the
// last applied commit while it waits.
func TestLagCountsAcknowledgedWAL(t *testing.T) {
	var st Stats
	if st.LagBytes() != 0 || st.LagSeconds(time.Now()) != 0 {
		t.Fatalf("no session yet: lag %d bytes, %v s", st.LagBytes(), st.LagSeconds(time.Now()))
	}
	pos := position.New(100)
	st.Positions.Store(pos)
	committed := time.Unix(1000, 0)
	st.CommitTime.Store(committed.UnixNano())

	pos.AdvanceApplied(200)
	st.ServerEnd.Store(500)
	if got := st.LagBytes(); got != 300 {
		t.Errorf("applied 200, server end 500: lag %d bytes, want 300", got)
	}
	if got := st.LagSeconds(committed.Add(7 * time.Second)); got != 7 {
		t.Errorf("lag %v s while WAL waits, want 7", got)
	}

	pos.AdvanceReported(500) // drained: the keepalive's end acknowledged
	if got := st.LagBytes(); got != 0 {
		t.Errorf("applied 200, acknowledged 500, server end 500: lag %d bytes, want 0", got)
	}
	if got := st.LagSeconds(committed.Add(7 * time.Second)); got != 0 {
		t.Errorf("lag %v s when caught up, want 0", got)
	}
}
