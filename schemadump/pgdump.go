package schemadump

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
)

// When the target has none of the job's tables, bootstrap takes the schema
// from one pg_dump archive (custom format, schema only), as pgcopydb does,
// and reads it through its table of contents (toc.go), never through its
// SQL text: the pre-data section (extensions, schemas, types, functions,
// sequences, tables, views) is restored with pg_restore before the copy,
// in one transaction, and each post-data entry (keys, indexes,
// constraints, triggers, rules, policies, foreign keys, default
// privileges) after it, in parallel, by its dump id, so that a rerun
// builds those not built yet. pg_dump knows how to write every object of
// every PostgreSQL version; the built-in creator (prepare.go) knows
// tables, their types and their indexes and constraints only.

// Off turns pg_dump off (job.pg_dump).
const Off = "off"

// Scope is what bootstrap dumps: the whole database, or whole schemas,
// and the archive it read.
type Scope struct {
	Path    string   // the pg_dump program
	Restore string   // the pg_restore beside it
	Version int      // its major version
	Schemas []string // nil: the whole database
	// Extensions the source has (but plpgsql), dumped with a schema scope.
	Extensions []string
	// Unlogged tables, left out as the copy leaves them out.
	Unlogged []string
	// Archive is pg_dump's custom-format archive; PreData the entries
	// restored before the copy, PostData those built after it.
	Archive  []byte
	PreData  []Entry
	PostData []Object
	// SkippedSchemas are schemas the target has already, whose CREATE
	// SCHEMA entry is left out.
	SkippedSchemas []string
}

// String names the scope for log lines.
func (d *Scope) String() string {
	if d.Schemas == nil {
		return "the whole database"
	}
	return "schema(s) " + strings.Join(d.Schemas, ", ")
}

var pgDumpVersionRe = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// Version returns the major version of the pg_dump at path, from its
// --version.
func Version(ctx context.Context, path string) (int, error) {
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("%s --version: %w", path, err)
	}
	m := pgDumpVersionRe.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("%s --version printed %q, not a pg_dump version", path, strings.TrimSpace(string(out)))
	}
	return strconv.Atoi(string(m[1]))
}

