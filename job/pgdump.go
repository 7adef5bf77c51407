package job

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgconnect"
)

// When the target has none of the job's tables, bootstrap takes the schema
// from pg_dump, as pgcopydb does: its pre-data section (extensions,
// schemas, types, functions, sequences, tables, views) is restored before
// the copy, in one transaction, and its post-data section (keys, indexes,
// constraints, triggers, rules, policies, foreign keys) after it, in
// parallel. pg_dump knows how to write every object of every PostgreSQL
// version; the built-in creator (prepare.go) knows tables, their types and
// their indexes and constraints only.

// pgDumpOff turns pg_dump off (job.pg_dump).
const pgDumpOff = "off"

// dumpScope is what bootstrap dumps: the whole database, or whole
// schemas.
type dumpScope struct {
	path    string   // the pg_dump program
	version int      // its major version
	schemas []string // nil: the whole database
	// extensions the source has (but plpgsql), dumped with a schema scope.
	extensions []string
	// unlogged tables, left out as the copy leaves them out.
	unlogged []string
	// The sections' scripts, dumped while choosing.
	preData, postData string
}

func (d *dumpScope) String() string {
	if d.schemas == nil {
		return "the whole database"
	}
	return "schema(s) " + strings.Join(d.schemas, ", ")
}

// pgDumpVersion returns the major version of the pg_dump at path.
var pgDumpVersionRe = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

