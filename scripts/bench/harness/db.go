package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// sqlLimit bounds every statement the harness runs: the largest, a dataset
// of tens of millions of rows, takes minutes.
const sqlLimit = 2 * time.Hour

// runSQL runs each statement on database db of the cluster at port, in its
// own implicit transaction, on one connection.
func runSQL(ctx context.Context, port int, db string, statements ...string) error {
	ctx, cancel := context.WithTimeout(ctx, sqlLimit)
	defer cancel()
	conn, err := pgConn(ctx, port, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, s := range statements {
		done := waiting(s, sqlLimit)
		_, err := conn.Exec(ctx, s)
		done()
		if err != nil {
			return fmt.Errorf("port %d, database %s: %s: %w", port, db, s, err)
		}
	}
	return nil
}

// query scans the one row of q into dest.
func query(ctx context.Context, port int, db, q string, dest ...any) error {
	ctx, cancel := context.WithTimeout(ctx, sqlLimit)
	defer cancel()
	conn, err := pgConn(ctx, port, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	defer waiting(q, sqlLimit)()
	if err := conn.QueryRow(ctx, q).Scan(dest...); err != nil {
		return fmt.Errorf("port %d, database %s: %s: %w", port, db, q, err)
	}
	return nil
}

// column is the first column of every row of q.
func column(ctx context.Context, port int, db, q string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, sqlLimit)
	defer cancel()
	conn, err := pgConn(ctx, port, db)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("port %d, database %s: %s: %w", port, db, q, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
