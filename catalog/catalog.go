// Package catalog reads table definitions from PostgreSQL's catalogs: which
// tables a job's patterns select, their columns, keys and replica identity,
// and the DDL that recreates a table on the target.
package catalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/pattern"
)

// Querier is what catalog needs of a connection; *pgx.Conn and pgx.Tx both
// satisfy it.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// TableName is a table's schema and name.
type TableName struct{ Schema, Name string }

// String is "schema.name", unquoted: the form of job.tables and the log.
func (n TableName) String() string { return n.Schema + "." + n.Name }

// TableName returns t's schema and name.
func (t *Table) TableName() TableName { return TableName{t.Schema, t.Name} }

// Column is one user column of a table.
type Column struct {
	Name string
	Type string // format_type() of the column, e.g. "character varying(20)"
	// BaseType is the type without its modifier, e.g. "character varying":
	// a cast to it checks nothing, so the assignment to the column does.
	BaseType string
	// IdentityAlways marks a GENERATED ALWAYS AS IDENTITY column, which an
	// INSERT fills only with OVERRIDING SYSTEM VALUE and an UPDATE cannot set.
	IdentityAlways bool
	// Identity is pg_attribute.attidentity: 'a' (ALWAYS), 'd' (BY DEFAULT)
	// or 0.
	Identity byte
	// Sequence is the sequence a serial or identity column owns (qualified
	// name), SequenceType its type and SequenceOptions its options
	// ("INCREMENT BY 1 ..."), so that a created table gets one of the same
	// kind.
	Sequence        string
	SequenceType    string
	SequenceOptions string
	// SequenceShared marks a Sequence the column's default takes from
	// without owning it (nextval('s') on a sequence of its own): created
	// if missing, never owned by the column.
	SequenceShared bool
	NotNull        bool
	// Default is the column default when it is portable to another
	// database (it uses no sequence, or one CreateTableSQL creates: see
	// Sequence); "" otherwise.
	Default string
	// Generated is the expression of a STORED generated column, "" if the
	// column is not generated. Generated columns are neither copied nor
	// replicated: the target computes them.
	Generated string
}

// Table is a table's definition.
type Table struct {
	Schema  string
	Name    string
	Columns []Column
	// PrimaryKey lists the primary key columns in key order; nil if none.
	PrimaryKey []string
	// ReplicaIdentity is pg_class.relreplident: 'd' default (primary key),
	// 'f' full, 'i' index, 'n' nothing.
	ReplicaIdentity byte
	// HasIdentityIndex is true when ReplicaIdentity is 'i' and the index exists.
	HasIdentityIndex bool
	// SizeBytes is the table's on-disk size, used to copy the largest first.
	SizeBytes int64
	// PartitionOf is the partitioned table this table is a partition of
	// (schema and name only), with PartitionBound its FOR VALUES clause;
	// nil for a table that is not a partition.
	PartitionOf    *Table
	PartitionBound string
	// PartitionKey is the PARTITION BY clause of a partitioned table.
	PartitionKey string
}

// String returns schema.name for messages.
func (t *Table) String() string { return t.Schema + "." + t.Name }

// Ident returns the quoted, qualified name for SQL.
func (t *Table) Ident() string { return pgx.Identifier{t.Schema, t.Name}.Sanitize() }

// CopiedColumns returns the quoted column list that COPY and verify read:
// every column except generated ones.
func (t *Table) CopiedColumns() string { return t.CopiedColumnsCast(nil) }

// CopiedColumnsCast is CopiedColumns with each column named in casts read
// as the type it gives ("col::type").
func (t *Table) CopiedColumnsCast(casts map[string]string) string {
	var b strings.Builder
	for _, c := range t.Columns {
		if c.Generated != "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(QuoteIdent(c.Name))
		if cast := casts[c.Name]; cast != "" {
			b.WriteString("::" + cast)
		}
	}
	return b.String()
}

