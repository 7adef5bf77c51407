package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const base = `
[source]
url = "postgres://postgres@127.0.0.1:55432/app"
[target]
url = "postgres://postgres@127.0.0.1:55433/app"
[job]
name = "bench"
tables = ["public.*"]
`

func noEnv(string) string { return "" }

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse("pgsync.toml", base, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tuning != DefaultTuning() {
		t.Errorf("tuning = %+v, want defaults %+v", cfg.Tuning, DefaultTuning())
	}
	if cfg.PgDump != "pg_dump" {
		t.Errorf("job.pg_dump = %q, want pg_dump (from PATH)", cfg.PgDump)
	}
	if cfg.SlotName() != "pgsync_bench" {
		t.Errorf("slot name = %q", cfg.SlotName())
	}
	d := DefaultTuning()
	if d.MaxInflightBytes != 16*1024*1024 || d.MaxBatchBytes != 4*1024*1024 || d.MaxGroupBytes != 4*1024*1024 || d.MaxBatchRows != 8000 || d.BufferSizeBytes != 256<<10 || d.CopyRangeBytes != 64<<20 || d.MaxParallelCopies != 2 ||
		d.WALReceiverTimeout != 60*time.Second || d.RunProcs != 1 || d.ApplyStreamed != "as-received" {
		t.Errorf("defaults drifted from the documented ones: %+v", d)
	}
}

func TestParseTuning(t *testing.T) {
	cfg, err := Parse("f.toml", base+`
[tuning]
max_inflight_bytes = "32MiB"
max_batch_rows = 100
max_batch_bytes = "1MB"
max_group_bytes = "8MiB"
buffer_size_kb = 64
max_parallel_copies = 4
copy_range_mb = 8
wal_receiver_timeout = "90s"
run_procs = 0
apply_streamed = "at-commit"
build_maintenance_work_mem = "256MB"
`, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := Tuning{MaxInflightBytes: 32 << 20, MaxBatchRows: 100, MaxBatchBytes: 1000000, MaxGroupBytes: 8 << 20, BufferSizeBytes: 64 << 10, MaxParallelCopies: 4, CopyRangeBytes: 8 << 20,
		WALReceiverTimeout: 90 * time.Second, RunProcs: 0, ApplyStreamed: "at-commit", BuildMaintenanceWorkMem: "256MB"}
	if cfg.Tuning != want {
		t.Errorf("tuning = %+v, want %+v", cfg.Tuning, want)
	}
}

// TestParseGroupBytes: tuning.max_group_bytes bounds a group on its own;
// unset, it follows tuning.max_batch_bytes, which bounded both before it
// had a key of its own, so that an older file means what it meant.
func TestParseGroupBytes(t *testing.T) {
	tests := []struct {
		name         string
		tuning       string
		batch, group int64
		err          string
	}{
		{name: "defaults", batch: 4 << 20, group: 4 << 20},
		{name: "batch only: the group follows", tuning: `max_batch_bytes = "1MiB"`, batch: 1 << 20, group: 1 << 20},
		{name: "group only", tuning: `max_group_bytes = "64MiB"`, batch: 4 << 20, group: 64 << 20},
		{name: "both", tuning: "max_batch_bytes = \"2MiB\"\nmax_group_bytes = \"256KiB\"", batch: 2 << 20, group: 256 << 10},
		{name: "too small", tuning: `max_group_bytes = "100"`, err: "tuning.max_group_bytes: "},
		{name: "not a size", tuning: `max_group_bytes = "lots"`, err: "tuning.max_group_bytes: "},
	}
	for _, tt := range tests {
		cfg, err := Parse("f.toml", base+"[tuning]\n"+tt.tuning+"\n", noEnv)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want one naming %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if cfg.Tuning.MaxBatchBytes != tt.batch || cfg.Tuning.MaxGroupBytes != tt.group {
			t.Errorf("%s: batch %d, group %d; want %d, %d", tt.name, cfg.Tuning.MaxBatchBytes, cfg.Tuning.MaxGroupBytes, tt.batch, tt.group)
		}
	}
}

// TestParseWALReceiverTimeout: "0" turns the timeout off, as in
// PostgreSQL; other values are Go durations.
func TestParseWALReceiverTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"60s": 60 * time.Second, "5s": 5 * time.Second, "2m": 2 * time.Minute, "1m30s": 90 * time.Second,
		"0": 0, "0s": 0, " 10s ": 10 * time.Second,
	} {
		cfg, err := Parse("f.toml", base+"[tuning]\nwal_receiver_timeout = \""+in+"\"\n", noEnv)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := cfg.Tuning.WALReceiverTimeout; got != want {
			t.Errorf("%q: timeout = %s, want %s", in, got, want)
		}
	}
}

