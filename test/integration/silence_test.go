//go:build integration

package integration

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSilentSourceReconnects first leaves run idle for longer than its
// timeout, which must not end the session. Then it freezes the walsender
// that streams to run (SIGSTOP): nothing, not even a keepalive, comes from
// the source any more while its connection stays open. Like PostgreSQL's
// subscriber with wal_receiver_timeout, run must say so and reconnect after
// the timeout, not wait for ever showing no lag (issue 15); once the
// walsender moves again, rows written during and after the freeze arrive.
func TestSilentSourceReconnects(t *testing.T) {
	e := newEnv(t, "CREATE TABLE w (id int PRIMARY KEY, pad text);", "[tuning]\nwal_receiver_timeout = \"5s\"\n")
	e.mustPgsync("bootstrap")
	addr := freeAddr(t)
	bg := e.start("run", "--metrics-addr", addr)
	e.srcExec("INSERT INTO w SELECT g, 'a' FROM generate_series(1, 100) g")
	eventually(t, 30*time.Second, "the first rows on the target", func() bool { return queryOne[int](t, e.tgt, "SELECT count(*) FROM w") == 100 })

	// An idle source is not a silent one: the walsender sends a keepalive
	// on its own only every half wal_sender_timeout (15 s here), so run
	// asks for one at half its timeout, as PostgreSQL's walreceiver does.
	time.Sleep(8 * time.Second)
	if strings.Contains(bg.stderr.String(), "wal_receiver_timeout") {
		t.Fatalf("run gave up an idle but healthy source\n%s", bg.stderr.String())
	}

	walsender := queryOne[int](t, e.src, "SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1", "pgsync_"+e.job)
	if walsender == 0 {
		t.Fatal("no walsender streams from the slot")
	}
	if err := syscall.Kill(walsender, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thaw := func() { _ = syscall.Kill(walsender, syscall.SIGCONT) }
	t.Cleanup(thaw)
	frozen := time.Now()
	// Commits do not wait for the frozen walsender: the source's WAL moves
	// on while run hears nothing.
	e.srcExec("INSERT INTO w SELECT g, 'b' FROM generate_series(101, 200) g")

	// pgsync_lag_bytes is as of the last message; the silence beside it
	// says how old that is.
	eventually(t, 20*time.Second, "pgsync_source_silent_seconds to pass 2", func() bool { return metricValue(addr, "pgsync_source_silent_seconds") >= 2 })
	const line = "no message from the source for 5s (wal_receiver_timeout): reconnecting"
	eventually(t, 20*time.Second, "run to give up the silent source", func() bool { return strings.Contains(bg.stderr.String(), line) })
	// The clock runs from the last message, at most half the timeout
	// before the freeze: run asks for a keepalive then.
	took := time.Since(frozen)
	if took < 2*time.Second {
		t.Errorf("run gave up the source %s after the freeze, too early for a 5 s timeout\n%s", took.Round(time.Millisecond), bg.stderr.String())
	}
	t.Logf("timeout line %s after the freeze", took.Round(100*time.Millisecond))
	select {
	case <-bg.done:
		t.Fatalf("run exited instead of reconnecting\n%s", bg.stderr.String())
	default:
	}

	// The frozen walsender holds the slot until it runs again and sees the
	// connection closed; the reconnecting session waits for it.
	thaw()
	e.srcExec("INSERT INTO w SELECT g, 'c' FROM generate_series(201, 300) g")
	eventually(t, 60*time.Second, "rows written during and after the freeze", func() bool { return queryOne[int](t, e.tgt, "SELECT count(*) FROM w") == 300 })
	if !strings.Contains(bg.stderr.String(), "reconnected") {
		t.Errorf("run did not log a new session\n%s", bg.stderr.String())
	}
	sigtermWithin(t, bg, 10*time.Second)
	e.catchUp()
	e.mustVerify()
}

// metricValue scrapes run's metrics at addr and returns series' value, -1
// when absent.
func metricValue(addr, series string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
				return v
			}
		}
	}
	return -1
}
