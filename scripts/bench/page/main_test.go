package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestPagesFromBenchResults reads the repository's own bench-results/ and
// renders both pages in memory (no charts): every results file decodes
// with all its keys, and the main page stays short (issue 25: about 250
// lines at most).
func TestPagesFromBenchResults(t *testing.T) {
	r, err := load("../../..")
	if err != nil {
		t.Fatal(err)
	}
	p, err := build("../../..", r)
	if err != nil {
		t.Fatal(err)
	}
	pages, err := render(p)
	if err != nil {
		t.Fatal(err)
	}
	main := pages["benchmarks.md"]
	if n := bytes.Count(main, []byte("\n")); n > 260 {
		t.Errorf("docs/benchmarks.md would have %d lines, want at most about 250", n)
	}
	for name, text := range pages {
		for _, bad := range []string{"<no value>", "NaN", "%!"} {
			if strings.Contains(string(text), bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
	}
	if !strings.Contains(string(main), "`"+r.Copy.Env.Commit+"`") {
		t.Errorf("docs/benchmarks.md does not name the copy's commit %s", r.Copy.Env.Commit)
	}
}
