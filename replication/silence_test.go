package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

func TestSilenceStep(t *testing.T) {
	const timeout = 60 * time.Second
	tests := []struct {
		name     string
		silent   time.Duration
		timeout  time.Duration
		pinged   bool
		wantPing bool
		wantEnd  bool
	}{
		{"just heard", 0, timeout, false, false, false},
		{"quiet, under half", 29 * time.Second, timeout, false, false, false},
		{"half the timeout: ask for a keepalive", 30 * time.Second, timeout, false, true, false},
		{"asked already", 45 * time.Second, timeout, true, false, false},
		{"timeout", 60 * time.Second, timeout, true, false, true},
		{"timeout, never asked", 61 * time.Second, timeout, false, false, true},
		{"off", time.Hour, 0, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ping, end := silenceStep(tt.silent, tt.timeout, tt.pinged)
			if ping != tt.wantPing || end != tt.wantEnd {
				t.Errorf("silenceStep(%s, %s, %t) = (%t, %t), want (%t, %t)", tt.silent, tt.timeout, tt.pinged, ping, end, tt.wantPing, tt.wantEnd)
			}
		})
	}
}

// TestCheckSilenceClock: the clock starts at the first read, a message
// restarts it, and the timeout ends the session with ErrSourceSilent,
// naming the setting.
func TestCheckSilenceClock(t *testing.T) {
	r := &reader{slot: "pgsync_j", stats: &Stats{}, silenceTimeout: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	step := func(at time.Duration, wantSilence time.Duration) error {
		t.Helper()
		err := r.checkSilence(t0.Add(at))
		if got := time.Duration(r.stats.Silence.Load()); got != wantSilence {
			t.Errorf("at %s: silence %s, want %s", at, got, wantSilence)
		}
		return err
	}
	if err := step(0, 0); err != nil {
		t.Fatal(err)
	}
	if err := step(3*time.Second, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	r.heard = true // a message, then the next renewal
	if err := step(4*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	err := step(14*time.Second, 10*time.Second)
	if !errors.Is(err, ErrSourceSilent) || !Transient(err) {
		t.Fatalf("after 10 s of silence: %v, want a transient ErrSourceSilent", err)
	}
	if want := "slot pgsync_j: no message from the source for 10s (wal_receiver_timeout)"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestSilentSourceIsTransient(t *testing.T) {
	if err := fmt.Errorf("slot x: %w for 60s (wal_receiver_timeout)", ErrSourceSilent); !Transient(err) {
		t.Errorf("Transient(%v) = false", err)
	}
}

// TestProgressLineDuringSilence: the progress line gives lag_bytes while
// the source talks, and silent_s instead once it has been silent for a
// period, since its WAL may have moved on by any amount (issue 15).
func TestProgressLineDuringSilence(t *testing.T) {
	for _, tt := range []struct {
		name     string
		silence  time.Duration
		prepared func() int64
		want     string
		notWant  string
	}{
		{"talking", 0, nil, "lag_bytes=0", "silent_s"},
		{"silent", 42 * time.Second, nil, "silent_s=42", "lag_bytes"},
		{"prepared statements", 0, func() int64 { return 7 }, "prepared_statements=7", "silent_s"},
		{"no prepared statements count", 0, nil, "lag_bytes=0", "prepared_statements"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf syncBuffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			st := &Stats{}
			st.Silence.Store(int64(tt.silence))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := logProgress(ctx, log, st, tt.prepared, 10*time.Millisecond, 0)
			defer stop()
			deadline := time.Now().Add(5 * time.Second)
			for !strings.Contains(buf.String(), "applying") {
				if time.Now().After(deadline) {
					t.Fatal("no progress line")
				}
				st.Txns.Add(1)
				time.Sleep(5 * time.Millisecond)
			}
			line := buf.String()
			if !strings.Contains(line, tt.want) || strings.Contains(line, tt.notWant) {
				t.Errorf("progress line %q: want %q and no %q", line, tt.want, tt.notWant)
			}
		})
	}
}

// TestProgressLine: the decision of each period's progress line, for
// every case: rates when anything was applied; when nothing was, run
// --until-caught-up says what it waits for and run stays quiet.
func TestProgressLine(t *testing.T) {
	for _, tt := range []struct {
		applied bool
		stopAt  pglogrepl.LSN
		want    int
	}{
		{true, 0, progressApplying},
		{true, 0x5000, progressApplying},
		{false, 0x5000, progressWaiting},
		{false, 0, progressQuiet},
	} {
		if got := progressLineOf(tt.applied, tt.stopAt); got != tt.want {
			t.Errorf("progressLineOf(%t, %s) = %d, want %d", tt.applied, tt.stopAt, got, tt.want)
		}
	}
}

// TestLagAttr: the lag in bytes, or the seconds of silence once the source
// has sent nothing for a whole period.
func TestLagAttr(t *testing.T) {
	for _, tt := range []struct {
		silence time.Duration
		want    string
	}{
		{0, "lag_bytes=4096"},
		{9 * time.Second, "lag_bytes=4096"},
		{10 * time.Second, "silent_s=10"},
		{95 * time.Second, "silent_s=95"},
	} {
		if got := lagAttr(4096, tt.silence, 10*time.Second).String(); got != tt.want {
			t.Errorf("lagAttr(4096, %s, 10s) = %s, want %s", tt.silence, got, tt.want)
		}
	}
}

// syncBuffer is a bytes.Buffer the logging goroutine and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
