package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLogNumber(t *testing.T) {
	log := filepath.Join(t.TempDir(), "run.log")
	text := "time=2026-12-03T23:45:43Z level=INFO msg=stopped txns=10 rows=100 cpu_s=0.50\n" +
		"time=2026-12-03T23:45:44Z level=INFO msg=progress lag=1s\n" +
		"time=2026-12-03T23:45:45Z level=INFO msg=stopped txns=20 rows=200 cpu_s=1.25\n"
	if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// The last matching line counts: run logs a stop per session.
	if v, err := logNumber(log, "stopped", "cpu_s"); err != nil || v != 1.25 {
		t.Errorf("cpu_s = %v, %v; want 1.25", v, err)
	}
	if v, err := logNumber(log, "progress", "lag"); err != nil || v != 1 {
		t.Errorf("lag = %v, %v; want 1 (a duration's s dropped)", v, err)
	}
	if _, err := logNumber(log, "stopped", "bytes"); err == nil {
		t.Error("a missing key gave no error")
	}
	if _, err := logNumber(log, "bootstrap done", "bytes"); err == nil {
		t.Error("a missing line gave no error")
	}
	all, err := allLogFields(log, "stopped")
	if err != nil || len(all) != 2 || all[0]["txns"] != "10" {
		t.Errorf("allLogFields = %v, %v", all, err)
	}
}

func TestRound2(t *testing.T) {
	for in, want := range map[float64]float64{1.234: 1.23, 1.235001: 1.24, 0: 0, 12.5: 12.5} {
		if got := round2(in); got != want {
			t.Errorf("round2(%v) = %v, want %v", in, got, want)
		}
	}
}

// TestPgbenchCommitted reads the processed count of pgbench's -T output
// (N) and of its -t output (N/M), and fails on a log without the line.
func TestPgbenchCommitted(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		log  string
		want int64
	}{
		"duration": {"transaction type: bench-100mb-txn.sql\nscaling factor: 1\nnumber of clients: 4\nduration: 5 s\nnumber of transactions actually processed: 12345\nnumber of failed transactions: 0 (0.000%)\ntps = 2468.9 (without initial connection time)\n", 12345},
		"count":    {"number of transactions per client: 100\nnumber of transactions actually processed: 398/400\n", 398},
	} {
		path := filepath.Join(dir, name+".log")
		if err := os.WriteFile(path, []byte(c.log), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := pgbenchCommitted(path)
		if err != nil || got != c.want {
			t.Errorf("%s: pgbenchCommitted = %d, %v; want %d", name, got, err, c.want)
		}
	}
	path := filepath.Join(dir, "failed.log")
	if err := os.WriteFile(path, []byte("pgbench: error: connection to server failed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := pgbenchCommitted(path); err == nil {
		t.Errorf("a log without the line gave %d, no error", n)
	}
}

func TestVersionCommit(t *testing.T) {
	for line, want := range map[string]string{
		"pgsync 1fffa62 (commit 1fffa62, go1.26.8)\n":                              "1fffa62",
		"pgsync 011a36b-dirty (commit unknown, go1.26.8)":                          "011a36b-dirty",
		"pgsync dev (commit 2ba6cfc0123456789abcdef0123456789abcdef0, go1.26.8)\n": "2ba6cfc",
	} {
		if got, err := versionCommit(line); err != nil || got != want {
			t.Errorf("versionCommit(%q) = %q, %v; want %q", line, got, err, want)
		}
	}
	for _, bad := range []string{"pgsync dev (commit unknown, go1.26.8)", "", "pgsync"} {
		if got, err := versionCommit(bad); err == nil {
			t.Errorf("versionCommit(%q) = %q, want an error", bad, got)
		}
	}
}

func TestReportsDifference(t *testing.T) {
	dir := t.TempDir()
	for text, want := range map[string]bool{
		"public.items  200000  200001  83c6  75ef  DIFFERS\npgsync: 1 of 1 tables differ: public.items\n": true,
		"public.items (17): only on the source\n":                                                         true,
		"public.items (42): values differ (qty)\n":                                                        true,
		"all 2 tables identical\n":                                                                        false,
		"pgsync: connect to the target: connection refused\n":                                             false,
	} {
		path := filepath.Join(dir, "report.txt")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := reportsDifference(path); got != want {
			t.Errorf("reportsDifference(%q) = %v, want %v", text, got, want)
		}
	}
}
