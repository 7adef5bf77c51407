package ddl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pattern"
)

// The capture on the source, in schema pgsync: for job j, the function
// pgsync.ddl_capture_j and the event triggers pgsync_ddl_j_end (on
// ddl_command_end) and pgsync_ddl_j_drop (on sql_drop), and j's signing
// key in pgsync.ddl_keys.
//
// The function runs as its owner (SECURITY DEFINER: the application's
// role may neither read the key nor add a table to the publication), and
// so sets search_path to pg_catalog for its own body, after reading the
// caller's, which it carries. An event trigger function cannot be called
// but by its trigger.
//
// For each command it is told of, it looks whether the command touches the
// job's schemas (those job.tables' patterns name), leaving out schema
// pgsync and the sessions of pgsync itself (application_name pgsync...);
// a table created in them that job.tables matches is added to the job's
// publication in the same transaction, so that its rows are published from
// the first (issue 31, point 3). Then, once per statement string
// (statements.go), it emits the signed record with
// pg_logical_emit_message(true, ...): transactional, it is decoded inside
// the transaction that ran the DDL, at its place. A source older than
// PostgreSQL 14 gets the record as a row of pgsync.ddl instead (insertRow,
// the table path), which the dispatcher turns back into the message it
// stands for.

// functionSQL is the capture function; %[1]s is the job, %[2]s the
// publication as a literal, %[3]s and %[4]s the patterns' schema and name
// LIKE patterns as array literals, %[5]s how a signed record is sent
// (emitMessage or insertRow, up to the record's text and a closing
// parenthesis).
const functionSQL = `CREATE OR REPLACE FUNCTION pgsync.ddl_capture_%[1]s() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER AS $pgsync$
DECLARE
  caller_path text := pg_catalog.current_setting('search_path');
  schema_likes text[] := %[3]s;
  name_likes text[] := %[4]s;
  touched boolean := false;
  outside boolean := false;
  obj record;
  guard text;
  signing_key text;
  payload text;
  who text;
  rewrites text;
  reported text;
  reason int;
  cols text[];
  elsewhere json[] := '{}';
  sch name;
BEGIN
  PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
  IF coalesce(current_setting('application_name', true), '') NOT LIKE 'pgsync%%' THEN
    IF TG_EVENT = 'table_rewrite' THEN
      -- Noted for ddl_command_end, which knows the statement (where.go).
      PERFORM set_config('pgsync.ddl_rewrites_%[1]s', coalesce(current_setting('pgsync.ddl_rewrites_%[1]s', true), '')
        || pg_event_trigger_table_rewrite_oid()::text || ':' || pg_event_trigger_table_rewrite_reason()::text || ',', true);
    ELSIF TG_EVENT = 'sql_drop' THEN
      SELECT coalesce(bool_or(d.schema_name LIKE ANY (schema_likes)), false), coalesce(bool_or(NOT d.is_temporary), false)
        INTO touched, outside FROM pg_event_trigger_dropped_objects() d
      WHERE d.schema_name <> 'pgsync' AND d.schema_name NOT LIKE 'pg\_temp%%' AND d.schema_name NOT LIKE 'pg\_toast%%';
    ELSE
      FOR obj IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
        -- GRANT and REVOKE name no object here: every one is carried
        -- (one on an object the target lacks stops run, named).
        IF obj.command_tag IN ('GRANT', 'REVOKE') THEN
          touched := true;
          CONTINUE;
        END IF;
        -- Triggers, rules and policies have no schema of their own: their
        -- table's.
        sch := coalesce(obj.schema_name, CASE obj.classid
          WHEN 'pg_trigger'::regclass THEN (SELECT n.nspname FROM pg_trigger x JOIN pg_class c ON c.oid = x.tgrelid
                                             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE x.oid = obj.objid)
          WHEN 'pg_rewrite'::regclass THEN (SELECT n.nspname FROM pg_rewrite x JOIN pg_class c ON c.oid = x.ev_class
                                             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE x.oid = obj.objid)
          WHEN 'pg_policy'::regclass THEN (SELECT n.nspname FROM pg_policy x JOIN pg_class c ON c.oid = x.polrelid
                                            JOIN pg_namespace n ON n.oid = c.relnamespace WHERE x.oid = obj.objid)
          END);
        outside := outside OR (sch IS NOT NULL AND sch <> 'pgsync' AND sch NOT LIKE 'pg\_temp%%');
        CONTINUE WHEN sch IS NULL OR sch = 'pgsync' OR NOT sch LIKE ANY (schema_likes);
        touched := true;
        IF obj.object_type = 'table' AND obj.command_tag IN ('CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO')
           AND EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE c.oid = obj.objid AND c.relkind = 'r' AND c.relpersistence = 'p'
                         AND EXISTS (SELECT 1 FROM unnest(schema_likes, name_likes) p(s, t) WHERE n.nspname LIKE p.s AND c.relname LIKE p.t))
           AND NOT EXISTS (SELECT 1 FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
                           WHERE p.pubname = %[2]s AND r.prrelid = obj.objid) THEN
          EXECUTE format('ALTER PUBLICATION %%I ADD TABLE %%s', %[2]s, obj.objid::regclass);
        END IF;
        IF obj.object_type = 'table' AND obj.command_tag = 'ALTER TABLE' THEN
` + elsewhereSQL + `
        END IF;
      END LOOP;
      PERFORM set_config('pgsync.ddl_rewrites_%[1]s', '', true);
    END IF;
    who := CASE WHEN current_setting('role') = 'none' THEN session_user::text ELSE current_setting('role') END;
    IF NOT touched AND outside THEN
      -- Told to run, which logs it and applies nothing: the operator sees
      -- what the move leaves out. Once per statement string, as below.
      guard := txid_current()::text || ' ' || statement_timestamp()::text || ' ' || md5(coalesce(current_query(), ''));
      IF coalesce(current_setting('pgsync.ddl_outside_guard_%[1]s', true), '') <> guard THEN
        PERFORM set_config('pgsync.ddl_outside_guard_%[1]s', guard, true);
        SELECT k.key INTO signing_key FROM pgsync.ddl_keys k WHERE k.job = '%[1]s';
        payload := json_build_object('job', '%[1]s', 'query', coalesce(current_query(), ''), 'search_path', caller_path,
                                     'role', who, 'tag', TG_TAG, 'outside', true)::text;
` + sendSigned + `      END IF;
    END IF;
    IF touched THEN
      SELECT k.key INTO signing_key FROM pgsync.ddl_keys k WHERE k.job = '%[1]s';
      guard := txid_current()::text || ' ' || statement_timestamp()::text || ' ' || md5(coalesce(current_query(), ''));
      IF coalesce(current_setting('pgsync.ddl_guard_%[1]s', true), '') <> guard THEN
        PERFORM set_config('pgsync.ddl_guard_%[1]s', guard, true);
        payload := json_build_object('job', '%[1]s', 'query', coalesce(current_query(), ''), 'search_path', caller_path,
                                     'role', who, 'tag', TG_TAG)::text;
` + sendSigned + `      END IF;
      IF cardinality(elsewhere) > 0 THEN
        -- Its own record, after the statement's: run refuses it (where.go).
        payload := json_build_object('job', '%[1]s', 'query', coalesce(current_query(), ''), 'search_path', caller_path,
                                     'role', who, 'tag', TG_TAG, 'elsewhere', array_to_json(elsewhere))::text;
` + sendSigned + `      END IF;
    END IF;
  END IF;
  PERFORM pg_catalog.set_config('search_path', caller_path, true);
END
$pgsync$`

