//go:build integration

package integration

import (
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgsync/pgsync/ddl"
)

// An application's migration history, run on the source while pgsync
// moves it with job.ddl = "capture" (issue 31, point 6): the migrations in
// testdata/migrations are written in the shapes Django, Rails, Prisma and
// Flyway emit, and run one by one at random moments between the writes of
// the application (drillApp: accounts, history, orders, tables that exist
// throughout).

// histSchema is the application's schema before the first migration.
// measurements is partitioned, so that partitions can be created, attached
// and detached during the move.
const histSchema = `
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT g, 0 FROM generate_series(1, 100) g;
CREATE TABLE history (account int NOT NULL, delta int NOT NULL);
ALTER TABLE history REPLICA IDENTITY FULL;
CREATE TABLE orders (id bigserial PRIMARY KEY, account int NOT NULL);
CREATE TABLE measurements (id bigint NOT NULL, at date NOT NULL, value int NOT NULL, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
CREATE TABLE measurements_2024 PARTITION OF measurements FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE measurements_2025 PARTITION OF measurements FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
INSERT INTO measurements SELECT g, DATE '2024-06-01' + g, g FROM generate_series(1, 300) g;`

// histReader is the role the migrations grant to. Roles belong to the
// cluster: it is created on both, once, and left there (a test database
// that holds its grants is dropped with the test).
const histReader = "pgsync_hist_reader"

// migration is one file of testdata/migrations: its statements, sent one
// by one as a framework's migration runner sends them, in one transaction
// unless the file's first line says "-- pgsync-test: each statement on its
// own" (a batched backfill: one transaction per batch).
type migration struct {
	name  string
	alone bool
	stmts []string
}

func loadMigrations(t *testing.T) []migration {
	t.Helper()
	files, err := filepath.Glob("testdata/migrations/*.sql")
	if err != nil || len(files) < 30 {
		t.Fatalf("testdata/migrations: %d files (%v), want the history of about 30", len(files), err)
	}
	sort.Strings(files)
	var out []migration
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := migration{name: filepath.Base(f), alone: strings.HasPrefix(string(text), "-- pgsync-test: each statement on its own")}
		// The splitter of the capture: the files hold no statement it
		// would cut differently from psql.
		for _, st := range ddl.Split(string(text)) {
			if len(ddl.Split(stripComments(st))) != 0 {
				m.stmts = append(m.stmts, st)
			}
		}
		out = append(out, m)
	}
	return out
}

