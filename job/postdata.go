package job

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
// each marked built as it is, so that a rerun builds the rest.

// schemaBuilder builds a job's recorded post-data objects from its
// recorded archive, one pg_restore per object, so that each is marked
// built as it is.
type schemaBuilder struct {
	j       *Job
	restore string // pg_restore
	archive string // the archive's file
	cleanup func()
	// restrictKey is the key of pg_restore's \restrict line, "" for a
	// pg_restore that writes none.
	restrictKey string
	// conn is the builder's own target session: the copy's goroutines use
	// the job's while keys are built.
	conn *pgx.Conn
}

// openSchemaBuilder writes the job's recorded archive to a file; nil when
// the job has no post-data objects left to build.
func (j *Job) openSchemaBuilder(ctx context.Context) (*schemaBuilder, error) {
	archive, err := ledger.PendingArchive(ctx, j.tgt, j.opts.Job)
	if err != nil || archive == nil {
		return nil, err
	}
	file, cleanup, err := writeArchive(archive)
	if err != nil {
		return nil, err
	}
	restore, key, err := pgRestoreProgram(ctx, j.opts.PgDump)
	if err != nil {
		cleanup()
		return nil, err
	}
	conn, err := pgconnect.Connect(ctx, "target", j.opts.TargetURL)
	if err != nil {
		cleanup()
		return nil, err
	}
	return &schemaBuilder{j: j, restore: restore, restrictKey: key, archive: file, cleanup: func() {
		conn.Close(context.WithoutCancel(ctx))
		cleanup()
	}, conn: conn}, nil
}

