package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestTransient(t *testing.T) {
	pg := func(code string) error {
		return fmt.Errorf("apply UPDATE on public.t at 0/1: %w", &pgconn.PgError{Code: code, Message: "m"})
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection failure", pg("08006"), true},
		{"connection does not exist", pg("08003"), true},
		{"admin shutdown", pg("57P01"), true},
		{"crash shutdown", pg("57P02"), true},
		{"cannot connect now", pg("57P03"), true},
		{"too many connections", pg("53300"), true},
		{"serialization failure on the target", pg("40001"), true},
		{"deadlock on the target", pg("40P01"), true},
		{"check violation", pg("23514"), false},
		{"unique violation", pg("23505"), false},
		{"undefined column", pg("42703"), false},
		{"string too long", pg("22001"), false},
		{"slot in use", pg("55006"), false},
		{"query canceled", pg("57014"), false},
		{"diverged row", fmt.Errorf("apply UPDATE: %w", errors.New("no row matched")), false},
		{"slot invalidated", fmt.Errorf("x: %w", ErrSlotInvalidated), false},
		{"slot active", fmt.Errorf("x: %w", ErrSlotActive), false},
		{"stream ended", fmt.Errorf("slot x: %w", ErrStreamEnded), true},
		{"closed connection", fmt.Errorf("x: %w", pgconn.ErrConnClosed), true},
		{"EOF", fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), true},
		{"network", &net.OpError{Op: "read", Err: errors.New("reset by peer")}, true},
		{"canceled", context.Canceled, false},
	}
	for _, tt := range tests {
		if got := Transient(tt.err); got != tt.want {
			t.Errorf("%s: Transient(%v) = %t, want %t", tt.name, tt.err, got, tt.want)
		}
	}
}

// The reconnect waits: fast for the first half minute of an outage (a
// failover's promotion is found within fastRetryEvery of it), then
// doubling from a second up to the cap.
func TestReconnectWait(t *testing.T) {
	const maxWait = 10 * time.Second
	for _, tc := range []struct {
		outage, prev, want time.Duration
	}{
		{0, 0, fastRetryEvery},
		{5 * time.Second, fastRetryEvery, fastRetryEvery},
		{fastRetryFor - time.Millisecond, fastRetryEvery, fastRetryEvery},
		{fastRetryFor, fastRetryEvery, time.Second},
		{fastRetryFor + time.Second, time.Second, 2 * time.Second},
		{time.Minute, 4 * time.Second, 8 * time.Second},
		{2 * time.Minute, 8 * time.Second, maxWait},
		{time.Hour, maxWait, maxWait},
	} {
		if got := reconnectWait(tc.outage, tc.prev, maxWait); got != tc.want {
			t.Errorf("reconnectWait(outage %s, prev %s) = %s, want %s", tc.outage, tc.prev, got, tc.want)
		}
	}
	if got := reconnectWait(time.Hour, time.Second, 500*time.Millisecond); got != 500*time.Millisecond {
		t.Errorf("reconnectWait with a cap of 500ms = %s", got)
	}
}

// A fast retry is logged once per reconnectSayEvery, the first of an
// outage and every slow one always.
func TestSayReconnect(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name   string
		saidAt time.Time
		wait   time.Duration
		want   bool
	}{
		{"first of an outage", time.Time{}, fastRetryEvery, true},
		{"fast, just said", now.Add(-time.Second), fastRetryEvery, false},
		{"fast, said long ago", now.Add(-reconnectSayEvery), fastRetryEvery, true},
		{"slow, just said", now.Add(-time.Second), 2 * time.Second, true},
	} {
		if got := sayReconnect(tc.saidAt, tc.wait); got != tc.want {
			t.Errorf("%s: sayReconnect = %v, want %v", tc.name, got, tc.want)
		}
	}
}
