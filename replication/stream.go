package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/semaphore"

	"github.com/pgsync/pgsync/pgoutput"
	"github.com/pgsync/pgsync/position"
)

// Applier receives the decoded source transactions in commit order. The
// apply package implements it on the target. Every method that talks to the
// target honours ctx: when it ends, the call returns promptly.
type Applier interface {
	Begin(ctx context.Context, b pgoutput.Begin) error
	Relation(ctx context.Context, r *pgoutput.Relation) error
	Change(ctx context.Context, c *pgoutput.Change) error
	Truncate(ctx context.Context, t pgoutput.Truncate) error
	// Commit ends a source transaction; more says that another one is
	// already waiting, so the applier may keep its target transaction open.
	// durable is the position now durable on the target: c.EndLSN when the
	// group committed, 0 when it stays open.
	Commit(ctx context.Context, c pgoutput.Commit, more bool) (durable pglogrepl.LSN, err error)
	// Flush commits what the applier still holds and returns the position
	// now durable, 0 when it held nothing.
	Flush(ctx context.Context) (durable pglogrepl.LSN, err error)
}

// DDLApplier is an Applier that applies the statements the source's DDL
// capture emits (job.ddl = "capture", package ddl).
type DDLApplier interface {
	// DDL applies the statement m carries in the source transaction being
	// applied, after its changes before m and before those after it.
	DDL(ctx context.Context, m pgoutput.Message) error
}

// SessionOptions configures one streaming session (streamSession).
type SessionOptions struct {
	Names
	// MaxInflightBytes bounds the received WAL data waiting to be applied.
	MaxInflightBytes int64
	// StopAt, when set, ends the stream once the position acknowledged to
	// the source reaches it.
	StopAt pglogrepl.LSN
	Logger *slog.Logger
	// Stats, when set, counts what is applied.
	Stats *Stats
	// ReadPauseQueued is the queue length from which the reader pauses
	// before each read (0: the default, 1024; negative: never). For
	// benchmarks that measure the pause.
	ReadPauseQueued int
	// WALReceiverTimeout ends the session with ErrSourceSilent when the
	// reader, waiting on the source, receives nothing at all for this long,
	// like PostgreSQL's wal_receiver_timeout; at half of it the walsender
	// is asked for a keepalive. 0 turns it off.
	WALReceiverTimeout time.Duration
	// SpoolDir is the directory of the files that hold streamed
	// transactions until they commit (spool.go); "" means pgsync-<job>-spool
	// under os.TempDir() ($TMPDIR). Each session empties it of its spool
	// files.
	SpoolDir string
	// AbortedXids returns those of xids, subtransactions of a streamed
	// transaction that committed, that the source's commit log records as
	// aborted (streamed.go says why); nil asks nothing. Stream sets it.
	AbortedXids func(ctx context.Context, xids []uint32) ([]uint32, error)
	// CommitAloneThrough, when set, commits each source transaction that
	// commits at or before it in a target transaction of its own (no group
	// commit), so that a failure there stops at exactly that transaction
	// (GroupFailedError).
	CommitAloneThrough pglogrepl.LSN
	// HoldAt, when set, returns the position an online verify asks the
	// session to hold at (0: none): no source transaction committing at
	// or after it is applied until it changes. Held is told once the
	// target has every transaction committed before it (hold.go).
	HoldAt func() pglogrepl.LSN
	Held   func(ctx context.Context, at pglogrepl.LSN) error
	// Messages asks the source for logical decoding messages (pgoutput's
	// messages option, PostgreSQL 14+): job.ddl = "capture" carries the
	// source's DDL in them (package ddl). Those of ddl.Prefix go to the
	// Applier's DDL method, in order; any other is ignored.
	Messages bool
	// DDLTable takes the rows of the source's pgsync.ddl for those
	// messages (the table path of job.ddl = "capture" on a source older
	// than 14, ddl.Install): an insert there goes to the Applier's DDL
	// method as the message it stands for, and nothing of that table is
	// applied as data (ddltable.go).
	DDLTable bool
}

