package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTableCopySeconds(t *testing.T) {
	log := filepath.Join(t.TempDir(), "bootstrap.log")
	text := `time=2026-12-03T23:54:20Z level=INFO msg="table copied" table=public.other parts=1 seconds=0.10
time=2026-12-03T23:54:21Z level=INFO msg="table copied" table=public.items parts=2 seconds=0.43
time=2026-12-03T23:54:22Z level=INFO msg="bootstrap done" seconds=1.5
`
	if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := tableCopySeconds(log, "public.items"); err != nil || s != 0.43 {
		t.Errorf("public.items: %v, %v; want 0.43", s, err)
	}
	if s, err := tableCopySeconds(log, "public.absent"); err == nil {
		t.Errorf("public.absent: %v, want an error", s)
	}
}

func TestNamedDifferences(t *testing.T) {
	report := filepath.Join(t.TempDir(), "rows.out")
	text := `public.items (17): only on the source
public.items (200001): only on the target
public.items (42): values differ (qty)
public.items (7): values differ (note)
public.items: 4 rows differ
pgsync: rows differ in 1 of 1 tables: public.items
`
	if err := os.WriteFile(report, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := namedDifferences(report); err != nil || n != 4 {
		t.Errorf("named = %d, %v; want 4", n, err)
	}
}