// stripComments drops the "--" comment lines of a statement.
func stripComments(st string) string {
	var keep []string
	for _, l := range strings.Split(st, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// migrate runs m on the source.
func (e *env) migrate(m migration) {
	e.t.Helper()
	if m.alone {
		for _, s := range m.stmts {
			if _, err := e.src.Exec(context.Background(), s); err != nil {
				e.t.Fatalf("migration %s: %v\n%s", m.name, err, s)
			}
		}
		return
	}
	e.srcTx(m.stmts...)
}

// ensureHistReader creates the role the migrations grant to on both
// clusters.
func ensureHistReader(t *testing.T) {
	t.Helper()
	for _, port := range []string{sourcePort, targetPort} {
		admin := mustConnect(t, adminURL(port))
		if _, err := admin.Exec(context.Background(), `DO $$ BEGIN CREATE ROLE `+histReader+`; EXCEPTION WHEN duplicate_object THEN NULL; END $$`); err != nil {
			t.Fatal(err)
		}
		admin.Close(context.Background())
	}
}

// appSchema is pg_dump --schema-only of one side without pgsync's own
// objects. dumpSchemaText leaves out schema pgsync (the capture's
// function and key on the source, the ledger on the target) and the job's
// publication (source only); the job's two event triggers are left out
// here (source only, and database-wide, so --exclude-schema keeps them).
// Nothing else is left out: both sides' objects belong to the same user
// (postgres runs the migrations on the source and pgsync on the target),
// so owners and grants must be equal too.
func (e *env) appSchema(port string) string {
	e.t.Helper()
	text := dumpSchemaText(e.t, port, e.db, "pgsync_"+e.job)
	var keep []string
	for _, block := range regexp.MustCompile(`(?m)^--\n-- Name: `).Split(text, -1) {
		if strings.HasPrefix(block, "pgsync_ddl_"+e.job+"_") {
			// The dump's last lines may follow in the same block: kept.
			if i := strings.Index(block, "--\n-- PostgreSQL database dump complete"); i >= 0 {
				keep[len(keep)-1] += block[i:]
			}
			continue
		}
		keep = append(keep, block)
	}
	return strings.Join(keep, "--\n-- Name: ")
}

// assertSameApp requires the application's schema and every table's rows
// to be equal on both sides, compared here, independently of pgsync (verify
// knows the job's tables only; tables created during the move are
// compared too).
func (e *env) assertSameApp() {
	e.t.Helper()
	src, tgt := e.appSchema(sourcePort), e.appSchema(targetPort)
	if src != tgt {
		e.t.Errorf("pg_dump --schema-only of the target differs from the source's:\n%s", lineDiff(src, tgt))
	}
	tables := func(url string) []string {
		c := mustConnect(e.t, url)
		defer c.Close(context.Background())
		return queryOne[[]string](e.t, c, `SELECT coalesce(array_agg(format('%I.%I', n.nspname, c.relname) ORDER BY n.nspname, c.relname), '{}')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = 'public'`)
	}
	srcTables, tgtTables := tables(e.srcURL), tables(e.tgtURL)
	if strings.Join(srcTables, ",") != strings.Join(tgtTables, ",") {
		e.t.Errorf("tables: source %v, target %v", srcTables, tgtTables)
	}
	for _, table := range srcTables {
		if s, g := tableDigest(e.t, e.srcURL, table), tableDigest(e.t, e.tgtURL, table); s != g {
			e.t.Errorf("%s: source %s, target %s", table, s, g)
		}
	}
}

// TestDDLMigrationHistory: the migration history runs on the source, each
// migration at a random moment (seeded) between the application's writes,
// while run applies; after cutover the target's schema is the source's
// (pg_dump --schema-only, pgsync's objects left out) and every table's
// rows are the source's.
func TestDDLMigrationHistory(t *testing.T) {
	ensureHistReader(t)
	migrations := loadMigrations(t)
	e := newEnv(t, histSchema, "ddl = \"capture\"\n")
	e.mustPgsync("bootstrap")
	run := e.start("run")
	app := startDrillApp(e.srcURL)
	defer func() { app.stop(); <-app.done }()
	app.writes(t, 20)

	seed := time.Now().UnixNano()
	if s := os.Getenv("PGSYNC_DDL_HISTORY_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("PGSYNC_DDL_HISTORY_SEED: %v", err)
		}
		seed = n
	}
	t.Logf("seed %d (PGSYNC_DDL_HISTORY_SEED fixes it)", seed)
	rnd := rand.New(rand.NewSource(seed))
	for _, m := range migrations {
		app.writes(t, int64(1+rnd.Intn(30)))
		select {
		case <-run.done:
			t.Fatalf("run ended before migration %s:\n%s", m.name, run.stderr.String())
		default:
		}
		e.migrate(m)
	}
	app.writes(t, 20)
	app.stop()
	<-app.done
	if len(app.errs) > 0 {
		t.Fatalf("the application's writes failed: %v", app.errs)
	}
	t.Logf("%d application transactions during %d migrations", app.committed.Load(), len(migrations))

	// The last write, awaited on the target: the WAL position is no mark
	// (WAL written after the last commit, by autovacuum say, is never
	// applied, and the progress row stays before it).
	last := queryOne[int64](t, e.src, "INSERT INTO orders (account) VALUES (0) RETURNING id")
	eventually(t, 90*time.Second, "run to apply the last write", func() bool {
		select {
		case <-run.done:
			t.Fatalf("run ended:\n%s", run.stderr.String())
		default:
		}
		return queryOne[int](t, e.tgt, "SELECT count(*) FROM orders WHERE id = $1", last) == 1
	})
	e.mustPgsync("cutover", "--timeout", "60s")
	sigtermWithin(t, run, 10*time.Second)
	log := run.stderr.String()
	if strings.Contains(log, "level=ERROR") {
		t.Errorf("run logged an error:\n%s", log)
	}
	ddlStatements := 0
	for _, m := range migrations {
		for _, s := range m.stmts {
			if w := strings.Fields(stripComments(s)); len(w) > 0 && strings.Contains(" CREATE ALTER DROP COMMENT GRANT ", " "+strings.ToUpper(w[0])+" ") {
				ddlStatements++
			}
		}
	}
	// A statement that cannot run in a transaction is logged before it
	// runs on its own, as it may wait.
	if n := strings.Count(log, "applied DDL captured on the source") + strings.Count(log, "applying DDL captured on the source, on its own"); n != ddlStatements {
		t.Errorf("run applied %d captured statements, the migrations hold %d\n%s", n, ddlStatements, log)
	}
	e.assertSameApp()
}
