package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

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