// Schemas returns what pg_dump dumps for tables: nil for the whole
// database, else the job's schemas, each of which it must take whole
// (why says so when it does not); and the unlogged tables to leave out.
func Schemas(ctx context.Context, src *pgx.Conn, tables []catalog.Table) (dumped, unlogged []string, why string, err error) {
	// The job's schemas, and whether it takes every table of them, or of
	// the whole database.
	inJob := make(map[string]bool, len(tables))
	for i := range tables {
		inJob[tables[i].String()] = true
		if p := tables[i].PartitionOf; p != nil {
			inJob[p.String()] = true
		}
	}
	rows, err := src.Query(ctx, `SELECT n.nspname, c.relname, c.relpersistence = 'u'
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgsync') AND n.nspname NOT LIKE 'pg\_%'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')`)
	if err != nil {
		return nil, nil, "", fmt.Errorf("list the source's tables: %w", err)
	}
	left := map[string][]string{} // schema -> tables not in the job
	schemas := map[string]bool{}
	for rows.Next() {
		var schema, name string
		var isUnlogged bool
		if err := rows.Scan(&schema, &name, &isUnlogged); err != nil {
			rows.Close()
			return nil, nil, "", err
		}
		switch {
		case isUnlogged:
			unlogged = append(unlogged, catalog.QuoteIdent(schema)+"."+catalog.QuoteIdent(name))
		case inJob[schema+"."+name]:
			schemas[schema] = true
		default:
			left[schema] = append(left[schema], name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, "", fmt.Errorf("list the source's tables: %w", err)
	}
	if len(left) > 0 {
		for s := range schemas {
			if t := left[s]; len(t) > 0 {
				return nil, nil, fmt.Sprintf("the job selects only some tables of schema %s (not %s): pg_dump's schema is used for whole schemas", s, strings.Join(t, ", ")), nil
			}
		}
		// Whole schemas, not the whole database: pg_dump then leaves
		// extensions out unless named.
		for s := range schemas {
			dumped = append(dumped, s)
		}
		slices.Sort(dumped)
	}
	return dumped, unlogged, "", nil
}

// TargetHoldsObjects says which objects the target already has in the
// schemas to restore (nil: any but the system's and pgsync's): pg_dump's
// schema goes only into a database without them.
func TargetHoldsObjects(ctx context.Context, tgt *pgx.Conn, schemas []string) (string, error) {
	var found []string
	err := tgt.QueryRow(ctx, `WITH ns AS (
  SELECT oid FROM pg_namespace
  WHERE nspname NOT IN ('pg_catalog', 'information_schema', 'pgsync') AND nspname NOT LIKE 'pg\_%'
    AND ($1::text[] IS NULL OR nspname = ANY ($1))),
objs AS (
  SELECT c.oid::regclass::text AS o, 'pg_class'::regclass AS cls, c.oid FROM pg_class c
  WHERE c.relnamespace IN (SELECT oid FROM ns) AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
  UNION ALL SELECT t.oid::regtype::text, 'pg_type'::regclass, t.oid FROM pg_type t
  WHERE t.typnamespace IN (SELECT oid FROM ns) AND t.typtype IN ('e', 'd', 'r', 'm', 'c') AND (t.typrelid = 0 OR EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.typrelid AND c.relkind = 'c'))
  UNION ALL SELECT p.oid::regprocedure::text, 'pg_proc'::regclass, p.oid FROM pg_proc p
  WHERE p.pronamespace IN (SELECT oid FROM ns))
SELECT coalesce(array_agg(o ORDER BY o), '{}') FROM (
  SELECT o FROM objs WHERE NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = objs.cls AND d.objid = objs.oid AND d.deptype = 'e') LIMIT 5) x`, schemas).Scan(&found)
	if err != nil {
		return "", fmt.Errorf("look for objects on the target: %w", err)
	}
	if len(found) > 0 {
		return fmt.Sprintf("the target database already has objects pg_dump's schema would create (%s): pg_dump's schema goes only into an empty database", strings.Join(found, ", ")), nil
	}
	return "", nil
}

// Dump runs pg_dump once for the schema (every section) into a
// custom-format archive, kept in d.Archive.
func (d *Scope) Dump(ctx context.Context, sourceURL string) error {
	dir, err := os.MkdirTemp("", "pgsync-dump-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "schema.dump")
	args := []string{"--format=custom", "--schema-only", "--no-subscriptions", "--exclude-schema=pgsync", "--file=" + file, "-d", sourceURL}
	for _, s := range d.Schemas {
		args = append(args, "--schema="+catalog.QuoteIdent(s))
	}
	for _, e := range d.Extensions {
		args = append(args, "--extension="+catalog.QuoteIdent(e))
	}
	for _, t := range d.Unlogged {
		args = append(args, "--exclude-table="+t)
	}
	cmd := exec.CommandContext(ctx, d.Path, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		// pg_dump's messages name no password; the url is not repeated.
		return fmt.Errorf("pg_dump --format=custom --schema-only of the source: %w: %s", err, oneLine(stderr.String()))
	}
	if d.Archive, err = os.ReadFile(file); err != nil {
		return fmt.Errorf("read pg_dump's archive: %w", err)
	}
	return nil
}

// listSection is pg_restore -l of one section of archive (a file).
func listSection(ctx context.Context, pgRestore, archive, section string) ([]Entry, error) {
	cmd := exec.CommandContext(ctx, pgRestore, "--list", "--section="+section, archive)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pg_restore --list --section=%s: %w: %s", section, err, oneLine(stderr.String()))
	}
	return ParseTOC(out.String())
}

// ReadTOC reads the archive's table of contents: the pre-data entries to
// restore (without the job's publication and the schemas the target has
// already) and the post-data objects, each with the table it is on, from
// the source's catalogs.
func (d *Scope) ReadTOC(ctx context.Context, src, tgt *pgx.Conn, publication string) error {
	file, cleanup, err := writeArchive(d.Archive)
	if err != nil {
		return err
	}
	defer cleanup()
	pre, err := listSection(ctx, d.Restore, file, "pre-data")
	if err != nil {
		return err
	}
	post, err := listSection(ctx, d.Restore, file, "post-data")
	if err != nil {
		return err
	}
	ours, err := publicationEntries(ctx, src, publication)
	if err != nil {
		return err
	}
	// Schemas: the target's own (public) stay, and their CREATE SCHEMA
	// entry is left out.
	var schemaOIDs []uint32
	for _, e := range pre {
		if e.CatalogOID == catPgNamespace {
			schemaOIDs = append(schemaOIDs, e.OID)
		}
	}
	schemaNames := map[uint32]string{}
	if len(schemaOIDs) > 0 {
		rows, err := src.Query(ctx, `SELECT oid, nspname FROM pg_namespace WHERE oid = ANY ($1)`, schemaOIDs)
		if err != nil {
			return fmt.Errorf("read the dump's schemas on the source: %w", err)
		}
		for rows.Next() {
			var oid uint32
			var name string
			if err := rows.Scan(&oid, &name); err != nil {
				rows.Close()
				return err
			}
			schemaNames[oid] = name
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read the dump's schemas on the source: %w", err)
		}
	}
	names := make([]string, 0, len(schemaNames))
	for _, n := range schemaNames {
		names = append(names, n)
	}
	var existing []string
	if err := tgt.QueryRow(ctx, `SELECT coalesce(array_agg(n ORDER BY n), '{}') FROM unnest($1::text[]) n WHERE to_regnamespace(quote_ident(n)) IS NOT NULL`, names).Scan(&existing); err != nil {
		return fmt.Errorf("look for the dump's schemas on the target: %w", err)
	}
	skip := map[uint32]bool{}
	for oid, n := range schemaNames {
		if slices.Contains(existing, n) {
			skip[oid] = true
		}
	}
	d.SkippedSchemas = existing
	for _, e := range pre {
		if ours[e.OID] && e.OID != 0 || e.CatalogOID == catPgNamespace && skip[e.OID] {
			continue
		}
		d.PreData = append(d.PreData, e)
	}
	var kept []Entry
	for _, e := range post {
		if !(ours[e.OID] && e.OID != 0) {
			kept = append(kept, e)
		}
	}
	d.PostData, err = resolveObjects(ctx, src, kept)
	return err
}

// publicationEntries returns the catalog OIDs of the job's publication and
// its tables on the source: the target must not get them.
func publicationEntries(ctx context.Context, src *pgx.Conn, publication string) (map[uint32]bool, error) {
	rows, err := src.Query(ctx, `SELECT p.oid FROM pg_publication p WHERE p.pubname = $1
UNION ALL SELECT r.oid FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid WHERE p.pubname = $1`, publication)
	if err != nil {
		return nil, fmt.Errorf("read publication %s on the source: %w", publication, err)
	}
	oids, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		return nil, fmt.Errorf("read publication %s on the source: %w", publication, err)
	}
	out := make(map[uint32]bool, len(oids))
	for _, o := range oids {
		out[o] = true
	}
	return out, nil
}

// Object is one post-data entry of the archive and what the source's
// catalogs say of it.
type Object struct {
	Entry
	// Phase is its PostDataPhase.
	Phase int
	// Table is the table (schema.name) of a key, index, constraint,
	// trigger, rule or policy, and Name its name there; both empty for
	// other entries.
	Table, Name string
	// PrimaryKey: a failure stops bootstrap (run finds rows by key).
	PrimaryKey bool
}

// resolveObjects looks up, on the source, the table and name of each
// post-data entry by its catalog identity.
func resolveObjects(ctx context.Context, src *pgx.Conn, entries []Entry) ([]Object, error) {
	objs := make([]Object, len(entries))
	var cats, oids []uint32
	for i, e := range entries {
		objs[i] = Object{Entry: e, Phase: PostDataPhase(e.Desc)}
		if e.OID != 0 {
			cats, oids = append(cats, e.CatalogOID), append(oids, e.OID)
		}
	}
	if len(oids) == 0 {
		return objs, nil
	}
	rows, err := src.Query(ctx, `SELECT e.cat, e.oid, n.nspname, c.relname, o.name, o.pk
FROM unnest($1::oid[], $2::oid[]) AS e(cat, oid)
JOIN LATERAL (
  SELECT i.indrelid AS rel, ic.relname::text AS name, false AS pk FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
  WHERE e.cat = 'pg_class'::regclass AND i.indexrelid = e.oid
  UNION ALL SELECT conrelid, conname::text, contype = 'p' FROM pg_constraint WHERE e.cat = 'pg_constraint'::regclass AND oid = e.oid AND conrelid <> 0
  UNION ALL SELECT tgrelid, tgname::text, false FROM pg_trigger WHERE e.cat = 'pg_trigger'::regclass AND oid = e.oid
  UNION ALL SELECT ev_class, rulename::text, false FROM pg_rewrite WHERE e.cat = 'pg_rewrite'::regclass AND oid = e.oid
  UNION ALL SELECT polrelid, polname::text, false FROM pg_policy WHERE e.cat = 'pg_policy'::regclass AND oid = e.oid
) o ON true
JOIN pg_class c ON c.oid = o.rel JOIN pg_namespace n ON n.oid = c.relnamespace`, cats, oids)
	if err != nil {
		return nil, fmt.Errorf("read the dump's post-data objects on the source: %w", err)
	}
	type key struct{ cat, oid uint32 }
	type found struct {
		table, name string
		pk          bool
	}
	byKey := map[key]found{}
	for rows.Next() {
		var k key
		var schema, rel, name string
		var pk bool
		if err := rows.Scan(&k.cat, &k.oid, &schema, &rel, &name, &pk); err != nil {
			rows.Close()
			return nil, err
		}
		byKey[k] = found{schema + "." + rel, name, pk}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the dump's post-data objects on the source: %w", err)
	}
	for i := range objs {
		if f, ok := byKey[key{objs[i].CatalogOID, objs[i].OID}]; ok {
			objs[i].Table, objs[i].Name, objs[i].PrimaryKey = f.table, f.name, f.pk
		}
	}
	return objs, nil
}

// writeArchive writes an archive to a file of its own for pg_restore.
func writeArchive(archive []byte) (file string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "pgsync-schema-")
	if err != nil {
		return "", nil, err
	}
	file = filepath.Join(dir, "schema.dump")
	if err := os.WriteFile(file, archive, 0o600); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return file, func() { os.RemoveAll(dir) }, nil
}

