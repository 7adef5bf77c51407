package pgsynclog

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFields(t *testing.T) {
	kv := Fields(`time=2026-12-03T23:45:43.123Z level=INFO msg="table copied" table=public.bench_a parts=13 seconds=8.91 note="a \"quoted\" word"`)
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
	if kv := Fields("panic: not a log line"); len(kv) != 0 {
		t.Errorf("a line that is not key=value gave %v", kv)
	}
}

func TestBootstrapAndApplying(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "b.log")
	text := `time=2026-12-03T23:45:40.000Z level=INFO msg="schema read with pg_dump" seconds=0.18
time=2026-12-03T23:45:41.000Z level=INFO msg="slot created" slot=pgsync_b
time=2026-12-03T23:45:42.000Z level=INFO msg=applying rows_per_s=100 lag_bytes=5
time=2026-12-03T23:45:43.000Z level=INFO msg=created object="primary key of public.a" seconds=2.5
time=2026-12-03T23:45:43.100Z level=INFO msg=created object="constraint public.b b_pkey" seconds=1.5
time=2026-12-03T23:45:43.200Z level=INFO msg=created object="index i on public.b" seconds=9
time=2026-12-03T23:45:44.500Z level=INFO msg="bootstrap done" bytes=10
panic: not a log line
`
	if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Bootstrap(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.KeyBuildSeconds) != 2 || b.KeyBuildSeconds[0] != 2.5 || b.KeyBuildSeconds[1] != 1.5 {
		t.Errorf("key builds %v, want [2.5 1.5] (the index is no key)", b.KeyBuildSeconds)
	}
	if b.PgDumpSeconds == nil || *b.PgDumpSeconds != 0.18 || b.SlotToDoneSeconds == nil || *b.SlotToDoneSeconds != 3.5 {
		t.Errorf("pg_dump %v, slot to done %v; want 0.18 and 3.5", b.PgDumpSeconds, b.SlotToDoneSeconds)
	}
	csv := filepath.Join(dir, "a.csv")
	if err := WriteApplying(log, csv); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(csv)
	if want := "unix_s,rows_per_s,lag_bytes\n1796341542.000,100,5\n"; string(got) != want {
		t.Errorf("applying CSV %q, want %q", got, want)
	}
	if err := WriteApplying(filepath.Join(dir, "none.log"), csv); err == nil {
		t.Error("a missing log gave no error")
	}
}
