package catalog

import (
	"context"
	"fmt"
	"strings"
)

// CastType returns the name of baseType, a column's type as
// format_type(oid, NULL) writes it, that a cast which only gives a
// parameter its type may use: one that takes every value of the type
// unchanged, so that the assignment to the column checks the value against
// the column's own modifier (a value too long is an error there, never cut
// by the cast).
//
// For most types the name without a modifier is that type: varchar,
// varbit, numeric, time, timetz, timestamp, timestamptz and interval take
// any precision or length without one. SQL reads two bare names with a
// modifier, though: bit is bit(1) and character is character(1), and an
// explicit cast to them cuts the value ('10101010'::bit is '1',
// 'abc'::character is 'a'; issue 16). For those, and their arrays, it
// returns the names format_type(oid, -1) gives the types without a
// modifier: "bit" quoted (bit string input keeps every bit) and bpchar
// (character input keeps every character, trailing spaces too).
func CastType(baseType string) string {
	elem, array := strings.CutSuffix(baseType, "[]")
	switch elem {
	case "bit":
		elem = `"bit"`
	case "character":
		elem = "bpchar"
	default:
		return baseType
	}
	if array {
		return elem + "[]"
	}
	return elem
}

// UserType is an enum, domain, composite or range type a table's columns
// use, directly or through another type, with the statement that creates
// it on another database.
type UserType struct {
	Schema, Name string
	SQL          string
}

// String returns schema.name.
func (u UserType) String() string { return u.Schema + "." + u.Name }

// UsedTypes returns the user-defined types the columns of tables use, on the
// source, each after the types it depends on (a domain after its base type,
// a composite after its attributes' types, arrays through their element
// type), with the DDL that recreates it.
func UsedTypes(ctx context.Context, q Querier, tables []*Table) ([]UserType, error) {
	idents := RefIdents(tables)
	rows, err := q.Query(ctx, `
WITH RECURSIVE used(oid, depth) AS (
  SELECT a.atttypid, 0 FROM pg_attribute a
  WHERE a.attrelid = ANY (SELECT to_regclass(x) FROM unnest($1::text[]) x) AND a.attnum > 0 AND NOT a.attisdropped
  UNION
  SELECT d.dep, u.depth + 1 FROM used u
  CROSS JOIN LATERAL (
    SELECT t.typelem AS dep FROM pg_type t WHERE t.oid = u.oid AND t.typcategory = 'A' AND t.typelem <> 0
    UNION ALL SELECT t.typbasetype FROM pg_type t WHERE t.oid = u.oid AND t.typtype = 'd'
    UNION ALL SELECT a.atttypid FROM pg_type t JOIN pg_attribute a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
              WHERE t.oid = u.oid AND t.typtype = 'c'
    UNION ALL SELECT r.rngsubtype FROM pg_range r WHERE r.rngtypid = u.oid) d
  WHERE u.depth < 20
)
SELECT n.nspname::text, t.typname::text,
  CASE t.typtype
  WHEN 'e' THEN format('CREATE TYPE %I.%I AS ENUM (%s)', n.nspname, t.typname,
       (SELECT string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid))
  WHEN 'd' THEN format('CREATE DOMAIN %I.%I AS %s', n.nspname, t.typname, format_type(t.typbasetype, t.typtypmod))
       || coalesce(' DEFAULT ' || t.typdefault, '') || CASE WHEN t.typnotnull THEN ' NOT NULL' ELSE '' END
       || coalesce((SELECT string_agg(format(' CONSTRAINT %I ', c.conname) || pg_get_constraintdef(c.oid), '' ORDER BY c.conname)
                    FROM pg_constraint c WHERE c.contypid = t.oid), '')
  WHEN 'c' THEN format('CREATE TYPE %I.%I AS (%s)', n.nspname, t.typname,
       (SELECT string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
        FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped))
  WHEN 'r' THEN format('CREATE TYPE %I.%I AS RANGE (SUBTYPE = %s)', n.nspname, t.typname,
       (SELECT format_type(r.rngsubtype, NULL) FROM pg_range r WHERE r.rngtypid = t.oid))
  END
FROM (SELECT oid, max(depth) AS depth FROM used GROUP BY oid) u
JOIN pg_type t ON t.oid = u.oid
JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND t.typtype IN ('e', 'd', 'c', 'r')
  AND (t.typtype <> 'c' OR (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c')
ORDER BY u.depth DESC, 1, 2`, idents)
	if err != nil {
		return nil, fmt.Errorf("read the types the job's columns use: %w", err)
	}
	defer rows.Close()
	var out []UserType
	for rows.Next() {
		var u UserType
		if err := rows.Scan(&u.Schema, &u.Name, &u.SQL); err != nil {
			return nil, fmt.Errorf("read the types the job's columns use: %w", err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// TypeExists reports whether the database has a type named schema.name.
func TypeExists(ctx context.Context, q Querier, schema, name string) (bool, error) {
	exists, err := queryBool(ctx, q, `SELECT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE n.nspname = $1 AND t.typname = $2)`, schema, name)
	if err != nil {
		return false, fmt.Errorf("look up type %s.%s: %w", schema, name, err)
	}
	return exists, nil
}

// MissingDefaultFunctions returns the user-defined functions that the
// column defaults of tables call on the source and that the target lacks
// (by signature), as "table.column: function(args)", so that bootstrap can
// name them all before it creates anything.
func MissingDefaultFunctions(ctx context.Context, src, tgt Querier, tables []*Table) ([]string, error) {
	idents := RefIdents(tables)
	rows, err := src.Query(ctx, `
SELECT DISTINCT n.nspname || '.' || c.relname || '.' || a.attname, p.oid::regprocedure::text
FROM pg_attrdef d
JOIN pg_class c ON c.oid = d.adrelid JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
JOIN pg_depend dp ON dp.classid = 'pg_attrdef'::regclass AND dp.objid = d.oid AND dp.refclassid = 'pg_proc'::regclass
JOIN pg_proc p ON p.oid = dp.refobjid
WHERE d.adrelid = ANY (SELECT to_regclass(x) FROM unnest($1::text[]) x)
  AND p.pronamespace <> 'pg_catalog'::regnamespace
ORDER BY 1, 2`, idents)
	if err != nil {
		return nil, fmt.Errorf("read the functions column defaults call: %w", err)
	}
	type use struct{ column, fn string }
	var uses []use
	for rows.Next() {
		var u use
		if err := rows.Scan(&u.column, &u.fn); err != nil {
			rows.Close()
			return nil, err
		}
		uses = append(uses, u)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var missing []string
	for _, u := range uses {
		exists, err := queryBool(ctx, tgt, "SELECT to_regprocedure($1) IS NOT NULL", u.fn)
		if err != nil {
			return nil, fmt.Errorf("look up function %s on the target: %w", u.fn, err)
		}
		if !exists {
			missing = append(missing, u.column+": "+u.fn)
		}
	}
	return missing, nil
}
