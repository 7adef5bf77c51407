package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func samples(step float64, points ...[2]float64) []sampled {
	// Each point is {copied (0 or 1), lag (-1: no heartbeat yet)}.
	var out []sampled
	for i, p := range points {
		x := sampled{copied: p[0] == 1}
		x.T = float64(i) * step
		if p[1] >= 0 {
			lag := p[1]
			x.LagSeconds = &lag
		}
		out = append(out, x)
	}
	return out
}

// Ready is the first sample of a stretch of hold (5 s) where the tool has
// copied and every lag is under 1 s; a lag of 1 s or more, or no
// heartbeat, starts the stretch again.
func TestReadyIn(t *testing.T) {
	var pts [][2]float64
	pts = append(pts, [2]float64{0, -1}, [2]float64{0, 0.1})  // 0, 1: lag low, not copied
	pts = append(pts, [2]float64{1, 12}, [2]float64{1, 0.2})  // 2: copied, behind; 3: caught up
	pts = append(pts, [2]float64{1, 0.3}, [2]float64{1, 1.0}) // 5: a lag of 1 s breaks the stretch
	for range 6 {
		pts = append(pts, [2]float64{1, 0.1}) // 6..11
	}
	ready, copied, ok := readyIn(samples(1, pts...))
	if !ok || ready != 6 || copied != 2 {
		t.Fatalf("ready %v at %v, copied at %v; want ready at 6, copied at 2", ok, ready, copied)
	}
	// One sample short of the hold: not ready yet.
	if _, _, ok := readyIn(samples(1, pts[:11]...)); ok {
		t.Fatal("ready before the lag stayed low for 5 s")
	}
	if _, copied, ok := readyIn(samples(1, [2]float64{0, 0.1})); ok || copied != -1 {
		t.Fatalf("nothing copied: ok %v, copied %v", ok, copied)
	}
}

func TestParseLogLine(t *testing.T) {
	for line, want := range map[string]string{
		`time=2026-12-03T20:58:15.077Z level=INFO msg=started slot=pgsync_move from_lsn=3/4A723388`:               "started",
		`time=2026-12-03T20:57:55.542Z level=INFO msg="slot created" temporary=false consistent_point=3/4A723388`: "slot created",
		`time=2026-12-03T20:57:55.542Z level=INFO msg="a \"quoted\" word" x=1`:                                    `a "quoted" word`,
		`bootstrapped job move: 6 tables`:       "",
		`time=yesterday level=INFO msg=started`: "",
	} {
		at, msg, ok := parseLogLine(line)
		if want == "" {
			if ok {
				t.Errorf("%q: parsed as %q", line, msg)
			}
			continue
		}
		if !ok || msg != want || at.IsZero() {
			t.Errorf("%q: %q %v %v, want %q", line, msg, at, ok, want)
		}
	}
}

// The write gap ends at pgbench's last logged transaction, across its
// per-thread logs.
func TestLastCommit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pgbench.123", "0 1 2500 0 1764800000 100\n1 1 2400 0 1764800001 250000\n")
	write("pgbench.123.1", "2 1 2300 0 1764800001 900000\n")
	last, txns, err := pgbenchTxns(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(1764800001, 900000*1000); !last.Equal(want) || txns != 3 {
		t.Fatalf("last commit %v of %d, want %v of 3", last, txns, want)
	}
	if _, _, err := pgbenchTxns(t.TempDir()); err == nil {
		t.Fatal("no logs gave no error")
	}
}
