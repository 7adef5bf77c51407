package main

import "testing"

// The equivalent command of a measurement names every flag that changes
// it.
func TestCatchupArgs(t *testing.T) {
	c := catchupConfig{dir: "/r/rtt/2ms-1", backlog: 300, rows: 20000, rttMS: 2, runFlags: []string{"--read-pause-queued", "-1"}}
	got := command("catchup", c.args())
	want := `cd scripts/bench && go run ./harness -root ../.. catchup -backlog 300 -rows 20000 -rtt 2 -run-flags "--read-pause-queued -1"`
	if got != want {
		t.Fatalf("command\n got %s\nwant %s", got, want)
	}
	c.rttMS, c.runFlags = -1, nil
	if got, want := command("catchup", c.args()), `cd scripts/bench && go run ./harness -root ../.. catchup -backlog 300 -rows 20000`; got != want {
		t.Fatalf("command without proxy\n got %s\nwant %s", got, want)
	}
}
