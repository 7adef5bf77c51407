package catalog

import (
	"context"
	"fmt"
	"strings"
)

// Object is something bootstrap adds to a table it created, after the
// table's rows are copied: the primary key of an ordinary table, a
// secondary index, or a UNIQUE, CHECK, EXCLUDE or FOREIGN KEY constraint.
// SQL creates it on another database.
type Object struct {
	Table *Table
	Kind  string // "primary key", "index", "unique", "check", "exclude", "foreign key"
	Name  string
	SQL   string
	// References is the table a foreign key points to, as schema.name.
	References string
	// Validate, when set, runs after SQL: a foreign key is added NOT VALID
	// and validated apart. The ADD then holds its SHARE ROW EXCLUSIVE lock
	// on the referenced table only for a moment, and the scan runs under
	// VALIDATE's weaker locks, so a running pgsync run keeps writing the
	// referenced table while add-tables builds the key.
	Validate string
}

// String names the object for the operator.
func (o *Object) String() string { return fmt.Sprintf("%s %s on %s", o.Kind, o.Name, o.Table) }

// Unported is something of a table that bootstrap does not create.
type Unported struct {
	Table *Table
	Kind  string // "trigger", "policy", "rule", "grant", "comment", "extension" (whose type a column uses)
	Name  string
}

// SecondaryObjects returns the indexes (other than those of the primary
// key and of constraints) and the UNIQUE, CHECK, EXCLUDE and FOREIGN KEY
// constraints of t on the source, from pg_get_indexdef and
// pg_get_constraintdef, and what bootstrap leaves out: triggers, policies,
// rules, grants, comments, and the extensions whose types the columns use.
// The primary key of a table that is neither partitioned nor a partition
// is one of the objects too: CreateTableSQL leaves it out, since COPY into
// a table without an index and one sorted build after it cost the target
// less than a btree insertion per row (docs/benchmarks.md). Partitioned
// tables keep theirs inline, so that their partitions inherit it.
func SecondaryObjects(ctx context.Context, q Querier, t *Table) (objs []Object, left []Unported, err error) {
	rows, err := q.Query(ctx, `
SELECT 'index', ic.relname::text, pg_get_indexdef(i.indexrelid), ''
FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
WHERE i.indrelid = $1::regclass AND NOT i.indisprimary
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.conrelid = i.indrelid)
  AND NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = i.indexrelid) -- a partition's copy of its parent's index
UNION ALL
SELECT CASE c.contype WHEN 'p' THEN 'primary key' WHEN 'u' THEN 'unique' WHEN 'c' THEN 'check' WHEN 'x' THEN 'exclude' ELSE 'foreign key' END,
       c.conname::text, pg_get_constraintdef(c.oid),
       CASE WHEN c.contype = 'f' THEN (SELECT n.nspname || '.' || r.relname FROM pg_class r JOIN pg_namespace n ON n.oid = r.relnamespace WHERE r.oid = c.confrelid) ELSE '' END
FROM pg_constraint c
WHERE c.conrelid = $1::regclass AND (c.contype IN ('u', 'c', 'x', 'f') OR c.contype = 'p' AND $2)
  AND c.conislocal AND c.conparentid = 0 -- not inherited from a parent
ORDER BY 1, 2`, t.Ident(), t.PrimaryKeyAfterCopy())
	if err != nil {
		return nil, nil, fmt.Errorf("read indexes and constraints of %s: %w", t, err)
	}
	for rows.Next() {
		o := Object{Table: t}
		var def string
		if err := rows.Scan(&o.Kind, &o.Name, &def, &o.References); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("read indexes and constraints of %s: %w", t, err)
		}
		if o.Kind == "index" {
			// CREATE INDEX name ON schema.table ...; on a partitioned table
			// "ON ONLY", which would leave the partitions without it.
			o.SQL = strings.Replace(def, " ON ONLY ", " ON ", 1)
		} else {
			o.SQL = fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s %s", t.Ident(), QuoteIdent(o.Name), def)
			// A key NOT VALID on the source stays so.
			if o.Kind == "foreign key" && !strings.HasSuffix(def, " NOT VALID") {
				o.SQL += " NOT VALID"
				o.Validate = fmt.Sprintf("ALTER TABLE %s VALIDATE CONSTRAINT %s", t.Ident(), QuoteIdent(o.Name))
			}
		}
		objs = append(objs, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read indexes and constraints of %s: %w", t, err)
	}
	rows, err = q.Query(ctx, `
SELECT 'trigger', tgname::text FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal
UNION ALL SELECT 'policy', polname::text FROM pg_policy WHERE polrelid = $1::regclass
UNION ALL SELECT 'rule', rulename::text FROM pg_rewrite WHERE ev_class = $1::regclass AND rulename <> '_RETURN'
UNION ALL SELECT 'grant', array_to_string(relacl, ',') FROM pg_class WHERE oid = $1::regclass AND relacl IS NOT NULL
UNION ALL SELECT 'comment', coalesce(a.attname::text, 'table') FROM pg_description d
          LEFT JOIN pg_attribute a ON a.attrelid = d.objoid AND a.attnum = d.objsubid AND d.objsubid > 0
          WHERE d.classoid = 'pg_class'::regclass AND d.objoid = $1::regclass
UNION ALL SELECT DISTINCT 'extension', e.extname::text FROM pg_attribute a
          JOIN pg_depend dp ON dp.classid = 'pg_type'::regclass AND dp.objid = a.atttypid AND dp.deptype = 'e'
          JOIN pg_extension e ON e.oid = dp.refobjid
          WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY 1, 2`, t.Ident())
	if err != nil {
		return nil, nil, fmt.Errorf("read triggers of %s: %w", t, err)
	}
	defer rows.Close()
	for rows.Next() {
		u := Unported{Table: t}
		if err := rows.Scan(&u.Kind, &u.Name); err != nil {
			return nil, nil, fmt.Errorf("read triggers of %s: %w", t, err)
		}
		left = append(left, u)
	}
	return objs, left, rows.Err()
}

