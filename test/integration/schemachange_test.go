//go:build integration

package integration

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// A schema that changes during the move (issue 16): the same DDL and
// writes on the source, applied by a native subscription, by pgsync with
// job.add_columns and by pgsync without it.

const schemaChangeDDL = `
CREATE TABLE dd (id int PRIMARY KEY, v int, req int NOT NULL, label varchar(8));
INSERT INTO dd SELECT g, g, g, 'l' || g FROM generate_series(1, 100) g;
CREATE TABLE gg (id int PRIMARY KEY, a int);
INSERT INTO gg SELECT g, g FROM generate_series(1, 20) g;`

// schemaChangeSteps are run one after the other, each applied by pgsync
// before the next: pgsync reads a column's definition from the source when
// it meets the change, and a later table rewrite on the source (ALTER
// COLUMN TYPE) forgets the value older rows read (docs/reference.md).
var schemaChangeSteps = [][]string{
	{
		// Older rows read 'x' and the time of the ALTER (not now() on the
		// target); code has a collation of its own.
		`ALTER TABLE dd ADD COLUMN note text NOT NULL DEFAULT 'x', ADD COLUMN at timestamptz NOT NULL DEFAULT now(), ADD COLUMN code text COLLATE "C"`,
		`INSERT INTO dd (id, v, req, label, note, code) VALUES (101, 101, 101, 'new', 'set', 'b')`,
		`UPDATE dd SET note = 'y', code = 'a' WHERE id <= 10`,
		// A generated column comes with the column it is computed from.
		`ALTER TABLE gg ADD COLUMN b int NOT NULL DEFAULT 1, ADD COLUMN c int GENERATED ALWAYS AS (a + b) STORED`,
		`INSERT INTO gg VALUES (21, 21, 5)`,
		`UPDATE gg SET b = 2 WHERE id <= 5`,
	},
	{
		`ALTER TABLE dd ALTER COLUMN v TYPE bigint, ALTER COLUMN label TYPE varchar(20)`,
		`UPDATE dd SET v = 5000000000, label = 'a longer label' WHERE id = 2`,
		`INSERT INTO dd (id, v, req, label) VALUES (102, 6000000000, 102, 'big')`,
	},
	{
		// req is NOT NULL without a default on the target, which keeps it.
		`ALTER TABLE dd DROP COLUMN req`,
		`INSERT INTO dd (id, v, label) VALUES (103, 7, 'after drop')`,
		`UPDATE dd SET v = v + 1 WHERE id = 50`,
	},
}

// stopLSN finds the source LSN in a stop's error.
var stopLSN = regexp.MustCompile(`^pgsync: table \S+ at ([0-9A-F]+/[0-9A-F]+): `)

// printedStatement returns the statement that the one-line error msg
// suggests after marker, e.g. "add it on the target (": up to the
// parenthesis that closes the one after marker, quotes respected.
func printedStatement(t *testing.T, msg, marker string) string {
	t.Helper()
	i := strings.Index(msg, marker)
	if i < 0 {
		t.Fatalf("no %q in the error: %s", marker, msg)
	}
	s := msg[i+len(marker):]
	depth := 0
	var quote byte
	for j := 0; j < len(s); j++ {
		switch c := s[j]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			if depth == 0 {
				return s[:j]
			}
			depth--
		}
	}
	t.Fatalf("unbalanced statement after %q: %s", marker, msg)
	return ""
}

// errorLine returns the line of a failed run's stderr that holds the
// error, and fails unless there is exactly one.
func errorLine(t *testing.T, stderr string) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "on the source") || strings.Contains(l, "no longer sends it") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("want one error line, got %d:\n%s", len(lines), stderr)
	}
	return lines[0]
}

// sameGenerated compares gg's generated column on source and target,
// which verify leaves out (each side computes it).
func (e *env) sameGenerated() {
	e.t.Helper()
	q := "SELECT string_agg(id || ':' || c, ',' ORDER BY id) FROM gg"
	if src, tgt := queryOne[string](e.t, e.src, q), queryOne[string](e.t, e.tgt, q); src != tgt {
		e.t.Errorf("gg.c on the target %s, on the source %s", tgt, src)
	}
}

