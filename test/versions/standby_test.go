//go:build versions

package versions

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// standbyResult is the line TestStandbySource appends to
// bench-results/standby-source.jsonl.
type standbyResult struct {
	Date             string  `json:"date"`
	Commit           string  `json:"commit"`
	Source           int     `json:"source"`
	Target           int     `json:"target"`
	BootstrapSeconds float64 `json:"bootstrap_seconds"`
	WriteGapSeconds  float64 `json:"write_gap_seconds"`
	Commits          int     `json:"commits"`
}

// TestStandbySource moves a database from a hot standby (source.url) of
// PostgreSQL 16, the first that decodes on a standby, and of 17 under writes on its primary (source.primary_url):
// bootstrap creates the publication on the primary and the slot on the
// standby, copies from the standby under the slot's snapshot, run streams
// the standby's slot, verify compares under a temporary slot's snapshot
// on the standby, and cutover locks the writer's role on the primary
// and waits for the primary's position. Nothing acknowledged is lost,
// nothing applied twice, and teardown removes the slot from the standby
// and the publication from the primary.
func TestStandbySource(t *testing.T) {
	for _, major := range []int{16, 17} {
		t.Run(strconv.Itoa(major), func(t *testing.T) { standbySource(t, major) })
	}
}

func standbySource(t *testing.T, major int) {
	primary, standby := startPrimaryAndStandby(t, major, basePort+6, basePort+7, true)
	tgt := cluster{major: failoverMajor, port: basePort + 8, url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/app?sslmode=disable", basePort+8)}
	tgt.dir = startCluster(t, tgt.major, tgt.port)
	exec1(t, connect(t, tgt.adminURL()), "create database", "CREATE DATABASE app")
	exec1(t, connect(t, tgt.url), "the schema on the target", failoverSchema)

	cfg := filepath.Join(t.TempDir(), "pgsync.toml")
	body := fmt.Sprintf("[source]\nurl = %q\nprimary_url = %q\n[target]\nurl = %q\n[job]\nname = \"upgrade\"\ntables = [\"public.*\"]\n", standby.url, primary.url, tgt.url)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	chk := pgsync(t, 2*time.Minute, cfg, "check")
	if chk.code != 0 || !strings.Contains(chk.stdout, fmt.Sprintf("source.url is a hot standby of PostgreSQL %d", major)) {
		t.Fatalf("check does not accept the standby source: exit %d\n%s\n%s", chk.code, chk.stdout, chk.stderr)
	}

	w := startAckWriter(t, primary.url)
	eventually(t, 30*time.Second, "the writer's first commits", func() bool { return w.count() > 20 })
	boot := mustPgsync(t, 5*time.Minute, cfg, "bootstrap")
	p, sb := connect(t, primary.url), connect(t, standby.url)
	if n := queryOne[int](t, sb, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pgsync_upgrade' AND slot_type = 'logical'"); n != 1 {
		t.Errorf("the standby has %d slot(s) pgsync_upgrade of its own, want 1", n)
	}
	if n := queryOne[int](t, p, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pgsync_upgrade'"); n != 0 {
		t.Errorf("the primary has slot pgsync_upgrade: the slot belongs on the standby")
	}
	if n := queryOne[int](t, p, "SELECT count(*) FROM pg_publication WHERE pubname = 'pgsync_upgrade'"); n != 1 {
		t.Errorf("the primary has no publication pgsync_upgrade")
	}
	run := startRun(t, cfg)
	run.awaitConfirmedSlot(t, p, sb, "pgsync_upgrade", 2*time.Minute, "run to apply the writes from the standby")
	time.Sleep(2 * time.Second) // writes and run go on
	mustPgsync(t, time.Minute, cfg, "status")
	// verify while run streams: its snapshot is a temporary slot's on the
	// standby, its hold a commit on the primary.
	if v := mustPgsync(t, 2*time.Minute, cfg, "verify"); strings.Contains(v.stdout, "differ") {
		t.Errorf("verify while run streams from the standby:\n%s", v.stdout)
	}
	if err := w.failure(); err != nil {
		t.Fatalf("the writer: %v", err)
	}

	w.cutting.Store(true)
	cut := mustPgsync(t, 5*time.Minute, cfg, "cutover", "--lock-source", writerRole, "--timeout", "120s", "--json")
	var rep struct {
		Identical       bool    `json:"identical"`
		WriteGapSeconds float64 `json:"write_gap_seconds"`
	}
	if err := json.Unmarshal([]byte(cut.stdout), &rep); err != nil {
		t.Fatalf("cutover --json: %v\n%s\n%s", err, cut.stdout, cut.stderr)
	}
	if !rep.Identical {
		t.Errorf("cutover found differences:\n%s\n%s", cut.stdout, cut.stderr)
	}
	w.halt()
	run.stop(t)
	g := connect(t, tgt.url)
	if lost := compareFailover(t, w, p, g); lost > 0 {
		t.Errorf("%d acknowledged commits are not on the target", lost)
	}
	mustPgsync(t, time.Minute, cfg, "teardown")
	if n := queryOne[int](t, sb, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pgsync_upgrade'"); n != 0 {
		t.Errorf("teardown left slot pgsync_upgrade on the standby")
	}
	if n := queryOne[int](t, p, "SELECT count(*) FROM pg_publication WHERE pubname = 'pgsync_upgrade'"); n != 0 {
		t.Errorf("teardown left publication pgsync_upgrade on the primary")
	}
	checkServerLog(t, primary)
	checkServerLog(t, standby)
	if t.Failed() {
		return
	}
	res := standbyResult{Source: major, Target: tgt.major, BootstrapSeconds: boot.elapsed.Seconds(), WriteGapSeconds: rep.WriteGapSeconds}
	res.Commits, _, _ = w.tally(time.Now())
	t.Logf("PostgreSQL %d standby as the source: bootstrap %.2f s, cutover's write gap %.3f s, %d commits on the primary, identical", major, res.BootstrapSeconds, res.WriteGapSeconds, res.Commits)
	appendResult(t, "standby-source.jsonl", &res.Date, &res.Commit, &res)
}
