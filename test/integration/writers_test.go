//go:build integration

package integration

import (
	"context"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// writer is a goroutine committing transactions on the source.
type writer struct {
	done    chan struct{}
	commits int
	err     error
}

func (w *writer) wait(t testing.TB) int {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatal("writer did not stop")
	}
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	return w.commits
}

// startTransfers moves money between rows of acct (keeping the sum) and
// logs each move in ledger, until ctx ends.
func startTransfers(ctx context.Context, t testing.TB, url string) *writer {
	return startWriter(ctx, t, url, func(ctx context.Context, tx pgx.Tx, rnd *rand.Rand) error {
		from, to, amt := rnd.Intn(50000)+1, rnd.Intn(50000)+1, rnd.Intn(10)+1
		if _, err := tx.Exec(ctx, "UPDATE acct SET balance = balance - $2 WHERE id = $1", from, amt); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE acct SET balance = balance + $2 WHERE id = $1", to, amt); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO ledger (acct, delta) VALUES ($1, $2), ($3, $4)", from, -amt, to, amt)
		return err
	})
}

// startWriter runs txn in a loop, one transaction each, until ctx ends.
// Connection losses (a restarted source) are retried.
func startWriter(ctx context.Context, t testing.TB, url string, txn func(context.Context, pgx.Tx, *rand.Rand) error) *writer {
	w := &writer{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				conn.Close(context.Background())
			}
		}()
		for ctx.Err() == nil {
			if conn == nil || conn.IsClosed() {
				c, err := pgx.Connect(ctx, url)
				if err != nil {
					time.Sleep(200 * time.Millisecond)
					continue
				}
				conn = c
			}
			err := pgx.BeginFunc(context.Background(), conn, func(tx pgx.Tx) error { return txn(context.Background(), tx, rnd) })
			if err != nil {
				if conn.IsClosed() || pgconnLost(err) {
					conn.Close(context.Background())
					conn = nil
					time.Sleep(200 * time.Millisecond)
					continue
				}
				w.err = err
				return
			}
			w.commits++
		}
	}()
	return w
}

// pgconnLost reports whether err is a lost connection or a server shutting
// down, which a writer rides out during a source restart.
func pgconnLost(err error) bool {
	s := err.Error()
	for _, frag := range []string{"57P01", "57P03", "terminating connection", "conn closed", "EOF", "connection refused", "broken pipe", "reset by peer", "shutting down", "starting up"} {
		if strings.Contains(s, frag) {
			return true
		}
	}
	return false
}