// pgRestore runs pg_restore of the entries of list from archive into the
// target; pg_restore stops at the first error, which it returns.
func pgRestore(ctx context.Context, program, targetURL, archive string, list []Entry, singleTransaction bool) error {
	listFile, err := writeList(filepath.Dir(archive), list)
	if err != nil {
		return err
	}
	defer os.Remove(listFile)
	// Tablespaces are the target server's own (pg_dumpall makes them): the
	// objects go to the target's default tablespace.
	args := []string{"--no-tablespaces", "--exit-on-error", "--use-list=" + listFile, "--dbname=" + targetURL}
	if singleTransaction {
		args = append(args, "--single-transaction")
	}
	cmd := exec.CommandContext(ctx, program, append(args, archive)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_restore: %w: %s", err, restoreError(stderr.String()))
	}
	return nil
}

// writeList writes entries as a pg_restore -L list in a file of dir.
func writeList(dir string, entries []Entry) (string, error) {
	f, err := os.CreateTemp(dir, "list-*")
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(entryList(entries)); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// restoreError keeps of pg_restore's messages the lines that say what
// failed, up to the statement it quotes.
func restoreError(stderr string) string {
	var keep []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "Command was:") {
			break
		}
		keep = append(keep, line)
	}
	return oneLine(strings.Join(keep, "\n"))
}

