// Package sequences carries sequence values from the source to the target.
// Logical replication does not replicate sequences: the rows arrive with
// their ids, but the target's sequences stay where bootstrap left them, and
// the first INSERT on the target after a move would collide. The sequences
// of a job are those its tables use: owned ones (serial), identity columns'
// and those named in a column default.
package sequences

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
)

// Sequence is one sequence of a job's tables, with its value on each side.
type Sequence struct {
	Source string `json:"source"` // qualified name on the source
	Target string `json:"target"` // qualified name on the target; "" when missing
	Table  string `json:"table"`
	Column string `json:"column"`
	// Increment is the source sequence's; its sign says which way is ahead.
	Increment    int64 `json:"increment"`
	SourceLast   int64 `json:"source_last_value"`
	SourceCalled bool  `json:"source_is_called"`
	TargetLast   int64 `json:"target_last_value"`
	TargetCalled bool  `json:"target_is_called"`
}

// position is the last value handed out, or what stands for it before the
// first nextval (one increment before the start).
func position(last int64, called bool, inc int64) int64 {
	if called {
		return last
	}
	return last - inc
}

// Behind reports whether the target sequence would hand out a value the
// source has already handed out.
func (s Sequence) Behind() bool {
	if s.Target == "" {
		return false
	}
	src := position(s.SourceLast, s.SourceCalled, s.Increment)
	tgt := position(s.TargetLast, s.TargetCalled, s.Increment)
	if s.Increment < 0 {
		return tgt > src
	}
	return tgt < src
}

// List returns the sequences of tables (read on the source) with their
// values on both sides. A target sequence is found through the target
// table's column (pg_get_serial_sequence) and, failing that, by name.
func List(ctx context.Context, src, tgt *pgx.Conn, tables []catalog.Table) ([]Sequence, error) {
	idents := catalog.Idents(tables)
	rows, err := src.Query(ctx, `WITH t AS (SELECT unnest($1::text[])::regclass::oid AS rel),
used AS (
  -- owned by a column (serial) or an identity column's
  SELECT d.objid AS seq, d.refobjid AS rel, d.refobjsubid AS attnum
  FROM pg_depend d
  WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
    AND d.deptype IN ('a', 'i') AND d.refobjsubid > 0 AND d.refobjid IN (SELECT rel FROM t)
  UNION
  -- named in a column default: nextval('s')
  SELECT d.refobjid, ad.adrelid, ad.adnum
  FROM pg_attrdef ad
  JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid AND d.refclassid = 'pg_class'::regclass
  WHERE ad.adrelid IN (SELECT rel FROM t))
SELECT DISTINCT ON (u.seq) u.seq::regclass::text, u.rel::regclass::text, a.attname, s.seqincrement
FROM used u
JOIN pg_sequence s ON s.seqrelid = u.seq
JOIN pg_attribute a ON a.attrelid = u.rel AND a.attnum = u.attnum
ORDER BY u.seq, u.rel, u.attnum`, idents)
	if err != nil {
		return nil, fmt.Errorf("list the sequences of the job's tables on the source: %w", err)
	}
	seqs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Sequence, error) {
		var s Sequence
		err := r.Scan(&s.Source, &s.Table, &s.Column, &s.Increment)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("list the sequences of the job's tables on the source: %w", err)
	}
	all := make([]*Sequence, len(seqs))
	for i := range seqs {
		all[i] = &seqs[i]
	}
	if err := readValues(ctx, src, all, sourceSide); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if err := findTargets(ctx, tgt, seqs); err != nil {
		return nil, err
	}
	var onTarget []*Sequence
	for _, s := range all {
		if s.Target != "" {
			onTarget = append(onTarget, s)
		}
	}
	if err := readValues(ctx, tgt, onTarget, targetSide); err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	return seqs, nil
}

// sourceSide and targetSide name a Sequence's sequence on one side and
// the fields its value goes to (readValues).
func sourceSide(s *Sequence) (string, *int64, *bool) { return s.Source, &s.SourceLast, &s.SourceCalled }
func targetSide(s *Sequence) (string, *int64, *bool) { return s.Target, &s.TargetLast, &s.TargetCalled }

