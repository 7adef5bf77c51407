package catalog

import (
	"context"
	"fmt"
	"strconv"
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

// typeDependencies is the recursive step of a walk over the types a
// column uses (the CTE "used" with columns oid and depth): an array's
// element, a domain's base, a composite's attributes, a range's subtype.
const typeDependencies = `  CROSS JOIN LATERAL (
    SELECT t.typelem AS dep FROM pg_type t WHERE t.oid = u.oid AND t.typcategory = 'A' AND t.typelem <> 0
    UNION ALL SELECT t.typbasetype FROM pg_type t WHERE t.oid = u.oid AND t.typtype = 'd'
    UNION ALL SELECT a.atttypid FROM pg_type t JOIN pg_attribute a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
              WHERE t.oid = u.oid AND t.typtype = 'c'
    UNION ALL SELECT r.rngsubtype FROM pg_range r WHERE r.rngtypid = u.oid) d
  WHERE u.depth < 20`

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
`+typeDependencies+`
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

// ColumnType is a column's type as format_type writes it: Type with the
// modifier ("character varying(20)", "timestamp(3) without time zone",
// "numeric(12,2)[]"), BaseType without it ("character varying",
// "timestamp without time zone", "numeric[]").
type ColumnType struct {
	Type     string
	BaseType string
}

// ColumnType returns the column's type.
func (c Column) ColumnType() ColumnType { return ColumnType{Type: c.Type, BaseType: c.BaseType} }

// TimestampWarning is the warning of Holds for a timestamp column that is
// timestamptz on the target: the value carries no zone, so its input on
// the target reads it in the session's TimeZone, which the caller names.
const TimestampWarning = "timestamp values become timestamptz in the target session's time zone"

// Holds reports whether a column of type target holds every value of a
// column of type source, written through its text form as logical
// replication writes it (the source's output, the target's input): the
// rule for a target column of another type than the source's (issue 16).
// Moving with replication is how columns are widened without downtime, so
// it accepts a type that takes every value of the source's unchanged:
//
//   - the same type with a modifier that allows as much or more
//     (varchar(10) to varchar(20), numeric(8,2) to numeric(12,4),
//     timestamp(3) to timestamp, char(3) to char(6), which pads);
//   - integer widening (smallint to integer to bigint), an integer to a
//     numeric with enough integer digits (or none given), to a float
//     that holds it exactly (smallint to real, integer to double);
//   - real to double precision (the text form, "1.1", is read as the
//     double 1.1, as native does);
//   - varchar(n), char(n) and text to a varchar at least as long;
//   - json to jsonb and back, cidr to inet, bit(n) to a varbit as long;
//   - any type to text or an unconstrained varchar (char(n) keeps its
//     padding: its output has it, as native writes it);
//   - timestamp to timestamptz, with warn set: the value has no zone, and
//     the target's input reads it in the target session's TimeZone
//     (TimestampWarning; the caller names the zone).
//
// Arrays follow their elements' rule. Everything else is refused (ok
// false): a narrowing with counterexample a value of the source's type
// that would not fit the target's ("2147483648" for bigint to integer, "a
// 20-character value" for varchar(20) to varchar(5)); unrelated types,
// domains and extension types with counterexample "". Narrowing words the
// refusal.
func Holds(source, target ColumnType) (ok bool, warn, counterexample string) {
	if source.Type == target.Type {
		return true, "", ""
	}
	s, t := shapeOf(source), shapeOf(target)
	if !t.array && t.unboundedText() {
		return true, "", "" // an array's text form too
	}
	if s.array != t.array {
		return false, "", ""
	}
	return holds(s, t)
}

// Narrowing words a refusal of Holds for a message: "bigint to integer:
// 2147483648 would not fit".
func Narrowing(source, target ColumnType, counterexample string) string {
	if counterexample == "" {
		return fmt.Sprintf("%s to %s: the target's type does not hold every value of the source's", source.Type, target.Type)
	}
	return fmt.Sprintf("%s to %s: %s would not fit", source.Type, target.Type, counterexample)
}

// ComparisonCast returns the type to cast a source column's values to so
// that their text form is the one the target holds after replication
// wrote them (Holds accepted the pair), or "" when the text forms agree
// already. verify hashes both sides by text, and some widenings change it:
// jsonb normalizes json, timestamptz adds the zone, numeric(12,4) and
// char(6) pad. The cast reads the value as the target's input did: casts
// between these types are that input, where a cast to text is not (char(n)
// to text trims the padding that the text output keeps, and real to
// double precision gives 1.100000023841858 where the target read "1.1"):
// there the text forms agree without one.
func ComparisonCast(source, target ColumnType) string {
	if source.Type == target.Type {
		return ""
	}
	s, t := shapeOf(source), shapeOf(target)
	switch {
	case t.base == "text" || t.base == "character varying":
		return "" // the source's text form, kept as it is
	case intBits[s.base] > 0 && (intBits[t.base] > 0 || t.base == "real" || t.base == "double precision"):
		return ""
	case s.base == "real" && t.base == "double precision":
		return ""
	case s.base == "bit" && t.base == "bit varying", s.base == t.base && s.base == "bit varying":
		return ""
	}
	return target.Type
}

// typeShape is a ColumnType taken apart.
type typeShape struct {
	base  string // the type without modifier or [], as format_type(oid, NULL)
	array bool
	// mods are the modifier's numbers, nil without a modifier; opaque is a
	// modifier that is not numbers (an extension type's).
	mods   []int
	opaque bool
	// fields are an interval's fields ("day to second"), "" for all.
	fields string
}

func shapeOf(ct ColumnType) typeShape {
	typ, array := strings.CutSuffix(ct.Type, "[]")
	base, _ := strings.CutSuffix(ct.BaseType, "[]")
	s := typeShape{base: base, array: array}
	if typ == base {
		return s
	}
	// "character varying(20)", "numeric(12,2)", "timestamp(3) with time
	// zone", "interval day to second(3)"; bpchar, an unbounded character,
	// has none.
	if i := strings.IndexByte(typ, '('); i >= 0 {
		if j := strings.IndexByte(typ[i:], ')'); j > 0 {
			for _, f := range strings.Split(typ[i+1:i+j], ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					s.mods, s.opaque = nil, true
					break
				}
				s.mods = append(s.mods, n)
			}
			typ = typ[:i] + typ[i+j+1:]
		}
	}
	if base == "interval" {
		s.fields = strings.TrimSpace(strings.TrimPrefix(typ, "interval"))
	}
	return s
}

