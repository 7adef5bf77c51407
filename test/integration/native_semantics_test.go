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
