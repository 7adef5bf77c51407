package main

import (
	"strings"
	"testing"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

func moveRun(who string, run int, ready *float64, gap *float64, tool, src, tgt float64, equal bool) benchres.MoveRun {
	return benchres.MoveRun{Contender: who, Run: run, Ready: ready != nil, ReadySeconds: ready, WriteGapSeconds: gap,
		ToolCPUSeconds: tool, SourceCPUSeconds: src, TargetCPUSeconds: tgt, ContentEqual: equal, ToolPeakBytes: int64(run) << 20,
		Phases: []benchres.Phase{{Name: "copy", Start: 1, End: 1 + float64(run)}}}
}

func sec(v float64) *float64 { return &v }

// The medians, the ratio to native and its goal, the peak memory, the
// busy share and the phases of summarizeMove.
func TestSummarizeMove(t *testing.T) {
	m := benchres.Move{Env: benchres.Environment{Cores: 2}, Runs: []benchres.MoveRun{
		moveRun("pgsync", 1, sec(12), sec(0.1), 3, 10, 10, true),
		moveRun("native", 1, sec(20), nil, 14, 10, 20, true),
		moveRun("pgcopydb", 1, nil, nil, 5, 20, 10, false),
		moveRun("pgsync", 2, sec(10), sec(0.3), 3, 10, 10, true),
		moveRun("native", 2, sec(22), nil, 14, 10, 20, true),
		moveRun("pgcopydb", 2, nil, nil, 5, 20, 10, false),
		moveRun("pgsync", 3, sec(11), sec(0.2), 3, 10, 10, true),
		moveRun("native", 3, sec(21), nil, 14, 10, 20, true),
		moveRun("pgcopydb", 3, nil, nil, 5, 20, 10, false),
	}}
	s, err := summarizeMove(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rows) != 3 || s.Rows[0].Contender != "pgsync" || s.Rows[2].Contender != "pgcopydb" {
		t.Fatalf("rows %+v", s.Rows)
	}
	pg, nat, pc := s.Rows[0], s.Rows[1], s.Rows[2]
	if pg.Ready != "11.0 s" || nat.Ready != "21.0 s" || pg.WriteGap != "0.200 s" || pg.PeakMB != "3 MB" {
		t.Errorf("pgsync %+v, native %+v", pg, nat)
	}
	// (3 + 10 + 10) CPU seconds in 11 s of 2 cores; native's tool is in
	// the target's CPU: (10 + 20) in 21 s.
	if pg.Busy != "105 %" && pg.Busy != "104 %" {
		t.Errorf("pgsync busy %s", pg.Busy)
	}
	if nat.Busy != "71 %" {
		t.Errorf("native busy %s", nat.Busy)
	}
	if s.VsNative != "0.52" || !s.Met {
		t.Errorf("vs native %s met %v, want 0.52 met", s.VsNative, s.Met)
	}
	if pc.Ready != "not ready in 3 of 3 runs" || pc.Equal != 0 || s.VsPgcopydb != "–" || !s.PgcopydbMet {
		t.Errorf("pgcopydb %+v, vs %s", pc, s.VsPgcopydb)
	}
	if len(s.Phases) != 1 || s.Phases[0].Value != 2 {
		t.Errorf("phases %+v, want copy's median 2 s", s.Phases)
	}
	if b := s.bound(2); !strings.Contains(b, "the copy is the longest phase") || !strings.Contains(b, "bound by their CPU") {
		t.Errorf("bound: %s", b)
	}

	// No median without every run of pgsync and native ready.
	m.Runs[3].Ready, m.Runs[3].ReadySeconds = false, nil
	if _, err := summarizeMove(m); err == nil {
		t.Error("a pgsync run that was not ready gave a median")
	}
}