func pgDumpVersion(ctx context.Context, path string) (int, error) {
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

// choosePgDump decides whether the schema comes from pg_dump, and why not
// when it does not: job.pg_dump is off, the target already has a table of
// the job, no pg_dump as new as the source is found, or the job selects
// only some tables of a schema (pg_dump would create the others, empty).
// An error is a refusal: the target lacks an extension the source has.
func (j *Job) choosePgDump(ctx context.Context, tables []catalog.Table, tp targetPlan) (*dumpScope, string, error) {
	if j.opts.PgDump == pgDumpOff {
		return nil, "job.pg_dump is off", nil
	}
	if len(tp.existing) > 0 {
		return nil, fmt.Sprintf("the target already has %d of the job's tables (pg_dump's schema is used only for a target that has none)", len(tp.existing)), nil
	}
	path, err := exec.LookPath(j.opts.PgDump)
	if err != nil {
		return nil, fmt.Sprintf("no pg_dump %q found (set job.pg_dump to its path)", j.opts.PgDump), nil
	}
	version, err := pgDumpVersion(ctx, path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err() // cancelled (a check failed): not a reason to do without pg_dump
		}
		return nil, err.Error(), nil
	}
	var srcVersion int
	if err := j.src.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&srcVersion); err != nil {
		return nil, "", fmt.Errorf("read the source's version: %w", err)
	}
	if version < srcVersion {
		return nil, fmt.Sprintf("%s is pg_dump %d, older than the source (%d): set job.pg_dump to a pg_dump %d or later", path, version, srcVersion, srcVersion), nil
	}
	d := &dumpScope{path: path, version: version}
	// The job's schemas, and whether it takes every table of them, or of
	// the whole database.
	inJob := make(map[string]bool, len(tables))
	for i := range tables {
		inJob[tables[i].String()] = true
		if p := tables[i].PartitionOf; p != nil {
			inJob[p.String()] = true
		}
	}
	rows, err := j.src.Query(ctx, `SELECT n.nspname, c.relname, c.relpersistence = 'u'
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgsync') AND n.nspname NOT LIKE 'pg\_%'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')`)
	if err != nil {
		return nil, "", fmt.Errorf("list the source's tables: %w", err)
	}
	left := map[string][]string{} // schema -> tables not in the job
	schemas := map[string]bool{}
	for rows.Next() {
		var schema, name string
		var unlogged bool
		if err := rows.Scan(&schema, &name, &unlogged); err != nil {
			rows.Close()
			return nil, "", err
		}
		switch {
		case unlogged:
			d.unlogged = append(d.unlogged, catalog.QuoteIdent(schema)+"."+catalog.QuoteIdent(name))
		case inJob[schema+"."+name]:
			schemas[schema] = true
		default:
			left[schema] = append(left[schema], name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list the source's tables: %w", err)
	}
	if len(left) > 0 {
		for s := range schemas {
			if t := left[s]; len(t) > 0 {
				return nil, fmt.Sprintf("the job selects only some tables of schema %s (not %s): pg_dump's schema is used for whole schemas", s, strings.Join(t, ", ")), nil
			}
		}
		// Whole schemas, not the whole database: pg_dump then leaves
		// extensions out unless named.
		for s := range schemas {
			d.schemas = append(d.schemas, s)
		}
		slices.Sort(d.schemas)
	}
	var extensions []string
	if err := j.src.QueryRow(ctx, `SELECT coalesce(array_agg(extname::text ORDER BY extname), '{}') FROM pg_extension WHERE extname <> 'plpgsql'`).Scan(&extensions); err != nil {
		return nil, "", fmt.Errorf("list the source's extensions: %w", err)
	}
	if d.schemas != nil {
		d.extensions = extensions
	}
	var missing []string
	if err := j.tgt.QueryRow(ctx, `SELECT coalesce(array_agg(e ORDER BY e), '{}') FROM unnest($1::text[]) e
WHERE NOT EXISTS (SELECT 1 FROM pg_available_extensions a WHERE a.name = e)`, extensions).Scan(&missing); err != nil {
		return nil, "", fmt.Errorf("list the target's available extensions: %w", err)
	}
	if len(missing) > 0 {
		return nil, "", fmt.Errorf("the source has extension(s) %s, which the target cannot create: install them on the target's server, or set job.pg_dump = %q for the built-in creator: %w",
			strings.Join(missing, ", "), pgDumpOff, ErrTargetTable)
	}
	if why, err := j.targetHoldsObjects(ctx, d.schemas); err != nil || why != "" {
		return nil, why, err
	}
	// Both sections are dumped now, before anything is written: the roles
	// they name must exist on the target, and its user must be able to
	// give objects to their owners. The two pg_dumps run at once: each
	// makes a round trip to the source per catalog query, which a source
	// far away makes long (0.86 s each at a 10 ms round trip).
	dumpBegan := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		d.preData, err = d.dump(gctx, j.opts.SourceURL, "pre-data")
		return err
	})
	g.Go(func() (err error) {
		d.postData, err = d.dump(gctx, j.opts.SourceURL, "post-data")
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, "", err
	}
	// Its own line: with the source far away, the dump is most of what
	// bootstrap does before the copy (docs/benchmarks.md).
	j.log.Info("schema read with pg_dump", "sections", "pre-data, post-data", "seconds", fmt.Sprintf("%.2f", time.Since(dumpBegan).Seconds()))
	if why, err := j.missingRoles(ctx, d); err != nil || why != "" {
		return nil, why, err
	}
	return d, "", nil
}

