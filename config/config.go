// Package config reads and validates pgsync's TOML configuration file.
//
// The file is parsed once, in cmd, and its values are copied into the plain
// option structs of the packages that use them; no other package imports
// config.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/dustin/go-humanize"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/pattern"
)

// Environment variables that override the urls of the file.
const (
	EnvSourceURL = "PGSYNC_SOURCE_URL"
	EnvTargetURL = "PGSYNC_TARGET_URL"
)

// Config is a validated pgsync configuration.
type Config struct {
	SourceURL string
	// SourcePrimaryURL (source.primary_url) is the primary of a source.url
	// that is a hot standby (PostgreSQL 16+ decode there): what cannot run
	// on a standby (the publication, the DDL capture's objects, cutover's
	// lock and its position) runs on it. Empty: source.url is the primary.
	SourcePrimaryURL string
	TargetURL        string
	Job              string
	// Tables are schema.table patterns; '*' matches any run of characters.
	Tables []string
	// PgDump is the pg_dump bootstrap takes the schema from when the
	// target has none of the job's tables ("pg_dump": the one on PATH);
	// "off" keeps the built-in creator.
	PgDump string
	// AddColumns (job.add_columns) lets run add a column the source gained
	// during the move to the target, and widen a column whose source type
	// grew, instead of stopping with the statement (issue 16). Off by
	// default: pgsync changes no target schema unasked.
	AddColumns bool
	// DDL (job.ddl) is what run does with the source's schema changes:
	// DDLStop (the default) stops at the first row whose shape the
	// target lacks, as before; DDLCapture captures each DDL statement on
	// the source with event triggers and applies it on the target in
	// commit order (issue 31).
	DDL    string
	Tuning Tuning
}

// The values of job.ddl.
const (
	DDLStop    = "stop"
	DDLCapture = "capture"
)

// Tuning holds the performance knobs. Sizes are converted to bytes, whatever
// the unit of their key (buffer_size_kb, copy_range_mb); every field names
// its unit.
type Tuning struct {
	// MaxInflightBytes bounds the received WAL data waiting to be applied.
	MaxInflightBytes int64
	// MaxBatchRows and MaxBatchBytes end a batch of the target pipeline:
	// the statements sent between two synchronisation points.
	MaxBatchRows  int
	MaxBatchBytes int64
	// MaxGroupBytes ends a group of source transactions committed as one
	// target transaction. Unset, it is MaxBatchBytes, which bounded both
	// before it had a key of its own (issue 23).
	MaxGroupBytes int64
	// BufferSizeBytes is each COPY stream's hand-off buffer (key
	// buffer_size_kb, in KiB).
	BufferSizeBytes int
	// MaxParallelCopies is the number of concurrent COPY streams.
	MaxParallelCopies int
	// CopyRangeBytes splits a table of twice this heap size or more into
	// block ranges copied by all streams; 0 copies every table whole (key
	// copy_range_mb, in MiB).
	CopyRangeBytes int64
	// WALReceiverTimeout ends run's session, which then reconnects, when
	// the source sends nothing, not even a keepalive, for this long; 0
	// turns it off. Named and defaulted after PostgreSQL's own setting.
	WALReceiverTimeout time.Duration
	// RunProcs is GOMAXPROCS for run: 1 by default, measured in
	// docs/benchmarks.md (the reader and the applier hand messages to each
	// other, and on one P that is a goroutine switch, not a thread
	// wake-up); 0 leaves Go's default (one per core).
	RunProcs int
	// ApplyStreamed says when run applies a transaction the source streams
	// while it runs (one larger than its logical_decoding_work_mem):
	// "as-received" (the default), by a second target session as its
	// segments arrive, committed at its commit; "at-commit", all of it from
	// its spool once it commits, as PostgreSQL 15's own apply worker does.
	ApplyStreamed string
	// BuildMaintenanceWorkMem is maintenance_work_mem on the target
	// sessions that build keys, indexes and foreign keys after the copy
	// (a PostgreSQL memory value, "256MB"); empty leaves the server's.
	BuildMaintenanceWorkMem string
}

