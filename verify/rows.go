package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/catalog"
)

// Kinds of RowDiff.
const (
	OnlyOnSource = "only on the source"
	OnlyOnTarget = "only on the target"
	ValuesDiffer = "values differ"
)

// RowDiff is one row that differs between the two sides.
type RowDiff struct {
	Table string `json:"table"`
	// Key is the row's primary key in its text form ("(42)"); for a table
	// without a primary key, the whole row's.
	Key  string `json:"key"`
	Kind string `json:"kind"`
	// Columns are the columns whose values differ (ValuesDiffer).
	Columns []string `json:"columns,omitempty"`
	// Copies is, for a table without a key, how many more copies of the
	// row the side named by Kind holds.
	Copies int64 `json:"copies,omitempty"`
}

// RowsResult is what CompareRows found in one table.
type RowsResult struct {
	Table string    `json:"table"`
	Rows  int64     `json:"source_rows"`
	Diffs []RowDiff `json:"diffs"`
	// Truncated: the search stopped at the limit of differences.
	Truncated bool `json:"truncated,omitempty"`
}

// buckets is how many groups of rows, by a hash of their key, are hashed
// on each side; only the rows of groups whose hashes differ are read.
const buckets = 4096

// bucketsPerRead bounds the groups whose rows are read at once, and so
// the memory the rows of differing groups take.
const bucketsPerRead = 16

// CompareRows finds the rows of each table that differ between source and
// target, each side read in its session's current transaction. Rows are
// grouped by a hash of their primary key (of the whole row for a table
// without one) into buckets; each side sums a hash of every row of each
// group in one pass, and only the rows of the groups whose sums differ are
// read, bucketsPerRead groups at a time, and compared by key and by a
// hash of each column. maxDiffs bounds the differences reported for a
// table (0: 1000).
func CompareRows(ctx context.Context, source, target *pgx.Conn, tables []catalog.Table, maxDiffs int) (results []RowsResult, err error) {
	if maxDiffs <= 0 {
		maxDiffs = 1000
	}
	restore, err := alignTimeZone(ctx, source, target)
	if err != nil {
		return nil, err
	}
	defer keepFirst(&err, restore)
	for _, side := range []struct {
		name string
		conn *pgx.Conn
	}{{"source", source}, {"target", target}} {
		undo, perr := planForGroups(ctx, side.conn)
		if perr != nil {
			return nil, fmt.Errorf("%s: %w", side.name, perr)
		}
		defer func() {
			if rerr := undo(); rerr != nil && err == nil {
				err = fmt.Errorf("%s: %w", side.name, rerr)
			}
		}()
	}
	// The target's definitions of every table in one query (issue 33).
	found, err := catalog.LookupAll(ctx, target, catalog.Names(tables))
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	targets := catalog.ByName(found)
	for i := range tables {
		r, err := compareTableRows(ctx, source, target, &tables[i], targets[tables[i].TableName()], maxDiffs)
		if err != nil {
			return results, err
		}
		results = append(results, r)
	}
	return results, nil
}

// planSettings make the groups' query a hash aggregate in one process: the
// planner, which cannot tell that a hash masked to 12 bits has 4096
// values, sorted every row (spilling to disk) in parallel workers, and on
// two cores the two sides' six processes took 9.5 s where one hash
// aggregate each takes 2.6 s (10M rows); JIT compiled for longer than it
// saved.
var planSettings = [][2]string{{"enable_sort", "off"}, {"max_parallel_workers_per_gather", "0"}, {"jit", "off"}}

// planForGroups sets planSettings on conn's session and returns what
// gives the session back its own.
func planForGroups(ctx context.Context, conn *pgx.Conn) (undo func() error, err error) {
	was := make([]string, len(planSettings))
	for i, s := range planSettings {
		if err := conn.QueryRow(ctx, "SELECT current_setting($1), set_config($1, $2, false)", s[0], s[1]).Scan(&was[i], nil); err != nil {
			return nil, fmt.Errorf("set %s: %w", s[0], err)
		}
	}
	return func() error {
		for i, s := range planSettings {
			if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT set_config($1, $2, false)", s[0], was[i]); err != nil {
				return fmt.Errorf("reset %s: %w", s[0], err)
			}
		}
		return nil
	}, nil
}

