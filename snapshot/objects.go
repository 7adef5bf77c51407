package snapshot

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/pgconnect"
)

// Built is the outcome of creating one secondary object on the target.
type Built struct {
	Object  catalog.Object
	Elapsed time.Duration
	Err     error
}

// BuildObjects creates the secondary objects of the tables bootstrap
// created, once their rows are copied: building an index over loaded rows
// is faster than maintaining it row by row during COPY. Indexes and UNIQUE,
// CHECK and EXCLUDE constraints are built up to maxParallel at a time, then
// the foreign keys, which need the referenced keys. A failure is reported
// in its Built and the others go on; an error is returned only when the
// target cannot be reached or ctx ends.
func BuildObjects(ctx context.Context, targetURL string, maxParallel int, objs []catalog.Object) ([]Built, error) {
	var first, fks []int
	for i := range objs {
		if objs[i].Kind == "foreign key" {
			fks = append(fks, i)
		} else {
			first = append(first, i)
		}
	}
	out := make([]Built, len(objs))
	for _, phase := range [][]int{first, fks} {
		if err := buildPhase(ctx, targetURL, max(maxParallel, 1), objs, phase, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

func buildPhase(ctx context.Context, targetURL string, workers int, objs []catalog.Object, idx []int, out []Built) error {
	if len(idx) == 0 {
		return nil
	}
	work := make(chan int)
	g, gctx := errgroup.WithContext(ctx)
	for w := 0; w < min(workers, len(idx)); w++ {
		g.Go(func() error {
			conn, err := pgconnect.Connect(gctx, "target", targetURL)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(gctx))
			for i := range work {
				began := time.Now()
				_, err := conn.Exec(gctx, objs[i].SQL)
				if err != nil {
					err = fmt.Errorf("create %s: %w", &objs[i], err)
				} else if objs[i].Validate != "" {
					if _, verr := conn.Exec(gctx, objs[i].Validate); verr != nil {
						err = fmt.Errorf("validate %s (it stays NOT VALID on the target): %w", &objs[i], verr)
					}
				}
				out[i] = Built{Object: objs[i], Elapsed: time.Since(began), Err: err}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(work)
		for _, i := range idx {
			select {
			case work <- i:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	return g.Wait()
}
