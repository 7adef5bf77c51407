//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestCatalogRoundTrips counts the statements check, bootstrap and verify
// send to the source for 20 and for 200 tables (in 4 schemas): the catalog
// is read in a fixed number of queries, whatever the number of tables
// (issue 33: 2,029 statements for check and 4,040 for bootstrap's table
// lists at 2,000 tables, one or two per table). The copy's COPY statements
// and verify's hash of each table, one per table by nature, are not
// counted. Statements are counted in the source
// server's log, with log_statement = 'all' set on the test's database
// only; pg_dump's session, which bootstrap starts, turns it off for
// itself (a wrapper sets PGOPTIONS), since its queries are not pgsync's.
func TestCatalogRoundTrips(t *testing.T) {
	small := countCatalogStatements(t, 5)
	large := countCatalogStatements(t, 50)
	for _, cmd := range []string{"check", "bootstrap", "verify"} {
		t.Logf("%s: %d statements at 20 tables, %d at 200", cmd, small[cmd].total, large[cmd].total)
		if grown := large[cmd].total - small[cmd].total; grown > 5 {
			t.Errorf("%s sent %d more statements to the source for 200 tables than for 20 (%d against %d): the catalog is read per table; grown:\n%s",
				cmd, grown, large[cmd].total, small[cmd].total, grownStatements(small[cmd].byKind, large[cmd].byKind))
		}
	}
	if small["check"].total == 0 || small["bootstrap"].total == 0 {
		t.Fatalf("no statement counted (%v): the premise (log_statement in the source's log) is false", small)
	}
}

// statementCount is how many statements one command sent, in all and by
// their first words.
type statementCount struct {
	total  int
	byKind map[string]int
}

// countCatalogStatements creates perSchema tables in each of 4 schemas on
// the source, each with a sequence, and counts the statements of check,
// bootstrap and verify.
func countCatalogStatements(t *testing.T, perSchema int) map[string]statementCount {
	var ddl strings.Builder
	for s := 0; s < 4; s++ {
		fmt.Fprintf(&ddl, "CREATE SCHEMA tenant%d;\n", s)
		fmt.Fprintf(&ddl, "CREATE TABLE tenant%d.accounts (id serial PRIMARY KEY, name text NOT NULL);\n", s)
		fmt.Fprintf(&ddl, "INSERT INTO tenant%d.accounts (name) VALUES ('a'), ('b');\n", s)
		for i := 1; i < perSchema; i++ {
			fmt.Fprintf(&ddl, `CREATE TABLE tenant%[1]d.t%[2]d (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account int REFERENCES tenant%[1]d.accounts, note text, at timestamptz DEFAULT now());
CREATE INDEX ON tenant%[1]d.t%[2]d (at);
INSERT INTO tenant%[1]d.t%[2]d (account, note) VALUES (1, 'x'), (2, 'y');
`, s, i)
		}
	}
	e := newEnv(t, ddl.String(), "")
	wrapper := filepath.Join(t.TempDir(), "pg_dump")
	script := fmt.Sprintf("#!/bin/sh\nPGOPTIONS='-c log_statement=none' exec %s \"$@\"\n", pgBin(t, "pg_dump"))
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), `tables = ["public.*"]`, fmt.Sprintf("tables = [\"tenant*.*\"]\npg_dump = %q", wrapper), 1))
	if err := os.WriteFile(e.cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	// Sessions opened from now on log every statement; the test's own
	// connection, opened before, does not.
	e.srcExec("ALTER DATABASE " + e.db + " SET log_statement = 'all'")
	out := map[string]statementCount{}
	for _, cmd := range []string{"check", "bootstrap", "verify"} {
		log := filepath.Join(pgDir, "source.log")
		before, err := os.Stat(log)
		if err != nil {
			t.Fatalf("the source's server log: %v", err)
		}
		r := e.mustPgsync(cmd)
		out[cmd] = countLoggedStatements(t, log, before.Size())
		t.Logf("%d tables: %s took %s", 4*perSchema, cmd, r.elapsed.Round(time.Millisecond))
	}
	return out
}

// loggedStatement matches the log line of a statement that log_statement
// logs, simple ("statement: ...") or extended ("execute <name>: ...").
// The clusters' log_line_prefix ends with the database and application
// (logEntry); one made before that prefix has neither.
var loggedStatement = regexp.MustCompile(`\] (?:db=\S* app=.*?: )?LOG:  (?:statement|execute [^:]*): (.*)$`)

// countLoggedStatements counts the statements in the log after offset,
// COPY statements and hashes of a whole table left out.
func countLoggedStatements(t *testing.T, log string, offset int64) statementCount {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	c := statementCount{byKind: map[string]int{}}
	lines := strings.Split(string(data[offset:]), "\n")
	for i, line := range lines {
		m := loggedStatement.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := m[1]
		if strings.TrimSpace(text) == "" && i+1 < len(lines) {
			text = lines[i+1] // a statement that begins with a new line
		}
		kind := strings.Join(strings.Fields(text), " ")
		if strings.HasPrefix(kind, "COPY ") || kind == "SELECT count(*)," /* verify's hashSQL */ {
			continue
		}
		c.total++
		c.byKind[kind[:min(len(kind), 70)]]++
	}
	return c
}

// grownStatements lists the statements sent more often in large than in
// small, most grown first.
func grownStatements(small, large map[string]int) string {
	var lines []string
	for k, n := range large {
		if n > small[k] {
			lines = append(lines, fmt.Sprintf("%6d more: %s", n-small[k], k))
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(lines)))
	return strings.Join(lines, "\n")
}
