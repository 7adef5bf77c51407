//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestCutoverReadyBeforeVerify: cutover reports the target ready as soon
// as it has every change and its sequences, and compares the tables only
// after that, the locked source against the target's snapshot at the
// cutover position (issue 24): the application's writes to the target
// right after "ready:" do not show as a difference, and the comparison's
// time is not part of the write gap.
func TestCutoverReadyBeforeVerify(t *testing.T) {
	e := newEnv(t, `CREATE TABLE big (id bigint PRIMARY KEY, v text);
INSERT INTO big SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, 1500000) g;
CREATE TABLE orders (id bigserial PRIMARY KEY, v int);`, builtinCreator)
	role := "app_" + e.db
	e.srcExec("CREATE ROLE " + role + " LOGIN; GRANT INSERT, SELECT ON orders TO " + role + "; GRANT USAGE ON SEQUENCE orders_id_seq TO " + role)
	t.Cleanup(func() {
		admin := mustConnect(t, adminURL(sourcePort))
		defer admin.Close(context.Background())
		_, _ = admin.Exec(context.Background(), "ALTER ROLE "+role+" RESET ALL")
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE IF EXISTS "+role)
	})
	e.mustPgsync("bootstrap")
	run := e.start("run")
	defer run.kill9(t)
	e.srcExec("INSERT INTO orders (v) SELECT 1 FROM generate_series(1, 10)")

	cut := e.start("cutover", "--lock-source", role, "--timeout", "60s")
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(cut.stderr.String(), "ready:") {
		if time.Now().After(deadline) {
			t.Fatalf("cutover said no ready line within 90 s:\n%s", cut.stderr.String())
		}
		select {
		case <-cut.done:
			t.Fatalf("cutover ended without a ready line:\n%s", cut.stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	// The application writes to the target at once: new orders (the
	// sequence was set before ready) and changed rows of a table the
	// comparison reads.
	e.tgtExec("INSERT INTO orders (v) SELECT 2 FROM generate_series(1, 50)")
	e.tgtExec("UPDATE big SET v = 'written after ready' WHERE id <= 1000")
	if out := cut.stderr.String(); strings.Contains(out, "identical") || strings.Contains(out, "DIFFERS") {
		t.Fatalf("the comparison ended before the target took writes: the test's premise does not hold\n%s", out)
	}
	if code := cut.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("cutover: exit %d, want 0: writes after ready must not show as a difference\n%s", code, cut.stderr.String())
	}
	out := cut.stderr.String()
	if !strings.Contains(out, "all 2 tables identical at the cutover position") {
		t.Errorf("cutover's verdict:\n%s", out)
	}
	if strings.Index(out, "ready:") > strings.Index(out, "TABLE") {
		t.Errorf("the comparison was printed before ready:\n%s", out)
	}
	if n := queryOne[int64](t, e.tgt, "SELECT count(*) FROM orders"); n != 60 {
		t.Errorf("target orders: %d, want 10 replicated and 50 written after ready", n)
	}

	// The JSON report of another cutover (nothing left to wait for) has
	// both moments and the gap between them.
	e.mustPgsync("cutover", "--unlock-source", role)
	e.tgtExec("UPDATE big SET v = repeat(md5(id::text), 4) WHERE id <= 1000; DELETE FROM orders WHERE v = 2")
	r := e.mustPgsync("cutover", "--lock-source", role, "--json")
	var rep struct {
		LockedAt        time.Time `json:"locked_at"`
		ReadyAt         time.Time `json:"ready_at"`
		Finished        time.Time `json:"finished"`
		WriteGapSeconds float64   `json:"write_gap_seconds"`
		VerifySeconds   float64   `json:"verify_seconds"`
		TargetSnapshot  string    `json:"target_snapshot"`
		Identical       bool      `json:"identical"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("cutover --json: %v\n%s", err, r.stdout)
	}
	if !rep.Identical || rep.LockedAt.IsZero() || rep.ReadyAt.Before(rep.LockedAt) || rep.Finished.Before(rep.ReadyAt) ||
		rep.WriteGapSeconds <= 0 || rep.TargetSnapshot == "" || rep.VerifySeconds <= 0 {
		t.Errorf("cutover report: %+v\n%s", rep, r.stdout)
	}
	if got := rep.ReadyAt.Sub(rep.LockedAt).Seconds(); got-rep.WriteGapSeconds > 0.001 || rep.WriteGapSeconds-got > 0.001 {
		t.Errorf("write_gap_seconds %.3f is not ready_at - locked_at (%.3f)", rep.WriteGapSeconds, got)
	}
	e.mustPgsync("cutover", "--unlock-source", role)
}