func (s typeShape) unboundedText() bool {
	return s.base == "text" || s.base == "character varying" && s.mods == nil && !s.opaque
}

// intBits are the integer types' sizes; intMax their largest values.
var (
	intBits = map[string]int{"smallint": 16, "integer": 32, "bigint": 64}
	intMax  = map[string]int64{"smallint": 32767, "integer": 2147483647, "bigint": 9223372036854775807}
)

// timeSamples are values of the types with a fractional-seconds precision,
// with six digits of it, from which a counterexample keeps the source's.
var timeSamples = map[string]string{
	"timestamp without time zone": "'2000-01-01 00:00:00.123456'",
	"timestamp with time zone":    "'2000-01-01 00:00:00.123456+00'",
	"time without time zone":      "'00:00:00.123456'",
	"time with time zone":         "'00:00:00.123456+00'",
	"interval":                    "'00:00:00.123456'",
}

// holds is Holds for two scalar types, or two arrays' elements.
func holds(s, t typeShape) (ok bool, warn, counterexample string) {
	switch {
	case t.unboundedText():
		return true, "", ""
	case s.opaque || t.opaque:
		return false, "", ""
	case s.base == t.base:
		return holdsModifier(s, t)
	}
	sBits, tBits := intBits[s.base], intBits[t.base]
	switch {
	case sBits > 0 && tBits > 0:
		if tBits > sBits {
			return true, "", ""
		}
		return false, "", strconv.FormatInt(intMax[t.base]+1, 10)
	case sBits > 0 && t.base == "numeric":
		digits := len(strconv.FormatInt(intMax[s.base], 10))
		if t.mods == nil || scale(t.mods) >= 0 && t.mods[0]-scale(t.mods) >= digits {
			return true, "", ""
		}
		if scale(t.mods) < 0 {
			return false, "", "1" // rounded to tens or more
		}
		return false, "", pow10(t.mods[0] - scale(t.mods))
	case sBits > 0 && t.base == "real":
		if sBits <= 16 { // a real has 24 bits of mantissa
			return true, "", ""
		}
		return false, "", "16777217"
	case sBits > 0 && t.base == "double precision":
		if sBits <= 32 { // a double has 53
			return true, "", ""
		}
		return false, "", "9007199254740993"
	case s.base == "numeric" && tBits > 0:
		return false, "", "0.5"
	case s.base == "real" && t.base == "double precision":
		return true, "", ""
	case s.base == "double precision" && t.base == "real":
		return false, "", "1e+300"
	case s.base == "json" && t.base == "jsonb", s.base == "jsonb" && t.base == "json", s.base == "cidr" && t.base == "inet":
		return true, "", ""
	case s.base == "timestamp without time zone" && t.base == "timestamp with time zone":
		if ok, ce := holdsPrecision(s, t); !ok {
			return false, "", ce
		}
		return true, TimestampWarning, ""
	case t.base == "character varying" && (s.base == "text" || s.base == "character varying" || s.base == "character"):
		return holdsLength(s, t, "character")
	case s.base == "bit" && t.base == "bit varying":
		return holdsLength(s, t, "bit")
	}
	return false, "", ""
}

