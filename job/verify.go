package job

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/largeobject"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/sequences"
	"github.com/pgsync/pgsync/verify"
)

// TableResult is one table's comparison by count and content hash.
type TableResult = verify.Result

// RowsResult is one table's comparison row by row (verify --rows).
type RowsResult = verify.RowsResult

// Sequence is one sequence of the job's tables on both sides.
type Sequence = sequences.Sequence

// ErrSequenceMissing: a sequence of the source has no counterpart on the
// target.
var ErrSequenceMissing = sequences.ErrMissing

// VerifyOptions say what verify compares.
type VerifyOptions struct {
	// Rows names the rows that differ, by key, instead of comparing each
	// table by one hash.
	Rows bool
	// Tables limits the comparison to these tables (schema.name).
	Tables []string
	// MaxRows stops naming a table's rows after this many (Rows).
	MaxRows int
}

// VerifyReport is what verify found.
type VerifyReport struct {
	// Tables are the tables compared by count and hash; Rows those
	// compared row by row.
	Tables []TableResult
	Rows   []RowsResult
	// Sequences are the job's sequences (not with Rows); those behind are
	// reported, not failed: logical replication does not carry them.
	Sequences []Sequence
	// LargeObjects compares the large objects (not with Rows).
	LargeObjects largeobject.Comparison
	// Found says in one line what differs; "" when nothing does.
	Found string
	// At is the source position both sides were read at, when a run was
	// streaming (an online verify); 0 when they were read as they are.
	At pglogrepl.LSN
}

// Verify compares the two sides as they are now, records the verdict as
// the job's last comparison, and returns what it found; the error wraps
// ErrTablesDiffer when something differs. It names a bad --table with
// ErrUnknownTable.
func (j *Job) Verify(ctx context.Context, o VerifyOptions) (*VerifyReport, error) {
	tables, err := j.Tables(ctx)
	if err != nil {
		return nil, err
	}
	if len(o.Tables) > 0 {
		if tables, err = selectTables(tables, o.Tables); err != nil {
			return nil, err
		}
	}
	rep := &VerifyReport{}
	kind := "verify"
	if o.Rows {
		kind = "verify --rows"
	}
	// While a run streams, both sides are read at one source position
	// (holdViews); otherwise as they are.
	src, tgt := j.src, j.tgt
	if slot, err := replication.Status(ctx, j.src, j.names); err != nil {
		return nil, err
	} else if slot.Active {
		views, err := j.holdViews(ctx)
		if err != nil {
			return nil, err
		}
		defer views.close(ctx)
		src, tgt, rep.At = views.src, views.tgt, views.at
	}
	stop := j.sayWhile(ctx, "comparing the tables", "when every table is compared (it changes nothing: Ctrl-C stops it)")
	defer stop()
	if rep.At != 0 {
		kind += " (online)"
	}
	if o.Rows {
		if rep.Rows, err = verify.CompareRows(ctx, src, tgt, tables, o.MaxRows); err != nil {
			return rep, err
		}
		rep.Found = rowsVerdict(rep.Rows)
	} else {
		if rep.Tables, err = verify.Compare(ctx, src, tgt, tables); err != nil {
			return rep, err
		}
		if rep.Sequences, err = sequences.List(ctx, j.src, j.tgt, tables); err != nil {
			return rep, err
		}
		// Large objects: logical decoding does not carry them, bootstrap
		// and cutover copy them; compared by a hash of each, and by
		// owner, grants and comment.
		if rep.LargeObjects, err = largeobject.Compare(ctx, src, tgt); err != nil {
			return rep, err
		}
		rep.Found = verdict(rep.Tables, &rep.LargeObjects)
	}
	if err := j.RecordVerification(ctx, Verification{Kind: kind, LSN: rep.At, Identical: rep.Found == "", Found: rep.Found}); err != nil {
		return rep, err
	}
	if rep.Found != "" {
		return rep, differError(rep.Found)
	}
	return rep, nil
}

// differError is verify's verdict when something differs: what differs,
// in one line, and ErrTablesDiffer for errors.Is.
type differError string