// Replicable reports whether UPDATE and DELETE on the table can be published:
// it needs a primary key, a replica identity index or REPLICA IDENTITY FULL.
func (t *Table) Replicable() bool {
	switch t.ReplicaIdentity {
	case 'f':
		return true
	case 'i':
		return t.HasIdentityIndex
	case 'd':
		return len(t.PrimaryKey) > 0
	}
	return false
}

// Idents returns the quoted schema.table name of each table.
func Idents(tables []Table) []string {
	idents := make([]string, len(tables))
	for i := range tables {
		idents[i] = tables[i].Ident()
	}
	return idents
}

// RefIdents is Idents for a list of references to tables.
func RefIdents(tables []*Table) []string {
	idents := make([]string, len(tables))
	for i, t := range tables {
		idents[i] = t.Ident()
	}
	return idents
}

// Names returns the schema and name of each table, for LookupAll.
func Names(tables []Table) []TableName {
	names := make([]TableName, len(tables))
	for i := range tables {
		names[i] = tables[i].TableName()
	}
	return names
}

// RefNames is Names for a list of references to tables.
func RefNames(tables []*Table) []TableName {
	names := make([]TableName, len(tables))
	for i, t := range tables {
		names[i] = t.TableName()
	}
	return names
}

// QuoteIdent quotes one identifier.
func QuoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

// QuoteLiteral quotes s as an SQL string literal, for the statements that
// take no parameters (DO blocks, replication commands, DDL).
func QuoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Resolve returns every ordinary, permanent table that one of the
// schema.table patterns matches, sorted by name, with columns and keys
// loaded. System schemas and pgsync's own schema are never selected. It
// reads them in one query, whatever their number (issue 33: one query
// per table was 2,000 round trips for a schema per customer).
func Resolve(ctx context.Context, q Querier, patterns []string) ([]Table, error) {
	schemas, names, err := parsePatterns(patterns)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, definitionsSQL(`
SELECT c.oid, row_number() OVER (ORDER BY n.nspname, c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE `+matchCondition), schemas, names, "p")
	if err != nil {
		return nil, fmt.Errorf("resolve table patterns %s: %w", strings.Join(patterns, ", "), err)
	}
	tables, err := scanDefinitions(rows)
	if err != nil {
		return nil, fmt.Errorf("resolve table patterns %s: %w", strings.Join(patterns, ", "), err)
	}
	return tables, nil
}

// UnloggedMatches returns the UNLOGGED tables the patterns match: logical
// replication cannot publish them, so Resolve leaves them out and the
// commands say so. Only their names are read.
func UnloggedMatches(ctx context.Context, q Querier, patterns []string) ([]Table, error) {
	schemas, names, err := parsePatterns(patterns)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, `
SELECT n.nspname, c.relname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE `+matchCondition+`
ORDER BY 1, 2`, schemas, names, "u")
	if err != nil {
		return nil, fmt.Errorf("resolve table patterns %s: %w", strings.Join(patterns, ", "), err)
	}
	var tables []Table
	for rows.Next() {
		var t Table
		if err := rows.Scan(&t.Schema, &t.Name); err != nil {
			return nil, err
		}
		tables = append(tables, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("resolve table patterns %s: %w", strings.Join(patterns, ", "), err)
	}
	return tables, nil
}

// matchCondition selects the ordinary tables (c in namespace n) of
// persistence $3 ('p' permanent, 'u' unlogged) outside the system
// schemas and pgsync's own that one of the patterns ($1 schemas, $2
// names, LIKE patterns) matches.
const matchCondition = `EXISTS (SELECT 1 FROM unnest($1::text[], $2::text[]) AS p(s, t)
              WHERE n.nspname LIKE p.s AND c.relname LIKE p.t)
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgsync')
  AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%'
  AND c.relkind = 'r' AND c.relpersistence = $3`

// parsePatterns splits the schema.table patterns into LIKE patterns of
// schemas and of names.
func parsePatterns(patterns []string) (schemas, names []string, err error) {
	for _, p := range patterns {
		s, n, err := pattern.Parse(p)
		if err != nil {
			return nil, nil, fmt.Errorf("table pattern %q: %w", p, err)
		}
		schemas = append(schemas, s)
		names = append(names, n)
	}
	return schemas, names, nil
}

