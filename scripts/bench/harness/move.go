package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

// The whole move under load (issue 25): a pgbench-shaped database with a
// table of TOASTed documents, written by pgbench at a fixed rate from
// before the move to its end, brought into an empty target by each
// contender in turn. Ready for cutover: the tool says every table is
// copied, and the target's heartbeat (a row the harness updates on the
// source every 100 ms) stays within readyLag of the source's clock for
// hold.

const (
	moveDB        = "move"
	appRole       = "bench_app" // pgbench's role: the one cutover locks
	sampleEvery   = 250 * time.Millisecond
	heartbeatTick = 100 * time.Millisecond
	readyLag      = time.Second
	hold          = 5 * time.Second
	// warmUp is how long pgbench writes before the move starts.
	warmUp = 3 * time.Second
)

type moveConfig struct {
	scale, rate, runs int
	contenders        []string
	timeout           time.Duration
	out               string
	// tuning is pgsync's [tuning] section, for experiments ("" in make
	// bench: the defaults).
	tuning string
}

func init() { scenarios["move"] = moveMain }

// moveMain is the whole move's command: its flags, the dataset, the runs
// and the result.
func moveMain(ctx context.Context, root string, args []string) error {
	fs := flag.NewFlagSet("move", flag.ContinueOnError)
	var c moveConfig
	var contenders string
	fs.IntVar(&c.scale, "scale", 60, "pgbench's scale (60: about 1 GB with the documents)")
	fs.IntVar(&c.rate, "rate", 300, "pgbench's transactions a second")
	fs.IntVar(&c.runs, "runs", 3, "runs of each contender, interleaved")
	fs.StringVar(&contenders, "contenders", "pgsync,native,pgcopydb", "who moves the database")
	fs.DurationVar(&c.timeout, "timeout", 90*time.Second, "a contender not ready after this long is reported not ready")
	fs.StringVar(&c.out, "out", "", "the result's directory (default bench-results/move)")
	fs.StringVar(&c.tuning, "tuning", "", `pgsync's [tuning] keys, for an experiment (e.g. "copy_range_mb = 0")`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.contenders = strings.Split(contenders, ",")
	for _, name := range c.contenders {
		if _, ok := contenderSteps[name]; !ok {
			return fmt.Errorf("unknown contender %q (pgsync, native, pgcopydb)", name)
		}
	}
	b, stop, err := setup(ctx, root)
	if err != nil {
		return err
	}
	defer stop()
	if c.out == "" {
		c.out = filepath.Join(b.results, "move")
	}
	// Absolute: the tools run in their run's directory, given paths in it.
	if c.out, err = filepath.Abs(c.out); err != nil {
		return err
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	if slices.Contains(c.contenders, "pgcopydb") {
		if err := b.installPgcopydb(ctx); err != nil {
			return err
		}
	}
	res := benchres.Move{
		Command: command("move", args),
		Date:    time.Now().UTC().Format(time.RFC3339),
		Env:     b.env, Scale: c.scale, Rate: c.rate,
		ReadyLagSeconds: readyLag.Seconds(), HoldSeconds: hold.Seconds(), TimeoutSeconds: c.timeout.Seconds(),
	}
	if err := b.moveDataset(ctx, c.scale, &res); err != nil {
		return err
	}
	for run := 1; run <= c.runs; run++ {
		for _, name := range c.contenders {
			fmt.Fprintf(os.Stderr, "harness: move: %s run %d of %d\n", name, run, c.runs)
			r, err := b.moveOnce(ctx, c, name, run)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", name, run, err)
			}
			fmt.Fprintf(os.Stderr, "harness: move: %s run %d: ready=%v %s equal=%v tool cpu %.1f s peak %d MB\n",
				name, run, r.Ready, secondsOr(r.ReadySeconds, r.NotReady), r.ContentEqual, r.ToolCPUSeconds, r.ToolPeakBytes>>20)
			res.Runs = append(res.Runs, r)
		}
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.out, "move.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return b.dropMove(ctx)
}

// dropMove drops what the move left on both clusters, its database most
// of all: make bench's next scripts run on the same clusters, which should
// not hold a 1 GB database for autovacuum to work on meanwhile.
func (b *bench) dropMove(ctx context.Context) error {
	if err := b.resetMove(ctx); err != nil {
		return err
	}
	for _, port := range []int{sourcePort, targetPort} {
		if err := runSQL(ctx, port, "postgres", "DROP DATABASE IF EXISTS "+moveDB+" WITH (FORCE)", "CHECKPOINT"); err != nil {
			return err
		}
	}
	return nil
}

func secondsOr(s *float64, otherwise string) string {
	if s == nil {
		return otherwise
	}
	return fmt.Sprintf("%.1f s", *s)
}

// installPgcopydb installs Debian's pgcopydb and the wal2json plugin it
// decodes with (pgcopydb 0.10 supports no other here) when missing.
func (b *bench) installPgcopydb(ctx context.Context) error {
	_, errTool := os.Stat("/usr/bin/pgcopydb")
	_, errPlugin := os.Stat(filepath.Join(filepath.Dir(b.bindir), "lib", "wal2json.so"))
	if errTool == nil && errPlugin == nil {
		return nil
	}
	major := filepath.Base(filepath.Dir(b.bindir))
	return b.run(ctx, 10*time.Minute, []string{"DEBIAN_FRONTEND=noninteractive"},
		"apt-get", "install", "-y", "-q", "pgcopydb", "postgresql-"+major+"-wal2json")
}

// moveDataset builds the source database anew: pgbench's tables with
// their foreign keys, pgbench_history under REPLICA IDENTITY FULL (it has
// no key), a table of TOASTed documents (about 2.7 kB a row, scale*1000
// rows) and the heartbeat; and the application's role on both clusters.
func (b *bench) moveDataset(ctx context.Context, scale int, res *benchres.Move) error {
	if err := createAppRole(ctx); err != nil {
		return err
	}
	if err := b.resetMove(ctx); err != nil {
		return err
	}
	if err := runSQL(ctx, sourcePort, "postgres", "DROP DATABASE IF EXISTS "+moveDB+" WITH (FORCE)", "CREATE DATABASE "+moveDB); err != nil {
		return err
	}
	err := b.appDataset(ctx, moveDB, scale,
		"CREATE TABLE move_heartbeat (id int PRIMARY KEY, at timestamptz NOT NULL)",
		"INSERT INTO move_heartbeat VALUES (1, clock_timestamp())")
	if err != nil {
		return err
	}
	err = runSQL(ctx, sourcePort, moveDB,
		// The first run must not pay for the dataset's creation: its
		// rows are frozen and hinted, its pages written and read once
		// (at 87deddb pgsync's first run took 29.8 s, its second 18.3 s;
		// native's 25.0 s and 22.0 s).
		"VACUUM (FREEZE, ANALYZE)",
		"CHECKPOINT",
		"SELECT count(*), sum(length(body)) FROM documents",
		"SELECT count(*), sum(abalance) FROM pgbench_accounts")
	if err != nil {
		return err
	}
	return query(ctx, sourcePort, moveDB,
		"SELECT pg_database_size(current_database()), pg_total_relation_size('documents')", &res.DatabaseBytes, &res.DocumentsBytes)
}

// createAppRole creates the application's role on both clusters, if
// missing, and lifts the lock a cutover left on it.
func createAppRole(ctx context.Context) error {
	for _, port := range []int{sourcePort, targetPort} {
		if err := runSQL(ctx, port, "postgres",
			`DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '`+appRole+`') THEN CREATE ROLE `+appRole+` LOGIN; END IF; END$$`,
			`ALTER ROLE `+appRole+` RESET ALL`); err != nil {
			return err
		}
	}
	return nil
}

// appDataset fills the source's empty database db with the application
// the move and the cutover gap are measured under: pgbench's tables at
// scale with their foreign keys, pgbench_history under REPLICA IDENTITY
// FULL (it has no key) and a table of TOASTed documents (about 2.7 kB a
// row, scale*1000 rows), then the statements extra, then grants every
// table to the application's role.
func (b *bench) appDataset(ctx context.Context, db string, scale int, extra ...string) error {
	say("dataset", "pgbench -i -s %d --foreign-keys into %s", scale, db)
	if err := b.run(ctx, 20*time.Minute, nil, filepath.Join(b.bindir, "pgbench"), "-i", "-q", "-s", strconv.Itoa(scale),
		"--foreign-keys", "-h", "127.0.0.1", "-p", strconv.Itoa(sourcePort), "-U", "postgres", db); err != nil {
		return err
	}
	statements := append([]string{
		"ALTER TABLE pgbench_history REPLICA IDENTITY FULL",
		"CREATE TABLE documents (id bigint PRIMARY KEY, body text NOT NULL)",
		fmt.Sprintf("INSERT INTO documents SELECT g, string_agg(md5(g::text || i::text), '') FROM generate_series(1, %d) g, generate_series(1, 85) i GROUP BY g", scale*1000),
	}, extra...)
	return runSQL(ctx, sourcePort, db, append(statements, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "+appRole)...)
}

// resetMove removes what a contender left: the source's slots,
// publications and pgcopydb's schema in the move database, the target's
// subscriptions, its move database (made anew, empty) and pgcopydb's
// replication origins, and the lock of the application's role.
func (b *bench) resetMove(ctx context.Context) error {
	if err := dropSubscriptions(ctx, moveDB); err != nil {
		return err
	}
	err := runSQL(ctx, targetPort, "postgres",
		"DROP DATABASE IF EXISTS "+moveDB+" WITH (FORCE)",
		"CREATE DATABASE "+moveDB,
		"SELECT pg_replication_origin_drop(roname) FROM pg_replication_origin WHERE roname LIKE 'pgcopydb%'")
	if err != nil {
		return err
	}
	if err := runSQL(ctx, sourcePort, "postgres", "ALTER ROLE "+appRole+" RESET ALL"); err != nil {
		return err
	}
	var exists bool
	if err := query(ctx, sourcePort, "postgres", "SELECT count(*) > 0 FROM pg_database WHERE datname = '"+moveDB+"'", &exists); err != nil || !exists {
		return err
	}
	// A slot's walsender may take a moment to exit after it is ended.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := runSQL(ctx, sourcePort, moveDB,
			"SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = current_database() AND active_pid IS NOT NULL",
			"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database() AND NOT active",
			"DROP SCHEMA IF EXISTS pgcopydb CASCADE")
		if err != nil {
			return err
		}
		var left int
		if err := query(ctx, sourcePort, moveDB, "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()", &left); err != nil {
			return err
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d replication slots of database %s still active after 30 s", left, moveDB)
		}
		time.Sleep(200 * time.Millisecond)
	}
	pubs, err := column(ctx, sourcePort, moveDB, "SELECT quote_ident(pubname) FROM pg_publication")
	if err != nil {
		return err
	}
	for _, p := range pubs {
		if err := runSQL(ctx, sourcePort, moveDB, "DROP PUBLICATION "+p); err != nil {
			return err
		}
	}
	return nil
}

// contender is one tool's way through a run.
type contender interface {
	// begin starts the move; t0 has just been taken.
	begin(ctx context.Context) error
	// copied reports whether the tool has copied every table, and an
	// error when it has failed.
	copied(ctx context.Context) (bool, error)
	// toolPIDs are the processes whose memory and CPU are the tool's.
	toolPIDs(ctx context.Context) []int
	// cutover switches, where the tool has a cutover: it returns when
	// the target was reported ready for writes (nil time without one).
	cutover(ctx context.Context) (readyAt time.Time, err error)
	// end stops the tool.
	end(ctx context.Context) error
}

var contenderSteps = map[string]func(b *bench, c moveConfig, dir string) contender{
	"pgsync": func(b *bench, c moveConfig, dir string) contender {
		return &pgsyncMove{b: b, dir: dir, tuning: c.tuning}
	},
	"native":   func(b *bench, _ moveConfig, dir string) contender { return &nativeMove{b: b, dir: dir} },
	"pgcopydb": func(b *bench, _ moveConfig, dir string) contender { return &pgcopydbMove{b: b, dir: dir} },
}

// sampled is a sample with what the harness decides readiness from and
// the CPU seconds used until it was taken: the tool's (sampled: what a
// process used after its last sample is not in it) and each cluster's.
type sampled struct {
	benchres.Sample
	copied                        bool
	toolCPU, sourceCPU, targetCPU float64
}

// moveOnce runs one contender once, its logs in NAME-RUN of the run's log
// directory.
func (b *bench) moveOnce(ctx context.Context, c moveConfig, name string, run int) (benchres.MoveRun, error) {
	r := benchres.MoveRun{Contender: name, Run: run, SampleSeconds: sampleEvery.Seconds()}
	dir := filepath.Join(b.logs, fmt.Sprintf("%s-%d", name, run))
	if err := os.RemoveAll(dir); err != nil {
		return r, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	if err := b.resetMove(ctx); err != nil {
		return r, err
	}
	if err := runSQL(ctx, sourcePort, moveDB, "CHECKPOINT"); err != nil {
		return r, err
	}
	tool := contenderSteps[name](b, c, dir)
	// Whatever ends the run, the tool's processes end with it: a pgsync
	// run left behind would reconnect to the next run's clusters. end is
	// called again below, where its error counts; twice is harmless.
	defer func() { _ = tool.end(context.WithoutCancel(ctx)) }()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	beat, err := startHeartbeat(runCtx)
	if err != nil {
		return r, err
	}
	defer beat.stop()
	app, err := start(dir, filepath.Join(dir, "pgbench.out"), filepath.Join(dir, "pgbench.out"), nil, filepath.Join(b.bindir, "pgbench"),
		"-n", "-c", "4", "-j", "2", "-R", strconv.Itoa(c.rate), "-T", strconv.Itoa(int((c.timeout + 10*time.Minute).Seconds())),
		"-l", "--log-prefix=pgbench", "-h", "127.0.0.1", "-p", strconv.Itoa(sourcePort), "-U", appRole, moveDB)
	if err != nil {
		return r, err
	}
	defer app.stop(10 * time.Second)
	time.Sleep(warmUp)

	t0 := time.Now()
	s, err := newSampler(runCtx, tool, t0)
	if err != nil {
		return r, err
	}
	if err := tool.begin(runCtx); err != nil {
		s.stop()
		return r, err
	}
	readyAt, copiedAt, why, err := s.waitReady(runCtx, c.timeout)
	s.stop()
	if err != nil {
		return r, err
	}
	r.Samples = s.samples()
	r.Ready = why == ""
	r.NotReady = why
	// The CPU until ready (or until the harness gave up), from the first
	// sample's: what the switch and the checks after it cost is not in it.
	until := s.at(r.Samples[len(r.Samples)-1].T)
	if r.Ready {
		r.ReadySeconds = ptr(readyAt)
		until = s.at(readyAt)
	}
	first := s.at(0)
	if first.sourceCPU == 0 || first.targetCPU == 0 {
		return r, errors.New("no CPU reading of the clusters at the start")
	}
	r.ToolCPUSeconds = until.toolCPU
	r.SourceCPUSeconds = until.sourceCPU - first.sourceCPU
	r.TargetCPUSeconds = until.targetCPU - first.targetCPU
	if copiedAt >= 0 {
		r.CopiedSeconds = ptr(copiedAt)
	}
	for _, x := range r.Samples {
		r.ToolPeakBytes = max(r.ToolPeakBytes, x.ToolBytes)
	}

	// The switch. A tool with a cutover gets it once ready: the harness's
	// heartbeat stops first (it writes as postgres, which no lock stops).
	beat.stop()
	lastBeat := beat.last()
	var gapEnd time.Time
	if r.Ready {
		if gapEnd, err = tool.cutover(runCtx); err != nil {
			return r, err
		}
	}
	if !gapEnd.IsZero() {
		// cutover ended the application's sessions: pgbench exits and
		// writes its logs.
		if err := app.wait(ctx, 60*time.Second); err != nil && !strings.Contains(err.Error(), "exit status") {
			return r, fmt.Errorf("pgbench after cutover: %w", err)
		}
		last, _, err := pgbenchTxns(dir)
		if err != nil {
			return r, err
		}
		r.WriteGapSeconds = ptr(gapEnd.Sub(last).Seconds())
	} else {
		app.stop(10 * time.Second)
		// The writes have stopped: the tool is given a bounded time to
		// apply the last of them, up to the last heartbeat.
		limit := 60 * time.Second
		if !r.Ready {
			limit = 10 * time.Second // it was behind already: no more waiting
		}
		if err := waitHeartbeat(ctx, lastBeat, limit); err != nil {
			fmt.Fprintf(os.Stderr, "harness: move: %s run %d: %v\n", name, run, err)
		}
	}
	if r.ContentEqual, r.Differences, err = sameContent(ctx); err != nil {
		return r, err
	}
	if err := tool.end(ctx); err != nil {
		return r, err
	}
	if p, ok := tool.(*pgsyncMove); ok {
		end := time.Duration(0)
		if r.Ready {
			end = time.Duration(*r.ReadySeconds * float64(time.Second))
		}
		if r.Phases, err = p.phases(t0, end); err != nil {
			return r, err
		}
	}
	return r, nil
}

func ptr(f float64) *float64 { return &f }

// pgbenchTxns reads the per-transaction logs pgbench wrote in dir (-l
// --log-prefix=pgbench, one file a thread): the end of the last
// transaction (the fifth and sixth fields are its epoch seconds and
// microseconds) and how many there were.
func pgbenchTxns(dir string) (last time.Time, txns int64, err error) {
	logs, _ := filepath.Glob(filepath.Join(dir, "pgbench.[0-9]*"))
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			return last, 0, err
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			fields := strings.Fields(s.Text())
			if len(fields) < 6 {
				continue
			}
			sec, err1 := strconv.ParseInt(fields[4], 10, 64)
			usec, err2 := strconv.ParseInt(fields[5], 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			txns++
			if t := time.Unix(sec, usec*1000); t.After(last) {
				last = t
			}
		}
		f.Close()
	}
	if last.IsZero() {
		return last, 0, fmt.Errorf("no transaction in pgbench's logs under %s", dir)
	}
	return last, txns, nil
}

// heartbeat updates the source's heartbeat row every heartbeatTick.
type heartbeat struct {
	mu     sync.Mutex
	at     time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

func startHeartbeat(ctx context.Context) (*heartbeat, error) {
	conn, err := pgx.Connect(ctx, url(sourcePort, moveDB))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	h := &heartbeat{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		defer conn.Close(context.Background())
		t := time.NewTicker(heartbeatTick)
		defer t.Stop()
		for {
			var at time.Time
			if err := conn.QueryRow(ctx, "UPDATE move_heartbeat SET at = clock_timestamp() WHERE id = 1 RETURNING at").Scan(&at); err == nil {
				h.mu.Lock()
				h.at = at
				h.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return h, nil
}

func (h *heartbeat) stop() { h.cancel(); <-h.done }

func (h *heartbeat) last() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.at
}

// waitHeartbeat waits until the target's heartbeat is at least at.
func waitHeartbeat(ctx context.Context, at time.Time, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var got time.Time
		err := query(ctx, targetPort, moveDB, "SELECT at FROM move_heartbeat WHERE id = 1", &got)
		if err == nil && !got.Before(at) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the target's heartbeat did not reach the source's last (%s) within %s (last read %s, %v)", at.Format(time.RFC3339Nano), limit, got.Format(time.RFC3339Nano), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sameContent compares each table of the source's public schema with the
// target's: the row count and the sum of a 64-bit hash of each row's text.
func sameContent(ctx context.Context) (equal bool, differences []string, err error) {
	tables, err := column(ctx, sourcePort, moveDB, "SELECT quote_ident(relname) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p') AND NOT relispartition ORDER BY 1")
	if err != nil {
		return false, nil, err
	}
	if len(tables) == 0 {
		return false, nil, errors.New("no table on the source")
	}
	for _, t := range tables {
		q := "SELECT count(*)::text || ' ' || coalesce(sum(hashtextextended(t::text, 0)), 0)::text FROM public." + t + " t"
		var sums [2]string
		var wg sync.WaitGroup
		var errs [2]error
		for i, port := range []int{sourcePort, targetPort} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = query(ctx, port, moveDB, q, &sums[i])
			}()
		}
		wg.Wait()
		if errs[0] != nil {
			return false, nil, fmt.Errorf("table %s on the source: %w", t, errs[0])
		}
		if errs[1] != nil {
			differences = append(differences, fmt.Sprintf("%s: %v", t, errs[1]))
			continue
		}
		if sums[0] != sums[1] {
			differences = append(differences, fmt.Sprintf("%s: source %s, target %s (rows, hash sum)", t, sums[0], sums[1]))
		}
	}
	return len(differences) == 0, differences, nil
}