func (e differError) Error() string { return string(e) }
func (e differError) Unwrap() error { return ErrTablesDiffer }

// verdict says in one line what differs among tables and, when given, the
// large objects; "" when nothing does. verify and cutover both judge by it.
func verdict(tables []TableResult, los *largeobject.Comparison) string {
	var differ []string
	for _, r := range tables {
		if !r.Match() {
			differ = append(differ, r.Table)
		}
	}
	switch {
	case len(differ) > 0:
		return fmt.Sprintf("%d of %d tables differ: %s", len(differ), len(tables), strings.Join(differ, ", "))
	case los != nil && !los.Identical():
		d := los.Differ[0]
		return fmt.Sprintf("%d large object(s) differ (first: %d, %s)", len(los.Differ), d.OID, d.Kind)
	}
	return ""
}

// rowsVerdict is verdict's rule for a comparison row by row.
func rowsVerdict(results []RowsResult) string {
	var differ []string
	for _, r := range results {
		if len(r.Diffs) > 0 {
			differ = append(differ, r.Table)
		}
	}
	if len(differ) == 0 {
		return ""
	}
	return fmt.Sprintf("rows differ in %d of %d tables: %s", len(differ), len(results), strings.Join(differ, ", "))
}

// Print writes the report for an operator: the tables, the sequences
// behind, the large objects that differ, and a closing line when nothing
// differs; or, with asJSON, the rows that differ (Rows) as JSON.
func (r *VerifyReport) Print(w io.Writer, asJSON bool) {
	if r.Rows != nil || asJSON {
		if asJSON {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(r.Rows)
			return
		}
		verify.PrintRows(w, r.Rows)
		if r.At != 0 {
			fmt.Fprintf(w, "both sides read at source position %s, while run applied (online)\n", r.At)
		}
		if r.Found == "" {
			fmt.Fprintf(w, "all %d tables identical, row by row\n", len(r.Rows))
		}
		return
	}
	verify.Print(w, r.Tables)
	if r.At != 0 {
		fmt.Fprintf(w, "both sides read at source position %s, while run applied (online)\n", r.At)
	}
	behind := 0
	for _, s := range r.Sequences {
		switch {
		case s.Target == "":
			fmt.Fprintf(w, "sequence %s (%s.%s): missing on the target\n", s.Source, s.Table, s.Column)
		case s.Behind():
			behind++
			fmt.Fprintf(w, "sequence %s: target %d behind source %d\n", s.Target, s.TargetLast, s.SourceLast)
		}
	}
	if behind > 0 {
		fmt.Fprintf(w, "%d of %d sequences behind the source: pgsync sequences (or cutover) sets them\n", behind, len(r.Sequences))
	}
	los := r.LargeObjects
	if los.Source > 0 || los.Target > 0 {
		for i, d := range los.Differ {
			if i == 20 {
				fmt.Fprintf(w, "large object ...: %d more differ\n", len(los.Differ)-20)
				break
			}
			fmt.Fprintf(w, "large object %d: %s\n", d.OID, d.Kind)
		}
		fmt.Fprintf(w, "large objects: %d on the source, %d on the target, %d differ\n", los.Source, los.Target, len(los.Differ))
	}
	if r.Found == "" {
		fmt.Fprintf(w, "all %d tables identical\n", len(r.Tables))
	}
}

// PrintTables writes tables compared by count and hash as an aligned
// table.
func PrintTables(w io.Writer, tables []TableResult) { verify.Print(w, tables) }

// Sequences sets each sequence of the job's tables that is behind the
// source to the source's value (none with dryRun), and returns them all
// and those it set. A sequence missing on the target is named by an error
// wrapping ErrSequenceMissing, after the others are set.
func (j *Job) Sequences(ctx context.Context, dryRun bool) (all, set []Sequence, err error) {
	tables, err := j.Tables(ctx)
	if err != nil {
		return nil, nil, err
	}
	if all, err = sequences.List(ctx, j.src, j.tgt, tables); err != nil {
		return nil, nil, err
	}
	if dryRun {
		return all, nil, nil
	}
	set, err = sequences.Sync(ctx, j.tgt, all)
	return all, set, err
}
