package apply

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgoutput"
)

// The statements the applier prepares. Parameters are text; their types
// come from the target columns they meet, or from explicit casts where
// nothing gives them (VALUES lists, and keys of a composite type, whose
// equality is record's and would make the parameter a record). No cast
// may change a value: a cast names a type that takes the value as it is
// (catalog.CastType), the column's modifier is checked by the assignment,
// and a key is compared as sent (issue 16). COPY casts nothing: each value
// goes through its type's input with the column's modifier, as an
// assignment does.

// insertSQL returns an INSERT of rows rows.
func insertSQL(rel *relation, rows int, param func(p, n int) string) string {
	var b strings.Builder
	if len(rel.cols) == 0 { // a table without columns: rows rows of nothing
		fmt.Fprintf(&b, "INSERT INTO %s SELECT FROM generate_series(1, %d)", rel.ident, rows)
		return b.String()
	}
	fmt.Fprintf(&b, "INSERT INTO %s (%s) ", rel.ident, strings.Join(rel.cols, ", "))
	if rel.anyAlways {
		// The source's identity values are the row's: as COPY does.
		b.WriteString("OVERRIDING SYSTEM VALUE ")
	}
	b.WriteString("VALUES ")
	writeParamRows(&b, rows, len(rel.cols), true, param)
	return b.String()
}

// copySQL returns the COPY FROM STDIN of a row set of INSERTs. COPY writes
// the given values into identity columns, GENERATED ALWAYS ones too, as
// INSERT ... OVERRIDING SYSTEM VALUE does.
func copySQL(rel *relation) string {
	return fmt.Sprintf("COPY %s (%s) FROM STDIN", rel.ident, strings.Join(rel.cols, ", "))
}

// keyCast returns the cast of a parameter compared with key column i: to
// the column's type when it is composite (targetFacts.composite), where
// the comparison gives the parameter no type but record; else nothing.
func keyCast(rel *relation, i int) string {
	if !rel.isComposite(i) {
		return ""
	}
	return "::" + catalog.CastType(rel.types[i])
}

// checkedSQL returns dml, an UPDATE or DELETE on rel whose rows from (a
// FROM list and its WHERE clause) finds, as it is; or, when a trigger may
// skip the operation's rows (targetFacts.checked), a statement that runs
// it and returns the rows it changed and the rows from finds. Both counts
// come from the snapshot the statement started with (the statements of a
// WITH do not see each other's changes), so that a row a trigger skipped
// is told from a missing one in the same round trip, whatever the
// statements after it in the pipeline do to the row.
func checkedSQL(rel *relation, op byte, dml, from string) string {
	if !rel.checks(op) {
		return dml
	}
	return "WITH pgsync_w AS (" + dml + " RETURNING 1) SELECT (SELECT count(*) FROM pgsync_w), (SELECT count(*) FROM " + from + ")"
}

// whereIdentity writes the row match, numbering parameters from next. A
// full-row identity matches one row only, even among duplicates, and among
// rows equal to the old row under their types' equality (numeric 1.0 and
// 1.00, citext 'A' and 'a', -0.0 and 0.0) prefers the one whose values are
// identical to it.
func whereIdentity(b *strings.Builder, rel *relation, next int) {
	if rel.full {
		fmt.Fprintf(b, " WHERE ctid = (SELECT ctid FROM %s WHERE ", rel.ident)
	} else {
		b.WriteString(" WHERE ")
	}
	if len(rel.keys) == 0 { // a full identity without columns: any row
		b.WriteString("true")
	}
	for n, i := range rel.keys {
		if n > 0 {
			b.WriteString(" AND ")
		}
		switch {
		case rel.full && rel.textEq[i]:
			fmt.Fprintf(b, "%s::text IS NOT DISTINCT FROM $%d::text", rel.cols[i], next+n)
		case rel.full:
			fmt.Fprintf(b, "%s IS NOT DISTINCT FROM $%d%s", rel.cols[i], next+n, keyCast(rel, i))
		default:
			fmt.Fprintf(b, "%s = $%d%s", rel.cols[i], next+n, keyCast(rel, i))
		}
	}
	if !rel.full {
		return
	}
	var exact []string
	for n, i := range rel.keys {
		if !rel.textEq[i] { // textEq columns are compared as text already
			exact = append(exact, fmt.Sprintf("%s::text IS NOT DISTINCT FROM $%d::text", rel.cols[i], next+n))
		}
	}
	if len(exact) > 0 {
		fmt.Fprintf(b, " ORDER BY (%s) DESC", strings.Join(exact, " AND "))
	}
	b.WriteString(" LIMIT 1)")
}

// updateSQL returns the single-row UPDATE: the set values, then the identity.
func updateSQL(rel *relation, setCols []int, param func(p, n int) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "UPDATE %s SET ", rel.ident)
	for n, i := range setCols {
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(rel.cols[i])
		b.WriteString(" = ")
		writeParam(&b, n+1, n, param)
	}
	where := b.Len()
	whereIdentity(&b, rel, len(setCols)+1)
	sql := b.String()
	return checkedSQL(rel, pgoutput.MsgUpdate, sql, rel.ident+sql[where:])
}

