package schemadump

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/pgconnect"
)

// The post-data section of pg_dump's archive (pgdump.go) is built after
// the copy from the archive recorded on the target, one entry at a time,
// each marked built as it is, so that a rerun builds the rest. How many
// at once, and what a failure means, is the caller's (job/build.go).

// Builder builds a job's recorded post-data objects from its recorded
// archive, one at a time, so that each is marked built as it is; their
// scripts are read from pg_restore in a few runs (scripts.go).
type Builder struct {
	job     string
	restore string // pg_restore
	archive string // the archive's file
	cleanup func()
	// restrictKey is the key of pg_restore's \restrict line, "" for a
	// pg_restore that writes none.
	restrictKey string
	// conn is the builder's own target session: the copy's goroutines use
	// the job's while keys are built.
	conn *pgx.Conn
	// scripts holds the pending entries' scripts by dump id, read at
	// OpenBuilder (scripts.go); read-only after it, so the build's
	// workers share it.
	scripts     map[int]string
	restoreRuns int
}

// OpenBuilder writes job's recorded archive to a file, and opens a target
// session of its own on targetURL; nil when the job has no post-data
// objects left to build. pgDump is job.pg_dump, beside which pg_restore
// is looked for.
func OpenBuilder(ctx context.Context, tgt *pgx.Conn, targetURL, pgDump, job string) (*Builder, error) {
	archive, err := ledger.PendingArchive(ctx, tgt, job)
	if err != nil || archive == nil {
		return nil, err
	}
	file, cleanup, err := writeArchive(archive)
	if err != nil {
		return nil, err
	}
	restore, key, err := RestoreProgram(ctx, pgDump)
	if err != nil {
		cleanup()
		return nil, err
	}
	conn, err := pgconnect.Connect(ctx, "target", targetURL)
	if err != nil {
		cleanup()
		return nil, err
	}
	b := &Builder{job: job, restore: restore, restrictKey: key, archive: file, cleanup: func() {
		conn.Close(context.WithoutCancel(ctx))
		cleanup()
	}, conn: conn, scripts: map[int]string{}}
	pending, err := b.Pending(ctx, "")
	if err == nil {
		entries := make([]Entry, len(pending))
		for i, o := range pending {
			entries[i] = o.Entry
		}
		err = b.prepareScripts(ctx, entries)
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// RestoreProgram finds the pg_restore of the pg_dump of job.pg_dump: the
// program itself where Debian's wrapper (which adds 50 ms to each run)
// stands in front of it, else the one beside it or on the PATH. key is a
// fresh key for its \restrict lines, "" when it writes none.
func RestoreProgram(ctx context.Context, pgDump string) (program, key string, err error) {
	if path, err := exec.LookPath(pgDump); err == nil {
		if v, err := Version(ctx, path); err == nil {
			if p := fmt.Sprintf("/usr/lib/postgresql/%d/bin/pg_restore", v); fileExists(p) {
				program = p
			}
		}
		if p := filepath.Join(filepath.Dir(path), "pg_restore"); program == "" && fileExists(p) {
			program = p
		}
	}
	if program == "" {
		if program, err = exec.LookPath("pg_restore"); err != nil {
			return "", "", fmt.Errorf("no pg_restore beside %s or on the PATH (it restores pg_dump's archive): %w", pgDump, err)
		}
	}
	help, err := exec.CommandContext(ctx, program, "--help").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s --help: %w", program, err)
	}
	if bytes.Contains(help, []byte("--restrict-key")) {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", "", err
		}
		key = hex.EncodeToString(b[:])
	}
	return program, key, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Pending is a recorded post-data object not built yet.
type Pending struct {
	Seq, Phase int
	Entry      Entry
	// Table (schema.name) and Name are the object's on its table, empty
	// for other kinds.
	Table, Name string
	PrimaryKey  bool
}

// String names the object for the operator.
func (o Pending) String() string { return o.Entry.String() }

// Pending reads the objects not built yet; table, when set, keeps the
// first phase's objects of that table only.
func (b *Builder) Pending(ctx context.Context, table string) ([]Pending, error) {
	recorded, err := ledger.PendingObjects(ctx, b.conn, b.job, table)
	if err != nil {
		return nil, err
	}
	out := make([]Pending, len(recorded))
	for i, r := range recorded {
		o := Pending{Seq: r.Seq, Phase: r.Phase, Table: r.Table, Name: r.Name, PrimaryKey: r.PrimaryKey}
		if o.Entry, err = ParseTOCLine(r.Entry); err != nil {
			return nil, fmt.Errorf("pgsync.schema_objects row %d: %w", r.Seq, err)
		}
		out[i] = o
	}
	return out, nil
}

// Build creates one object on conn and marks it built there. An object
// that an interrupted earlier build made already (creating it fails, and
// the target has it) counts as built: the one failure ignored on purpose,
// since a rerun resumes where the last run was stopped.
func (b *Builder) Build(ctx context.Context, conn *pgx.Conn, o Pending) error {
	sql, err := b.entrySQL(ctx, o.Entry)
	if err != nil {
		return err
	}
	if _, err = conn.Exec(ctx, sql); err != nil && ctx.Err() == nil {
		there, xerr := objectExists(ctx, conn, o)
		switch {
		case xerr != nil:
			err = errors.Join(err, fmt.Errorf("look up %s on the target: %w", o, xerr))
		case there:
			err = nil
		}
	}
	// The entry's SETs (search_path among them) end with it.
	if _, rerr := conn.Exec(ctx, "RESET ALL"); rerr != nil {
		err = errors.Join(err, fmt.Errorf("RESET ALL after %s: %w", o, rerr))
	}
	if err != nil {
		return err
	}
	if err := ledger.MarkBuilt(ctx, conn, b.job, o.Seq); err != nil {
		return fmt.Errorf("%s: %w", o, err)
	}
	return nil
}

// entrySQL is the script of one entry of the archive: read with the
// others at OpenBuilder (scripts.go), or asked of pg_restore alone.
func (b *Builder) entrySQL(ctx context.Context, e Entry) (string, error) {
	if sql, ok := b.scripts[e.DumpID]; ok {
		return sql, nil
	}
	return b.restoreScript(ctx, []Entry{e})
}

// objectExists says whether the target has the object already, for the
// kinds that have a name on a table.
func objectExists(ctx context.Context, conn *pgx.Conn, o Pending) (bool, error) {
	if o.Table == "" {
		return false, nil
	}
	schema, rel, _ := strings.Cut(o.Table, ".")
	var there bool
	err := conn.QueryRow(ctx, `WITH t AS (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2)
SELECT CASE $3::oid
  WHEN 'pg_class'::regclass THEN EXISTS (SELECT 1 FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid WHERE i.indrelid IN (SELECT oid FROM t) AND ic.relname = $4)
  WHEN 'pg_constraint'::regclass THEN EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid IN (SELECT oid FROM t) AND conname = $4)
  WHEN 'pg_trigger'::regclass THEN EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM t) AND tgname = $4)
  WHEN 'pg_rewrite'::regclass THEN EXISTS (SELECT 1 FROM pg_rewrite WHERE ev_class IN (SELECT oid FROM t) AND rulename = $4)
  WHEN 'pg_policy'::regclass THEN EXISTS (SELECT 1 FROM pg_policy WHERE polrelid IN (SELECT oid FROM t) AND polname = $4)
  ELSE false END`, schema, rel, o.Entry.CatalogOID, o.Name).Scan(&there)
	return there, err
}

// Conn is the builder's own target session: the copy's goroutines use
// the job's while keys are built.
func (b *Builder) Conn() *pgx.Conn { return b.conn }

// Close closes the builder's session and removes the archive's file.
func (b *Builder) Close() { b.cleanup() }

// Counts returns how many of job's recorded objects are built, and those
// that are not: the same on every run of the same schema.
func Counts(ctx context.Context, tgt *pgx.Conn, job string) (built int, failed []string, err error) {
	built, lines, err := ledger.SchemaCounts(ctx, tgt, job)
	if err != nil {
		return 0, nil, err
	}
	for _, l := range lines {
		if e, perr := ParseTOCLine(l); perr == nil {
			failed = append(failed, e.String())
		}
	}
	return built, failed, nil
}
