package main

import (
	"slices"
	"testing"
)

func TestParseDatasets(t *testing.T) {
	for in, want := range map[string][]int{"1,2": {1, 2}, "2": {2}, " 2, 1 ": {2, 1}} {
		if got, err := parseDatasets(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("parseDatasets(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "3", "1 2", "1,,2", "0"} {
		if got, err := parseDatasets(in); err == nil {
			t.Errorf("parseDatasets(%q) = %v, want an error", in, got)
		}
	}
}

func TestParsePgcopydbVersion(t *testing.T) {
	// pgcopydb 0.10's output: a log line first, then the version line.
	out := `23:51:13 1728 INFO  Running pgcopydb version 0.10-1 from "/usr/bin/pgcopydb"
pgcopydb version 0.10-1
compiled with PostgreSQL 15.0 (Debian 15.0-2) on x86_64-pc-linux-gnu
`
	if v, err := parsePgcopydbVersion(out); err != nil || v != "0.10-1" {
		t.Errorf("version = %q, %v; want 0.10-1", v, err)
	}
	if v, err := parsePgcopydbVersion("pgcopydb: command not found"); err == nil {
		t.Errorf("version = %q, want an error", v)
	}
}