// TestSchemaChangeAddColumns: with job.add_columns, pgsync adds the
// source's new columns as the source defines them, widens the columns
// whose type grew, stops at a NOT NULL column the source dropped with the
// fix, and ends identical to the source; a native subscription given the
// same sequence stops at the first missing column.
func TestSchemaChangeAddColumns(t *testing.T) {
	e := newEnv(t, schemaChangeDDL, "add_columns = true\n")
	native := newNativeSubscriber(e, "") // the source's schema
	native.subscribe(e, "dd, gg", "")
	e.mustPgsync("bootstrap")

	var log strings.Builder
	for i, step := range schemaChangeSteps {
		for _, sql := range step {
			e.srcExec(sql)
		}
		r := e.pgsync("run", "--until-caught-up")
		log.WriteString(r.stderr)
		if i < 2 {
			if r.code != 0 {
				t.Fatalf("step %d: run with add_columns: exit %d\n%s", i+1, r.code, r.stderr)
			}
			continue
		}
		// The dropped NOT NULL column stops run with add_columns too: a
		// constraint of the target is the operator's to drop.
		if r.code != 1 {
			t.Fatalf("step %d: run after a NOT NULL column was dropped on the source: exit %d\n%s", i+1, r.code, r.stderr)
		}
		fix := printedStatement(t, errorLine(t, r.stderr), "drop the constraint (")
		if fix != `ALTER TABLE "public"."dd" ALTER COLUMN "req" DROP NOT NULL` {
			t.Errorf("fix printed: %s", fix)
		}
		e.tgtExec(fix)
		log.WriteString(e.catchUp().stderr)
	}
	for _, want := range []string{
		`msg="added a column on the target, as the source defines it" table=public.dd column=note definition="text DEFAULT 'x'::text NOT NULL"`,
		`column=code definition="text COLLATE pg_catalog.\"C\""`,
		`table=public.gg column=c definition="integer GENERATED ALWAYS AS ((a + b)) STORED"`,
		`msg="widened a column on the target to the source's type" table=public.dd column=v from=integer to=bigint`,
		`column=label from="character varying(8)" to="character varying(20)"`,
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %s:\n%s", want, log.String())
		}
	}
	e.mustVerify()
	e.sameGenerated()
	// Older rows read the source's values of the new columns, not the
	// target's now().
	q := "SELECT count(DISTINCT at) || ' ' || min(at)::text FROM dd WHERE id <= 100"
	if src, tgt := queryOne[string](t, e.src, q), queryOne[string](t, e.tgt, q); src != tgt {
		t.Errorf("dd.at of the older rows: source %s, target %s", src, tgt)
	}

	// Native stops at the first missing column: its worker errors and
	// retries, and the row written after the ALTER never arrives.
	eventually(t, 60*time.Second, "the native worker's error", func() bool {
		return queryOne[int64](t, native.conn, "SELECT coalesce(sum(apply_error_count), 0) FROM pg_stat_subscription_stats WHERE subname = $1", native.sub) > 0
	})
	if n := queryOne[int](t, native.conn, "SELECT count(*) FROM dd WHERE id > 100"); n != 0 {
		t.Errorf("the native subscriber applied %d rows written after the ALTER", n)
	}
}

// TestSchemaChangeStopsWithStatement: without job.add_columns, pgsync stops
// at each schema change of the same sequence with one statement, exactly
// the one that makes the target take it; once the operator has run each as
// printed, run ends identical to the source.
func TestSchemaChangeStopsWithStatement(t *testing.T) {
	e := newEnv(t, schemaChangeDDL, "")
	e.mustPgsync("bootstrap")
	var printed []string
	for i, step := range schemaChangeSteps {
		for _, sql := range step {
			e.srcExec(sql)
		}
		for stops := 0; ; stops++ {
			r := e.pgsync("run", "--until-caught-up")
			if r.code == 0 {
				break
			}
			if r.code != 1 || stops == 3 {
				t.Fatalf("step %d: run: exit %d after %d stops\n%s", i+1, r.code, stops, r.stderr)
			}
			line := errorLine(t, r.stderr)
			var stmt string
			for _, marker := range []string{"add it on the target (", "add them on the target (", "widen it on the target (", "widen them on the target (", "drop the constraint ("} {
				if strings.Contains(line, marker) {
					stmt = printedStatement(t, line, marker)
				}
			}
			// The position stays before the transaction that stopped run
			// ("table public.dd at <its commit LSN>: ...").
			m := stopLSN.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("step %d: the error names no LSN: %s", i+1, line)
			}
			if at := queryOne[string](t, e.tgt, "SELECT lsn::text FROM pgsync.progress WHERE job = $1", e.job); !lsnLess(at, m[1]) {
				t.Errorf("step %d: progress at %s, past the change at %s that stopped run", i+1, at, m[1])
			}
			printed = append(printed, stmt)
			e.tgtExec(stmt)
		}
	}
	all := strings.Join(printed, "\n")
	t.Logf("statements printed:\n%s", all)
	for _, want := range []string{
		`ADD COLUMN "note" text DEFAULT 'x'::text NOT NULL`,
		`ALTER COLUMN "at" SET DEFAULT now()`,
		`ADD COLUMN "code" text COLLATE pg_catalog."C"`,
		`ALTER TABLE "public"."gg" ADD COLUMN "b" integer DEFAULT 1 NOT NULL, ADD COLUMN "c" integer GENERATED ALWAYS AS ((a + b)) STORED`,
		`ALTER TABLE "public"."dd" ALTER COLUMN "v" TYPE bigint, ALTER COLUMN "label" TYPE character varying(20)`,
		`ALTER TABLE "public"."dd" ALTER COLUMN "req" DROP NOT NULL`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no statement printed has %s:\n%s", want, all)
		}
	}
	e.mustVerify()
	e.sameGenerated()
}
