//go:build integration

package integration

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// appWholeDDL adds to appSchemaDDL what only pg_dump's schema carries: a
// function called by a column default, views and a materialized view, a
// partitioned table with many partitions, row-level security with a
// policy, comments and grants.
func appWholeDDL(role string) string {
	var parts strings.Builder
	for m := 0; m < 24; m++ {
		from := time.Date(2025, time.Month(1+m), 1, 0, 0, 0, 0, time.UTC)
		to := from.AddDate(0, 1, 0)
		fmt.Fprintf(&parts, "CREATE TABLE readings_%s PARTITION OF readings FOR VALUES FROM ('%s') TO ('%s');\n",
			from.Format("2006_01"), from.Format("2006-01-02"), to.Format("2006-01-02"))
	}
	return appSchemaDDL + `
CREATE FUNCTION next_code() RETURNS text LANGUAGE sql AS $$ SELECT 'C-' || floor(random() * 1e6)::text $$;
CREATE TABLE coupons (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, code text NOT NULL DEFAULT next_code(),
  customer_id bigint REFERENCES customers ON DELETE CASCADE, owner name NOT NULL DEFAULT current_user);
CREATE INDEX coupons_customer ON coupons (customer_id);
INSERT INTO coupons (customer_id) SELECT id FROM customers WHERE id % 3 = 0;
ALTER TABLE coupons ENABLE ROW LEVEL SECURITY;
CREATE POLICY coupons_own ON coupons FOR SELECT TO ` + role + ` USING (owner = current_user);
CREATE TABLE readings (sensor int NOT NULL, at date NOT NULL, value float8, PRIMARY KEY (sensor, at)) PARTITION BY RANGE (at);
` + parts.String() + `
CREATE INDEX readings_value ON readings (value);
INSERT INTO readings SELECT s, '2025-01-01'::date + d, s * d FROM generate_series(1, 20) s, generate_series(0, 700) d;
CREATE VIEW open_orders AS SELECT o.id, c.email FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.status <> 'shipped';
CREATE MATERIALIZED VIEW order_totals AS SELECT customer_id, sum(total) AS total FROM orders GROUP BY customer_id;
CREATE UNIQUE INDEX order_totals_customer ON order_totals (customer_id);
COMMENT ON TABLE orders IS 'one row per order';
COMMENT ON COLUMN customers.email IS 'login';
GRANT SELECT ON orders, open_orders TO ` + role + `;
GRANT SELECT, INSERT ON coupons TO ` + role + `;
`
}

// dumpSchemaText is pg_dump --schema-only of a database without the pgsync
// schema, psql's \restrict lines and the job's publication.
func dumpSchemaText(t *testing.T, port, db, publication string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, pgBin(t, "pg_dump"), "--schema-only", "--exclude-schema=pgsync", "-h", "127.0.0.1", "-p", port, "-U", "postgres", db).Output()
	if err != nil {
		t.Fatalf("pg_dump --schema-only of %s on %s: %v", db, port, err)
	}
	var keep []string
	for _, block := range regexp.MustCompile(`(?m)^--\n-- Name: `).Split(string(out), -1) {
		if strings.HasPrefix(block, publication+";") || strings.HasPrefix(block, publication+" ") {
			continue
		}
		keep = append(keep, block)
	}
	var lines []string
	for _, l := range strings.Split(strings.Join(keep, "--\n-- Name: "), "\n") {
		if !strings.HasPrefix(l, `\`) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// TestBootstrapWholeDatabaseFromPgDump: bootstrap into an empty database
// takes the schema from pg_dump (pre-data before the copy, post-data after
// it), so the target's schema is the source's, functions, views,
// policies, comments and grants included; run then applies a workload and
// verify says identical.
func TestBootstrapWholeDatabaseFromPgDump(t *testing.T) {
	role := fmt.Sprintf("app_reader_%d", time.Now().UnixNano()%1e9)
	for _, port := range []string{sourcePort, targetPort} {
		admin := mustConnect(t, adminURL(port))
		if _, err := admin.Exec(context.Background(), "CREATE ROLE "+role); err != nil {
			t.Fatal(err)
		}
		admin.Close(context.Background())
	}
	e := newEnv(t, appWholeDDL(role), "")
	t.Cleanup(func() {
		for _, port := range []string{sourcePort, targetPort} {
			admin := mustConnect(t, adminURL(port))
			_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
			admin.Close(context.Background())
		}
	})
	r := e.mustPgsync("bootstrap")
	if !strings.Contains(r.stdout, "schema from pg_dump") || !strings.Contains(r.stderr, "schema restored from pg_dump") {
		t.Fatalf("bootstrap did not take the schema from pg_dump:\n%s\n%s", r.stdout, r.stderr)
	}
	for _, want := range []string{`object="constraint public.orders orders_pkey"`, `object="fk constraint public.order_items order_items_order_id_fkey"`,
		`object="trigger public.orders orders_audit"`, `object="policy public.coupons coupons_own"`, "refreshed materialized_view=order_totals"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("bootstrap's log lacks %s", want)
		}
	}
	src := dumpSchemaText(t, sourcePort, e.db, "pgsync_"+e.job)
	tgt := dumpSchemaText(t, targetPort, e.db, "pgsync_"+e.job)
	if src != tgt {
		t.Errorf("pg_dump --schema-only of the target differs from the source's:\n%s", lineDiff(src, tgt))
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM order_totals"); n == 0 {
		t.Error("the materialized view was not refreshed")
	}
	// The triggers are enabled as on the source and did not fire for the
	// copy: audit holds the source's rows only.
	if a, b := tableDigest(t, e.srcURL, "audit"), tableDigest(t, e.tgtURL, "audit"); a != b {
		t.Errorf("audit differs after the copy: source %s, target %s", a, b)
	}
	for _, sql := range appWorkload {
		e.srcExec(sql)
	}
	e.srcExec(`INSERT INTO coupons (customer_id) SELECT id FROM customers WHERE id % 5 = 0; INSERT INTO readings VALUES (99, '2026-12-31', 1)`)
	e.catchUp()
	e.mustVerify()
}

// lineDiff lists the lines only one side has.
func lineDiff(a, b string) string {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var out []string
	for l, n := range count {
		switch {
		case n > 0:
			out = append(out, "source only: "+l)
		case n < 0:
			out = append(out, "target only: "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestBootstrapSaysWhyNotPgDump: a target that already holds objects of
// the application gets the built-in creator, and the log says why.
func TestBootstrapSaysWhyNotPgDump(t *testing.T) {
	e := newEnv(t, `CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a VALUES (1, 'x');`, "")
	e.tgtExec(`CREATE FUNCTION helper() RETURNS int LANGUAGE sql AS 'SELECT 1'`)
	r := e.mustPgsync("bootstrap")
	if !strings.Contains(r.stderr, "why_not_pg_dump") || !strings.Contains(r.stderr, "already has objects") || !strings.Contains(r.stderr, "helper()") {
		t.Errorf("bootstrap did not say why it used the built-in creator:\n%s", r.stderr)
	}
	if strings.Contains(r.stdout, "schema from pg_dump") {
		t.Errorf("bootstrap restored pg_dump's schema over existing objects:\n%s", r.stdout)
	}
	e.mustVerify()
}
