package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Apply as native does (issue 16): each scenario is replicated into two
// targets, one by pgsync and one by PostgreSQL's own subscriber (CREATE
// SUBSCRIPTION), and the two must end with the same rows.

// nativeSubscriber is a test's second target database, fed by a native
// subscription to the test's source: the reference pgsync's target is
// compared with.
type nativeSubscriber struct {
	t    *testing.T
	db   string
	url  string
	conn *pgx.Conn
	sub  string // the subscription, and its slot on the source
}

// newNativeSubscriber creates the database <db>_native on the target
// cluster and prepares it with targetSQL, or with the source's schema
// (pg_dump --schema-only) when targetSQL is empty. Its cleanup drops the
// subscription (and so its slot) before the database.
func newNativeSubscriber(e *env, targetSQL string) *nativeSubscriber {
	e.t.Helper()
	n := &nativeSubscriber{t: e.t, db: e.db + "_native", sub: "native_" + e.db}
	admin := mustConnect(e.t, adminURL(targetPort))
	defer admin.Close(context.Background())
	for _, sql := range []string{"DROP DATABASE IF EXISTS " + n.db + " WITH (FORCE)", "CREATE DATABASE " + n.db} {
		if _, err := admin.Exec(context.Background(), sql); err != nil {
			e.t.Fatal(err)
		}
	}
	n.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%s/%s?sslmode=disable", targetPort, n.db)
	if targetSQL == "" {
		e.dumpSchema(n.db)
	}
	n.conn = mustConnect(e.t, n.url)
	e.t.Cleanup(func() {
		ctx := context.Background()
		_, _ = n.conn.Exec(ctx, "DROP SUBSCRIPTION IF EXISTS "+n.sub)
		n.conn.Close(ctx)
		if a, err := mustConnectErr(adminURL(targetPort)); err == nil {
			_, _ = a.Exec(ctx, "DROP DATABASE IF EXISTS "+n.db+" WITH (FORCE)")
			a.Close(ctx)
		}
	})
	if targetSQL != "" {
		n.exec(targetSQL)
	}
	return n
}

func (n *nativeSubscriber) exec(sql string) {
	n.t.Helper()
	if _, err := n.conn.Exec(context.Background(), sql); err != nil {
		n.t.Fatalf("native target: %v\n%s", err, sql)
	}
}

// subscribe publishes tables (a FOR TABLE list) on e's source, subscribes
// to them and waits for the initial copy of every table.
func (n *nativeSubscriber) subscribe(e *env, tables string) {
	n.t.Helper()
	e.srcExec("CREATE PUBLICATION native_pub FOR TABLE " + tables)
	n.exec(fmt.Sprintf("CREATE SUBSCRIPTION %s CONNECTION 'host=127.0.0.1 port=%s dbname=%s user=postgres' PUBLICATION native_pub",
		n.sub, sourcePort, e.db))
	eventually(n.t, 60*time.Second, "the native initial copy", func() bool {
		return queryOne[bool](n.t, n.conn, "SELECT count(*) FILTER (WHERE srsubstate = 'r') = count(*) AND count(*) > 0 FROM pg_subscription_rel")
	})
}

// caughtUp waits until the subscription has applied all the source's WAL
// written so far.
func (n *nativeSubscriber) caughtUp(e *env) {
	n.t.Helper()
	head := queryOne[string](n.t, e.src, "SELECT pg_current_wal_lsn()::text")
	eventually(n.t, 60*time.Second, "the native subscription to reach "+head, func() bool {
		at := queryOne[string](n.t, e.src, "SELECT coalesce((SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1), '0/0')", n.sub)
		return !lsnLess(at, head)
	})
}

// sameAsNative compares each table's rows on pgsync's target with the
// native subscriber's (a table may be written "ONLY name").
func (n *nativeSubscriber) sameAsNative(e *env, tables ...string) {
	n.t.Helper()
	for _, table := range tables {
		if got, want := tableDigest(n.t, e.tgtURL, table), tableDigest(n.t, n.url, table); got != want {
			n.t.Errorf("%s: pgsync's target has %s, the native subscription's %s", table, got, want)
		}
	}
}