// rowQuery is one side's view of a table for CompareRows: each row's key
// text (k), the hash of its values (h) and the hash of each column (c).
type rowQuery struct {
	from    string // FROM clause: [ONLY] schema.table
	key     string // the key's text form
	row     string // the row's text form
	columns []string
	colExpr []string // each column, cast as the comparison reads it
	colText []string // each column's text form
	// singleKey: the key is one column, whose text is shown in
	// parentheses.
	singleKey bool
}

func newRowQuery(t *catalog.Table, casts map[string]string, only bool) rowQuery {
	q := rowQuery{from: t.Ident()}
	if only {
		q.from = "ONLY " + q.from
	}
	isKey := make(map[string]bool, len(t.PrimaryKey))
	for _, k := range t.PrimaryKey {
		isKey[k] = true
	}
	var all, keys []string
	for _, c := range t.Columns {
		if c.Generated != "" {
			continue
		}
		expr := catalog.QuoteIdent(c.Name)
		if cast := casts[c.Name]; cast != "" {
			expr += "::" + cast
		}
		all = append(all, expr)
		q.colExpr = append(q.colExpr, expr)
		q.columns = append(q.columns, c.Name)
		q.colText = append(q.colText, expr+"::text")
		if isKey[c.Name] {
			keys = append(keys, expr)
		}
	}
	q.row = "ROW(" + strings.Join(all, ", ") + ")::text"
	q.key = q.row
	switch {
	case len(keys) == 1:
		// One column's text is cheaper than a record's; it is shown
		// in parentheses as a record would be (singleKey).
		q.key, q.singleKey = keys[0]+"::text", true
	case len(keys) > 1:
		q.key = "ROW(" + strings.Join(keys, ", ") + ")::text"
	}
	return q
}

// bucketSQL sums, by group, the count and a 64-bit hash of the rows
// (hashtextextended, several times cheaper than md5 and its hex
// arithmetic). The sums are exact numerics, so the order of the rows does
// not matter; a group whose rows differ and whose sums agree has a chance
// of 2^-64.
func (q rowQuery) bucketSQL() string {
	// OFFSET 0 keeps each row's text computed once: pulled up, the
	// subquery's expression would be computed for each of its uses.
	inner := fmt.Sprintf("SELECT %s AS k, %s AS t FROM %s OFFSET 0", q.key, q.row, q.from)
	if q.key == q.row { // no key: the row is its own
		inner = fmt.Sprintf("SELECT t AS k, t FROM (SELECT %s AS t FROM %s OFFSET 0) x1", q.row, q.from)
	}
	return fmt.Sprintf(`SELECT b, count(*), sum(h)::text
FROM (SELECT hashtext(k) & %d AS b, hashtextextended(t, 1) AS h FROM (%s) x0 OFFSET 0) r
GROUP BY b`, buckets-1, inner)
}

// bucketRecordSQL is bucketSQL with each row hashed by its columns' hash
// functions: several times cheaper than its text form, and the same on
// both sides only when their column types are the same.
func (q rowQuery) bucketRecordSQL() string {
	return fmt.Sprintf(`SELECT b, count(*), sum(h)::text
FROM (SELECT hashtext(%s) & %d AS b, hash_record_extended(ROW(%s), 1) AS h FROM %s) r
GROUP BY b`, q.key, buckets-1, strings.Join(q.colExpr, ", "), q.from)
}

// readBothBuckets reads the groups' sums of both sides at once.
func readBothBuckets(ctx context.Context, source, target *pgx.Conn, src, tgt rowQuery, byRecord bool, t *catalog.Table) (srcBuckets, tgtBuckets map[int32]bucketSum, err error) {
	sql := func(q rowQuery) string {
		if byRecord {
			return q.bucketRecordSQL()
		}
		return q.bucketSQL()
	}
	err = both(ctx, func(ctx context.Context) (err error) {
		srcBuckets, err = readBuckets(ctx, source, sql(src))
		if err != nil {
			err = fmt.Errorf("source: hash %s by groups: %w", t, err)
		}
		return err
	}, func(ctx context.Context) (err error) {
		tgtBuckets, err = readBuckets(ctx, target, sql(tgt))
		if err != nil {
			err = fmt.Errorf("target: hash %s by groups: %w", t, err)
		}
		return err
	})
	return srcBuckets, tgtBuckets, err
}