// The values of tuning.apply_streamed.
const (
	ApplyStreamedAsReceived = "as-received"
	ApplyStreamedAtCommit   = "at-commit"
)

// DefaultTuning returns the defaults documented in README.md.
func DefaultTuning() Tuning {
	return Tuning{
		MaxInflightBytes:   16 << 20,
		MaxBatchRows:       8000,
		MaxBatchBytes:      4 << 20,
		MaxGroupBytes:      4 << 20,
		BufferSizeBytes:    256 << 10,
		MaxParallelCopies:  2,
		CopyRangeBytes:     64 << 20,
		WALReceiverTimeout: 60 * time.Second,
		RunProcs:           1,
		ApplyStreamed:      ApplyStreamedAsReceived,
	}
}

// SlotName is the name of the job's replication slot and publication.
func (c *Config) SlotName() string { return "pgsync_" + c.Job }

// Error is a configuration error: the file, the key and what is wrong. The
// command line turns it into exit status 2.
type Error struct {
	File string
	Key  string
	Msg  string
}

// Error formats the error as "file: key: message" on one line.
func (e *Error) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.File, e.Key, e.Msg)
}

// fileConfig mirrors the TOML layout. Sizes stay strings until validated so
// that the error can quote what the operator wrote.
type fileConfig struct {
	Source struct {
		URL        string `toml:"url"`
		PrimaryURL string `toml:"primary_url"`
	} `toml:"source"`
	Target struct {
		URL string `toml:"url"`
	} `toml:"target"`
	Job struct {
		Name   string   `toml:"name"`
		Tables []string `toml:"tables"`
		PgDump *string  `toml:"pg_dump"`
		// Checked in Parse, so that the error says what is accepted.
		AddColumns any     `toml:"add_columns"`
		DDL        *string `toml:"ddl"`
	} `toml:"job"`
	Tuning struct {
		MaxInflightBytes   *string `toml:"max_inflight_bytes"`
		MaxBatchRows       *int    `toml:"max_batch_rows"`
		MaxBatchBytes      *string `toml:"max_batch_bytes"`
		MaxGroupBytes      *string `toml:"max_group_bytes"`
		BufferSizeKB       *int    `toml:"buffer_size_kb"`
		MaxParallelCopies  *int    `toml:"max_parallel_copies"`
		CopyRangeMB        *int    `toml:"copy_range_mb"`
		WALReceiverTimeout *string `toml:"wal_receiver_timeout"`
		RunProcs           *int    `toml:"run_procs"`
		ApplyStreamed      *string `toml:"apply_streamed"`
		BuildMaintenance   *string `toml:"build_maintenance_work_mem"`
	} `toml:"tuning"`
}

// memoryValue is a PostgreSQL memory setting's value with its unit.
var memoryValue = regexp.MustCompile(`^[1-9][0-9]*(kB|MB|GB|TB)$`)