// ObjectExists reports whether the target already has an object of o's
// name: an index in the table's schema, or a constraint on the table.
func ObjectExists(ctx context.Context, q Querier, o *Object) (bool, error) {
	sql, args := `SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass($1) AND conname = $2)`, []any{o.Table.Ident(), o.Name}
	switch o.Kind {
	case "primary key": // a table has one, whatever its name
		sql, args = `SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p')`, []any{o.Table.Ident()}
	case "index":
		sql, args = `SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2)`, []any{o.Table.Schema, o.Name}
	}
	exists, err := queryBool(ctx, q, sql, args...)
	if err != nil {
		return false, fmt.Errorf("look up %s on the target: %w", o, err)
	}
	return exists, nil
}

// queryBool runs a query of one boolean value; no row is false.
func queryBool(ctx context.Context, q Querier, sql string, args ...any) (bool, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	var v bool
	if rows.Next() {
		if err := rows.Scan(&v); err != nil {
			return false, err
		}
	}
	return v, rows.Err()
}

// LeftOut returns, by kind, what the built-in creator does not make of the
// source around tables: the views and materialized views that read them,
// the functions of their schemas, and the schemas that hold such views but
// none of the tables (objects of extensions are the extension's).
func LeftOut(ctx context.Context, q Querier, tables []*Table) (map[string][]string, error) {
	rows, err := q.Query(ctx, `WITH t AS (SELECT to_regclass(x) AS oid FROM unnest($1::text[]) x),
ts AS (SELECT DISTINCT c.relnamespace AS ns FROM pg_class c WHERE c.oid IN (SELECT oid FROM t)),
views AS (
  SELECT DISTINCT v.oid, v.relkind, v.relnamespace FROM pg_depend d
  JOIN pg_rewrite r ON r.oid = d.objid AND d.classid = 'pg_rewrite'::regclass
  JOIN pg_class v ON v.oid = r.ev_class AND v.relkind IN ('v', 'm')
  WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid IN (SELECT oid FROM t))
SELECT CASE views.relkind WHEN 'v' THEN 'view' ELSE 'materialized view' END, format('%I.%I', n.nspname, c.relname)
FROM views JOIN pg_class c ON c.oid = views.oid JOIN pg_namespace n ON n.oid = c.relnamespace
UNION ALL
SELECT 'function', p.oid::regprocedure::text FROM pg_proc p
WHERE p.pronamespace IN (SELECT ns FROM ts)
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
UNION ALL
SELECT DISTINCT 'schema', quote_ident(n.nspname) FROM views JOIN pg_namespace n ON n.oid = views.relnamespace
WHERE views.relnamespace NOT IN (SELECT ns FROM ts)
ORDER BY 1, 2`, RefIdents(tables))
	if err != nil {
		return nil, fmt.Errorf("read what the built-in creator leaves out: %w", err)
	}
	out := map[string][]string{}
	for rows.Next() {
		var kind, name string
		if err := rows.Scan(&kind, &name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read what the built-in creator leaves out: %w", err)
		}
		out[kind] = append(out[kind], name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read what the built-in creator leaves out: %w", err)
	}
	return out, nil
}