// TestParseAddColumns: job.add_columns is off unless set, and only a
// boolean sets it.
func TestParseAddColumns(t *testing.T) {
	job := func(line string) string {
		return strings.Replace(base, `tables = ["public.*"]`, "tables = [\"public.*\"]\n"+line, 1)
	}
	for text, want := range map[string]bool{base: false, job("add_columns = true"): true, job("add_columns = false"): false} {
		cfg, err := Parse("f.toml", text, noEnv)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.AddColumns != want {
			t.Errorf("add_columns = %v, want %v in\n%s", cfg.AddColumns, want, text)
		}
	}
	for _, bad := range []string{`add_columns = "yes"`, "add_columns = 1"} {
		_, err := Parse("f.toml", job(bad), noEnv)
		if err == nil || !strings.Contains(err.Error(), "job.add_columns: ") || !strings.Contains(err.Error(), "not true or false") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v does not name job.add_columns on one line", bad, err)
		}
	}
	// In [tuning] it is an unknown key there, not silently ignored.
	if _, err := Parse("f.toml", base+"[tuning]\nadd_columns = true\n", noEnv); err == nil || !strings.Contains(err.Error(), "unknown key") {
		t.Errorf("add_columns under [tuning]: %v", err)
	}
}

// TestParseDDL: job.ddl is "stop" unless set, and takes only "stop" or
// "capture"; a wrong value names the key and both values on one line.
func TestParseDDL(t *testing.T) {
	job := func(line string) string {
		return strings.Replace(base, `tables = ["public.*"]`, "tables = [\"public.*\"]\n"+line, 1)
	}
	for text, want := range map[string]string{base: DDLStop, job(`ddl = "stop"`): DDLStop, job(`ddl = "capture"`): DDLCapture} {
		cfg, err := Parse("f.toml", text, noEnv)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.DDL != want {
			t.Errorf("ddl = %q, want %q in\n%s", cfg.DDL, want, text)
		}
	}
	_, err := Parse("f.toml", job(`ddl = "apply"`), noEnv)
	if err == nil || !strings.Contains(err.Error(), "job.ddl: ") || !strings.Contains(err.Error(), `"capture"`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("ddl = \"apply\": error %v does not name job.ddl and its values on one line", err)
	}
}

