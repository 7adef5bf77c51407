// Command insert-copy-bench measures what the target's backend spends to
// insert the same rows as prepared multi-row INSERTs of R rows (text
// parameters with casts, pipelined, as pgsync's runs are) and as COPY FROM
// STDIN of R rows each, all in one transaction. It prints the wall time
// and the backend's CPU seconds (from /proc: the server must run on this
// machine), which is what decides from how many rows a run is worth a COPY
// (apply/run.go, copyMinRows).
//
//	cd scripts/bench && go run ./cmd/insert-copy-bench -url postgres://postgres@127.0.0.1:26563/postgres -rows 500000 -runs "insert:64 copy:100 copy:256 copy:1000"
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func main() {
	url := flag.String("url", "", "target database URL (a scratch table insert_copy_bench is created there)")
	total := flag.Int("rows", 500000, "rows inserted by each run")
	runs := flag.String("runs", "insert:64 copy:100 insert:64 copy:256 copy:1000 copy:4000", "space-separated mode:rows-per-statement")
	flag.Parse()
	if err := run(*url, *total, strings.Fields(*runs)); err != nil {
		fmt.Fprintln(os.Stderr, "insert-copy-bench:", err)
		os.Exit(1)
	}
}

// row is one row of the catch-up benchmark's inserts.
func row(i int) []string {
	return []string{strconv.Itoa(i), "customer-new", strconv.Itoa(i % 100), "12.50", "2026-11-30 20:00:00.123456+00", strings.Repeat("n", 64)}
}

func run(url string, total int, runs []string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return err
	}
	for _, r := range runs {
		mode, n, ok := strings.Cut(r, ":")
		per, err := strconv.Atoi(n)
		if !ok || err != nil || per < 1 || mode != "insert" && mode != "copy" {
			return fmt.Errorf("run %q: want insert:N or copy:N", r)
		}
		if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS insert_copy_bench;
CREATE TABLE insert_copy_bench (id bigint PRIMARY KEY, customer text NOT NULL, qty int NOT NULL, price numeric(12,2), created timestamptz NOT NULL, note text);
CHECKPOINT`); err != nil {
			return err
		}
		cpu0, err := backendCPU(pid)
		if err != nil {
			return err
		}
		began := time.Now()
		if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
			return err
		}
		if mode == "insert" {
			err = inserts(ctx, conn.PgConn(), total, per)
		} else {
			err = copies(ctx, conn.PgConn(), total, per)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			return err
		}
		wall := time.Since(began)
		cpu1, err := backendCPU(pid)
		if err != nil {
			return err
		}
		fmt.Printf("{\"mode\": %q, \"rows_per_statement\": %d, \"rows\": %d, \"seconds\": %.2f, \"backend_cpu_seconds\": %.2f}\n",
			mode, per, total, wall.Seconds(), cpu1-cpu0)
	}
	_, err = conn.Exec(ctx, "DROP TABLE insert_copy_bench")
	return err
}

func inserts(ctx context.Context, conn *pgconn.PgConn, total, per int) error {
	var sql strings.Builder
	sql.WriteString("INSERT INTO insert_copy_bench (id, customer, qty, price, created, note) VALUES ")
	for r := 0; r < per; r++ {
		if r > 0 {
			sql.WriteString(", ")
		}
		b := r * 6
		fmt.Fprintf(&sql, "($%d::bigint, $%d::text, $%d::integer, $%d::numeric, $%d::timestamptz, $%d::text)", b+1, b+2, b+3, b+4, b+5, b+6)
	}
	name := "ins" + strconv.Itoa(per)
	if _, err := conn.Prepare(ctx, name, sql.String(), nil); err != nil {
		return err
	}
	p := conn.StartPipeline(ctx)
	sent := 0
	for i := 0; i+per <= total; i += per {
		params := make([][]byte, 0, per*6)
		for r := 0; r < per; r++ {
			for _, v := range row(i + r) {
				params = append(params, []byte(v))
			}
		}
		p.SendQueryPrepared(name, params, nil, nil)
		if sent++; sent%8 == 0 { // pgsync's batches: about 500 rows
			if err := syncPipeline(p); err != nil {
				return err
			}
		}
	}
	if err := syncPipeline(p); err != nil {
		return err
	}
	if err := p.Close(); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, "DEALLOCATE "+name).ReadAll()
	return err
}

func syncPipeline(p *pgconn.Pipeline) error {
	if err := p.Sync(); err != nil {
		return err
	}
	for {
		res, err := p.GetResults()
		if err != nil {
			return err
		}
		switch r := res.(type) {
		case *pgconn.PipelineSync:
			return nil
		case *pgconn.ResultReader:
			if _, err := r.Close(); err != nil {
				return err
			}
		}
	}
}

func copies(ctx context.Context, conn *pgconn.PgConn, total, per int) error {
	var buf strings.Builder
	for i := 0; i+per <= total; i += per {
		buf.Reset()
		for r := 0; r < per; r++ {
			buf.WriteString(strings.Join(row(i+r), "\t"))
			buf.WriteByte('\n')
		}
		if _, err := conn.CopyFrom(ctx, strings.NewReader(buf.String()), "COPY insert_copy_bench (id, customer, qty, price, created, note) FROM STDIN"); err != nil {
			return err
		}
	}
	return nil
}

// backendCPU reads the CPU seconds a local server process has used.
func backendCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("the server must run on this machine: %w", err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}
