//go:build integration

package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// serverLog is one test cluster's log file, read from where it ended when
// the test began.
type serverLog struct {
	cluster, path string
	from          int64
}

// openServerLogs notes where both clusters' logs end now. It fails the
// test when the clusters do not write each line's database
// (scripts/local-pg.sh sets log_line_prefix when it makes them): the
// errors of tests run beside this one could not be told apart.
func openServerLogs(t *testing.T) []serverLog {
	t.Helper()
	var logs []serverLog
	for _, c := range []struct{ cluster, port string }{{"source", sourcePort}, {"target", targetPort}} {
		admin := mustConnect(t, adminURL(c.port))
		prefix := queryOne[string](t, admin, "SHOW log_line_prefix")
		admin.Close(context.Background())
		if !strings.Contains(prefix, "db=%d ") {
			t.Fatalf("the %s cluster's log_line_prefix %q does not name the database: it was made before scripts/local-pg.sh set it; destroy it (PGSYNC_PG_DIR=%s scripts/local-pg.sh destroy)",
				c.cluster, prefix, pgDir)
		}
		path := filepath.Join(pgDir, c.cluster+".log")
		st, err := os.Stat(path)
		if err != nil {
			t.Fatalf("the %s cluster's log: %v", c.cluster, err)
		}
		logs = append(logs, serverLog{cluster: c.cluster, path: path, from: st.Size()})
	}
	return logs
}

// logEntry matches a line of the clusters' log_line_prefix ('%m [%p]
// %qdb=%d app=%a: '): its pid, database, application and level.
var logEntry = regexp.MustCompile(`^\S+ \S+ \S+ \[(\d+)\] db=(\S*) app=(.*?): ([A-Z]+):  `)