// jobNamePattern keeps the job name a plain lower-case identifier: it is
// spliced into CREATE_REPLICATION_SLOT, which does not quote, and
// "pgsync_" + name must fit PostgreSQL's 63-byte identifiers.
var jobNamePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,55}$`)

// Load reads the file at path, applies the environment overrides and
// validates every key. Every error it returns is an *Error.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &Error{File: path, Msg: "file not found (pass -c FILE)"}
		}
		return nil, &Error{File: path, Msg: err.Error()}
	}
	return Parse(path, string(raw), os.Getenv)
}

// Parse validates the TOML text of the file named name. getenv supplies the
// url overrides (os.Getenv in production).
func Parse(name, text string, getenv func(string) string) (*Config, error) {
	var fc fileConfig
	md, err := toml.Decode(text, &fc)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return nil, &Error{File: name, Msg: fmt.Sprintf("line %d: %s", perr.Position.Line, perr.Message)}
		}
		// Type mismatches name the key in their text already.
		return nil, &Error{File: name, Msg: err.Error()}
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		sort.Strings(keys)
		return nil, &Error{File: name, Key: keys[0], Msg: "unknown key"}
	}

	cfg := &Config{Tuning: DefaultTuning()}
	fail := func(key, format string, args ...any) (*Config, error) {
		return nil, &Error{File: name, Key: key, Msg: fmt.Sprintf(format, args...)}
	}

	cfg.SourceURL, cfg.TargetURL = fc.Source.URL, fc.Target.URL
	if v := getenv(EnvSourceURL); v != "" {
		cfg.SourceURL = v
	}
	if v := getenv(EnvTargetURL); v != "" {
		cfg.TargetURL = v
	}
	for _, u := range []struct{ section, value, env string }{
		{"source", cfg.SourceURL, EnvSourceURL},
		{"target", cfg.TargetURL, EnvTargetURL},
	} {
		if u.value == "" {
			if !md.IsDefined(u.section) {
				return fail("", "missing section [%s] (or set %s)", u.section, u.env)
			}
			return fail(u.section+".url", "missing (or set %s)", u.env)
		}
		if _, err := pgconn.ParseConfig(u.value); err != nil {
			return fail(u.section+".url", "not a valid PostgreSQL url: %s", Redact(u.value))
		}
	}

	if cfg.SourcePrimaryURL = fc.Source.PrimaryURL; cfg.SourcePrimaryURL != "" {
		if _, err := pgconn.ParseConfig(cfg.SourcePrimaryURL); err != nil {
			return fail("source.primary_url", "not a valid PostgreSQL url: %s", Redact(cfg.SourcePrimaryURL))
		}
	}

	if !md.IsDefined("job") {
		return fail("", "missing section [job]")
	}
	if fc.Job.Name == "" {
		return fail("job.name", "missing")
	}
	if !jobNamePattern.MatchString(fc.Job.Name) {
		return fail("job.name", "%q is not a valid job name: use 1-56 lower-case letters, digits or '_', not starting with a digit (it becomes the slot name pgsync_<name>)", fc.Job.Name)
	}
	cfg.Job = fc.Job.Name
	if len(fc.Job.Tables) == 0 {
		return fail("job.tables", "missing: list at least one schema.table pattern, e.g. [\"public.*\"]")
	}
	for _, p := range fc.Job.Tables {
		if _, _, err := pattern.Parse(p); err != nil {
			return fail("job.tables", "%q: %v", p, err)
		}
	}
	cfg.Tables = fc.Job.Tables
	cfg.PgDump = "pg_dump"
	if p := fc.Job.PgDump; p != nil {
		if strings.TrimSpace(*p) == "" {
			return fail("job.pg_dump", `empty: name a pg_dump program, or "off" for the built-in creator`)
		}
		cfg.PgDump = *p
	}
	if v := fc.Job.AddColumns; v != nil {
		b, ok := v.(bool)
		if !ok {
			return fail("job.add_columns", "%#v is not true or false", v)
		}
		cfg.AddColumns = b
	}
	cfg.DDL = DDLStop
	if v := fc.Job.DDL; v != nil {
		if *v != DDLStop && *v != DDLCapture {
			return fail("job.ddl", "%q: want %q or %q", *v, DDLStop, DDLCapture)
		}
		cfg.DDL = *v
	}

	t := &cfg.Tuning
	if s := fc.Tuning.MaxInflightBytes; s != nil {
		if t.MaxInflightBytes, err = parseSize(*s, 64<<10); err != nil {
			return fail("tuning.max_inflight_bytes", "%v", err)
		}
	}
	if s := fc.Tuning.MaxBatchBytes; s != nil {
		if t.MaxBatchBytes, err = parseSize(*s, 1<<10); err != nil {
			return fail("tuning.max_batch_bytes", "%v", err)
		}
	}
	t.MaxGroupBytes = t.MaxBatchBytes
	if s := fc.Tuning.MaxGroupBytes; s != nil {
		if t.MaxGroupBytes, err = parseSize(*s, 1<<10); err != nil {
			return fail("tuning.max_group_bytes", "%v", err)
		}
	}
	if v := fc.Tuning.MaxBatchRows; v != nil {
		if *v < 1 || *v > 1000000 {
			return fail("tuning.max_batch_rows", "%d is out of range (1 to 1000000)", *v)
		}
		t.MaxBatchRows = *v
	}
	if v := fc.Tuning.BufferSizeKB; v != nil {
		if *v < 4 || *v > 65536 {
			return fail("tuning.buffer_size_kb", "%d is out of range (4 to 65536)", *v)
		}
		t.BufferSizeBytes = *v << 10
	}
	if v := fc.Tuning.MaxParallelCopies; v != nil {
		if *v < 1 || *v > 64 {
			return fail("tuning.max_parallel_copies", "%d is out of range (1 to 64)", *v)
		}
		t.MaxParallelCopies = *v
	}
	if v := fc.Tuning.CopyRangeMB; v != nil {
		if *v < 0 || *v > 1<<20 {
			return fail("tuning.copy_range_mb", "%d is out of range (0 to 1048576; 0 copies every table whole)", *v)
		}
		t.CopyRangeBytes = int64(*v) << 20
	}
	if s := fc.Tuning.BuildMaintenance; s != nil {
		if !memoryValue.MatchString(*s) {
			return fail("tuning.build_maintenance_work_mem", "%q is not a PostgreSQL memory value (such as \"256MB\" or \"1GB\")", *s)
		}
		t.BuildMaintenanceWorkMem = *s
	}
	if s := fc.Tuning.WALReceiverTimeout; s != nil {
		if t.WALReceiverTimeout, err = parseTimeout(*s); err != nil {
			return fail("tuning.wal_receiver_timeout", "%v", err)
		}
	}
	if v := fc.Tuning.RunProcs; v != nil {
		if *v < 0 || *v > 1024 {
			return fail("tuning.run_procs", "%d is out of range (0 to 1024; 0: one per core)", *v)
		}
		t.RunProcs = *v
	}
	if v := fc.Tuning.ApplyStreamed; v != nil {
		if *v != ApplyStreamedAsReceived && *v != ApplyStreamedAtCommit {
			return fail("tuning.apply_streamed", "%q is neither %q nor %q", *v, ApplyStreamedAsReceived, ApplyStreamedAtCommit)
		}
		t.ApplyStreamed = *v
	}
	if t.MaxBatchBytes > t.MaxInflightBytes {
		return fail("tuning.max_batch_bytes", "%s is larger than tuning.max_inflight_bytes (%s)",
			humanize.IBytes(uint64(t.MaxBatchBytes)), humanize.IBytes(uint64(t.MaxInflightBytes)))
	}
	return cfg, nil
}

// parseSize accepts "16MiB", "4MB", "65536" and similar, at least min bytes.
func parseSize(s string, min int64) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (write e.g. \"16MiB\")", s)
	}
	if n < uint64(min) || n > 1<<40 {
		return 0, fmt.Errorf("%q is out of range (%s to 1TiB)", s, humanize.IBytes(uint64(min)))
	}
	return int64(n), nil
}

// parseTimeout accepts "0" (off) or a duration of 1s to 24h written as Go
// writes it: "60s", "2m", "1m30s". Below a second, a healthy source's
// answer to the reader's ping could be taken for silence.
func parseTimeout(s string) (time.Duration, error) {
	v := strings.TrimSpace(s)
	if v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (write e.g. \"60s\", or \"0\" to turn it off)", s)
	}
	if d != 0 && (d < time.Second || d > 24*time.Hour) {
		return 0, fmt.Errorf("%q is out of range (1s to 24h, or \"0\" to turn it off)", s)
	}
	return d, nil
}

// Redact returns a PostgreSQL url or keyword/value string with any password
// replaced, so that it can be printed.
func Redact(conn string) string {
	if u, err := url.Parse(conn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") && u.Opaque == "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	if strings.Contains(conn, "://") || strings.Contains(conn, "@") {
		// Unparseable url, or user:password@host without a scheme: do not
		// risk echoing a password.
		return "(unparseable url)"
	}
	return kvPassword.ReplaceAllString(conn, "password=xxxxx")
}

var kvPassword = regexp.MustCompile(`password\s*=\s*('([^'\\]|\\.)*'|\S+)`)