// Lookup loads one table's definition; ok is false when it does not exist.
func Lookup(ctx context.Context, q Querier, schema, name string) (t Table, ok bool, err error) {
	found, err := LookupAll(ctx, q, []TableName{{schema, name}})
	if err != nil || len(found) == 0 {
		return Table{Schema: schema, Name: name}, false, err
	}
	return found[0], true, nil
}

// LookupAll loads the definitions of the tables (ordinary or partitioned)
// named, in one query whatever their number, in the order of names; a
// name without such a table is left out.
func LookupAll(ctx context.Context, q Querier, names []TableName) ([]Table, error) {
	if len(names) == 0 {
		return nil, nil
	}
	schemas, rels := make([]string, len(names)), make([]string, len(names))
	for i, n := range names {
		schemas[i], rels[i] = n.Schema, n.Name
	}
	rows, err := q.Query(ctx, definitionsSQL(`
SELECT c.oid, w.ord
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w(s, t, ord)
JOIN pg_namespace n ON n.nspname = w.s
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = w.t
WHERE c.relkind IN ('r', 'p')`), schemas, rels)
	if err != nil {
		return nil, fmt.Errorf("look up table %s (of %d): %w", names[0], len(names), err)
	}
	tables, err := scanDefinitions(rows)
	if err != nil {
		return nil, fmt.Errorf("look up table %s (of %d): %w", names[0], len(names), err)
	}
	return tables, nil
}

// ByName indexes tables by schema and name.
func ByName(tables []Table) map[TableName]*Table {
	m := make(map[TableName]*Table, len(tables))
	for i := range tables {
		m[tables[i].TableName()] = &tables[i]
	}
	return m
}

// PrimaryKeyAfterCopy reports whether t's primary key is built after its
// rows are copied (SecondaryObjects) rather than created with the table:
// true for a table with a primary key that is neither partitioned nor a
// partition.
func (t *Table) PrimaryKeyAfterCopy() bool {
	return len(t.PrimaryKey) > 0 && t.PartitionKey == "" && t.PartitionOf == nil
}

// CreateTableSQL returns the statements that create t on another database:
// columns, types, NOT NULL, portable defaults, generated columns, identity
// columns with their sequence options, the sequences of serial columns
// (owned by them, defaults kept) and, for a partitioned table, the primary
// key. The primary key of an ordinary table, secondary indexes and
// constraints come later (SecondaryObjects); triggers are not recreated.
// A partition is created as a partition of its (existing) parent, with the
// same bounds; a partitioned table with its PARTITION BY.
func CreateTableSQL(t *Table) string {
	var b strings.Builder
	if t.PartitionOf != nil {
		// Columns, keys and defaults come from the partitioned table.
		fmt.Fprintf(&b, "CREATE TABLE %s PARTITION OF %s %s", t.Ident(), t.PartitionOf.Ident(), t.PartitionBound)
		return b.String()
	}
	// Sequences of serial columns and those defaults take from first:
	// the defaults name them.
	for _, c := range t.Columns {
		if c.Sequence != "" && c.Identity == 0 {
			fmt.Fprintf(&b, "CREATE SEQUENCE IF NOT EXISTS %s AS %s %s; ", c.Sequence, c.SequenceType, c.SequenceOptions)
		}
	}
	fmt.Fprintf(&b, "CREATE TABLE %s (", t.Ident())
	for i, c := range t.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", QuoteIdent(c.Name), c.Type)
		switch {
		case c.Generated != "":
			fmt.Fprintf(&b, " GENERATED ALWAYS AS (%s) STORED", c.Generated)
		case c.Identity == 'a':
			fmt.Fprintf(&b, " GENERATED ALWAYS AS IDENTITY (%s)", c.SequenceOptions)
		case c.Identity == 'd':
			fmt.Fprintf(&b, " GENERATED BY DEFAULT AS IDENTITY (%s)", c.SequenceOptions)
		}
		if c.NotNull {
			b.WriteString(" NOT NULL")
		}
		if c.Default != "" {
			fmt.Fprintf(&b, " DEFAULT %s", c.Default)
		}
	}
	if len(t.PrimaryKey) > 0 && !t.PrimaryKeyAfterCopy() {
		b.WriteString(", PRIMARY KEY (")
		for i, k := range t.PrimaryKey {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(QuoteIdent(k))
		}
		b.WriteString(")")
	}
	b.WriteString(")")
	if t.PartitionKey != "" {
		fmt.Fprintf(&b, " PARTITION BY %s", t.PartitionKey)
	}
	for _, c := range t.Columns {
		if c.Sequence != "" && c.Identity == 0 && !c.SequenceShared {
			fmt.Fprintf(&b, "; ALTER SEQUENCE %s OWNED BY %s.%s", c.Sequence, t.Ident(), QuoteIdent(c.Name))
		}
	}
	return b.String()
}