// sendSigned sends payload with its signature by signing_key (the hash
// Sign recomputes) through %[5]s: emitMessage or insertRow.
const sendSigned = `        %[5]s json_build_object('payload', payload,
          'sig', encode(sha256(convert_to(signing_key || encode(sha256(convert_to(signing_key || payload, 'UTF8')), 'hex'), 'UTF8')), 'hex'))::text);
`

// emitMessage sends a record as a transactional logical decoding message
// (PostgreSQL 14+, whose pgoutput forwards them).
const emitMessage = `PERFORM pg_logical_emit_message(true, '` + Prefix + `',`

// insertRow sends a record as a row of pgsync.ddl, the table path of a
// source older than PostgreSQL 14, whose pgoutput forwards no message: the
// row is in the job's publication, and the insert, made at
// ddl_command_end (after the command) in the DDL's own transaction, is
// decoded at the statement's place among that transaction's changes,
// exactly where the message would be. %[1]s is the job.
const insertRow = `INSERT INTO pgsync.ddl (job, record) VALUES ('%[1]s',`

// TableSchema and TableName name the source's table of the table path
// (insertRow), as a Relation message names them.
const TableSchema, TableName = "pgsync", "ddl"

// TableRecordColumn is the column of pgsync.ddl that holds a record's
// signed text, the content a message would carry.
const TableRecordColumn = "record"

// names are the capture's objects for job.
func names(job string) (function, endTrigger, dropTrigger, rewriteTrigger string) {
	return "pgsync.ddl_capture_" + job, "pgsync_ddl_" + job + "_end", "pgsync_ddl_" + job + "_drop", "pgsync_ddl_" + job + "_rewrite"
}

