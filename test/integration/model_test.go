//go:build integration

package integration

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestLifecycleModel drives the job's lifecycle as an operator might:
// seeded random sequences of commands (bootstrap, bootstrap --force,
// add-tables, run, teardown, cutover, unlock, edits of job.tables, source
// writes) with faults injected (the source down, the command killed with
// SIGKILL part-way, a target table holding rows of its own, a target
// column of another type), and after every step it asserts:
//   - no target row pgsync did not copy is removed or changed, unless a
//     bootstrap --force ran while job.tables named its table;
//   - a command that refused (exit 1, not killed) recorded nothing: the
//     job's rows of pgsync.progress and pgsync.tables and the slot are as
//     before;
//   - a command that took more than 10 s said what it waited for;
//
// and at the end of each sequence that the documented way forward
// (bootstrap, or bootstrap --force when bootstrap says so, then
// add-tables and run) ends with verify identical.
//
// PGSYNC_MODEL_SEQUENCES (4), PGSYNC_MODEL_STEPS (12) and PGSYNC_MODEL_SEED
// (1) size the run; scripts/model.sh runs a longer one.
func TestLifecycleModel(t *testing.T) {
	sequences := envInt("PGSYNC_MODEL_SEQUENCES", 4)
	steps := envInt("PGSYNC_MODEL_STEPS", 12)
	seed := int64(envInt("PGSYNC_MODEL_SEED", 1))
	for i := 0; i < sequences; i++ {
		s := seed + int64(i)
		t.Run(fmt.Sprintf("seed_%d", s), func(t *testing.T) { runModelSequence(t, s, steps) })
	}
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}

// modelTables are the source's tables; a is always in the job, the others
// come and go. x exists on the target with rows of the operator's own
// (ids above 1000); y's target copy has a column of another type.
var modelTables = []string{"a", "b", "c", "x", "y"}

const modelSource = `
CREATE TABLE a (id int PRIMARY KEY, v int NOT NULL DEFAULT 0);
CREATE TABLE b (id int PRIMARY KEY, a_id int, v int NOT NULL DEFAULT 0);
CREATE TABLE c (id int PRIMARY KEY, v int NOT NULL DEFAULT 0, pad text);
CREATE TABLE x (id int PRIMARY KEY, v int NOT NULL DEFAULT 0);
CREATE TABLE y (id int PRIMARY KEY, v int NOT NULL DEFAULT 0);
INSERT INTO a SELECT g FROM generate_series(1, 2000) g;
INSERT INTO b SELECT g, g FROM generate_series(1, 2000) g;
INSERT INTO c SELECT g, 0, repeat('c', 200) FROM generate_series(1, 150000) g;
INSERT INTO x SELECT g FROM generate_series(1, 100) g;
INSERT INTO y SELECT g FROM generate_series(1, 100) g;`

const modelTarget = `
CREATE TABLE x (id int PRIMARY KEY, v int NOT NULL DEFAULT 0);
INSERT INTO x VALUES (1001, 7), (1002, 7), (1003, 7);
CREATE TABLE y (id int PRIMARY KEY, v text);`

// modelState is what the test knows of the job between steps.
type modelState struct {
	named map[string]bool // tables job.tables names
	// operatorRows: x still has the operator's rows (no --force has
	// taken them).
	operatorRows bool
}

func (m *modelState) patterns() string {
	var p []string
	for _, t := range modelTables {
		if m.named[t] {
			p = append(p, fmt.Sprintf("%q", "public."+t))
		}
	}
	return "[" + strings.Join(p, ", ") + "]"
}