// pgRestoreProgram finds the pg_restore of the pg_dump of job.pg_dump: the
// program itself where Debian's wrapper (which adds 50 ms to each run)
// stands in front of it, else the one beside it or on the PATH. key is a
// fresh key for its \restrict lines, "" when it writes none.
func pgRestoreProgram(ctx context.Context, pgDump string) (program, key string, err error) {
	if path, err := exec.LookPath(pgDump); err == nil {
		if v, err := pgDumpVersion(ctx, path); err == nil {
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

// pendingObject is a recorded post-data object not built yet.
type pendingObject struct {
	seq, phase int
	entry      tocEntry
	table      string
	name       string
	primaryKey bool
}

func (o pendingObject) String() string { return o.entry.String() }

// pending reads the objects not built yet; table, when set, keeps the
// first phase's objects of that table only.
func (b *schemaBuilder) pending(ctx context.Context, table string) ([]pendingObject, error) {
	recorded, err := ledger.PendingObjects(ctx, b.conn, b.j.opts.Job, table)
	if err != nil {
		return nil, err
	}
	out := make([]pendingObject, len(recorded))
	for i, r := range recorded {
		o := pendingObject{seq: r.Seq, phase: r.Phase, table: r.Table, name: r.Name, primaryKey: r.PrimaryKey}
		if o.entry, err = parseTOCLine(r.Entry); err != nil {
			return nil, fmt.Errorf("pgsync.schema_objects row %d: %w", r.Seq, err)
		}
		out[i] = o
	}
	return out, nil
}

// build creates one object on conn and marks it built there. An object
// that an interrupted earlier build made already (creating it fails, and
// the target has it) counts as built: the one failure ignored on purpose,
// since a rerun resumes where the last run was stopped.
func (b *schemaBuilder) build(ctx context.Context, conn *pgx.Conn, o pendingObject) error {
	sql, err := b.entrySQL(ctx, o.entry)
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
	if err := ledger.MarkBuilt(ctx, conn, b.j.opts.Job, o.seq); err != nil {
		return fmt.Errorf("%s: %w", o, err)
	}
	return nil
}

// object is o for the build path (build.go).
func (b *schemaBuilder) object(o pendingObject) object {
	return object{name: o.String(), primaryKey: o.primaryKey, create: func(ctx context.Context, conn *pgx.Conn) error {
		return b.build(ctx, conn, o)
	}}
}

// entrySQL is pg_restore's script of one entry of the archive. Its psql
// meta-commands (\restrict and \unrestrict, which pg_restore writes since
// PostgreSQL 17.6, 16.10 and 15.14) carry a key pgsync chooses, and are
// the lines equal to them; nothing else of the script is read.
func (b *schemaBuilder) entrySQL(ctx context.Context, e tocEntry) (string, error) {
	listFile, err := writeList(filepath.Dir(b.archive), []tocEntry{e})
	if err != nil {
		return "", err
	}
	defer os.Remove(listFile)
	args := []string{"--no-tablespaces", "--use-list=" + listFile, "--file=-"}
	if b.restrictKey != "" {
		args = append(args, "--restrict-key="+b.restrictKey)
	}
	cmd := exec.CommandContext(ctx, b.restore, append(args, b.archive)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("pg_restore of %s: %w: %s", e, err, OneLine(stderr.String()))
	}
	script := out.String()
	if b.restrictKey != "" {
		var kept []string
		for _, line := range strings.Split(script, "\n") {
			if line == `\restrict `+b.restrictKey || line == `\unrestrict `+b.restrictKey {
				continue
			}
			kept = append(kept, line)
		}
		script = strings.Join(kept, "\n")
	}
	return script, nil
}

// objectExists says whether the target has the object already, for the
// kinds that have a name on a table.
func objectExists(ctx context.Context, conn *pgx.Conn, o pendingObject) (bool, error) {
	if o.table == "" {
		return false, nil
	}
	schema, rel, _ := strings.Cut(o.table, ".")
	var there bool
	err := conn.QueryRow(ctx, `WITH t AS (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2)
SELECT CASE $3::oid
  WHEN 'pg_class'::regclass THEN EXISTS (SELECT 1 FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid WHERE i.indrelid IN (SELECT oid FROM t) AND ic.relname = $4)
  WHEN 'pg_constraint'::regclass THEN EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid IN (SELECT oid FROM t) AND conname = $4)
  WHEN 'pg_trigger'::regclass THEN EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM t) AND tgname = $4)
  WHEN 'pg_rewrite'::regclass THEN EXISTS (SELECT 1 FROM pg_rewrite WHERE ev_class IN (SELECT oid FROM t) AND rulename = $4)
  WHEN 'pg_policy'::regclass THEN EXISTS (SELECT 1 FROM pg_policy WHERE polrelid IN (SELECT oid FROM t) AND polname = $4)
  ELSE false END`, schema, rel, o.entry.CatalogOID, o.name).Scan(&there)
	return there, err
}

// close removes the archive's file.
func (b *schemaBuilder) close() { b.cleanup() }

// counts returns how many of the job's recorded objects are built, and
// those that are not: the same on every run of the same schema.
func (j *Job) schemaCounts(ctx context.Context) (built int, failed []string, err error) {
	built, lines, err := ledger.SchemaCounts(ctx, j.tgt, j.opts.Job)
	if err != nil {
		return 0, nil, err
	}
	for _, l := range lines {
		if e, perr := parseTOCLine(l); perr == nil {
			failed = append(failed, e.String())
		}
	}
	return built, failed, nil
}

// buildPostData builds the recorded post-data objects not built yet, phase
// by phase, max_parallel_copies at a time, each logged with its duration.
// A primary key that fails stops bootstrap (run finds rows by key); any
// other failure is a warning (settleBuild), and the object stays not
// built in the record, which schemaCounts reports.
func (b *schemaBuilder) buildPostData(ctx context.Context) error {
	objs, err := b.pending(ctx, "")
	if err != nil {
		return err
	}
	byPhase := map[int][]object{}
	for _, o := range objs {
		byPhase[o.phase] = append(byPhase[o.phase], b.object(o))
	}
	phases := make([][]object, postDataPhases)
	for phase := range phases {
		phases[phase] = byPhase[phase]
	}
	if _, err := b.j.settleBuild(b.j.buildObjects(ctx, b.j.opts.MaxParallelCopies, phases)); err != nil {
		return fmt.Errorf("create pg_dump's post-data objects: %w: %w", ErrUnfinished, err)
	}
	return nil
}

// tableObjects returns the first-phase objects (keys, indexes) of table
// not built yet, for the key builder while other tables copy.
func (b *schemaBuilder) tableObjects(ctx context.Context, table string) ([]object, error) {
	objs, err := b.pending(ctx, table)
	if err != nil {
		return nil, err
	}
	out := make([]object, len(objs))
	for i, o := range objs {
		out[i] = b.object(o)
	}
	return out, nil
}