// Stats counts applied work for progress lines and benchmarks.
type Stats struct {
	Txns      atomic.Int64
	Rows      atomic.Int64
	ServerEnd atomic.Uint64 // last WAL end the server announced
	// Positions are the current session's positions.
	Positions atomic.Pointer[position.Positions]
	// CommitTime is the source commit time (Unix nanoseconds) of the last
	// transaction handed to the applier.
	CommitTime atomic.Int64
	// Reconnects counts the sessions lost and started again.
	Reconnects atomic.Int64
	// Silence is how long (nanoseconds) the reader had been waiting on the
	// source without receiving anything at its last read; time spent
	// waiting for the applier does not count.
	Silence atomic.Int64
	// SpoolBytes counts the bytes written to the spool files of streamed
	// transactions (protocol version 2), aborted ones included.
	SpoolBytes atomic.Int64
}

// SilentSeconds is how long the source has sent nothing while the reader
// waited for it.
func (st *Stats) SilentSeconds() float64 { return time.Duration(st.Silence.Load()).Seconds() }

// LagSeconds is how old the last applied source commit is, 0 when nothing
// is waiting (LagBytes is 0) or nothing was applied yet. Like LagBytes, it
// is as of the last message from the source.
func (st *Stats) LagSeconds(now time.Time) float64 {
	t := st.CommitTime.Load()
	if st.LagBytes() == 0 || t == 0 {
		return 0
	}
	return max(now.Sub(time.Unix(0, t)).Seconds(), 0)
}

// LagBytes is how far pgsync is behind the WAL end the server last
// announced. The position done is the later of the applied one and the one
// acknowledged to the source: WAL after the last published commit (other
// databases, unpublished tables, checkpoints) needs no apply, and is
// acknowledged once everything received is applied.
//
// The WAL end is as of the last message: while the source is silent
// (SilentSeconds) it may have written any amount since, which only the
// source can tell (pg_current_wal_lsn(); pgsync status and the
// pgsync_retained_wal_bytes metric read it there). The progress line of
// Stream therefore gives silent_s instead of lag_bytes after a silence.
func (st *Stats) LagBytes() int64 {
	p := st.Positions.Load()
	if p == nil {
		return 0
	}
	done := max(p.Applied(), p.Reported())
	return max(int64(st.ServerEnd.Load())-int64(done), 0)
}

// Timing of the reader. readTimeout bounds each receive so that feedback
// goes out soon after the applier commits; keepAliveEvery is the period of
// status updates while the reader waits for the applier, well under any
// sensible wal_sender_timeout. shutdownGrace is how long the applier may
// finish its round trip to the target once the session ends; after it the
// target I/O is cancelled.
const (
	readTimeout    = 100 * time.Millisecond
	keepAliveEvery = 5 * time.Second
	arenaChunk     = 256 << 10
	shutdownGrace  = 5 * time.Second
	lazyReadQueued = 1024
	lazyReadPause  = time.Millisecond
	queueMessages  = 1 << 16
	clockEvery     = 16 // messages between two clock reads of the reader
)

// walMessage is one pgoutput message, with the queue bytes it holds.
type walMessage struct {
	data   []byte
	weight int64
	// walStart is the WAL position the source sent with the message: for
	// one of a streamed transaction, before the transaction's commit.
	walStart pglogrepl.LSN
	// done, when set, is closed by the dispatcher once nothing refers to
	// data any more: data is the connection's own buffer.
	done chan struct{}
}

// errCaughtUp ends a stream that reached StopAt.
var errCaughtUp = errors.New("caught up")

