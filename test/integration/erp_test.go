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

	"github.com/pgsync/pgsync/test/fixture"
)

// erpDDL is the ERP fixture (issue 22), schema and rows: see
// fixture.ERPSchema.
func erpDDL(role string) string {
	return fixture.ERPSchema(role) + fixture.ERPData(role)
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
		for _, sql := range fixture.ERPWrite(i) {
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