// Record records the archive and its post-data objects on the target, in
// place of any an earlier bootstrap of job recorded.
func (d *Scope) Record(ctx context.Context, tgt *pgx.Conn, job string) error {
	objects := make([]ledger.SchemaObject, len(d.PostData))
	for i, o := range d.PostData {
		objects[i] = ledger.SchemaObject{Seq: i + 1, Phase: o.Phase, Entry: o.ListLine(), Kind: o.Desc,
			Table: o.Table, Name: o.Name, PrimaryKey: o.PrimaryKey}
	}
	return ledger.RecordSchema(ctx, tgt, job, d.Archive, objects)
}

// ErrRestore: pg_restore of the pre-data section failed, and it kept
// nothing.
var ErrRestore = errors.New("pg_restore of the pre-data section failed")

// RestorePreData creates the source's extensions (exts) at their versions
// where it can, then restores the pre-data entries with pg_restore into
// targetURL in one transaction: all of them, or none. When the restore
// fails, the extensions it created are dropped again, so that a failed
// bootstrap leaves nothing behind; the error (wrapping ErrRestore) names
// any it could not drop.
func (d *Scope) RestorePreData(ctx context.Context, tgt *pgx.Conn, targetURL string, exts []Extension) error {
	created, err := createExtensions(ctx, tgt, exts)
	if err != nil {
		return err
	}
	err = d.restorePreData(ctx, targetURL)
	if err == nil {
		return nil
	}
	if derr := dropExtensions(ctx, tgt, created); derr != nil {
		return fmt.Errorf("%w (it kept nothing, but the extensions created before it stay: %s, which the drop refused: %w): %w",
			ErrRestore, strings.Join(created, ", "), derr, err)
	}
	return fmt.Errorf("%w (nothing of it was kept, nor the extensions created for it): %w", ErrRestore, err)
}

