// Command discard measures the floor of logical replication from one
// source: it streams pgoutput from a slot, reads every message and throws
// it away, and acknowledges the end once the stream has passed a given WAL
// position. No consumer of the same slot can finish sooner, since the
// walsender does the same work for it; the bench harness's catchup
// scenario times it beside pgsync and a native subscription.
//
//	cd scripts/bench && go run ./cmd/discard -url 'postgres://...?replication=database' -slot S -publication P -until 0/5000000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

func main() {
	url := flag.String("url", "", "source connection URL with replication=database")
	slot := flag.String("slot", "", "logical slot (pgoutput)")
	publication := flag.String("publication", "", "publication name")
	until := flag.String("until", "", "stop once the stream has passed this WAL position")
	limit := flag.Duration("timeout", 30*time.Minute, "give up after this long")
	pauseAfter := flag.Duration("pause-after", 250*time.Microsecond, "sleep 1 ms after reading for this long (0: never); 250us was the fastest of 50us-4ms on the catch-up backlog")
	flag.Parse()
	if err := run(*url, *slot, *publication, *until, *limit, *pauseAfter); err != nil {
		fmt.Fprintln(os.Stderr, "discard:", err)
		os.Exit(1)
	}
}

func run(url, slot, publication, until string, limit, pauseAfter time.Duration) error {
	stopAt, err := pglogrepl.ParseLSN(until)
	if err != nil {
		return fmt.Errorf("-until %q: %w", until, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	conn, err := pgconn.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	start := time.Now()
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", fmt.Sprintf("publication_names '%s'", publication)},
	})
	if err != nil {
		return err
	}
	var messages, bytes int64
	var received pglogrepl.LSN
	reading := time.Now()
	for received < stopAt {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return fmt.Errorf("after %d messages at %s: %w", messages, received, err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 {
			return fmt.Errorf("unexpected message %T at %s", msg, received)
		}
		switch cd.Data[0] {
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				return err
			}
			messages++
			bytes += int64(len(x.WALData))
			// A reader that takes every few kilobytes as soon as they are
			// sent makes the walsender pay a system call per message;
			// pausing lets the data gather, as pgsync's reader does.
			if pauseAfter > 0 && messages%64 == 0 && time.Since(reading) >= pauseAfter {
				time.Sleep(time.Millisecond)
				reading = time.Now()
			}
			// A commit's message starts at its record; the stream has
			// passed stopAt once a message starts at or after it.
			received = max(received, x.WALStart)
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				return err
			}
			received = max(received, k.ServerWALEnd)
			if k.ReplyRequested {
				if err := ack(ctx, conn, received); err != nil {
					return err
				}
			}
		}
	}
	if err := ack(ctx, conn, received); err != nil {
		return err
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("{\"seconds\": %.2f, \"cpu_seconds\": %.2f, \"messages\": %d, \"bytes\": %d, \"acknowledged\": %q}\n",
		time.Since(start).Seconds(), cpu.Seconds(), messages, bytes, received)
	return nil
}

func ack(ctx context.Context, conn *pgconn.PgConn, lsn pglogrepl.LSN) error {
	return pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: lsn, WALFlushPosition: lsn, WALApplyPosition: lsn,
	})
}