// deleteSQL returns the single-row DELETE.
func deleteSQL(rel *relation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "DELETE FROM %s", rel.ident)
	whereIdentity(&b, rel, 1)
	sql := b.String()
	return checkedSQL(rel, pgoutput.MsgDelete, sql, strings.TrimPrefix(sql, "DELETE FROM "))
}

// updateRowSetSQL returns the UPDATE of rows rows by key, each row's parameters
// laid out as in updateSQL: the set values, then the key values.
func updateRowSetSQL(rel *relation, setCols []int, rows int) string {
	if rows == 1 {
		return updateSQL(rel, setCols, nil)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "UPDATE %s AS pgsync_t SET ", rel.ident)
	for n, i := range setCols {
		if n > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = v.c%d", rel.cols[i], n)
	}
	b.WriteString(" FROM ")
	values := b.Len()
	b.WriteString("(VALUES ")
	cols := append(append([]int(nil), setCols...), rel.keys...)
	// The casts only type the VALUES columns: to the column's type with
	// nothing that could change the value (catalog.CastType), so that the
	// SET assignment checks the value against the column's modifier and
	// the key comparison sees the key as sent.
	writeParamRows(&b, rows, len(cols), true, func(p, n int) string { return fmt.Sprintf("$%d::%s", p, catalog.CastType(rel.types[cols[n]])) })
	b.WriteString(") AS v(")
	for n := range cols {
		if n > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "c%d", n)
	}
	b.WriteString(") WHERE ")
	for n, i := range rel.keys {
		if n > 0 {
			b.WriteString(" AND ")
		}
		fmt.Fprintf(&b, "pgsync_t.%s = v.c%d", rel.cols[i], len(setCols)+n)
	}
	sql := b.String()
	return checkedSQL(rel, pgoutput.MsgUpdate, sql, rel.ident+" AS pgsync_t, "+sql[values:])
}

// deleteRowSetSQL returns the DELETE of rows rows by key.
func deleteRowSetSQL(rel *relation, rows int) string {
	if rows == 1 {
		return deleteSQL(rel)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "DELETE FROM %s WHERE ", rel.ident)
	multi := len(rel.keys) > 1
	if multi {
		b.WriteString("(")
	}
	for n, i := range rel.keys {
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(rel.cols[i])
	}
	if multi {
		b.WriteString(")")
	}
	b.WriteString(" IN (")
	var cast func(p, n int) string
	if rel.composite != nil {
		cast = func(p, n int) string { return fmt.Sprintf("$%d%s", p, keyCast(rel, rel.keys[n])) }
	}
	writeParamRows(&b, rows, len(rel.keys), multi, cast)
	b.WriteString(")")
	sql := b.String()
	return checkedSQL(rel, pgoutput.MsgDelete, sql, strings.TrimPrefix(sql, "DELETE FROM "))
}

// writeParamRows writes rows comma-separated groups of width parameters,
// numbered from $1: "($1, $2), ($3, $4)", or "$1, $2" unparenthesised.
// param, when set, writes the n-th value of a row, parameter $p, in
// place of "$p": with a cast, or from a staged value (staged.go).
func writeParamRows(b *strings.Builder, rows, width int, paren bool, param func(p, n int) string) {
	p := 1
	for r := 0; r < rows; r++ {
		if r > 0 {
			b.WriteString(", ")
		}
		if paren {
			b.WriteString("(")
		}
		for n := 0; n < width; n++ {
			if n > 0 {
				b.WriteString(", ")
			}
			writeParam(b, p, n, param)
			p++
		}
		if paren {
			b.WriteString(")")
		}
	}
}

// truncateSQL returns the TRUNCATE of rels, with RESTART IDENTITY when the
// source used it. Each table is truncated ONLY (ONLY applies to one name
// of the list): a table that inherits from it on the target is the
// target's own. A table partitioned on the target is truncated with its
// partitions, as the native apply worker does (TRUNCATE ONLY of a
// partitioned table is an error, 42809).
func truncateSQL(rels []*relation, options byte) string {
	var b strings.Builder
	b.WriteString("TRUNCATE ")
	for i, rel := range rels {
		if i > 0 {
			b.WriteString(", ")
		}
		if !rel.partitioned {
			b.WriteString("ONLY ")
		}
		b.WriteString(rel.ident)
	}
	if options&pgoutput.TruncateRestartIdentity != 0 {
		b.WriteString(" RESTART IDENTITY")
	}
	// No CASCADE even when the source used it: the message lists every
	// published table the cascade reached, and a cascade on the target would
	// also empty target-only tables that reference these (as the native
	// apply worker, which truncates exactly the tables listed).
	return b.String()
}

// writeParam writes parameter $p, the n-th value of a row, or what param
// makes of it.
func writeParam(b *strings.Builder, p, n int, param func(p, n int) string) {
	if param != nil {
		b.WriteString(param(p, n))
		return
	}
	b.WriteByte('$')
	b.WriteString(strconv.Itoa(p))
}