// holdsModifier is holds for one type with two modifiers.
func holdsModifier(s, t typeShape) (ok bool, warn, counterexample string) {
	switch s.base {
	case "character varying", "character":
		return holdsLength(s, t, "character")
	case "bit varying":
		return holdsLength(s, t, "bit")
	case "bit":
		// Fixed length: a bit(8) value is no bit(16) value.
		if t.mods == nil {
			return true, "", ""
		}
		return false, "", fmt.Sprintf("%s %d-bit value", article(modOr(s.mods, 1)), modOr(s.mods, 1))
	case "numeric":
		if t.mods == nil {
			return true, "", ""
		}
		tInt := t.mods[0] - scale(t.mods)
		if s.mods == nil {
			return false, "", pow10(tInt)
		}
		sInt := s.mods[0] - scale(s.mods)
		switch {
		case tInt < sInt:
			return false, "", pow10(tInt)
		case scale(t.mods) < scale(s.mods):
			// A digit the target's scale rounds away.
			if sc := scale(s.mods); sc > 0 {
				return false, "", "0." + strings.Repeat("0", sc-1) + "1"
			}
			return false, "", pow10(-scale(s.mods))
		}
		return true, "", ""
	case "interval":
		// Fields zero the units below the last one (interval day keeps
		// no hours); a target that keeps units as fine as the source's
		// holds its values.
		if intervalUnit(t.fields) < intervalUnit(s.fields) {
			return false, "", "'1 year 2 mons 3 days 04:05:06'"
		}
		fallthrough
	case "timestamp without time zone", "timestamp with time zone", "time without time zone", "time with time zone":
		if ok, ce := holdsPrecision(s, t); !ok {
			return false, "", ce
		}
		return true, "", ""
	}
	// Another type's modifier (an extension's, or one this rule does not
	// know): only the same one is taken.
	return false, "", ""
}

// holdsLength compares the lengths of string or bit types; unit names
// them in the counterexample.
func holdsLength(s, t typeShape, unit string) (ok bool, warn, counterexample string) {
	if t.mods == nil {
		return true, "", ""
	}
	max := t.mods[0]
	if s.mods != nil && s.mods[0] <= max {
		return true, "", ""
	}
	n := max + 1
	if s.mods != nil {
		n = s.mods[0]
	}
	return false, "", fmt.Sprintf("%s %d-%s value", article(n), n, unit)
}

// article is the article before n spoken: "an 8-bit value", "an 11-bit
// value", "a 20-character value".
func article(n int) string {
	s := strconv.Itoa(n)
	if s[0] == '8' || (len(s)%3 == 2 && (strings.HasPrefix(s, "11") || strings.HasPrefix(s, "18"))) {
		return "an"
	}
	return "a"
}

// holdsPrecision compares the fractional-seconds precisions of time
// types: 6 without a modifier.
func holdsPrecision(s, t typeShape) (ok bool, counterexample string) {
	sp, tp := modOr(s.mods, 6), modOr(t.mods, 6)
	if tp >= sp {
		return true, ""
	}
	sample := timeSamples[s.base]
	// Keep sp of the six digits: 0.123456 becomes 0.123 for timestamp(3).
	i := strings.Index(sample, ".123456")
	return false, sample[:i+1+sp] + sample[i+7:]
}

