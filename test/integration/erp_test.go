//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// erpDDL is a database shaped like an ERP application's (issue 22): several
// schemas, five extensions used by keys, columns and indexes, domains,
// enums and composite types across schemas, xml, identity columns, foreign
// keys with cascades, a trigger, a partitioned table, a schema that holds
// only views, a materialized view, a function whose body has a line
// beginning with a backslash, comments on every kind of object, grants and
// default privileges to role, a table without a key given REPLICA
// IDENTITY FULL, and large objects (one of 1.4 MB, over a chunk; one
// owned by role, one readable by it).
func erpDDL(role string) string {
	return `
CREATE EXTENSION citext; CREATE EXTENSION hstore; CREATE EXTENSION ltree; CREATE EXTENSION pg_trgm; CREATE EXTENSION "uuid-ossp";
CREATE SCHEMA person; CREATE SCHEMA sales; CREATE SCHEMA production; CREATE SCHEMA reporting;
COMMENT ON SCHEMA sales IS 'orders and their lines';
CREATE DOMAIN person.email AS citext CHECK (VALUE ~ '@');
COMMENT ON DOMAIN person.email IS 'an address';
CREATE TYPE person.address AS (street text, city text, zip text);
COMMENT ON TYPE person.address IS 'postal';
CREATE TYPE sales.status AS ENUM ('open', 'paid', 'shipped', 'cancelled');
COMMENT ON TYPE sales.status IS 'order status';
CREATE TABLE person.people (
  login citext PRIMARY KEY, email person.email NOT NULL, home person.address, attrs hstore, path ltree,
  uid uuid NOT NULL DEFAULT uuid_generate_v4() UNIQUE, profile xml, created timestamptz NOT NULL DEFAULT now());
COMMENT ON TABLE person.people IS 'everyone';
COMMENT ON COLUMN person.people.login IS 'case-insensitive';
CREATE INDEX people_path ON person.people USING gist (path);
CREATE INDEX people_email_trgm ON person.people USING gin ((email::text) gin_trgm_ops);
COMMENT ON INDEX person.people_path IS 'org tree';
CREATE TABLE sales.orders (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, login citext NOT NULL REFERENCES person.people ON DELETE CASCADE ON UPDATE CASCADE,
  status sales.status NOT NULL DEFAULT 'open', ship_to person.address, total numeric(12,2) NOT NULL DEFAULT 0, tags text[]);
COMMENT ON TABLE sales.orders IS 'one row per order';
COMMENT ON CONSTRAINT orders_login_fkey ON sales.orders IS 'cascades';
CREATE INDEX orders_login ON sales.orders (login);
CREATE TABLE sales.order_lines (
  order_id bigint NOT NULL REFERENCES sales.orders ON DELETE CASCADE, line int NOT NULL, sku text NOT NULL, qty int NOT NULL CHECK (qty > 0),
  PRIMARY KEY (order_id, line));
CREATE TABLE sales.audit (at timestamptz NOT NULL DEFAULT now(), order_id bigint, what text);
ALTER TABLE sales.audit REPLICA IDENTITY FULL;
COMMENT ON TABLE sales.audit IS 'no key: replica identity full';
CREATE FUNCTION sales.audit_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sales.audit (order_id, what) VALUES (NEW.id, TG_OP);
  RETURN NEW;
END $$;
COMMENT ON FUNCTION sales.audit_order() IS 'writes sales.audit';
CREATE TRIGGER orders_audit AFTER INSERT OR UPDATE ON sales.orders FOR EACH ROW EXECUTE FUNCTION sales.audit_order();
COMMENT ON TRIGGER orders_audit ON sales.orders IS 'audit';
CREATE FUNCTION production.backslash() RETURNS text LANGUAGE sql AS $$ SELECT '
\this line begins with a backslash' $$;
CREATE TABLE production.products (sku text PRIMARY KEY, name citext NOT NULL, path ltree, specs hstore, doc xml);
CREATE INDEX products_name_trgm ON production.products USING gin (name gin_trgm_ops);
CREATE TABLE production.readings (sensor int NOT NULL, at date NOT NULL, value float8, PRIMARY KEY (sensor, at)) PARTITION BY RANGE (at);
CREATE TABLE production.readings_2025 PARTITION OF production.readings FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE production.readings_2026 PARTITION OF production.readings FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
CREATE INDEX readings_value ON production.readings (value);
CREATE VIEW reporting.open_orders AS SELECT o.id, p.email FROM sales.orders o JOIN person.people p ON p.login = o.login WHERE o.status = 'open';
COMMENT ON VIEW reporting.open_orders IS 'to ship';
CREATE MATERIALIZED VIEW reporting.totals AS SELECT login, sum(total) AS total FROM sales.orders GROUP BY login;
CREATE UNIQUE INDEX totals_login ON reporting.totals (login);
ALTER DEFAULT PRIVILEGES IN SCHEMA sales GRANT SELECT ON TABLES TO ` + role + `;
GRANT USAGE ON SCHEMA sales, reporting TO ` + role + `;
GRANT SELECT ON sales.orders, reporting.open_orders TO ` + role + `;
GRANT SELECT (login, email) ON person.people TO ` + role + `;
INSERT INTO person.people (login, email, home, attrs, path, profile)
  SELECT 'User' || i, 'user' || i || '@example.com', ROW(i || ' Main St', 'Town' || i % 7, lpad(i::text, 5, '0'))::person.address,
         hstore('tier', (i % 3)::text), text2ltree('org.dept' || i % 5 || '.team' || i % 11), xmlparse(content '<p id="' || i || '"/>')
  FROM generate_series(1, 300) i;
INSERT INTO sales.orders (login, status, total, tags)
  SELECT 'user' || (i % 300 + 1), (ARRAY['open', 'paid', 'shipped']::sales.status[])[i % 3 + 1], i * 1.5, ARRAY['t' || i % 4]
  FROM generate_series(1, 1500) i;
INSERT INTO sales.order_lines SELECT o.id, l, 'SKU' || (o.id * l) % 97, l FROM sales.orders o, generate_series(1, 3) l;
INSERT INTO production.products SELECT 'SKU' || i, 'Product ' || i, text2ltree('cat' || i % 4), hstore('color', 'c' || i % 5), xmlparse(content '<spec n="' || i || '"/>')
  FROM generate_series(0, 96) i;
INSERT INTO production.readings SELECT s, '2025-06-01'::date + d, s * d FROM generate_series(1, 10) s, generate_series(0, 400) d;
REFRESH MATERIALIZED VIEW reporting.totals;
SELECT lo_from_bytea(1001, convert_to(repeat('contract ', 100), 'UTF8'));
SELECT lo_from_bytea(1002, decode(repeat('00ff', 700000), 'hex'));
SELECT lo_from_bytea(1003, 'removed after bootstrap');
ALTER LARGE OBJECT 1001 OWNER TO ` + role + `;
GRANT SELECT ON LARGE OBJECT 1002 TO ` + role + `;
`
}

