// Package verify compares a job's tables on the source and the target by
// row count and a content hash computed identically on both sides.
package verify

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgsync/pgsync/catalog"
)

// Side is one table's figures on one server.
type Side struct {
	Rows int64
	Hash string
}

// Result compares one table.
type Result struct {
	Table  string
	Source Side
	Target Side
}

// Match reports whether both sides agree.
func (r Result) Match() bool { return r.Source == r.Target }

// hashSQL returns the query of a table's content hash. Every row is turned
// into its text form (ROW(...)::text, the same columns in the same order on
// both sides, under the same session settings) and hashed with md5; the
// 128-bit hashes are summed exactly as numerics. The sum does not depend on
// row order, so it needs neither a sort nor a key, streams in constant
// memory on the server, and still tells apart a missing, extra, changed or
// duplicated row. casts names, by column, the type a column is read as
// (the source's side of a widened column, catalog.ComparisonCast).
func hashSQL(t *catalog.Table, casts map[string]string, only bool) string {
	return fmt.Sprintf(`SELECT count(*),
  coalesce(sum(('x' || substr(h, 1, 16))::bit(64)::bigint::numeric), 0)::text || '/' ||
  coalesce(sum(('x' || substr(h, 17, 16))::bit(64)::bigint::numeric), 0)::text
FROM (SELECT md5(ROW(%s)::text) AS h FROM %s%s) rows`, t.CopiedColumnsCast(casts), map[bool]string{true: "ONLY ", false: ""}[only], t.Ident())
}

// hashBatch is how many tables' hashes are asked for in one round trip
// (a pgx batch, one pipeline): thousands of small tables then cost tens of
// round trips, not thousands, when the server is far.
const hashBatch = 200

// hashQuery is one table's hash to ask for: its columns read as casts
// says, ONLY the table itself when only.
type hashQuery struct {
	t     *catalog.Table
	casts map[string]string
	only  bool
}

// hashTables hashes each of qs on conn, in conn's session and transaction
// (a snapshot the caller holds, or none), all in one round trip. On an
// error it returns the sides of the tables before the one that failed.
func hashTables(ctx context.Context, conn *pgx.Conn, qs []hashQuery) ([]Side, error) {
	batch := &pgx.Batch{}
	for _, q := range qs {
		batch.Queue(hashSQL(q.t, q.casts, q.only))
	}
	br := conn.SendBatch(ctx, batch)
	sides := make([]Side, 0, len(qs))
	for _, q := range qs {
		var s Side
		var sums string
		if err := br.QueryRow().Scan(&s.Rows, &sums); err != nil {
			_ = br.Close()
			return sides, fmt.Errorf("hash %s: %w", q.t, err)
		}
		sum := md5.Sum([]byte(sums))
		s.Hash = hex.EncodeToString(sum[:])
		sides = append(sides, s)
	}
	if err := br.Close(); err != nil {
		return sides, fmt.Errorf("hash %d tables from %s: %w", len(qs), qs[0].t, err)
	}
	return sides, nil
}

// comparisonCasts returns, by column, the type to read each of t's source
// columns as so that its text form is the one the target's column holds:
// a target may hold a column in a wider type than the source's (issue 16),
// and some widenings change the text form (json to jsonb, timestamp to
// timestamptz, numeric(8,2) to numeric(12,4); catalog.ComparisonCast).
// have is the target's table, nil when it has none (its hash then fails
// and names it).
func comparisonCasts(t, have *catalog.Table) (casts map[string]string, partitioned bool) {
	if have == nil {
		return nil, false
	}
	partitioned = have.PartitionKey != ""
	types := make(map[string]catalog.ColumnType, len(have.Columns))
	for _, c := range have.Columns {
		types[c.Name] = c.ColumnType()
	}
	for _, c := range t.Columns {
		tc, ok := types[c.Name]
		if !ok || c.Generated != "" {
			continue
		}
		if cast := catalog.ComparisonCast(c.ColumnType(), tc); cast != "" {
			if casts == nil {
				casts = make(map[string]string)
			}
			casts[c.Name] = cast
		}
	}
	return casts, partitioned
}