// sameColumnTypes says whether have, the target's table, has each
// compared (not generated) column of t, the source's, in the same type
// (format_type) and no other: both definitions are read already, so this
// asks neither server. A missing target table has none.
func sameColumnTypes(t, have *catalog.Table) bool {
	if have == nil {
		return false
	}
	types := func(cols []catalog.Column) map[string]string {
		m := make(map[string]string, len(cols))
		for _, c := range cols {
			if c.Generated == "" {
				m[c.Name] = c.Type
			}
		}
		return m
	}
	return maps.Equal(types(t.Columns), types(have.Columns))
}

// rowsSQL reads the rows of the groups $1: key, row hash, column hashes.
func (q rowQuery) rowsSQL() string {
	cols := make([]string, len(q.colText))
	for i, c := range q.colText {
		cols[i] = "md5(" + c + ")"
	}
	colArray := "ARRAY[]::text[]"
	if len(cols) > 0 {
		colArray = "ARRAY[" + strings.Join(cols, ", ") + "]"
	}
	return fmt.Sprintf(`SELECT %s, md5(%s), %s FROM %s WHERE hashtext(%s) & %d = ANY ($1)`, q.key, q.row, colArray, q.from, q.key, buckets-1)
}

type bucketSum struct {
	rows int64
	sum  string
}

func readBuckets(ctx context.Context, conn *pgx.Conn, sql string) (map[int32]bucketSum, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]bucketSum, buckets)
	for rows.Next() {
		var b int32
		var s bucketSum
		if err := rows.Scan(&b, &s.rows, &s.sum); err != nil {
			rows.Close()
			return nil, err
		}
		out[b] = s
	}
	rows.Close()
	return out, rows.Err()
}

// sideRow is one row as CompareRows reads it from a differing group.
type sideRow struct {
	hash   string
	cols   []string
	copies int64
}

func readRows(ctx context.Context, conn *pgx.Conn, sql string, groups []int32) (map[string]*sideRow, error) {
	rows, err := conn.Query(ctx, sql, groups)
	if err != nil {
		return nil, err
	}
	out := map[string]*sideRow{}
	for rows.Next() {
		var key, hash string
		var cols []string
		if err := rows.Scan(&key, &hash, &cols); err != nil {
			rows.Close()
			return nil, err
		}
		if r := out[key]; r != nil {
			r.copies++ // a table without a key: the same row again
			continue
		}
		out[key] = &sideRow{hash: hash, cols: cols, copies: 1}
	}
	rows.Close()
	return out, rows.Err()
}