// streamSession runs START_REPLICATION on conn from start and hands every source
// transaction to app until ctx ends (nil), StopAt is acknowledged (nil) or
// an error occurs. Transactions whose commit lies before start are skipped:
// they were applied before.
//
// One goroutine (the reader) owns the connection and all of its I/O,
// including the standby status updates; another (the dispatcher) decodes and
// applies. Between them sits a queue bounded by MaxInflightBytes. streamSession
// returns only after the dispatcher has stopped, so the caller may close
// the target then.
func streamSession(ctx context.Context, conn *pgconn.PgConn, start pglogrepl.LSN, app Applier, opts SessionOptions) error {
	if opts.Stats == nil {
		opts.Stats = &Stats{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	err := pglogrepl.StartReplication(ctx, conn, opts.Slot, start, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: pluginArgs(conn.ParameterStatus("server_version"), opts.Publication, opts.Messages),
	})
	if err != nil {
		return slotError(opts.Names, start, err)
	}
	// Only now, with the slot acquired, is no other session of the job
	// using the spool directory.
	dir := opts.SpoolDir
	if dir == "" {
		dir = defaultSpoolDir(opts.Job)
	}
	spools, err := newSpoolSet(dir, opts.Stats)
	if err != nil {
		return err
	}
	defer func() {
		if err := spools.close(); err != nil {
			opts.Logger.Warn("cannot remove the spool files of streamed transactions", "dir", dir, "err", err)
		}
	}()
	pos := position.New(start)
	opts.Stats.Positions.Store(pos)
	opts.Stats.Silence.Store(0)
	queue := make(chan walMessage, queueMessages)
	sem := semaphore.NewWeighted(opts.MaxInflightBytes)
	stop := make(chan struct{})
	d := &dispatcher{app: app, pos: pos, stats: opts.Stats, resume: start,
		queue: queue, sem: sem, maxInflight: opts.MaxInflightBytes, stop: stop,
		spools: spools, abortedXids: opts.AbortedXids, log: opts.Logger, commitAloneThrough: opts.CommitAloneThrough,
		holdAt: opts.HoldAt, held: opts.Held, ddlTable: opts.DDLTable}
	pauseQueued := opts.ReadPauseQueued
	switch {
	case pauseQueued == 0:
		pauseQueued = lazyReadQueued
	case pauseQueued < 0:
		pauseQueued = queueMessages + 1
	}
	r := &reader{conn: conn, slot: opts.Slot, pos: pos, stats: opts.Stats, stopAt: opts.StopAt, pauseQueued: pauseQueued,
		queue: queue, sem: sem, maxInflight: opts.MaxInflightBytes, silenceTimeout: opts.WALReceiverTimeout}

	// The dispatcher's round trips are not cut by ctx (a signal must not
	// abandon a commit half way) but by actx, cancelled shutdownGrace after
	// the session ends, so that a hung target cannot hold the process.
	actx, cancelApply := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelApply()
	// rctx ends when the dispatcher fails, so that a reader waiting for
	// queue space or data notices at once.
	rctx, stopReader := context.WithCancel(ctx)
	defer stopReader()
	done := make(chan error, 1)
	go func() {
		err := d.run(actx)
		if err != nil {
			stopReader()
		}
		done <- err
	}()
	readErr := r.read(rctx)

	close(stop)
	var cancelled atomic.Bool
	grace := time.AfterFunc(shutdownGrace, func() { cancelled.Store(true); cancelApply() })
	appErr := <-done // bounded: every target call of the dispatcher honours actx
	grace.Stop()
	if !conn.IsClosed() {
		if err := r.report(0, false); err != nil && appErr == nil && !isStop(readErr) {
			readErr = errors.Join(readErr, err)
		}
	}
	// An applier error is the cause unless it only reports the
	// cancellation of its last round trip.
	if appErr != nil && !cancelled.Load() {
		return appErr
	}
	if isStop(readErr) {
		return nil
	}
	return readErr
}

// pluginArgs are pgoutput's options. A source of PostgreSQL 14 or later is
// asked for protocol version 2 with streaming on, so that it sends a
// transaction larger than its logical_decoding_work_mem while the
// transaction runs, instead of spilling it to disk and sending it only after
// its commit (issue 18); older sources know only version 1. messages
// asks for logical decoding messages, which only version 2's sources send
// (job.ddl = "capture"; check refuses it on an older source).
func pluginArgs(serverVersion, publication string, messages bool) []string {
	args := []string{"proto_version '1'"}
	if majorVersion(serverVersion) >= 14 {
		args = []string{"proto_version '2'", "streaming 'on'"}
		if messages {
			args = append(args, "messages 'true'")
		}
	}
	return append(args, fmt.Sprintf("publication_names '%s'", publication))
}

// ServerMajor is the major version of the server conn is connected to,
// from the server_version it reported at startup (no query); 0 when it
// reported none.
func ServerMajor(conn *pgconn.PgConn) int {
	return majorVersion(conn.ParameterStatus("server_version"))
}

// majorVersion is the major version in a server_version parameter ("15.4
// (Debian 15.4-1.pgdg120+1)", "14beta1", "9.6.24"), 0 when there is none.
func majorVersion(v string) int {
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
		if n > 1000 {
			return 0
		}
	}
	return n
}

func isStop(err error) bool {
	return errors.Is(err, errCaughtUp) || errors.Is(err, context.Canceled)
}