// TestTruncateIntoPartitionedTargetLikeNative: the source truncates a plain
// table and a partition whose target copies are partitioned further; the
// native subscriber truncates their partitions, and so does pgsync. A
// target-only table that inherits from a truncated table keeps its rows, as
// native leaves it, wherever the table is in the TRUNCATE's list.
func TestTruncateIntoPartitionedTargetLikeNative(t *testing.T) {
	e := newEnv(t, `CREATE TABLE meas (id int, at date, v int, PRIMARY KEY (id, at));
CREATE TABLE ev (id int, at date, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
CREATE TABLE ev_2025 PARTITION OF ev FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE ev_2026 PARTITION OF ev FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
CREATE TABLE plain (id int PRIMARY KEY);
INSERT INTO meas SELECT g, '2025-01-01'::date + g % 365, g FROM generate_series(1, 500) g;
INSERT INTO ev SELECT g, '2025-01-01'::date + g % 730 FROM generate_series(1, 500) g;
INSERT INTO plain SELECT generate_series(1, 10);`, "")
	const targetSQL = `CREATE TABLE meas (id int, at date, v int, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
CREATE TABLE meas_h1 PARTITION OF meas FOR VALUES FROM ('2025-01-01') TO ('2025-07-01');
CREATE TABLE meas_h2 PARTITION OF meas FOR VALUES FROM ('2025-07-01') TO ('2026-01-01') PARTITION BY HASH (id);
CREATE TABLE meas_h2_0 PARTITION OF meas_h2 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE meas_h2_1 PARTITION OF meas_h2 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE ev (id int, at date, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
CREATE TABLE ev_2025 PARTITION OF ev FOR VALUES FROM ('2025-01-01') TO ('2026-01-01') PARTITION BY HASH (id);
CREATE TABLE ev_2025_0 PARTITION OF ev_2025 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE ev_2025_1 PARTITION OF ev_2025 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE ev_2026 PARTITION OF ev FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
CREATE TABLE plain (id int PRIMARY KEY);
CREATE TABLE plain_extra (note text) INHERITS (plain);`
	native := newNativeSubscriber(e, targetSQL)
	native.subscribe(e, "meas, ev, plain")
	e.tgtExec(targetSQL)
	e.mustPgsync("bootstrap")
	// After the copies, which go into empty tables only.
	const extra = `INSERT INTO plain_extra VALUES (1000, 'target only')`
	native.exec(extra)
	e.tgtExec(extra)
	for _, sql := range []string{
		`TRUNCATE meas`,
		`INSERT INTO meas SELECT g, '2025-01-01'::date + g % 365, -g FROM generate_series(1, 100) g`,
		`TRUNCATE ev_2025`, // a source partition, partitioned on the targets
		`INSERT INTO ev SELECT g, '2025-03-01'::date + (g - 1000) FROM generate_series(1000, 1050) g`,
		`TRUNCATE meas, plain`, // plain second in the list: ONLY for it too
		`INSERT INTO plain VALUES (42)`,
		`INSERT INTO meas VALUES (7, '2025-08-01', 7)`,
		`TRUNCATE ev`, // the source's leaves
		`INSERT INTO ev VALUES (1, '2025-09-09'), (2, '2026-09-09')`,
	} {
		e.srcExec(sql)
	}
	e.catchUp()
	native.caughtUp(e)
	native.sameAsNative(e, "meas", "meas_h1", "meas_h2_0", "meas_h2_1", "ev_2025_0", "ev_2025_1", "ev_2026", "ONLY plain", "plain_extra")
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM plain_extra"); n != 1 {
		t.Errorf("the target-only child table has %d rows, want 1", n)
	}
	// verify reads each target table ONLY, which a partitioned one has no
	// rows in: compare with the source here.
	for _, table := range []string{"meas", "ev_2025", "ev_2026", "ONLY plain"} {
		if got, want := tableDigest(t, e.tgtURL, table), tableDigest(t, e.srcURL, table); got != want {
			t.Errorf("%s: the target has %s, the source %s", table, got, want)
		}
	}
}