// Install creates (or replaces) job's capture on the source, for the
// tables patterns (job.tables) and the job's publication. job is a plain
// identifier (config's job name rule). Everything is created in one
// transaction. A source older than PostgreSQL 14, or any source when
// forceTable is set (PGSYNC_DDL_TABLE_PATH=1, for tests), gets the table
// path (insertRow): table pgsync.ddl, added to the publication.
func Install(ctx context.Context, conn *pgx.Conn, job, publication string, patterns []string, forceTable bool) error {
	var schemas, tables []string
	for _, p := range patterns {
		s, t, err := pattern.Parse(p)
		if err != nil {
			return fmt.Errorf("install the DDL capture: table pattern %q: %w", p, err)
		}
		schemas, tables = append(schemas, s), append(tables, t)
	}
	keyBytes := make([]byte, 32)
	if _, err := rand.Read(keyBytes); err != nil {
		return fmt.Errorf("install the DDL capture: signing key: %w", err)
	}
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return fmt.Errorf("install the DDL capture of job %s: read the source's version: %w", job, err)
	}
	send, table := emitMessage, forceTable || version < 140000
	var tableSQL []string
	if table {
		send = fmt.Sprintf(insertRow, job)
		tableSQL = tablePathSQL(publication)
	}
	fn, end, drop, rewrite := names(job)
	sql := strings.Join(append(append([]string{
		"CREATE SCHEMA IF NOT EXISTS pgsync",
		"CREATE TABLE IF NOT EXISTS pgsync.ddl_keys (job text PRIMARY KEY, key text NOT NULL)",
		"REVOKE ALL ON pgsync.ddl_keys FROM PUBLIC",
		// A key kept from an earlier install: a run streaming records it
		// signed still checks them.
		fmt.Sprintf("INSERT INTO pgsync.ddl_keys VALUES ('%s', '%s') ON CONFLICT (job) DO NOTHING", job, hex.EncodeToString(keyBytes)),
	}, tableSQL...),
		fmt.Sprintf(functionSQL, job, catalog.QuoteLiteral(publication), arrayLiteral(schemas), arrayLiteral(tables), send),
		fmt.Sprintf("DROP EVENT TRIGGER IF EXISTS %s", end),
		fmt.Sprintf("DROP EVENT TRIGGER IF EXISTS %s", drop),
		fmt.Sprintf("DROP EVENT TRIGGER IF EXISTS %s", rewrite),
		fmt.Sprintf("CREATE EVENT TRIGGER %s ON ddl_command_end EXECUTE FUNCTION %s()", end, fn),
		fmt.Sprintf("CREATE EVENT TRIGGER %s ON sql_drop EXECUTE FUNCTION %s()", drop, fn),
		fmt.Sprintf("CREATE EVENT TRIGGER %s ON table_rewrite EXECUTE FUNCTION %s()", rewrite, fn),
	), ";\n")
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("install the DDL capture of job %s: %w", job, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, sql); err != nil {
		return fmt.Errorf("install the DDL capture of job %s: %w", job, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("install the DDL capture of job %s: %w", job, err)
	}
	return nil
}

// tablePathSQL creates pgsync.ddl, shared by the jobs of the source (each
// applies its own records), and adds it to publication unless it is there
// (a resumed bootstrap installs again). Its rows stay until teardown
// (Remove): one per captured statement, a few hundred bytes each, and
// deleting them as they are applied would need run to write on the
// source. The primary key is its replica identity: a DELETE an operator
// runs on it is then published, not refused, and run ignores it.
func tablePathSQL(publication string) []string {
	return []string{
		"CREATE TABLE IF NOT EXISTS pgsync.ddl (seq bigserial PRIMARY KEY, job text NOT NULL, " + TableRecordColumn + " text NOT NULL)",
		"REVOKE ALL ON pgsync.ddl FROM PUBLIC",
		fmt.Sprintf(`DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
                 WHERE p.pubname = %s AND r.prrelid = 'pgsync.ddl'::regclass) THEN
    ALTER PUBLICATION %s ADD TABLE pgsync.ddl;
  END IF;
END $$`, catalog.QuoteLiteral(publication), catalog.QuoteIdent(publication)),
	}
}

// Remove drops job's capture from the source: its event triggers, its
// function, its key and its rows of pgsync.ddl (the table path), then
// pgsync.ddl_keys, pgsync.ddl and schema pgsync when nothing else is left
// in them. What is missing is fine, and a source
// where none was installed is not touched (dropping an event trigger
// needs a superuser).
func Remove(ctx context.Context, conn *pgx.Conn, job string) error {
	fn, end, drop, rewrite := names(job)
	var installed bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname IN ($1, $2, $4))
  OR to_regprocedure($3) IS NOT NULL OR to_regclass('pgsync.ddl_keys') IS NOT NULL OR to_regclass('pgsync.ddl') IS NOT NULL`, end, drop, fn+"()", rewrite).Scan(&installed); err != nil {
		return fmt.Errorf("look up the DDL capture of job %s: %w", job, err)
	}
	if !installed {
		return nil
	}
	sql := strings.Join([]string{
		"DROP EVENT TRIGGER IF EXISTS " + end,
		"DROP EVENT TRIGGER IF EXISTS " + drop,
		"DROP EVENT TRIGGER IF EXISTS " + rewrite,
		"DROP FUNCTION IF EXISTS " + fn + "()",
		`DO $$ BEGIN
  IF to_regclass('pgsync.ddl_keys') IS NOT NULL THEN
    DELETE FROM pgsync.ddl_keys WHERE job = '` + job + `';
    IF NOT EXISTS (SELECT 1 FROM pgsync.ddl_keys) THEN DROP TABLE pgsync.ddl_keys; END IF;
  END IF;
  IF to_regclass('pgsync.ddl') IS NOT NULL THEN
    DELETE FROM pgsync.ddl WHERE job = '` + job + `';
    IF NOT EXISTS (SELECT 1 FROM pgsync.ddl) THEN DROP TABLE pgsync.ddl; END IF;
  END IF;