func TestEnvOverridesURLs(t *testing.T) {
	env := map[string]string{EnvSourceURL: "postgres://a@127.0.0.1:1/x", EnvTargetURL: "postgres://b@127.0.0.1:2/y"}
	cfg, err := Parse("f.toml", base, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SourceURL != env[EnvSourceURL] || cfg.TargetURL != env[EnvTargetURL] {
		t.Errorf("urls = %q, %q", cfg.SourceURL, cfg.TargetURL)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string // substrings of the one-line error
	}{
		{"unknown key", base + "[tuning]\nmax_batch_rowz = 3\n", []string{"f.toml", "tuning.max_batch_rowz", "unknown key"}},
		{"unknown section", base + "[extra]\na = 1\n", []string{"f.toml", "extra", "unknown key"}},
		{"bad size", base + "[tuning]\nmax_batch_bytes = \"lots\"\n", []string{"f.toml", "tuning.max_batch_bytes", `"lots" is not a size`}},
		{"size too small", base + "[tuning]\nmax_inflight_bytes = \"1KiB\"\n", []string{"tuning.max_inflight_bytes", "out of range"}},
		{"batch larger than inflight", base + "[tuning]\nmax_inflight_bytes = \"1MiB\"\nmax_batch_bytes = \"2MiB\"\n", []string{"tuning.max_batch_bytes", "larger than"}},
		{"bad job name", strings.Replace(base, `"bench"`, `"Bad-Name"`, 1), []string{"job.name", `"Bad-Name" is not a valid job name`}},
		{"job name injection", strings.Replace(base, `"bench"`, `"x; DROP"`, 1), []string{"job.name"}},
		{"missing source", strings.Replace(base, "[source]\nurl = \"postgres://postgres@127.0.0.1:55432/app\"\n", "", 1), []string{"f.toml", "missing section [source]"}},
		{"missing job", base[:strings.Index(base, "[job]")], []string{"missing section [job]"}},
		{"no tables", strings.Replace(base, `tables = ["public.*"]`, "", 1), []string{"job.tables", "missing"}},
		{"bad table pattern", strings.Replace(base, `"public.*"`, `"nodot"`, 1), []string{"job.tables", `"nodot"`}},
		{"rows out of range", base + "[tuning]\nmax_batch_rows = 0\n", []string{"tuning.max_batch_rows", "out of range"}},
		{"wrong type", base + "[tuning]\nmax_batch_rows = \"many\"\n", []string{"f.toml", "max_batch_rows"}},
		{"bad timeout", base + "[tuning]\nwal_receiver_timeout = \"soon\"\n", []string{"f.toml", "tuning.wal_receiver_timeout", `"soon" is not a duration`}},
		{"timeout without unit", base + "[tuning]\nwal_receiver_timeout = \"60\"\n", []string{"tuning.wal_receiver_timeout", `"60" is not a duration`}},
		{"timeout too short", base + "[tuning]\nwal_receiver_timeout = \"500ms\"\n", []string{"tuning.wal_receiver_timeout", "out of range"}},
		{"negative timeout", base + "[tuning]\nwal_receiver_timeout = \"-5s\"\n", []string{"tuning.wal_receiver_timeout", "out of range"}},
		{"timeout as a number", base + "[tuning]\nwal_receiver_timeout = 60\n", []string{"f.toml", "wal_receiver_timeout"}},
		{"empty pg_dump", strings.Replace(base, `tables = ["public.*"]`, "tables = [\"public.*\"]\npg_dump = \" \"", 1), []string{"job.pg_dump", "empty"}},
		{"run_procs negative", base + "[tuning]\nrun_procs = -1\n", []string{"tuning.run_procs", "out of range"}},
		{"build_maintenance_work_mem without unit", base + "[tuning]\nbuild_maintenance_work_mem = \"256\"\n", []string{"tuning.build_maintenance_work_mem", `"256"`, "256MB"}},
		{"apply_streamed unknown", base + "[tuning]\napply_streamed = \"early\"\n", []string{"tuning.apply_streamed", `"early"`, "as-received"}},
		{"toml syntax", "[source\n", []string{"f.toml", "line 2"}},
		{"bad url keeps password secret", strings.Replace(base, "postgres://postgres@127.0.0.1:55432/app", "postgres://u:s3cret@127.0.0.1:notaport/app", 1), []string{"source.url", "not a valid"}},
		{"bad primary url keeps password secret", strings.Replace(base, "[target]", "primary_url = \"postgres://u:s3cret@db:notaport/app\"\n[target]", 1), []string{"source.primary_url", "not a valid"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.toml", tc.text, noEnv)
			if err == nil {
				t.Fatal("expected an error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans several lines: %q", msg)
			}
			if strings.Contains(msg, "s3cret") {
				t.Errorf("error leaks the password: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestRedact(t *testing.T) {
	cases := map[string]string{
		"postgres://u:pw@h:5432/db":     "postgres://u:xxxxx@h:5432/db",
		"postgres://u@h/db?password=pw": "postgres://u@h/db?password=xxxxx",
		"host=h password=pw user=u":     "host=h password=xxxxx user=u",
		"host=h password='p w' user=u":  "host=h password=xxxxx user=u",
		"postgres://u@h/db":             "postgres://u@h/db",
	}
	for in, want := range cases {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParse feeds arbitrary text to the configuration parser: it returns a
// valid configuration or a one-line *Error, never panics, and never
// repeats a password from the urls.
func FuzzParse(f *testing.F) {
	f.Add(`[source]
url = "postgres://u:s3cretpw@127.0.0.1:5432/db"
[target]
url = "postgres://u:s3cretpw@127.0.0.1:5433/db"
[job]
name = "j"
tables = ["public.*"]
[tuning]
max_inflight_bytes = "16MiB"
max_batch_bytes = "4MiB"
max_batch_rows = 500`)
	f.Add("[job]\nname = \"Bad-Name\"\ntables = []")
	f.Add("[tuning]\nmax_inflight_bytes = \"-1\"")
	f.Add("[[source]]\nurl = 1")
	f.Add("[source]\nurl = \"host=127.0.0.1 password=s3cretpw port=x\"")
	f.Add("[source]\nurl = \"postgres://u:s3cretpw@[::1\"\n[job]\nname=\"x\"\ntables=[\"a.b\"]")
	f.Fuzz(func(t *testing.T, text string) {
		cfg, err := Parse("fuzz.toml", text, func(string) string { return "" })
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			asPassword := strings.Contains(text, ":s3cretpw@") || strings.Contains(text, "password=s3cretpw")
			if asPassword && strings.Contains(err.Error(), "s3cretpw") {
				t.Fatalf("error repeats the password: %v", err)
			}
			return
		}
		if cfg.Job == "" || len(cfg.Tables) == 0 || cfg.SourceURL == "" || cfg.TargetURL == "" {
			t.Fatalf("accepted an incomplete configuration: %+v", cfg)
		}
		if cfg.Tuning.MaxBatchBytes > cfg.Tuning.MaxInflightBytes || cfg.Tuning.MaxInflightBytes <= 0 {
			t.Fatalf("accepted inconsistent sizes: %+v", cfg.Tuning)
		}
	})
}

// source.primary_url names the primary of a standby source; a source url
// with several hosts is taken as it is.
func TestParseSourcePrimaryURL(t *testing.T) {
	text := strings.Replace(base, "url = \"postgres://postgres@127.0.0.1:55432/app\"",
		"url = \"postgres://postgres@standby:5432/app\"\nprimary_url = \"postgres://postgres@primary:5432/app\"", 1)
	cfg, err := Parse("pgsync.toml", text, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SourcePrimaryURL != "postgres://postgres@primary:5432/app" || cfg.SourceURL != "postgres://postgres@standby:5432/app" {
		t.Errorf("source.url %q, source.primary_url %q", cfg.SourceURL, cfg.SourcePrimaryURL)
	}
	multi := strings.Replace(base, "127.0.0.1:55432/app", "db1:5432,db2:5432/app?target_session_attrs=read-write", 1)
	if cfg, err := Parse("pgsync.toml", multi, noEnv); err != nil {
		t.Errorf("a source url with two hosts: %v", err)
	} else if cfg.SourcePrimaryURL != "" {
		t.Errorf("a source url with two hosts: primary_url %q, want none", cfg.SourcePrimaryURL)
	}
}
