//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// widenBench is the pgbench script of TestWidenedKeysUnderLoad: a parent
// and its child inserted in one transaction, then a child updated and one
// deleted, each on its own (two rows locked in one transaction in random
// order by two clients would deadlock).
const widenBench = `\set c random(1, 5000)
\set d random(1, 5000)
\set p random(1, 1000)
BEGIN;
INSERT INTO parent (name) VALUES ('bench');
INSERT INTO child (parent_id, v) VALUES (currval('parent_id_seq'), :c);
END;
UPDATE child SET v = v + 1 WHERE id = :c;
UPDATE parent SET name = 'renamed' WHERE id = :p;
DELETE FROM child WHERE id = :d;
`

// TestWidenedKeysUnderLoad is the move that widens int keys to bigint
// (issue 16): two tables with int keys and a foreign key between them, a
// target prepared with bigint keys and the foreign key, bootstrap and run
// under a pgbench write load; after the load, run catches up, verify says
// identical, and cutover sets the target's bigint sequences and verifies.
// The target then takes a key no int could hold.
func TestWidenedKeysUnderLoad(t *testing.T) {
	e := newEnv(t, `CREATE TABLE parent (id serial PRIMARY KEY, name text NOT NULL);
CREATE TABLE child (id serial PRIMARY KEY, parent_id int NOT NULL REFERENCES parent, v int NOT NULL DEFAULT 0);
INSERT INTO parent (name) SELECT 'p' || g FROM generate_series(1, 1000) g;
INSERT INTO child (parent_id, v) SELECT 1 + g % 1000, g FROM generate_series(1, 5000) g;`, "")
	e.tgtExec(`CREATE TABLE parent (id bigserial PRIMARY KEY, name text NOT NULL);
CREATE TABLE child (id bigserial PRIMARY KEY, parent_id bigint NOT NULL REFERENCES parent, v int NOT NULL DEFAULT 0);`)

	r := e.mustPgsync("check")
	for _, want := range []string{"OK    table public.parent", "OK    table public.child"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("check does not accept the bigint keys: no %q\n%s", want, r.stdout)
		}
	}

	script := filepath.Join(t.TempDir(), "widen.sql")
	if err := os.WriteFile(script, []byte(widenBench), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bench := exec.CommandContext(ctx, pgBin(t, "pgbench"), "-n", "-f", script, "-T", "5", "-c", "2", e.srcURL)
	var benchOut strings.Builder
	bench.Stdout, bench.Stderr = &benchOut, &benchOut
	if err := bench.Start(); err != nil {
		t.Fatal(err)
	}
	benchDone := make(chan error, 1)
	go func() { benchDone <- bench.Wait() }()

	// The copy reads the source while pgbench writes to it.
	time.Sleep(500 * time.Millisecond)
	r = e.mustPgsync("bootstrap")
	for _, table := range []string{"parent", "child"} {
		// Binary int4 cannot be read into an int8 column.
		if !regexp.MustCompile(`table=public\.` + table + ` .*format=text`).MatchString(r.stderr) {
			t.Errorf("%s not copied in text format:\n%s", table, r.stderr)
		}
	}
	bg := e.start("run")
	if err := <-benchDone; err != nil {
		t.Fatalf("pgbench: %v\n%s", err, benchOut.String())
	}
	if !strings.Contains(benchOut.String(), "number of failed transactions: 0") {
		t.Fatalf("pgbench had failures:\n%s", benchOut.String())
	}
	t.Logf("pgbench:\n%s", benchOut.String())
	sigtermWithin(t, bg, 10*time.Second)
	e.catchUp()
	e.mustVerify()

	bg = e.start("run")
	defer bg.kill9(t)
	r = e.mustPgsync("cutover", "--json")
	var rep struct {
		Identical    bool `json:"identical"`
		SequencesSet []struct {
			Target string `json:"target"`
		} `json:"sequences_set"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("cutover --json: %v\n%s", err, r.stdout)
	}
	if !rep.Identical || len(rep.SequencesSet) != 2 {
		t.Errorf("cutover report: %+v\n%s", rep, r.stdout)
	}
	for _, table := range []string{"parent", "child"} {
		if src, tgt := tableDigest(t, e.srcURL, table), tableDigest(t, e.tgtURL, table); src != tgt {
			t.Errorf("%s: source %s, target %s", table, src, tgt)
		}
	}
	// The application moves to the target: new keys follow the source's,
	// and go past what an int holds.
	e.tgtExec("INSERT INTO parent (name) VALUES ('after the move')")
	if n := queryOne[int64](t, e.tgt, "SELECT count(*) FROM parent WHERE id > (SELECT max(id) FROM parent WHERE name <> 'after the move')"); n != 1 {
		t.Errorf("the target's sequence was not set past the source's keys")
	}
	e.tgtExec("INSERT INTO parent (id, name) VALUES (3000000000, 'wide'); INSERT INTO child (parent_id, v) VALUES (3000000000, 1)")
}

// widenSourceDDL and widenTargetDDL are a table of every widening the
// type rules accept (catalog.Holds), with values at the edges, a REPLICA
// IDENTITY FULL table of widened columns, whose rows apply finds by value,
// and a table whose types differ by their modifiers only.
const widenSourceDDL = `CREATE TABLE w (
  id int PRIMARY KEY, sm smallint, n int, vc varchar(10), ch char(4), ch2 char(3), js json, ts timestamp,
  f4 real, b boolean, arr int[], jarr json[], num numeric(8,2));
INSERT INTO w VALUES
 (1, 1, 5, 'abcdefghij', 'ab', 'x', '{"b": 1,  "a": [1, 2]}', '2024-01-01 12:34:56.123456', 1.1, true, '{1,NULL,2147483647}', ARRAY['{"z": 1, "a": 2}'::json], 123456.78),
 (2, -32768, 2147483647, '', '', '', '[]', 'infinity', 'NaN', false, '{}', '{}', -0.01),
 (3, 32767, -2147483648, 'é ✓', 'abcd', 'ab ', 'null', '1999-12-31 23:59:59', '-Infinity', NULL, NULL, NULL, 0),
 (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 3.4028235e38, NULL, '{-2147483648}', NULL, NULL);
CREATE TABLE wf (k int, note varchar(5), f real, at timestamp, c char(3));
ALTER TABLE wf REPLICA IDENTITY FULL;
INSERT INTO wf VALUES (1, 'a', 1.1, '2024-01-01 10:00', 'x'), (2, 'b ', 2.5, '2024-01-02 10:00', 'y '), (3, 'b ', 2.5, '2024-01-02 10:00', 'y ');
CREATE TABLE wm (id int PRIMARY KEY, c char(3), n numeric(8,2), v varchar(5), ts timestamp(3), iv interval(2));
INSERT INTO wm VALUES (1, 'ab', 1.5, 'abcde', '2024-01-01 00:00:00.123', '1 day 00:00:00.12'), (2, NULL, -999999.99, '', 'infinity', NULL);`

const widenTargetDDL = `CREATE TABLE w (
  id bigint PRIMARY KEY, sm integer, n numeric(12,2), vc text, ch text, ch2 char(6), js jsonb, ts timestamptz,
  f4 double precision, b text, arr bigint[], jarr jsonb[], num numeric(12,4));
CREATE TABLE wf (k bigint, note text, f double precision, at timestamptz, c text);
CREATE TABLE wm (id int PRIMARY KEY, c char(6), n numeric(12,4), v varchar(10), ts timestamp, iv interval);`

// widenWrites change every widened column through each apply path:
// INSERTs (a run of them goes through COPY), batched and single UPDATEs
// of key and non-key columns, DELETEs by key and by full row.
var widenWrites = []string{
	`INSERT INTO w SELECT g, g % 100, g, 'v' || g, 'c' || (g % 10), 'd', json_build_object('g', g, 'a', ARRAY[g]), '2024-03-01'::timestamp + g * interval '1 minute 0.5 second',
  g / 7.0, g % 2 = 0, ARRAY[g, -g], ARRAY[json_build_object('x', g)], g / 3.0 FROM generate_series(10, 400) g`,
	`UPDATE w SET n = n + 1, js = '{"updated":  true}', ts = ts + interval '1 hour', f4 = f4 * 2, vc = 'u' WHERE id % 3 = 0`,
	`UPDATE w SET id = id + 1000 WHERE id = 10`,
	`UPDATE w SET ch = 'z', ch2 = 'yy ', jarr = NULL WHERE id = 1`,
	`DELETE FROM w WHERE id % 5 = 0`,
	`INSERT INTO w (id, ts) VALUES (2147483647, '2038-01-19 03:14:07')`,
	`INSERT INTO wf VALUES (4, 'c', 0.1, '2024-01-04 10:00:00.5', 'z')`,
	`UPDATE wf SET note = 'd' WHERE k = 1`,
	`UPDATE wf SET f = 7 WHERE k = 2`,
	`DELETE FROM wf WHERE k = 3`,
	`UPDATE wf SET c = 'w' WHERE k = 4`,
	`INSERT INTO wm SELECT g, 'c' || g % 10, g / 3.0, 'v' || g % 100, '2024-01-01'::timestamp + g * interval '1.5 ms', g * interval '1.25 s' FROM generate_series(10, 300) g`,
	`UPDATE wm SET c = 'x', n = n * 2, ts = ts + interval '1 day' WHERE id >= 10 AND id % 2 = 0`,
}

// TestWidenedTypesMatchNative replicates every accepted widening
// (varchar(10) and char(4) to text, char(3) to char(6), json to jsonb,
// timestamp to timestamptz, real to double precision, int to numeric,
// smallint to integer, arrays, any type to text, wider modifiers) into two
// targets prepared with the wider types, one by a native subscription and
// one by pgsync: both must hold the same rows, verify must say identical,
// the tables must be copied in text format (binary where only modifiers
// differ), and bootstrap must warn about the time zone that timestamp
// values are read in.
func TestWidenedTypesMatchNative(t *testing.T) {
	e := newEnv(t, widenSourceDDL, "")
	native := newNativeSubscriber(e, widenTargetDDL)
	e.tgtExec(widenTargetDDL)
	native.subscribe(e, "w, wf, wm", "")
	r := e.mustPgsync("bootstrap")
	if !regexp.MustCompile(`level=WARN .*column=ts .*time_zone=UTC`).MatchString(r.stderr) {
		t.Errorf("bootstrap does not warn about the time zone of timestamp to timestamptz:\n%s", r.stderr)
	}
	for table, format := range map[string]string{"w": "text", "wf": "text", "wm": "binary"} {
		if !regexp.MustCompile(`table=public\.` + table + ` .*format=` + format).MatchString(r.stderr) {
			t.Errorf("%s not copied in %s format:\n%s", table, format, r.stderr)
		}
	}
	e.mustVerify()
	native.sameAsNative(e, "w", "wf", "wm")
	// What the target holds: char(n)'s padding kept in text and widened in
	// char(6), as native keeps it; json normalized by jsonb; an int given
	// the numeric's scale.
	if got := queryOne[string](t, e.tgt, "SELECT concat_ws('|', ch, ch2, js, n) FROM w WHERE id = 3"); got != "abcd|ab    |null|-2147483648.00" {
		t.Errorf("row 3 on the target: %q", got)
	}
	if got := queryOne[string](t, e.tgt, "SELECT concat_ws('|', ch, ch2) FROM w WHERE id = 2"); got != "    |      " {
		t.Errorf("row 2 on the target: %q", got)
	}

	for _, sql := range widenWrites {
		e.srcExec(sql)
	}
	e.catchUp()
	native.caughtUp(e)
	e.mustVerify()
	native.sameAsNative(e, "w", "wf", "wm")
	if got := queryOne[string](t, e.tgt, "SELECT concat_ws('|', ch, ch2) FROM w WHERE id = 1"); got != "z   |yy    " {
		t.Errorf("row 1 on the target after its update: %q", got)
	}
}

// TestWidenedFullIdentityJSON: a REPLICA IDENTITY FULL table whose json
// column is jsonb on the target. Native finds the old row with jsonb's
// equality; so does apply, which compares a column as text only when the
// target's type has no equality operator (json does not, jsonb does; the
// text of a jsonb is normalized, so a text match would find no row).
func TestWidenedFullIdentityJSON(t *testing.T) {
	e := newEnv(t, `CREATE TABLE wj (doc json, note text);
ALTER TABLE wj REPLICA IDENTITY FULL;
INSERT INTO wj VALUES ('{"k":  1}', 'a'), ('{"k":  2}', 'b');`, "")
	ddl := "CREATE TABLE wj (doc jsonb, note text)"
	native := newNativeSubscriber(e, ddl)
	e.tgtExec(ddl)
	native.subscribe(e, "wj", "")
	e.mustPgsync("bootstrap")
	e.srcExec(`INSERT INTO wj VALUES ('{"k": 3,   "a": []}', 'c')`)
	e.srcExec(`UPDATE wj SET note = 'd' WHERE doc::text = '{"k":  1}'`)
	e.srcExec(`DELETE FROM wj WHERE doc::text = '{"k":  2}'`)
	e.catchUp()
	native.caughtUp(e)
	e.mustVerify()
	native.sameAsNative(e, "wj")
}

// TestNarrowingTargetRefused: a target column that cannot hold every value
// of the source's type is refused by check and bootstrap, naming both
// types and a value that would not fit, before anything is created.
func TestNarrowingTargetRefused(t *testing.T) {
	e := newEnv(t, "CREATE TABLE nr (id bigint PRIMARY KEY, v text); INSERT INTO nr VALUES (1, 'a');", "")
	e.tgtExec("CREATE TABLE nr (id integer PRIMARY KEY, v text)")
	c := e.pgsync("check")
	if c.code == 0 || !strings.Contains(c.stdout, "bigint to integer: 2147483648 would not fit") {
		t.Errorf("check: exit %d\n%s", c.code, c.stdout)
	}
	r := e.pgsync("bootstrap")
	if r.code != 1 {
		t.Fatalf("bootstrap onto a narrower key: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"public.nr", "column id", "bigint to integer: 2147483648 would not fit"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("error does not name %q: %s", want, r.stderr)
		}
	}
	if n := queryOne[int](t, e.src, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", "pgsync_"+e.job); n != 0 {
		t.Error("a slot was created although bootstrap refused the target")
	}
}