// findTargets sets the Target of each sequence the target has, in one
// query for all of them (issue 33).
func findTargets(ctx context.Context, tgt *pgx.Conn, seqs []Sequence) error {
	if len(seqs) == 0 {
		return nil
	}
	tables, columns, sources := make([]string, len(seqs)), make([]string, len(seqs)), make([]string, len(seqs))
	for i, s := range seqs {
		tables[i], columns[i], sources[i] = s.Table, s.Column, s.Source
	}
	rows, err := tgt.Query(ctx, `SELECT coalesce(
  pg_get_serial_sequence(CASE WHEN to_regclass(w.tbl) IS NOT NULL THEN w.tbl END, w.col),
  to_regclass(w.seq)::text)
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS w(tbl, col, seq, ord)
ORDER BY w.ord`, tables, columns, sources)
	if err != nil {
		return fmt.Errorf("find the target sequences of %s.%s (and %d more): %w", seqs[0].Table, seqs[0].Column, len(seqs)-1, err)
	}
	targets, err := pgx.CollectRows(rows, pgx.RowTo[*string])
	if err != nil {
		return fmt.Errorf("find the target sequences of %s.%s (and %d more): %w", seqs[0].Table, seqs[0].Column, len(seqs)-1, err)
	}
	for i, target := range targets {
		if target != nil && i < len(seqs) {
			seqs[i].Target = *target
		}
	}
	return nil
}

// valuesChunk is how many sequences one statement of readValues reads:
// each holds its lock on every sequence it reads until it ends, and the
// server's lock table is sized for 64 per connection by default
// (max_locks_per_transaction).
const valuesChunk = 500

// readValues reads the last value and is_called of each of seqs on the
// side that side names, into the fields it points to: valuesChunk
// sequences per statement, not one each (issue 33).
func readValues(ctx context.Context, conn *pgx.Conn, seqs []*Sequence, side func(*Sequence) (name string, last *int64, called *bool)) error {
	for start := 0; start < len(seqs); start += valuesChunk {
		chunk := seqs[start:min(start+valuesChunk, len(seqs))]
		parts := make([]string, len(chunk))
		for i, s := range chunk {
			name, _, _ := side(s)
			parts[i] = fmt.Sprintf("SELECT %d, last_value, is_called FROM %s", i, name)
		}
		first, _, _ := side(chunk[0])
		if err := readChunk(ctx, conn, strings.Join(parts, " UNION ALL "), chunk, side); err != nil {
			return fmt.Errorf("read sequence %s (and %d more): %w", first, len(chunk)-1, err)
		}
	}
	return nil
}

// readChunk runs one statement of readValues.
func readChunk(ctx context.Context, conn *pgx.Conn, sql string, chunk []*Sequence, side func(*Sequence) (string, *int64, *bool)) error {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var i int32
		var last int64
		var called bool
		if err := rows.Scan(&i, &last, &called); err != nil {
			return err
		}
		if i < 0 || int(i) >= len(chunk) {
			return fmt.Errorf("row %d of %d sequences", i, len(chunk))
		}
		_, lastp, calledp := side(chunk[i])
		*lastp, *calledp = last, called
	}
	return rows.Err()
}

// ErrMissing is returned by Sync when a source sequence has no target one.
var ErrMissing = errors.New("missing on the target")

// Sync moves every target sequence that is behind to its source's value,
// never backwards, and returns the ones it moved. A sequence the target
// lacks is reported after the others are set.
func Sync(ctx context.Context, tgt *pgx.Conn, seqs []Sequence) (moved []Sequence, err error) {
	var missing []string
	for _, s := range seqs {
		if s.Target == "" {
			missing = append(missing, fmt.Sprintf("%s (%s.%s)", s.Source, s.Table, s.Column))
			continue
		}
		if !s.Behind() {
			continue
		}
		if _, err := tgt.Exec(ctx, "SELECT setval($1::regclass, $2, $3)", s.Target, s.SourceLast, s.SourceCalled); err != nil {
			return moved, fmt.Errorf("set sequence %s on the target to %d: %w", s.Target, s.SourceLast, err)
		}
		moved = append(moved, s)
	}
	if len(missing) > 0 {
		return moved, fmt.Errorf("%d sequences %w: %v", len(missing), ErrMissing, missing)
	}
	return moved, nil
}
