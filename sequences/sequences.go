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
	for i := range seqs {
		s := &seqs[i]
		if err := readValue(ctx, src, s.Source, &s.SourceLast, &s.SourceCalled); err != nil {
			return nil, fmt.Errorf("read sequence %s on the source: %w", s.Source, err)
		}
		var target *string
		if err := tgt.QueryRow(ctx, `SELECT coalesce(
  pg_get_serial_sequence(CASE WHEN to_regclass($1) IS NOT NULL THEN $1 END, $2),
  to_regclass($3)::text)`, s.Table, s.Column, s.Source).Scan(&target); err != nil {
			return nil, fmt.Errorf("find the target sequence of %s.%s: %w", s.Table, s.Column, err)
		}
		if target == nil {
			continue
		}
		s.Target = *target
		if err := readValue(ctx, tgt, s.Target, &s.TargetLast, &s.TargetCalled); err != nil {
			return nil, fmt.Errorf("read sequence %s on the target: %w", s.Target, err)
		}
	}
	return seqs, nil
}

func readValue(ctx context.Context, conn *pgx.Conn, seq string, last *int64, called *bool) error {
	return conn.QueryRow(ctx, "SELECT last_value, is_called FROM "+seq).Scan(last, called)
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
