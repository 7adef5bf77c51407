//go:build versions

package versions

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ackWriter is the application: one transaction at a time, each inserting
// a row of a new id into acks and adding one to counter, through the
// url that names both servers. It records each commit the server
// acknowledged, and each whose COMMIT got no answer (unknown: it may or
// may not have committed). Across the failover it reconnects every 50 ms
// for up to a minute.
type ackWriter struct {
	url  string
	stop chan struct{}
	done chan struct{}

	// cutting: cutover has begun, and the first error (the role locked
	// read-only) ends the writes quietly.
	cutting atomic.Bool

	mu       sync.Mutex
	acked    map[int64]time.Time
	unknown  []int64
	killedAt time.Time
	last     time.Time
	err      error
}

func startAckWriter(t *testing.T, url string) *ackWriter {
	t.Helper()
	url = strings.Replace(url, "postgres://postgres@", "postgres://"+writerRole+"@", 1)
	w := &ackWriter{url: url, stop: make(chan struct{}), done: make(chan struct{}), acked: map[int64]time.Time{}}
	go w.loop()
	t.Cleanup(w.halt)
	return w
}

func (w *ackWriter) loop() {
	defer close(w.done)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	var failingSince time.Time
	for id := int64(1); ; id++ {
		select {
		case <-w.stop:
			return
		default:
		}
		if conn == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := pgx.Connect(ctx, w.url)
			cancel()
			if err != nil {
				if !w.outage(&failingSince, err) {
					return
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			conn = c
		}
		committed, err := commitOne(conn, id)
		switch {
		case err == nil:
			failingSince = time.Time{}
			w.mu.Lock()
			w.acked[id], w.last = time.Now(), time.Now()
			w.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		case committed:
			w.mu.Lock()
			w.unknown = append(w.unknown, id)
			w.mu.Unlock()
			fallthrough
		default:
			conn.Close(context.Background())
			conn = nil
			if !w.outage(&failingSince, err) {
				return
			}
		}
	}
}

// commitOne runs the writer's transaction of id. sent says whether
// COMMIT was sent when err is not nil: the transaction's fate is unknown.
func commitOne(conn *pgx.Conn, id int64) (sent bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO acks (id, note) VALUES ($1, 'written')", id); err != nil {
		tx.Rollback(ctx)
		return false, err
	}
	if _, err := tx.Exec(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1"); err != nil {
		tx.Rollback(ctx)
		return false, err
	}
	return true, tx.Commit(ctx)
}

// outage records a failed attempt; it returns false (and sets the
// writer's error) once the writes have failed for a minute before the
// kill, or for a minute at all.
func (w *ackWriter) outage(since *time.Time, err error) bool {
	if since.IsZero() {
		*since = time.Now()
	}
	if w.cutting.Load() {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.killedAt.IsZero() || time.Since(*since) > time.Minute {
		w.err = fmt.Errorf("a write failed (outage of %s): %w", time.Since(*since).Round(time.Millisecond), err)
		return false
	}
	return true
}

func (w *ackWriter) mark(killed time.Time) { w.mu.Lock(); w.killedAt = killed; w.mu.Unlock() }

func (w *ackWriter) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *ackWriter) failure() error { w.mu.Lock(); defer w.mu.Unlock(); return w.err }

func (w *ackWriter) count() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.acked) }

func (w *ackWriter) lastCommit() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.last }

// firstIDAfter is the first id acknowledged after at, 0 when none is yet.
func (w *ackWriter) firstIDAfter(at time.Time) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first int64
	for id, when := range w.acked {
		if when.After(at) && (first == 0 || id < first) {
			first = id
		}
	}
	return first
}

// tally counts the acknowledged commits before and after killed, and the
// unknown ones.
func (w *ackWriter) tally(killed time.Time) (before, after, unknown int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, when := range w.acked {
		if when.After(killed) {
			after++
		} else {
			before++
		}
	}
	return before, after, len(w.unknown)
}

// compareFailover checks exactly once across the failover: the target
// equals the new primary n row for row, and its counter equals its rows
// (a transaction applied twice would count twice; a lost one, not at
// all). It returns how many commits the writer saw acknowledged are not
// on the target: with a synchronous standby none may be, with an
// asynchronous one those the standby had not received when the primary
// died are lost by the failover itself, and the new primary lacks them
// too.
func compareFailover(t *testing.T, w *ackWriter, n, g *pgx.Conn) (lost int) {
	t.Helper()
	for _, table := range []string{"acks", "counter"} {
		q := fmt.Sprintf("SELECT count(*) || ':' || coalesce(md5(string_agg(r::text, '|' ORDER BY r::text)), '') FROM %s r", table)
		if a, b := queryOne[string](t, n, q), queryOne[string](t, g, q); a != b {
			t.Errorf("%s: the target has %s, the new primary %s", table, b, a)
		}
	}
	rows := queryOne[int64](t, g, "SELECT count(*) FROM acks")
	if c := queryOne[int64](t, g, "SELECT n FROM counter WHERE id = 1"); c != rows {
		t.Errorf("the target's counter is %d, its rows %d: a transaction was applied twice or lost", c, rows)
	}
	w.mu.Lock()
	ids := make([]int64, 0, len(w.acked))
	for id := range w.acked {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	var missing []int64
	err := g.QueryRow(context.Background(), "SELECT coalesce(array_agg(i), '{}') FROM unnest($1::bigint[]) i WHERE NOT EXISTS (SELECT 1 FROM acks WHERE id = i)", ids).Scan(&missing)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Logf("%d acknowledged commits are not on the target: %v", len(missing), missing[:min(len(missing), 20)])
	}
	if len(ids) < 100 {
		t.Errorf("only %d commits acknowledged: the move was not under writes", len(ids))
	}
	return len(missing)
}