// nestedCompositeDDL is the schema of issue 16: a key of a composite type
// that nests another composite type, an array of it and an enum.
const nestedCompositeDDL = `CREATE TYPE basic_t AS (a float8, b text, c int);
CREATE TYPE enum_t AS ENUM ('a', 'b', 'c');
CREATE TYPE mix_t AS (a basic_t, b basic_t[], c enum_t, d enum_t[]);
CREATE TABLE t (a mix_t PRIMARY KEY, b mix_t[]);
CREATE TABLE one (k basic_t PRIMARY KEY, n int);
CREATE TABLE full_mix (a mix_t, n int);
ALTER TABLE full_mix REPLICA IDENTITY FULL;
CREATE FUNCTION mix(i int, s text) RETURNS mix_t LANGUAGE sql IMMUTABLE AS $$
  SELECT ROW(ROW(i / 4.0, s, i)::basic_t, ARRAY[ROW(-i, s || ' "q", \ y', NULL)::basic_t, NULL]::basic_t[],
             (ARRAY['a', 'b', 'c'])[1 + i % 3]::enum_t, ARRAY['c', 'a']::enum_t[])::mix_t $$;
INSERT INTO t SELECT mix(g, 'r' || g), ARRAY[mix(g + 1, 'x,y'), mix(g + 2, '')] FROM generate_series(1, 100) g;
INSERT INTO one SELECT ROW(g, 'k ' || g, g)::basic_t, 0 FROM generate_series(1, 100) g;
INSERT INTO full_mix SELECT mix(g, 'f'), g FROM generate_series(1, 50) g;`

// TestNestedCompositeKeyLikeNative: keys of a composite type that nests
// another composite type (and one level deep, and a REPLICA IDENTITY FULL
// table of such a column) through INSERT, UPDATE of a non-key column,
// UPDATE of the key and DELETE, in runs and one row at a time: pgsync's
// target ends as the native subscriber's, and as the source.
func TestNestedCompositeKeyLikeNative(t *testing.T) {
	e := newEnv(t, nestedCompositeDDL, "")
	native := newNativeSubscriber(e, "")
	native.subscribe(e, "t, one, full_mix")
	e.mustPgsync("bootstrap")
	for _, sql := range []string{
		`INSERT INTO t VALUES (mix(1000, 'single'), NULL)`,
		`INSERT INTO t SELECT mix(g, 'run'), ARRAY[mix(g, 'b')] FROM generate_series(2000, 2099) g`,
		`UPDATE t SET b = ARRAY[mix(0, 'one row')] WHERE a = mix(1, 'r1')`,
		`UPDATE t SET b = NULL WHERE ((a).a).c % 2 = 0`,
		`UPDATE t SET a = mix(((a).a).c + 5000, 'moved') WHERE ((a).a).c % 5 = 0`,
		`DELETE FROM t WHERE a = mix(3, 'r3')`,
		`DELETE FROM t WHERE ((a).a).c % 7 = 0`,
		`INSERT INTO one VALUES (ROW(0.5, 'single', NULL), 1)`,
		`UPDATE one SET n = n + 1 WHERE (k).c = 1`,
		`UPDATE one SET n = n + 1`,
		`UPDATE one SET k = ROW((k).a, (k).b || ' moved', (k).c) WHERE (k).c % 10 = 0`,
		`DELETE FROM one WHERE (k).c = 2`,
		`DELETE FROM one WHERE (k).c % 3 = 0`,
		`UPDATE full_mix SET n = -n WHERE n % 2 = 0`,
		`UPDATE full_mix SET a = mix(n, 'changed') WHERE n % 5 = 0`,
		`DELETE FROM full_mix WHERE n % 3 = 0`,
		`DELETE FROM full_mix WHERE n = 1`,
	} {
		e.srcExec(sql)
	}
	e.catchUp()
	native.caughtUp(e)
	native.sameAsNative(e, "t", "one", "full_mix")
	e.mustVerify()
}