func (d *Scope) restorePreData(ctx context.Context, targetURL string) error {
	file, cleanup, err := writeArchive(d.Archive)
	if err != nil {
		return err
	}
	defer cleanup()
	return pgRestore(ctx, d.Restore, targetURL, file, d.PreData, true)
}

// RefreshMaterializedViews fills the materialized views pre-data created
// empty, each after those it reads from, logging each.
func RefreshMaterializedViews(ctx context.Context, tgt *pgx.Conn, log *slog.Logger) error {
	for {
		var views []string
		if err := tgt.QueryRow(ctx, `SELECT coalesce(array_agg(c.oid::regclass::text ORDER BY c.oid), '{}') FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'm' AND NOT c.relispopulated AND n.nspname NOT IN ('pg_catalog', 'information_schema')`).Scan(&views); err != nil {
			return fmt.Errorf("list the target's materialized views: %w", err)
		}
		if len(views) == 0 {
			return nil
		}
		progressed := false
		var lastErr error
		for _, v := range views {
			began := time.Now()
			if _, err := tgt.Exec(ctx, "REFRESH MATERIALIZED VIEW "+v); err != nil {
				lastErr = fmt.Errorf("refresh materialized view %s: %w", v, err)
				continue
			}
			progressed = true
			log.Info("refreshed", "materialized_view", v, "seconds", fmt.Sprintf("%.2f", time.Since(began).Seconds()))
		}
		if !progressed {
			return lastErr
		}
	}
}

// oneLine joins a message's lines: pg_dump's and pg_restore's messages
// go into one-line errors.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
