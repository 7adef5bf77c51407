package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestParseStreams reads -streams and refuses what is not a count.
func TestParseStreams(t *testing.T) {
	got, err := parseStreams("1, 2,4")
	if err != nil || !slices.Equal(got, []int{1, 2, 4}) {
		t.Errorf("parseStreams = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1,,2", "0", "two"} {
		if _, err := parseStreams(bad); err == nil {
			t.Errorf("parseStreams(%q): no error", bad)
		}
	}
}

// TestSumParts adds the parts of every "table copied" line and ignores
// other lines; a log without one is an error.
func TestSumParts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "copy-2-bootstrap.log")
	log := `time=2026-12-03T23:45:40.1Z level=INFO msg="copying tables" tables=2
time=2026-12-03T23:45:43.1Z level=INFO msg="table copied" table=public.bench_a parts=3 seconds=1.2
time=2026-12-03T23:45:44.1Z level=INFO msg="table copied" table=public.bench_b parts=4 seconds=1.9
time=2026-12-03T23:45:45.1Z level=INFO msg="bootstrap done" bytes=123 parts=99
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := sumParts(path); err != nil || n != 7 {
		t.Errorf("sumParts = %d, %v; want 7", n, err)
	}
	empty := filepath.Join(t.TempDir(), "empty.log")
	if err := os.WriteFile(empty, []byte(`time=2026-12-03T23:45:45.1Z level=INFO msg="bootstrap done" bytes=123`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := sumParts(empty); err == nil {
		t.Errorf("a log without a table copied line gave %d, no error", n)
	}
}