// errorsOf returns the ERROR, FATAL and PANIC entries logged since the
// test began in database db, each with the lines of the same session
// that follow it (its DETAIL, CONTEXT and STATEMENT).
func (l serverLog) errorsOf(t *testing.T, db string) []string {
	t.Helper()
	f, err := os.Open(l.path)
	if err != nil {
		t.Fatalf("the %s cluster's log: %v", l.cluster, err)
	}
	defer f.Close()
	if _, err := f.Seek(l.from, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var out []string
	open := -1 // index in out of the entry being continued
	var openPID string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		m := logEntry.FindStringSubmatch(line)
		switch {
		case m == nil || m[2] != db:
			open = -1
		case m[4] == "ERROR" || m[4] == "FATAL" || m[4] == "PANIC":
			out = append(out, l.cluster+": "+line)
			open, openPID = len(out)-1, m[1]
		case open >= 0 && m[1] == openPID && (m[4] == "DETAIL" || m[4] == "CONTEXT" || m[4] == "STATEMENT" || m[4] == "HINT"):
			out[open] += "\n    " + line
		default:
			open = -1
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the %s cluster's log: %v", l.cluster, err)
	}
	return out
}

// appRole creates the application's role on both servers (pg_dump's schema
// carries its grants, grant with %s for the role on the source) and drops
// it when the test ends.
func (e *env) appRole(grant string) string {
	e.t.Helper()
	role := "app_" + e.db
	e.tgtExec("CREATE ROLE " + role + " LOGIN")
	e.srcExec("CREATE ROLE " + role + " LOGIN; " + fmt.Sprintf(grant, role))
	e.t.Cleanup(func() {
		for _, c := range []struct{ port, url string }{{sourcePort, e.srcURL}, {targetPort, e.tgtURL}} {
			if conn, err := mustConnectErr(c.url); err == nil {
				_, _ = conn.Exec(context.Background(), "DROP OWNED BY "+role)
				conn.Close(context.Background())
			}
			admin := mustConnect(e.t, adminURL(c.port))
			_, _ = admin.Exec(context.Background(), "ALTER ROLE "+role+" RESET ALL")
			_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
			admin.Close(context.Background())
		}
	})
	return role
}

// probeLogs raises an error of the test's own on each server, under
// application_name logProbe, which the log must show under the test's
// database (else a test reading the logs proves nothing).
func (e *env) probeLogs() {
	e.t.Helper()
	for _, url := range []string{e.srcURL, e.tgtURL} {
		probe := mustConnect(e.t, url+"&application_name="+logProbe)
		_, _ = probe.Exec(context.Background(), "SELECT pgsync_quietlog_probe()")
		probe.Close(context.Background())
	}
}

// logProbe is the application_name of the test's own deliberate errors.
const logProbe = "quietlog_probe"

// TestNoErrorsInServerLogs: a job's successful path, from status on a
// target never bootstrapped to teardown, with run streaming source writes,
// an online verify while it runs, a table added, verify --rows, the
// sequences and a cutover with the source locked, leaves no ERROR in
// either server's log (issue 30, point 5: operators alert on them). Lines are attributed by the test's own database name:
// other tests run beside this one, and some of them cause errors on
// purpose.
func TestNoErrorsInServerLogs(t *testing.T) {
	logs := openServerLogs(t)
	e := newEnv(t, `CREATE TABLE orders (id bigserial PRIMARY KEY, customer text NOT NULL, qty int);
CREATE TABLE items (id int PRIMARY KEY, body text);
INSERT INTO orders (customer, qty) SELECT 'c' || g, g FROM generate_series(1, 2000) g;
INSERT INTO items SELECT g, repeat('x', g % 100) FROM generate_series(1, 500) g;
SELECT lo_from_bytea(0, '\x6c6f'::bytea);`, "")
	role := e.appRole("GRANT INSERT, UPDATE, SELECT ON orders TO %s")
	e.probeLogs()

	e.pgsync("status") // a target no job was bootstrapped on: it may say so, not raise
	e.mustPgsync("check")
	e.mustPgsync("bootstrap")
	e.pgsync("status")
	run := e.start("run")
	defer run.kill9(t)
	e.srcExec(`INSERT INTO orders (customer, qty) SELECT 'n' || g, g FROM generate_series(1, 300) g;
UPDATE items SET body = 'changed' WHERE id % 7 = 0; DELETE FROM items WHERE id > 480`)
	eventually(t, 60*time.Second, "the source's writes on the target", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM orders") == 2300 && queryOne[int](t, e.tgt, "SELECT count(*) FROM items") == 480
	})
	// Online: run holds the slot, so verify reads both sides at one
	// position through a hold.
	if r := e.pgsync("verify"); r.code != 0 || !strings.Contains(r.stderr+r.stdout, "online") {
		t.Fatalf("online verify: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// A table added while run runs, then the row-by-row comparison and
	// the sequences.
	e.srcExec(`CREATE TABLE extra (id int PRIMARY KEY, v text); INSERT INTO extra SELECT g, 'e' FROM generate_series(1, 200) g`)
	e.mustPgsync("add-tables")
	e.srcExec(`INSERT INTO extra VALUES (201, 'after'); UPDATE orders SET qty = 0 WHERE id <= 5`)
	eventually(t, 60*time.Second, "the added table's writes on the target", func() bool {
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM extra") == 201
	})
	e.mustPgsync("verify", "--rows")
	e.mustPgsync("sequences")
	e.mustPgsync("status")
	e.mustPgsync("cutover", "--lock-source", role, "--timeout", "60s")
	e.mustPgsync("cutover", "--unlock-source", role)
	sigtermWithin(t, run, 10*time.Second)
	e.mustPgsync("teardown")

	var found []string
	for _, l := range logs {
		probed := false
		for _, entry := range l.errorsOf(t, e.db) {
			if strings.Contains(entry, "app="+logProbe+": ") {
				probed = true
				continue
			}
			found = append(found, entry)
		}
		if !probed {
			t.Errorf("the %s cluster's log (%s) has no line of the test's probe error in database %s: the log is not where the test reads it, or not attributed", l.cluster, l.path, e.db)
		}
	}
	if len(found) > 0 {
		t.Errorf("%d ERROR entries in database %s's server logs on a successful path:\n%s", len(found), e.db, strings.Join(found, "\n"))
	}
}
