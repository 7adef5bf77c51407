package schemadump

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// SchemaRoles lists the roles the schema pg_dump would dump names: owners
// of its objects, grantees of their privileges (column privileges
// included), default privileges and policies. schemas nil is the whole
// database. They are read from the source's catalogs, not from pg_dump's
// text; objects of extensions are the extension's, and left out.
func SchemaRoles(ctx context.Context, src *pgx.Conn, schemas []string, publication string) ([]string, error) {
	var roles []string
	err := src.QueryRow(ctx, `WITH ns AS (
  SELECT oid, nspname FROM pg_namespace
  WHERE nspname NOT IN ('pg_catalog', 'information_schema', 'pgsync') AND nspname NOT LIKE 'pg\_%'
    AND ($1::text[] IS NULL OR nspname = ANY ($1))),
ext AS (SELECT classid, objid FROM pg_depend WHERE deptype = 'e'),
cls AS (SELECT c.* FROM pg_class c WHERE c.relnamespace IN (SELECT oid FROM ns)
  AND NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_class'::regclass AND ext.objid = c.oid)),
prc AS (SELECT p.* FROM pg_proc p WHERE p.pronamespace IN (SELECT oid FROM ns)
  AND NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_proc'::regclass AND ext.objid = p.oid)),
typ AS (SELECT t.* FROM pg_type t WHERE t.typnamespace IN (SELECT oid FROM ns) AND t.typtype IN ('b', 'c', 'd', 'e', 'm', 'r')
  AND (t.typrelid = 0 OR EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.typrelid AND c.relkind = 'c'))
  AND NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_type'::regclass AND ext.objid = t.oid)),
dacl AS (SELECT * FROM pg_default_acl WHERE defaclnamespace IN (SELECT oid FROM ns) OR (defaclnamespace = 0 AND $1::text[] IS NULL)),
r(role) AS (
  SELECT nspowner FROM pg_namespace WHERE oid IN (SELECT oid FROM ns) AND nspname <> 'public'
  UNION SELECT (aclexplode(nspacl)).grantee FROM pg_namespace WHERE oid IN (SELECT oid FROM ns)
  UNION SELECT relowner FROM cls WHERE relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
  UNION SELECT (aclexplode(relacl)).grantee FROM cls
  UNION SELECT (aclexplode(a.attacl)).grantee FROM pg_attribute a JOIN cls ON cls.oid = a.attrelid WHERE a.attacl IS NOT NULL
  UNION SELECT proowner FROM prc
  UNION SELECT (aclexplode(proacl)).grantee FROM prc
  UNION SELECT typowner FROM typ
  UNION SELECT (aclexplode(typacl)).grantee FROM typ
  UNION SELECT defaclrole FROM dacl
  UNION SELECT (aclexplode(defaclacl)).grantee FROM dacl
  UNION SELECT unnest(p.polroles) FROM pg_policy p JOIN cls ON cls.oid = p.polrelid
  UNION SELECT evtowner FROM pg_event_trigger WHERE $1::text[] IS NULL
  UNION SELECT pubowner FROM pg_publication WHERE $1::text[] IS NULL AND pubname <> $2)
SELECT coalesce(array_agg(rolname::text ORDER BY rolname), '{}') FROM pg_roles WHERE oid IN (SELECT role FROM r)`, schemas, publication).Scan(&roles)
	if err != nil {
		return nil, fmt.Errorf("list the roles the source's schema names: %w", err)
	}
	return roles, nil
}

// RoleProblem says which roles the schema names that the target lacks, or
// that the target's user cannot give objects to ("" when none).
func RoleProblem(ctx context.Context, src, tgt *pgx.Conn, schemas []string, publication string) (string, error) {
	roles, err := SchemaRoles(ctx, src, schemas, publication)
	if err != nil {
		return "", err
	}
	return TargetRoleProblem(ctx, tgt, roles, "the schema")
}

// TargetRoleProblem says which of roles, which what names, the target
// lacks or its user cannot give objects to ("" when none). Predefined
// roles the target's version cannot have are not required
// (RolesTheTargetCanHave).
func TargetRoleProblem(ctx context.Context, tgt *pgx.Conn, roles []string, what string) (string, error) {
	var versionNum int
	if err := tgt.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&versionNum); err != nil {
		return "", fmt.Errorf("read the target's version: %w", err)
	}
	roles = RolesTheTargetCanHave(roles, versionNum)
	var missing, notMember []string
	err := tgt.QueryRow(ctx, `SELECT coalesce((SELECT array_agg(r ORDER BY r) FROM unnest($1::text[]) r WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r)), '{}'),
  coalesce((SELECT array_agg(r ORDER BY r) FROM unnest($1::text[]) r WHERE CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN NOT pg_has_role(current_user, r, 'MEMBER') ELSE false END), '{}')`,
		roles).Scan(&missing, &notMember)
	if err != nil {
		return "", fmt.Errorf("look for the roles %s names on the target: %w", what, err)
	}
	switch {
	case len(missing) > 0:
		return fmt.Sprintf("%s names role(s) the target lacks: %s (create them on the target first; docs/operations.md shows pg_dumpall --roles-only --no-role-passwords)", what, strings.Join(missing, ", ")), nil
	case len(notMember) > 0:
		return fmt.Sprintf("%s names role(s) the target's user cannot give objects to: %s (it must be a member of each, or a superuser)", what, strings.Join(notMember, ", ")), nil
	}
	return "", nil
}

// predefinedRoleSince is the server_version_num from which PostgreSQL has
// each predefined role that a schema's grants or owners can name. A
// source newer than the target names some the target cannot have: no
// operator could create them (the pg_ prefix is reserved), so requiring
// them would refuse every such target (issue 30: pg_database_owner, which
// owns schema public from 15 on, was required of a 13 target).
var predefinedRoleSince = map[string]int{
	"pg_monitor":                  100000,
	"pg_read_all_settings":        100000,
	"pg_read_all_stats":           100000,
	"pg_stat_scan_tables":         100000,
	"pg_signal_backend":           90600,
	"pg_read_server_files":        110000,
	"pg_write_server_files":       110000,
	"pg_execute_server_program":   110000,
	"pg_database_owner":           140000,
	"pg_read_all_data":            140000,
	"pg_write_all_data":           140000,
	"pg_checkpoint":               150000,
	"pg_use_reserved_connections": 160000,
	"pg_create_subscription":      160000,
	"pg_maintain":                 170000,
	"pg_signal_autovacuum_worker": 180000,
}

// RolesTheTargetCanHave returns roles without the predefined roles a
// server of versionNum (server_version_num) does not have.
func RolesTheTargetCanHave(roles []string, versionNum int) []string {
	out := make([]string, 0, len(roles))
	for _, r := range roles {
		if since, ok := predefinedRoleSince[r]; ok && versionNum < since {
			continue
		}
		out = append(out, r)
	}
	return out
}
