//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestVerifyRowsNamesEachDifference: verify --rows names every row that
// differs, by key and kind, on planted differences of each kind (issue
// 24): a row missing on the target, an extra one, a changed TOASTed value
// (with its column), a changed key column of a composite key, and in a
// table without a key a row the target has twice. It exits 0 only when
// nothing differs, and --table limits it.
func TestVerifyRowsNamesEachDifference(t *testing.T) {
	e := newEnv(t, `CREATE TABLE docs (id int PRIMARY KEY, title text, body text);
INSERT INTO docs SELECT g, 'doc ' || g, repeat(md5(g::text), 300) FROM generate_series(1, 20000) g;
CREATE TABLE lines (order_id int, line int, qty int, PRIMARY KEY (order_id, line));
INSERT INTO lines SELECT o, l, l FROM generate_series(1, 3000) o, generate_series(1, 3) l;
CREATE TABLE events (at int, what text);
ALTER TABLE events REPLICA IDENTITY FULL;
INSERT INTO events SELECT g % 500, 'e' || (g % 7) FROM generate_series(1, 5000) g;`, "")
	e.mustPgsync("bootstrap")
	r := e.pgsync("verify", "--rows")
	if r.code != 0 || !strings.Contains(r.stdout, "all 3 tables identical, row by row") {
		t.Fatalf("verify --rows with nothing changed: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	e.tgtExec(`DELETE FROM docs WHERE id = 17;
INSERT INTO docs VALUES (20001, 'extra', 'x');
UPDATE docs SET body = body || 'changed' WHERE id = 4242;
UPDATE lines SET qty = 99 WHERE order_id = 1234 AND line = 2;
INSERT INTO events SELECT at, what FROM events WHERE at = 77 AND what = 'e0' LIMIT 1;`)
	r = e.pgsync("verify", "--rows")
	for _, want := range []string{
		"public.docs (17): only on the source",
		"public.docs (20001): only on the target",
		"public.docs (4242): values differ (body)",
		"public.lines (1234,2): values differ (qty)",
		"public.events (77,e0): only on the target",
		"public.docs: 3 rows differ",
		"public.lines: 1 rows differ",
	} {
		if r.code != 1 || !strings.Contains(r.stdout, want) {
			t.Errorf("verify --rows: exit %d, want 1 and %q\n%s\n%s", r.code, want, r.stdout, r.stderr)
		}
	}
	// status shows the last comparison: when, which, at what position and
	// what it found.
	var st struct {
		Last *struct {
			Kind      string `json:"kind"`
			LSN       string `json:"lsn"`
			Identical bool   `json:"identical"`
			Found     string `json:"found"`
		} `json:"last_verification"`
	}
	if err := json.Unmarshal([]byte(e.mustPgsync("status", "--json").stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st.Last == nil || st.Last.Kind != "verify --rows" || st.Last.Identical || !strings.Contains(st.Last.Found, "public.docs") || st.Last.LSN == "0/0" {
		t.Errorf("status --json after verify --rows found differences: last_verification %+v", st.Last)
	}
	r = e.pgsync("verify", "--rows", "--table", "public.lines", "--json")
	var res []struct {
		Table string `json:"table"`
		Diffs []struct {
			Key     string   `json:"key"`
			Kind    string   `json:"kind"`
			Columns []string `json:"columns"`
		} `json:"diffs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("verify --rows --json: %v\n%s", err, r.stdout)
	}
	if r.code != 1 || len(res) != 1 || res[0].Table != "public.lines" || len(res[0].Diffs) != 1 ||
		res[0].Diffs[0].Key != "(1234,2)" || res[0].Diffs[0].Kind != "values differ" || strings.Join(res[0].Diffs[0].Columns, ",") != "qty" {
		t.Errorf("verify --rows --table public.lines --json: exit %d, %+v\n%s", r.code, res, r.stdout)
	}
	if r := e.pgsync("verify", "--rows", "--table", "public.nosuch"); r.code != 2 || !strings.Contains(r.stderr, "--table public.nosuch") {
		t.Errorf("verify --rows --table of no table: exit %d\n%s", r.code, r.stderr)
	}
	// Repaired, it is identical again.
	e.tgtExec(`INSERT INTO docs SELECT 17, 'doc 17', repeat(md5('17'), 300); DELETE FROM docs WHERE id = 20001;
UPDATE docs SET body = repeat(md5('4242'), 300) WHERE id = 4242; UPDATE lines SET qty = 2 WHERE order_id = 1234 AND line = 2;
DELETE FROM events WHERE ctid = (SELECT ctid FROM events WHERE at = 77 AND what = 'e0' LIMIT 1)`)
	if r := e.pgsync("verify", "--rows"); r.code != 0 {
		t.Errorf("verify --rows after the repair: exit %d\n%s", r.code, r.stdout)
	}
	e.mustVerify()
	if out := e.mustPgsync("status").stdout; !strings.Contains(out, "last_verification:") || !strings.Contains(out, "verify at ") || !strings.Contains(out, ": identical") {
		t.Errorf("status after an identical verify:\n%s", out)
	}
}

// TestVerifyOnlineUnderWrites: verify and verify --rows while run applies
// a steady stream of writes (issue 24, point 7): both sides are read at one
// source position, so the writes in flight never show; three rounds each
// say identical. Then rows changed on the target behind pgsync's back (a
// missing row, an extra one, a changed TOASTed value, a row twice in a
// table without a key) are named, and nothing else, while the writes go on.
func TestVerifyOnlineUnderWrites(t *testing.T) {
	e := newEnv(t, `CREATE TABLE docs (id int PRIMARY KEY, title text, body text);
INSERT INTO docs SELECT g, 'doc ' || g, repeat(md5(g::text), 300) FROM generate_series(1, 5000) g;
UPDATE docs SET body = (SELECT string_agg(md5(random()::text || g::text), '') FROM generate_series(1, 1000) g) WHERE id = 4242;
CREATE TABLE lines (order_id int, line int, qty int, PRIMARY KEY (order_id, line));
INSERT INTO lines SELECT o, l, l FROM generate_series(1, 3000) o, generate_series(1, 3) l;
CREATE TABLE events (at int, what text);
ALTER TABLE events REPLICA IDENTITY FULL;
INSERT INTO events SELECT g % 500, 'e' || (g % 7) FROM generate_series(1, 5000) g;`, "")
	// Row 4242's body is 32 kB of random hex: stored out of line (TOAST).
	if !queryOne[bool](t, e.src, "SELECT pg_column_size(body) > 2000 FROM docs WHERE id = 4242") {
		t.Fatal("docs 4242's body is not TOASTed: the test's premise is false")
	}
	e.mustPgsync("bootstrap")
	bg := e.start("run")
	defer bg.kill9(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wrote atomic.Int64
	done := make(chan struct{})
	go func() { // the application, away from the rows planted below
		defer close(done)
		conn, err := pgx.Connect(ctx, e.srcURL)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for i := 0; ctx.Err() == nil; i++ {
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "UPDATE lines SET qty = qty + 1 WHERE order_id = $1", 2000+i%900); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, "INSERT INTO docs VALUES ($1, 'new', repeat('y', 3000)) ON CONFLICT (id) DO UPDATE SET title = 'again'", 100000+i%5000); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "INSERT INTO events VALUES ($1, 'w')", 1000+i)
				return err
			})
			if err == nil {
				wrote.Add(1)
			}
		}
	}()
	defer func() { cancel(); <-done }()
	eventually(t, 30*time.Second, "the writes to start", func() bool { return wrote.Load() > 50 })
	for round := 1; round <= 3; round++ {
		for _, args := range [][]string{{"verify"}, {"verify", "--rows"}} {
			r := e.pgsync(args...)
			if r.code != 0 || !strings.Contains(r.stdout, "while run applied (online)") {
				t.Fatalf("round %d, %v under writes: exit %d, want 0, online\n%s\n%s", round, args, r.code, r.stdout, r.stderr)
			}
		}
	}
	before := wrote.Load()
	e.tgtExec(`DELETE FROM docs WHERE id = 17;
INSERT INTO docs VALUES (20001, 'extra', 'x');
UPDATE docs SET body = body || 'changed' WHERE id = 4242;
INSERT INTO events SELECT at, what FROM events WHERE at = 77 AND what = 'e0' LIMIT 1;`)
	r := e.pgsync("verify", "--rows")
	for _, want := range []string{
		"public.docs (17): only on the source",
		"public.docs (20001): only on the target",
		"public.docs (4242): values differ (body)",
		"public.events (77,e0): only on the target",
		"public.docs: 3 rows differ",
		"while run applied (online)",
	} {
		if r.code != 1 || !strings.Contains(r.stdout, want) {
			t.Errorf("verify --rows under writes: exit %d, want 1 and %q\n%s\n%s", r.code, want, r.stdout, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "public.lines (") {
		t.Errorf("verify --rows named a row of lines, which only the writes in flight change:\n%s", r.stdout)
	}
	r = e.pgsync("verify")
	if r.code != 1 || !strings.Contains(r.stderr, "2 of 3 tables differ: public.docs, public.events") {
		t.Errorf("verify under writes with rows changed on the target: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if wrote.Load() <= before {
		t.Error("the writes stopped while verify ran")
	}
}
