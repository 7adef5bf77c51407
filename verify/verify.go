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
// duplicated row.
func hashSQL(t *catalog.Table) string {
	return fmt.Sprintf(`SELECT count(*),
  coalesce(sum(('x' || substr(h, 1, 16))::bit(64)::bigint::numeric), 0)::text || '/' ||
  coalesce(sum(('x' || substr(h, 17, 16))::bit(64)::bigint::numeric), 0)::text
FROM (SELECT md5(ROW(%s)::text) AS h FROM ONLY %s) rows`, t.CopiedColumns(), t.Ident())
}

func hashTable(ctx context.Context, conn *pgx.Conn, t *catalog.Table) (Side, error) {
	var s Side
	var sums string
	if err := conn.QueryRow(ctx, hashSQL(t)).Scan(&s.Rows, &sums); err != nil {
		return s, fmt.Errorf("hash %s: %w", t, err)
	}
	sum := md5.Sum([]byte(sums))
	s.Hash = hex.EncodeToString(sum[:])
	return s, nil
}

// Compare hashes every table on both servers, the two sides concurrently.
// tables are the source definitions: their columns are read on both sides.
func Compare(ctx context.Context, source, target *pgx.Conn, tables []catalog.Table) ([]Result, error) {
	results := make([]Result, len(tables))
	for i := range tables {
		t := &tables[i]
		results[i].Table = t.String()
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() (err error) {
			results[i].Source, err = hashTable(gctx, source, t)
			if err != nil {
				err = fmt.Errorf("source: %w", err)
			}
			return err
		})
		g.Go(func() (err error) {
			results[i].Target, err = hashTable(gctx, target, t)
			if err != nil {
				err = fmt.Errorf("target: %w", err)
			}
			return err
		})
		if err := g.Wait(); err != nil {
			return results[:i], err
		}
	}
	return results, nil
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