// intervalUnit ranks the finest unit an interval's fields keep, from 0
// (year) to 5 (second, or no fields).
func intervalUnit(fields string) int {
	last := fields[strings.LastIndexByte(fields, ' ')+1:]
	switch last {
	case "year":
		return 0
	case "month":
		return 1
	case "day":
		return 2
	case "hour":
		return 3
	case "minute":
		return 4
	}
	return 5
}

func modOr(mods []int, def int) int {
	if len(mods) == 0 {
		return def
	}
	return mods[0]
}

// scale is a numeric modifier's scale: 0 when only the precision is given.
func scale(mods []int) int {
	if len(mods) < 2 {
		return 0
	}
	return mods[1]
}

// pow10 writes 10^n, n >= 0, in digits.
func pow10(n int) string {
	if n > 40 {
		return fmt.Sprintf("1e+%d", n)
	}
	return "1" + strings.Repeat("0", max(n, 0))
}

// UncreatableTypes returns what the columns of tables use, directly or
// through a domain, array, composite or range, that the built-in creator
// cannot make and the target lacks: base types outside pg_catalog (an
// extension's, such as citext or hstore) and collations. Each is worded
// as "schema.table.column: type schema.name (extension e)", so that
// bootstrap can name them all before it creates anything.
func UncreatableTypes(ctx context.Context, src, tgt Querier, tables []*Table) ([]string, error) {
	idents := RefIdents(tables)
	rows, err := src.Query(ctx, `
WITH RECURSIVE used(col, oid, depth) AS (
  SELECT (SELECT format('%I.%I.%I', n.nspname, c.relname, a.attname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = a.attrelid), a.atttypid, 0 FROM pg_attribute a
  WHERE a.attrelid = ANY (SELECT to_regclass(x) FROM unnest($1::text[]) x) AND a.attnum > 0 AND NOT a.attisdropped
  UNION
  SELECT u.col, d.dep, u.depth + 1 FROM used u
`+typeDependencies+`
)
SELECT DISTINCT u.col, 'type', n.nspname::text, t.typname::text,
  coalesce((SELECT e.extname::text FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
            WHERE d.classid = 'pg_type'::regclass AND d.objid = t.oid AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'), '')
FROM used u JOIN pg_type t ON t.oid = u.oid JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE t.typtype = 'b' AND NOT (t.typcategory = 'A' AND t.typelem <> 0) AND n.nspname NOT IN ('pg_catalog', 'information_schema')
UNION ALL
SELECT (SELECT format('%I.%I.%I', n.nspname, c.relname, a.attname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = a.attrelid), 'collation', n.nspname::text, c.collname::text, ''
FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation JOIN pg_namespace n ON n.oid = c.collnamespace
WHERE a.attrelid = ANY (SELECT to_regclass(x) FROM unnest($1::text[]) x) AND a.attnum > 0 AND NOT a.attisdropped
  AND n.nspname <> 'pg_catalog'
ORDER BY 1, 3, 4`, idents)
	if err != nil {
		return nil, fmt.Errorf("read the types the job's columns use: %w", err)
	}
	type need struct{ col, kind, schema, name, ext string }
	var needs []need
	for rows.Next() {
		var n need
		if err := rows.Scan(&n.col, &n.kind, &n.schema, &n.name, &n.ext); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the types the job's columns use: %w", err)
		}
		needs = append(needs, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the types the job's columns use: %w", err)
	}
	var out []string
	for _, n := range needs {
		q := `SELECT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = $1 AND t.typname = $2)`
		if n.kind == "collation" {
			q = `SELECT EXISTS (SELECT 1 FROM pg_collation c JOIN pg_namespace n ON n.oid = c.collnamespace WHERE n.nspname = $1 AND c.collname = $2)`
		}
		there, err := queryBool(ctx, tgt, q, n.schema, n.name)
		if err != nil {
			return nil, fmt.Errorf("look up %s %s.%s on the target: %w", n.kind, n.schema, n.name, err)
		}
		if there {
			continue
		}
		s := fmt.Sprintf("%s: %s %s.%s", n.col, n.kind, n.schema, n.name)
		if n.ext != "" {
			s += " (extension " + n.ext + ")"
		}
		out = append(out, s)
	}
	return out, nil
}