// erpTables are the ERP fixture's tables, compared row by row.
var erpTables = []string{"person.people", "sales.orders", "sales.order_lines", "sales.audit", "production.products", "production.readings"}

// erpWrites writes to every kind of table of the ERP fixture until stop is
// closed: inserts through the trigger, updates of citext keys that cascade,
// deletes that cascade, rows of partitions.
func erpWrites(t *testing.T, url string, stop <-chan struct{}, wrote *atomic.Int64) {
	c := mustConnect(t, url)
	defer c.Close(context.Background())
	for i := 1; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		for _, sql := range []string{
			fmt.Sprintf(`INSERT INTO person.people (login, email, attrs, path) VALUES ('New%d', 'new%d@example.com', 'k=>%d', 'org.new') ON CONFLICT DO NOTHING`, i, i, i),
			fmt.Sprintf(`INSERT INTO sales.orders (login, total, ship_to) VALUES ('new%d', %d, ROW('x', 'y', 'z'))`, i, i),
			fmt.Sprintf(`UPDATE sales.orders SET status = 'paid', tags = tags || 'w%d'::text WHERE id = %d`, i, i%1500+1),
			fmt.Sprintf(`UPDATE person.people SET login = 'Moved%d' WHERE login = 'user%d'`, i, i%300+1),
			fmt.Sprintf(`DELETE FROM person.people WHERE login = 'user%d'`, (i*7)%300+1),
			fmt.Sprintf(`INSERT INTO production.readings VALUES (%d, '2026-03-01'::date + %d, %d) ON CONFLICT DO NOTHING`, 100+i%5, i, i),
			fmt.Sprintf(`UPDATE production.products SET specs = specs || hstore('w', '%d') WHERE sku = 'SKU%d'`, i, i%97),
		} {
			if _, err := c.Exec(context.Background(), sql); err != nil {
				t.Errorf("source write: %v\n%s", err, sql)
				return
			}
		}
		wrote.Add(1)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestERPIntoEmptyTarget: the ERP fixture into an empty target database,
// with writes running through bootstrap and run, and beside it a native
// subscription into a target prepared with pg_dump --schema-only. Rows
// are identical on all three, pg_dump --schema-only of both sides is equal
// but for the job's publication (the native test's publication is part of
// the source's schema, and carried), and a second bootstrap of the same
// schema reports the same counts.
func TestERPIntoEmptyTarget(t *testing.T) {
	role := fmt.Sprintf("erp_reader_%d", time.Now().UnixNano()%1e9)
	for _, port := range []string{sourcePort, targetPort} {
		admin := mustConnect(t, adminURL(port))
		if _, err := admin.Exec(context.Background(), "CREATE ROLE "+role); err != nil {
			t.Fatal(err)
		}
		admin.Close(context.Background())
	}
	e := newEnv(t, erpDDL(role), "")
	e.setTables(`["sales.*", "person.*", "production.*"]`)
	nativeDB := e.db + "_native"
	admin := mustConnect(t, adminURL(targetPort))
	if _, err := admin.Exec(context.Background(), "CREATE DATABASE "+nativeDB); err != nil {
		t.Fatal(err)
	}
	admin.Close(context.Background())
	nativeURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%s/%s?sslmode=disable", targetPort, nativeDB)
	e.dumpSchema(nativeDB)
	native := mustConnect(t, nativeURL)
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = native.Exec(ctx, "DROP SUBSCRIPTION IF EXISTS erp_native_sub")
		native.Close(ctx)
		for _, port := range []string{sourcePort, targetPort} {
			if a, err := mustConnectErr(adminURL(port)); err == nil {
				if port == targetPort {
					_, _ = a.Exec(ctx, "DROP DATABASE IF EXISTS "+nativeDB+" WITH (FORCE)")
				}
				_, _ = a.Exec(ctx, "DROP ROLE IF EXISTS "+role)
				a.Close(ctx)
			}
		}
	})
	e.srcExec("CREATE PUBLICATION erp_native_pub FOR TABLE " + strings.Join(erpTables, ", ") + " WITH (publish_via_partition_root = false)")
	if _, err := native.Exec(context.Background(), fmt.Sprintf(
		"CREATE SUBSCRIPTION erp_native_sub CONNECTION 'host=127.0.0.1 port=%s dbname=%s user=postgres' PUBLICATION erp_native_pub",
		sourcePort, e.db)); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wrote atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); erpWrites(t, e.srcURL, stop, &wrote) }()
	r := e.mustPgsync("bootstrap")
	if !strings.Contains(r.stdout, "schema from pg_dump") {
		t.Fatalf("bootstrap did not take the schema from pg_dump:\n%s\n%s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "level=WARN") {
		t.Errorf("bootstrap warned:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "copied 3 large objects") {
		t.Errorf("bootstrap did not copy the 3 large objects:\n%s", r.stdout)
	}
	bg := e.start("run")
	eventually(t, 60*time.Second, "writes while run applies", func() bool { return wrote.Load() > 40 })
	close(stop)
	wg.Wait()
	if wrote.Load() == 0 {
		t.Fatal("no write ran")
	}
	head := queryOne[string](t, e.src, "SELECT pg_current_wal_lsn()::text")
	eventually(t, 90*time.Second, "both targets to reach "+head, func() bool {
		var pgsyncAt, nativeAt string
		row := e.src.QueryRow(context.Background(), `SELECT
  coalesce((SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1), '0/0'),
  coalesce((SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'erp_native_sub'), '0/0')`, "pgsync_"+e.job)
		if err := row.Scan(&pgsyncAt, &nativeAt); err != nil {
			t.Fatal(err)
		}
		ready := queryOne[bool](t, native, "SELECT count(*) FILTER (WHERE srsubstate = 'r') = count(*) AND count(*) > 0 FROM pg_subscription_rel")
		return ready && !lsnLess(pgsyncAt, head) && !lsnLess(nativeAt, head)
	})
	e.mustVerify()
	if got := queryOne[string](t, e.tgt, "SELECT pg_get_userbyid(lomowner)::text FROM pg_largeobject_metadata WHERE oid = 1001"); got != role {
		t.Errorf("large object 1001 is owned by %s on the target, want %s", got, role)
	}
	if !queryOne[bool](t, e.tgt, "SELECT lomacl::text LIKE '%"+role+"=r/%' FROM pg_largeobject_metadata WHERE oid = 1002") {
		t.Error("the grant on large object 1002 did not reach the target")
	}
	// Large objects changed after bootstrap: verify names each, cutover
	// copies and removes them before it reports ready.
	e.srcExec(`SELECT lo_from_bytea(1004, 'created after bootstrap'); SELECT lo_put(1002, 1048570, 'across the chunk boundary'); SELECT lo_unlink(1003)`)
	v := e.pgsync("verify")
	for _, want := range []string{"large object 1002: content differs", "large object 1003: only on the target", "large object 1004: only on the source"} {
		if v.code != 1 || !strings.Contains(v.stdout, want) {
			t.Errorf("verify after large objects changed: exit %d, want 1 and %q\n%s\n%s", v.code, want, v.stdout, v.stderr)
		}
	}
	cut := e.mustPgsync("cutover", "--timeout", "60s")
	if !strings.Contains(cut.stdout, "2 created or changed since bootstrap copied, 1 removed") {
		t.Errorf("cutover's large objects:\n%s", cut.stdout)
	}
	e.mustVerify()
	sigtermWithin(t, bg, 10*time.Second)
	if log := bg.stderr.String(); strings.Contains(log, "level=ERROR") {
		t.Errorf("run reported errors:\n%s", log)
	}
	for _, table := range erpTables {
		src, got, nat := tableDigest(t, e.srcURL, table), tableDigest(t, e.tgtURL, table), tableDigest(t, nativeURL, table)
		if got != src {
			t.Errorf("%s: pgsync's target has %s, the source %s", table, got, src)
		}
		if got != nat {
			t.Errorf("%s: pgsync's target has %s, the native subscription's %s", table, got, nat)
		}
	}
	srcSchema := dumpSchemaText(t, sourcePort, e.db, "pgsync_"+e.job)
	tgtSchema := dumpSchemaText(t, targetPort, e.db, "pgsync_"+e.job)
	if srcSchema != tgtSchema {
		t.Errorf("pg_dump --schema-only of the target differs from the source's:\n%s", lineDiff(srcSchema, tgtSchema))
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM reporting.totals"); n == 0 {
		t.Error("the materialized view was not refreshed")
	}
	built := bootstrapCounts(r.stdout)
	if built == "" {
		t.Fatalf("bootstrap printed no counts:\n%s", r.stdout)
	}
	// The same schema again, into another empty database: the same counts.
	again := newEnv(t, erpDDL(role), "")
	again.setTables(`["sales.*", "person.*", "production.*"]`)
	again.srcExec("CREATE PUBLICATION erp_native_pub FOR TABLE " + strings.Join(erpTables, ", ") + " WITH (publish_via_partition_root = false)")
	r2 := again.mustPgsync("bootstrap")
	if got := bootstrapCounts(r2.stdout); got != built {
		t.Errorf("a second bootstrap of the same schema reports %q, the first %q\n%s", got, built, r2.stderr)
	}
}

// bootstrapCounts is bootstrap's line of what the schema built.
func bootstrapCounts(stdout string) string {
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "schema from") {
			return l
		}
	}
	return ""
}