// Compare hashes every table on both servers, the two sides concurrently,
// each in its session's current transaction: a caller that holds a
// snapshot on each side (REPEATABLE READ) compares the two at those
// snapshots. tables are the source definitions: their columns are read on
// both sides, on the source as the target's types hold them
// (comparisonCasts), under the target session's TimeZone (the text form
// of a timestamptz, and a timestamp read as one, depend on it).
func Compare(ctx context.Context, source, target *pgx.Conn, tables []catalog.Table) (results []Result, err error) {
	restore, err := alignTimeZone(ctx, source, target)
	if err != nil {
		return nil, err
	}
	defer keepFirst(&err, restore)
	// The target's definitions of every table in one query (issue 33).
	found, err := catalog.LookupAll(ctx, target, catalog.Names(tables))
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	targets := catalog.ByName(found)
	results = make([]Result, len(tables))
	for start := 0; start < len(tables); start += hashBatch {
		end := min(start+hashBatch, len(tables))
		var srcQs, tgtQs []hashQuery
		for i := start; i < end; i++ {
			t := &tables[i]
			results[i].Table = t.String()
			// A table the target partitions further holds its rows in its
			// partitions: read it whole there, ONLY on the source.
			casts, partitioned := comparisonCasts(t, targets[t.TableName()])
			srcQs = append(srcQs, hashQuery{t: t, casts: casts, only: true})
			tgtQs = append(tgtQs, hashQuery{t: t, only: !partitioned})
		}
		var srcSides, tgtSides []Side
		err := both(ctx, func(ctx context.Context) (err error) {
			if srcSides, err = hashTables(ctx, source, srcQs); err != nil {
				err = fmt.Errorf("source: %w", err)
			}
			return err
		}, func(ctx context.Context) (err error) {
			if tgtSides, err = hashTables(ctx, target, tgtQs); err != nil {
				err = fmt.Errorf("target: %w", err)
			}
			return err
		})
		for i := range srcSides {
			results[start+i].Source = srcSides[i]
		}
		for i := range tgtSides {
			results[start+i].Target = tgtSides[i]
		}
		if err != nil {
			return results[:start+min(len(srcSides), len(tgtSides))], err
		}
	}
	return results, nil
}

// alignTimeZone gives the source session the target session's TimeZone,
// under which the text form of a timestamptz (and of a timestamp read as
// one) is compared; restore gives it back its own.
func alignTimeZone(ctx context.Context, source, target *pgx.Conn) (restore func() error, err error) {
	var sourceZone, targetZone string
	if err := source.QueryRow(ctx, "SELECT current_setting('TimeZone')").Scan(&sourceZone); err != nil {
		return nil, fmt.Errorf("source: read TimeZone: %w", err)
	}
	if err := target.QueryRow(ctx, "SELECT current_setting('TimeZone')").Scan(&targetZone); err != nil {
		return nil, fmt.Errorf("target: read TimeZone: %w", err)
	}
	if sourceZone == targetZone {
		return func() error { return nil }, nil
	}
	if _, err := source.Exec(ctx, "SELECT set_config('TimeZone', $1, false)", targetZone); err != nil {
		return nil, fmt.Errorf("source: set TimeZone: %w", err)
	}
	return func() error {
		if _, err := source.Exec(context.WithoutCancel(ctx), "SELECT set_config('TimeZone', $1, false)", sourceZone); err != nil {
			return fmt.Errorf("source: reset TimeZone: %w", err)
		}
		return nil
	}, nil
}

// both runs the source's and the target's side of a comparison at once;
// the first error cancels the other.
func both(ctx context.Context, source, target func(context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return source(gctx) })
	g.Go(func() error { return target(gctx) })
	return g.Wait()
}

// Print writes the results as an aligned table.
func Print(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tSOURCE ROWS\tTARGET ROWS\tSOURCE HASH\tTARGET HASH\tSTATUS")
	for _, r := range results {
		status := "ok"
		if !r.Match() {
			status = "DIFFERS"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", r.Table, r.Source.Rows, r.Target.Rows, r.Source.Hash, r.Target.Hash, status)
	}
	tw.Flush()
}

// keepFirst runs undo and keeps its error in *err unless *err already
// holds one: the deferred end of a session setting.
func keepFirst(err *error, undo func() error) {
	if uerr := undo(); uerr != nil && *err == nil {
		*err = uerr
	}
}