// targetHoldsObjects says which objects the target already has in the
// schemas to restore (nil: any but the system's and pgsync's): pg_dump's
// schema goes only into a database without them.
func (j *Job) targetHoldsObjects(ctx context.Context, schemas []string) (string, error) {
	var found []string
	err := j.tgt.QueryRow(ctx, `WITH ns AS (
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

var grantRe = regexp.MustCompile(`(?m)^(?:GRANT|REVOKE) .* (?:TO|FROM) (.+?)(?: WITH GRANT OPTION)?;$`)

// missingRoles says which roles the dump names (owners, grantees) the
// target lacks, or cannot give objects to.
func (j *Job) missingRoles(ctx context.Context, d *dumpScope) (string, error) {
	owners := map[string]bool{}
	grantees := map[string]bool{}
	for _, script := range []string{d.preData, d.postData} {
		for _, m := range dumpHeaderRe.FindAllStringSubmatch(script, -1) {
			if o := m[4]; o != "-" {
				owners[unquoteIdent(o)] = true
			}
		}
		for _, m := range grantRe.FindAllStringSubmatch(script, -1) {
			for _, r := range strings.Split(m[1], ",") {
				if r = unquoteIdent(strings.TrimSpace(r)); r != "" && r != "PUBLIC" {
					grantees[r] = true
				}
			}
		}
	}
	var roles, ownerList []string
	for r := range owners {
		roles, ownerList = append(roles, r), append(ownerList, r)
	}
	for r := range grantees {
		if !owners[r] {
			roles = append(roles, r)
		}
	}
	var missing, notMember []string
	err := j.tgt.QueryRow(ctx, `SELECT coalesce((SELECT array_agg(r ORDER BY r) FROM unnest($1::text[]) r WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r)), '{}'),
  coalesce((SELECT array_agg(r ORDER BY r) FROM unnest($2::text[]) r WHERE CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN NOT pg_has_role(current_user, r, 'MEMBER') ELSE false END), '{}')`,
		roles, ownerList).Scan(&missing, &notMember)
	if err != nil {
		return "", fmt.Errorf("look for the dump's roles on the target: %w", err)
	}
	switch {
	case len(missing) > 0:
		return fmt.Sprintf("the source's objects name role(s) the target lacks: %s (create them on the target first, e.g. with pg_dumpall --roles-only)", strings.Join(missing, ", ")), nil
	case len(notMember) > 0:
		return fmt.Sprintf("the target's user cannot give objects to their owner(s) %s (it must be a member of each, or a superuser)", strings.Join(notMember, ", ")), nil
	}
	return "", nil
}

// unquoteIdent undoes an identifier's double quotes.
func unquoteIdent(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
	}
	return s
}

// dump runs pg_dump for one section and returns its script.
func (d *dumpScope) dump(ctx context.Context, sourceURL, section string) (string, error) {
	args := []string{"--schema-only", "--section=" + section, "--no-subscriptions", "--exclude-schema=pgsync", "-d", sourceURL}
	for _, s := range d.schemas {
		args = append(args, "--schema="+catalog.QuoteIdent(s))
	}
	for _, e := range d.extensions {
		args = append(args, "--extension="+catalog.QuoteIdent(e))
	}
	for _, t := range d.unlogged {
		args = append(args, "--exclude-table="+t)
	}
	cmd := exec.CommandContext(ctx, d.path, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		// pg_dump's messages name no password; the url is not repeated.
		return "", fmt.Errorf("pg_dump --section=%s of the source: %w: %s", section, err, oneLine(stderr.String()))
	}
	return out.String(), nil
}

// dumpEntry is one object of a pg_dump script: its header's name, type and
// schema, and its statements.
type dumpEntry struct {
	Name, Type, Schema string
	SQL                string
}

func (e dumpEntry) String() string { return strings.ToLower(e.Type) + " " + e.Name }

var dumpHeaderRe = regexp.MustCompile(`(?m)^--\n-- Name: (.*); Type: (.*); Schema: (.*); Owner: (.*)\n--\n`)

// parseDump splits a plain pg_dump script into its preamble (the session
// settings before the first object) and its objects, dropping psql's
// meta-commands (\restrict), which only psql understands.
func parseDump(script string) (preamble string, entries []dumpEntry) {
	var kept []string
	for _, line := range strings.Split(script, "\n") {
		if strings.HasPrefix(line, `\`) {
			continue
		}
		kept = append(kept, line)
	}
	script = strings.Join(kept, "\n")
	locs := dumpHeaderRe.FindAllStringSubmatchIndex(script, -1)
	if len(locs) == 0 {
		return script, nil
	}
	preamble = script[:locs[0][0]]
	for i, l := range locs {
		end := len(script)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		entries = append(entries, dumpEntry{
			Name: script[l[2]:l[3]], Type: script[l[4]:l[5]], Schema: script[l[6]:l[7]],
			SQL: strings.TrimSpace(script[l[1]:end]),
		})
	}
	return preamble, entries
}

// keepEntry leaves out the job's own publication, which the source has and
// the target must not.
func keepEntry(e dumpEntry, publication string) bool {
	if strings.HasPrefix(e.Type, "PUBLICATION") {
		name, _, _ := strings.Cut(e.Name, " ")
		return name != publication
	}
	return true
}

var createSchemaRe = regexp.MustCompile(`(?m)^CREATE SCHEMA `)

// restorePreData restores the pre-data section on the target in one
// transaction: all of it, or nothing.
func (j *Job) restorePreData(ctx context.Context, d *dumpScope) (objects int, err error) {
	began := time.Now()
	preamble, entries := parseDump(d.preData)
	var b strings.Builder
	b.WriteString(preamble)
	for _, e := range entries {
		if !keepEntry(e, j.opts.Names.Publication) {
			continue
		}
		sql := e.SQL
		if e.Type == "SCHEMA" {
			// public (and any schema the target has already) stays.
			sql = createSchemaRe.ReplaceAllString(sql, "CREATE SCHEMA IF NOT EXISTS ")
		}
		b.WriteString("\n")
		b.WriteString(sql)
		objects++
	}
	err = pgx.BeginFunc(ctx, j.tgt, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, b.String())
		return err
	})
	// The restore's SETs (search_path among them) must not outlive it on
	// the job's target session.
	if _, rerr := j.tgt.Exec(ctx, "RESET ALL"); rerr != nil && err == nil {
		err = rerr
	}
	if err := pgconnect.ReplicaSession(ctx, j.tgt); err != nil {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("restore pg_dump's pre-data section on the target (nothing of it was kept): %w", err)
	}
	j.log.Info("schema restored from pg_dump", "section", "pre-data", "scope", d.String(), "pg_dump", d.path, "objects", objects,
		"seconds", fmt.Sprintf("%.2f", time.Since(began).Seconds()))
	return objects, nil
}

// postDataPhase orders post-data objects: keys and indexes first, in
// parallel; then the attachments of partitions' indexes to their
// parents'; then what needs them (foreign keys, triggers, rules,
// policies, comments on indexes).
func postDataPhase(typ string) int {
	switch typ {
	case "INDEX", "CONSTRAINT":
		return 0
	case "INDEX ATTACH":
		return 1
	}
	return 2
}

// postDataTable holds the post-data objects of a job, recorded with the
// pre-data restore so that a rerun after an interruption builds those not
// built yet.
const postDataDDL = `CREATE TABLE IF NOT EXISTS pgsync.post_data (
    job   text NOT NULL,
    seq   int NOT NULL,
    phase int NOT NULL,
    kind  text NOT NULL,
    name  text NOT NULL,
    sql   text NOT NULL,
    done  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (job, seq)
)`

// recordPostData dumps the post-data section and records its objects on
// the target, in place of any an earlier bootstrap of the job recorded.
func (j *Job) recordPostData(ctx context.Context, d *dumpScope) (int, error) {
	preamble, entries := parseDump(d.postData)
	n := 0
	err := pgx.BeginFunc(ctx, j.tgt, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, postDataDDL); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM pgsync.post_data WHERE job = $1`, j.opts.Job); err != nil {
			return err
		}
		// The preamble is row 0: every session that builds runs it first.
		if _, err := tx.Exec(ctx, `INSERT INTO pgsync.post_data VALUES ($1, 0, -1, 'preamble', '', $2, true)`, j.opts.Job, preamble); err != nil {
			return err
		}
		for _, e := range entries {
			if !keepEntry(e, j.opts.Names.Publication) {
				continue
			}
			n++
			if _, err := tx.Exec(ctx, `INSERT INTO pgsync.post_data VALUES ($1, $2, $3, $4, $5, $6, false)`,
				j.opts.Job, n, postDataPhase(e.Type), e.Type, e.Name, e.SQL); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("record pg_dump's post-data section on the target: %w", err)
	}
	return n, nil
}

