package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseLogfmt(t *testing.T) {
	kv := parseLogfmt(`time=2026-12-03T23:45:43.123Z level=INFO msg="table copied" table=public.bench_a parts=13 seconds=8.91 note="a \"quoted\" word"`)
	want := map[string]string{
		"time": "2026-12-03T23:45:43.123Z", "level": "INFO", "msg": "table copied",
		"table": "public.bench_a", "parts": "13", "seconds": "8.91", "note": `a "quoted" word`,
	}
	for k, v := range want {
		if kv[k] != v {
			t.Errorf("%s = %q, want %q", k, kv[k], v)
		}
	}
	if len(kv) != len(want) {
		t.Errorf("%d keys, want %d: %v", len(kv), len(want), kv)
	}
	if kv := parseLogfmt("panic: not a log line"); len(kv) != 0 {
		t.Errorf("a line that is not key=value gave %v", kv)
	}
}

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