// DifferentTypes describes the columns that want (the source table) and is
// (the target table) both have where is's type does not hold every value
// of want's (Holds): "column id: bigint to integer: 2147483648 would not
// fit". A wider type is accepted (issue 16): widening a column is what
// many moves are for. Generated columns are computed on each side and are
// not compared.
func DifferentTypes(want, is *Table) []string {
	var differ []string
	forTypeChanges(want, is, func(c Column, have ColumnType) {
		if ok, _, counterexample := Holds(c.ColumnType(), have); !ok {
			differ = append(differ, fmt.Sprintf("column %s: %s", c.Name, Narrowing(c.ColumnType(), have, counterexample)))
		}
	})
	return differ
}

// TypeWarnings describes the columns of want (the source table) that is
// (the target table) has with a type that Holds accepts with a warning:
// "column ts: timestamp without time zone to timestamp with time zone:
// timestamp values become timestamptz in the target session's time zone".
func TypeWarnings(want, is *Table) []string {
	var warnings []string
	forTypeChanges(want, is, func(c Column, have ColumnType) {
		if ok, warn, _ := Holds(c.ColumnType(), have); ok && warn != "" {
			warnings = append(warnings, fmt.Sprintf("column %s: %s to %s: %s", c.Name, c.Type, have.Type, warn))
		}
	})
	return warnings
}

// NeedsText reports whether the copy of want (the source table) into is
// (the target table) must use COPY's text format because a copied column
// has another type on the target (int to bigint, json to jsonb, any type
// to text): a type's binary form is read only by the same type. A column
// whose type differs by its modifier only (varchar(10) to varchar(20))
// is read in binary too: the binary input applies the modifier, as the
// text input does.
func NeedsText(want, is *Table) bool {
	base := make(map[string]string, len(is.Columns))
	for _, c := range is.Columns {
		base[c.Name] = c.BaseType
	}
	for _, c := range want.Columns {
		if have, ok := base[c.Name]; c.Generated == "" && (!ok || have != c.BaseType) {
			return true
		}
	}
	return false
}

// forTypeChanges calls f for each column of want that is has with another
// type, generated columns left out.
func forTypeChanges(want, is *Table, f func(c Column, have ColumnType)) {
	types := make(map[string]ColumnType, len(is.Columns))
	for _, c := range is.Columns {
		types[c.Name] = c.ColumnType()
	}
	for _, c := range want.Columns {
		if have, ok := types[c.Name]; ok && have.Type != c.Type && c.Generated == "" {
			f(c, have)
		}
	}
}

// MissingColumns returns the columns of want (the source table) that have
// is (the target table) lacks, by name.
func MissingColumns(want, is *Table) []string {
	have := make(map[string]bool, len(is.Columns))
	for _, c := range is.Columns {
		have[c.Name] = true
	}
	var missing []string
	for _, c := range want.Columns {
		if !have[c.Name] {
			missing = append(missing, c.Name)
		}
	}
	return missing
}