// postDataPending says whether the job has post-data objects not built yet.
func (j *Job) postDataPending(ctx context.Context) (bool, error) {
	var pending bool
	err := j.tgt.QueryRow(ctx, `SELECT to_regclass('pgsync.post_data') IS NOT NULL`).Scan(&pending)
	if err != nil || !pending {
		return false, err
	}
	err = j.tgt.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pgsync.post_data WHERE job = $1 AND NOT done)`, j.opts.Job).Scan(&pending)
	return pending, err
}

// alreadyThere are the errors of an object that an interrupted earlier
// build made already.
var alreadyThere = []string{"42P07", "42710", "42P16"}

// buildPostData builds the recorded post-data objects not built yet, phase
// by phase, max_parallel_copies at a time, each logged with its duration
// and marked built. A primary key that fails stops bootstrap (run finds
// rows by key); any other failure is a warning, named in failed.
func (j *Job) buildPostData(ctx context.Context) (built int, failed []string, err error) {
	type item struct {
		seq, phase int
		kind, name string
		sql        string
	}
	var preamble string
	rows, err := j.tgt.Query(ctx, `SELECT seq, phase, kind, name, sql FROM pgsync.post_data WHERE job = $1 AND (NOT done OR seq = 0) ORDER BY phase, seq`, j.opts.Job)
	if err != nil {
		return 0, nil, fmt.Errorf("read pgsync.post_data: %w", err)
	}
	phases := map[int][]item{}
	for rows.Next() {
		var it item
		if err := rows.Scan(&it.seq, &it.phase, &it.kind, &it.name, &it.sql); err != nil {
			rows.Close()
			return 0, nil, err
		}
		if it.seq == 0 {
			preamble = it.sql
			continue
		}
		phases[it.phase] = append(phases[it.phase], it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("read pgsync.post_data: %w", err)
	}
	workers := max(j.opts.MaxParallelCopies, 1)
	var mu sync.Mutex
	for phase := 0; phase <= 2; phase++ {
		work := make(chan item, len(phases[phase]))
		for _, it := range phases[phase] {
			work <- it
		}
		close(work)
		g, gctx := errgroup.WithContext(ctx)
		for w := 0; w < min(workers, len(phases[phase])); w++ {
			g.Go(func() error {
				conn, err := pgconnect.Connect(gctx, "target", j.opts.TargetURL)
				if err != nil {
					return err
				}
				defer conn.Close(context.WithoutCancel(gctx))
				if _, err := conn.Exec(gctx, preamble); err != nil {
					return fmt.Errorf("post-data session settings: %w", err)
				}
				for it := range work {
					began := time.Now()
					_, err := conn.Exec(gctx, it.sql)
					var pgErr *pgconn.PgError
					if errors.As(err, &pgErr) && slices.Contains(alreadyThere, pgErr.Code) {
						err = nil // built by an interrupted earlier run
					}
					name := strings.ToLower(it.kind) + " " + it.name
					if err != nil {
						if it.kind == "CONSTRAINT" && strings.Contains(it.sql, "PRIMARY KEY") {
							return fmt.Errorf("%s: %w", name, err)
						}
						j.log.Warn("not created", "object", name, "err", err)
						mu.Lock()
						failed = append(failed, name)
						mu.Unlock()
						continue
					}
					j.log.Info("created", "object", name, "seconds", fmt.Sprintf("%.2f", time.Since(began).Seconds()))
					mu.Lock()
					built++
					_, err = j.tgt.Exec(gctx, `UPDATE pgsync.post_data SET done = true WHERE job = $1 AND seq = $2`, j.opts.Job, it.seq)
					mu.Unlock()
					if err != nil {
						return fmt.Errorf("record %s as built: %w", name, err)
					}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return built, failed, fmt.Errorf("create pg_dump's post-data objects (rerun pgsync bootstrap to resume): %w", err)
		}
	}
	return built, failed, nil
}

// refreshMaterializedViews fills the materialized views pre-data created
// empty, each after those it reads from.
func (j *Job) refreshMaterializedViews(ctx context.Context) error {
	for round := 0; ; round++ {
		var views []string
		if err := j.tgt.QueryRow(ctx, `SELECT coalesce(array_agg(c.oid::regclass::text ORDER BY c.oid), '{}') FROM pg_class c
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
			if _, err := j.tgt.Exec(ctx, "REFRESH MATERIALIZED VIEW "+v); err != nil {
				lastErr = fmt.Errorf("refresh materialized view %s: %w", v, err)
				continue
			}
			progressed = true
			j.log.Info("refreshed", "materialized_view", v, "seconds", fmt.Sprintf("%.2f", time.Since(began).Seconds()))
		}
		if !progressed {
			return lastErr
		}
	}
}