// compareTableRows compares the rows of t (the source's definition) with
// those of have (the target's, nil when it has none).
func compareTableRows(ctx context.Context, source, target *pgx.Conn, t, have *catalog.Table, maxDiffs int) (RowsResult, error) {
	res := RowsResult{Table: t.String(), Diffs: []RowDiff{}}
	casts, partitioned := comparisonCasts(t, have)
	src, tgt := newRowQuery(t, casts, true), newRowQuery(t, nil, !partitioned)
	// Rows are hashed by their columns' own hash functions
	// (hash_record_extended), without their text form, when both sides
	// hold the same types; else, or when a type has no hash function, by
	// their text form.
	byRecord := sameColumnTypes(t, have) && len(t.PrimaryKey) > 0
	srcBuckets, tgtBuckets, err := readBothBuckets(ctx, source, target, src, tgt, byRecord, t)
	var pgErr *pgconn.PgError
	if byRecord && errors.As(err, &pgErr) && pgErr.Code == "42883" { // undefined_function: a type without a hash function
		srcBuckets, tgtBuckets, err = readBothBuckets(ctx, source, target, src, tgt, false, t)
	}
	if err != nil {
		return res, err
	}
	var differ []int32
	for b := int32(0); b < buckets; b++ {
		s, g := srcBuckets[b], tgtBuckets[b]
		res.Rows += s.rows
		if s != g {
			differ = append(differ, b)
		}
	}
	keyed := len(t.PrimaryKey) > 0
	for start := 0; start < len(differ); start += bucketsPerRead {
		groups := differ[start:min(start+bucketsPerRead, len(differ))]
		var srcRows, tgtRows map[string]*sideRow
		if err := both(ctx, func(ctx context.Context) (err error) {
			srcRows, err = readRows(ctx, source, src.rowsSQL(), groups)
			if err != nil {
				err = fmt.Errorf("source: read rows of %s: %w", t, err)
			}
			return err
		}, func(ctx context.Context) (err error) {
			tgtRows, err = readRows(ctx, target, tgt.rowsSQL(), groups)
			if err != nil {
				err = fmt.Errorf("target: read rows of %s: %w", t, err)
			}
			return err
		}); err != nil {
			return res, err
		}
		found := diffRows(t.String(), src.columns, srcRows, tgtRows, keyed)
		if src.singleKey {
			for i := range found {
				found[i].Key = "(" + found[i].Key + ")"
			}
		}
		res.Diffs = append(res.Diffs, found...)
		if len(res.Diffs) >= maxDiffs {
			res.Diffs, res.Truncated = res.Diffs[:maxDiffs], true
			break
		}
	}
	slices.SortFunc(res.Diffs, func(a, b RowDiff) int { return strings.Compare(a.Key, b.Key) })
	return res, nil
}

// diffRows compares the rows of the same groups read on both sides.
func diffRows(table string, columns []string, src, tgt map[string]*sideRow, keyed bool) []RowDiff {
	var out []RowDiff
	for key, s := range src {
		g := tgt[key]
		switch {
		case g == nil:
			out = append(out, RowDiff{Table: table, Key: key, Kind: OnlyOnSource, Copies: copiesIf(!keyed, s.copies)})
		case !keyed && s.copies != g.copies:
			kind, n := OnlyOnSource, s.copies-g.copies
			if n < 0 {
				kind, n = OnlyOnTarget, -n
			}
			out = append(out, RowDiff{Table: table, Key: key, Kind: kind, Copies: n})
		case s.hash != g.hash:
			d := RowDiff{Table: table, Key: key, Kind: ValuesDiffer}
			for i := range s.cols {
				if i < len(g.cols) && s.cols[i] != g.cols[i] {
					d.Columns = append(d.Columns, columns[i])
				}
			}
			out = append(out, d)
		}
	}
	for key, g := range tgt {
		if src[key] == nil {
			out = append(out, RowDiff{Table: table, Key: key, Kind: OnlyOnTarget, Copies: copiesIf(!keyed, g.copies)})
		}
	}
	return out
}

func copiesIf(keyless bool, n int64) int64 {
	if keyless {
		return n
	}
	return 0
}

// PrintRows writes each differing row on a line, then a line per table.
func PrintRows(w io.Writer, results []RowsResult) {
	for _, r := range results {
		for _, d := range r.Diffs {
			line := fmt.Sprintf("%s %s: %s", d.Table, d.Key, d.Kind)
			if len(d.Columns) > 0 {
				line += " (" + strings.Join(d.Columns, ", ") + ")"
			}
			if d.Copies > 1 {
				line += fmt.Sprintf(" (%d copies)", d.Copies)
			}
			fmt.Fprintln(w, line)
		}
		switch {
		case r.Truncated:
			fmt.Fprintf(w, "%s: %d rows differ or more (the search stopped there)\n", r.Table, len(r.Diffs))
		case len(r.Diffs) > 0:
			fmt.Fprintf(w, "%s: %d rows differ\n", r.Table, len(r.Diffs))
		default:
			fmt.Fprintf(w, "%s: %d rows, identical\n", r.Table, r.Rows)
		}
	}
}