END $$`,
	}, ";\n")
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("remove the DDL capture of job %s: %w", job, err)
	}
	// The schema goes when it is empty; another job's objects keep it.
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS pgsync"); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "2BP01" { // dependent_objects_still_exist
			return fmt.Errorf("remove the DDL capture of job %s: drop schema pgsync: %w", job, err)
		}
	}
	return nil
}

// Installed is what a job's capture on the source is: run reads it from
// the source rather than deciding again, so that it takes the records the
// way bootstrap installed them.
type Installed struct {
	// Key is the job's signing key: run checks each record's signature
	// with it. "" when no capture was installed.
	Key string
	// Table: the records are rows of pgsync.ddl, in the job's publication
	// (the table path), not messages.
	Table bool
}

// ReadInstalled reads job's capture from the source, publication being
// the job's.
func ReadInstalled(ctx context.Context, conn *pgx.Conn, job, publication string) (Installed, error) {
	var in Installed
	err := conn.QueryRow(ctx, `SELECT coalesce((SELECT key FROM pgsync.ddl_keys WHERE job = $1), ''),
  EXISTS (SELECT 1 FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
          WHERE p.pubname = $2 AND r.prrelid = to_regclass('pgsync.ddl'))
WHERE to_regclass('pgsync.ddl_keys') IS NOT NULL`, job, publication).Scan(&in.Key, &in.Table)
	if errors.Is(err, pgx.ErrNoRows) {
		return Installed{}, nil
	}
	if err != nil {
		return Installed{}, fmt.Errorf("read the DDL capture of job %s: %w", job, err)
	}
	return in, nil
}

// Capability says whether the source's user can install the capture: a
// source of PostgreSQL 13 or later (from 14 the records travel as
// messages, which pgoutput sends from 14 on; on 13 as rows of pgsync.ddl;
// the capture function uses PostgreSQL 13's pg_current_xact_id), and a
// superuser (event triggers), or rds_superuser / cloudsqlsuperuser on the
// managed services that let those create them. problem is "" when it can;
// fix says what to grant.
func Capability(ctx context.Context, conn *pgx.Conn) (detail, problem, fix string, err error) {
	var version int
	var user string
	var super, managed bool
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int, current_user::text,
  (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),
  EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname IN ('rds_superuser', 'cloudsqlsuperuser') AND pg_has_role(current_user, r.oid, 'MEMBER'))`).
		Scan(&version, &user, &super, &managed); err != nil {
		return "", "", "", fmt.Errorf("read the source's version and user: %w", err)
	}
	path := ""
	if version < 140000 {
		path = fmt.Sprintf(", and the statements travel as rows of table pgsync.ddl, in the publication (PostgreSQL %d's pgoutput sends no messages)", version/10000)
	}
	switch {
	case version < 130000:
		return "", fmt.Sprintf("the source is PostgreSQL %d: the DDL capture needs PostgreSQL 13 or later", version/10000),
			`set job.ddl = "stop" and repeat the schema changes on the target by hand (docs/operations.md)`, nil
	case super:
		return fmt.Sprintf("user %s is a superuser: bootstrap installs the event triggers in schema pgsync%s", user, path), "", "", nil
	case managed:
		return fmt.Sprintf("user %s is a member of the managed service's superuser role: bootstrap installs the event triggers in schema pgsync%s", user, path), "", "", nil
	}
	return "", fmt.Sprintf("user %s is not a superuser, and creating event triggers needs one", user),
		"ALTER ROLE " + catalog.QuoteIdent(user) + ` SUPERUSER (or rds_superuser / cloudsqlsuperuser on a managed service), or set job.ddl = "stop"`, nil
}

// arrayLiteral is a text[] literal of the strings vals, for the function's
// body.
func arrayLiteral(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = catalog.QuoteLiteral(v)
	}
	return "ARRAY[" + strings.Join(q, ", ") + "]::text[]"
}