func runModelSequence(t *testing.T, seed int64, steps int) {
	rnd := rand.New(rand.NewSource(seed))
	e := newEnv(t, modelSource, "[tuning]\nmax_parallel_copies = 2\n")
	e.tgtExec(modelTarget)
	m := &modelState{named: map[string]bool{"a": true}, operatorRows: true}
	e.setTables(m.patterns())
	goodCfg, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	writes := 0
	for step := 0; step < steps; step++ {
		var args []string
		switch k := rnd.Intn(10); {
		case k <= 1:
			args = []string{"bootstrap"}
		case k == 2:
			args = []string{"bootstrap", "--force"}
		case k == 3:
			args = []string{"add-tables"}
		case k == 4:
			args = []string{"run", "--until-caught-up"}
		case k == 5:
			args = []string{"teardown"}
		case k == 6:
			args = []string{"cutover", "--timeout", "2s"}
		case k == 7:
			args = []string{"cutover", "--unlock-source", "postgres_model_nobody"}
		default:
			// An edit of job.tables (a stays named), then source writes.
			tbl := modelTables[1+rnd.Intn(len(modelTables)-1)]
			m.named[tbl] = !m.named[tbl]
			e.setTables(m.patterns())
			writes++
			e.srcExec(fmt.Sprintf(`UPDATE a SET v = v + 1 WHERE id %% 7 = %d; INSERT INTO b VALUES (%d, 1, 1);
UPDATE c SET v = v + 1 WHERE id = %d; DELETE FROM b WHERE id = %d`, writes%7, 10000+writes, writes, writes))
			goodCfg, _ = os.ReadFile(e.cfgPath)
			t.Logf("step %d: job.tables = %s, source written", step, m.patterns())
			continue
		}
		if args[0] == "cutover" && args[1] == "--unlock-source" {
			e.srcExec("DO $$BEGIN CREATE ROLE postgres_model_nobody; EXCEPTION WHEN duplicate_object THEN NULL; END$$")
		}
		fault := ""
		switch f := rnd.Intn(10); {
		case f == 0:
			fault = "source down"
		case f <= 2:
			fault = "kill"
		}
		before := e.recorded()
		slotBefore := e.slotExists()
		var code int
		var out string
		var took time.Duration
		switch fault {
		case "source down":
			bad := strings.Replace(string(goodCfg), "127.0.0.1:"+sourcePort, "127.0.0.1:1", 1)
			if err := os.WriteFile(e.cfgPath, []byte(bad), 0o600); err != nil {
				t.Fatal(err)
			}
			r := e.pgsync(args...)
			code, out, took = r.code, r.stdout+r.stderr, r.elapsed
			if err := os.WriteFile(e.cfgPath, goodCfg, 0o600); err != nil {
				t.Fatal(err)
			}
			if code == 0 {
				t.Fatalf("step %d: %v with the source down exited 0", step, args)
			}
		case "kill":
			cmd := exec.Command(pgsyncBin, append([]string{"-c", e.cfgPath}, args...)...)
			var buf syncBuffer
			buf.mu = make(chan struct{}, 1)
			cmd.Stdout, cmd.Stderr = &buf, &buf
			began := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(50+rnd.Intn(700)) * time.Millisecond)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			code, out, took = -9, buf.String(), time.Since(began)
			// The killed process's last statement may still be running
			// on a server, and commit: what is recorded is read once it
			// has ended.
			e.awaitNoPgsyncSessions()
		default:
			r := e.pgsync(args...)
			code, out, took = r.code, r.stdout+r.stderr, r.elapsed
		}
		t.Logf("step %d: %v (fault %q): exit %d in %s", step, args, fault, code, took.Round(time.Millisecond))
		// A --force that ran (or may have run: killed) with x named
		// replaced the operator's rows, as documented.
		if len(args) > 1 && args[1] == "--force" && code != 1 && m.named["x"] {
			m.operatorRows = false
		}
		if code == 1 {
			if after := e.recorded(); after != before {
				t.Fatalf("step %d: %v refused and changed what is recorded from %q to %q\n%s", step, args, before, after, out)
			}
			if e.slotExists() != slotBefore {
				t.Fatalf("step %d: %v refused and created or dropped the slot\n%s", step, args, out)
			}
		}
		if code != -9 && took > 10*time.Second && !strings.Contains(out, "waiting") && !strings.Contains(out, "paused") {
			t.Fatalf("step %d: %v took %s without saying what it waited for\n%s", step, args, took, out)
		}
		e.assertOperatorRows(m, step)
	}

	// The documented way forward: the tables that hold no rows of the
	// operator's own, bootstrap unless ready (--force when it says so),
	// add-tables, run; verify identical.
	m.named = map[string]bool{"a": true, "b": true, "c": true}
	e.setTables(m.patterns())
	if state := e.recorded(); !strings.HasPrefix(state, "ready") {
		r := e.pgsync("bootstrap")
		if r.code != 0 {
			if !strings.Contains(r.stderr, "--force") {
				t.Fatalf("bootstrap refused without naming the way out:\n%s", r.stderr)
			}
			e.mustPgsync("bootstrap", "--force")
		}
	}
	if r := e.pgsync("add-tables"); r.code != 0 {
		// Rows of an earlier incarnation of the job (before a --force
		// that left the table out) are not pgsync's any more.
		if !strings.Contains(r.stderr, "--force") {
			t.Fatalf("add-tables refused without naming the way out:\n%s", r.stderr)
		}
		e.mustPgsync("add-tables", "--force")
	}
	e.catchUp()
	r := e.pgsync("verify")
	if r.code != 0 {
		// A table published earlier and no longer named stays in the job
		// (add-tables lists it, never drops it): verify compares it too.
		t.Fatalf("verify after the way forward: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	e.assertOperatorRows(m, steps)
}

// slotExists says whether the job's slot exists on the source.
func (e *env) slotExists() bool {
	e.t.Helper()
	return queryOne[bool](e.t, e.src, "SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)", "pgsync_"+e.job)
}

// assertOperatorRows fails unless the operator's own rows of x are there
// and unchanged, as long as no --force took them.
func (e *env) assertOperatorRows(m *modelState, step int) {
	e.t.Helper()
	if !m.operatorRows {
		return
	}
	n := queryOne[int](e.t, e.tgt, "SELECT count(*) FROM x WHERE id > 1000 AND v = 7")
	if n != 3 {
		e.t.Fatalf("after step %d the operator's 3 rows of x are %d: pgsync removed or changed rows it did not copy", step, n)
	}
}

// awaitNoPgsyncSessions waits (up to 10 s) until neither server runs a
// session of pgsync in the test's database: a killed client's backend ends
// its statement, or notices the closed socket, on its own time.
func (e *env) awaitNoPgsyncSessions() {
	e.t.Helper()
	eventually(e.t, 10*time.Second, "the killed pgsync's sessions to end", func() bool {
		for _, conn := range []*pgx.Conn{e.src, e.tgt} {
			if queryOne[int](e.t, conn, `SELECT count(*) FROM pg_stat_activity
WHERE application_name LIKE 'pgsync%' AND datname = current_database() AND pid <> pg_backend_pid()`) > 0 {
				return false
			}
		}
		return true
	})
}
