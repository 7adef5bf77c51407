package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"golang.org/x/sync/semaphore"

	"github.com/pgsync/pgsync/pgoutput"
	"github.com/pgsync/pgsync/position"
)

// Applier receives the decoded source transactions in commit order. The
// apply package implements it on the target.
type Applier interface {
	Begin(ctx context.Context, b pgoutput.Begin) error
	Relation(ctx context.Context, r *pgoutput.Relation) error
	Change(ctx context.Context, c *pgoutput.Change) error
	Truncate(ctx context.Context, t pgoutput.Truncate) error
	// Commit ends a source transaction; more says that another one is
	// already waiting, so the applier may keep its target transaction open.
	// committed reports whether everything up to c.EndLSN is now durable.
	Commit(ctx context.Context, c pgoutput.Commit, more bool) (committed bool, err error)
	// Flush commits what the applier still holds; committed reports whether
	// it had anything, which is then durable up to GroupEnd.
	Flush(ctx context.Context) (committed bool, err error)
	GroupEnd() pglogrepl.LSN
}

// StreamOptions configures one streaming session.
type StreamOptions struct {
	Names
	// MaxInflightBytes bounds the received WAL data waiting to be applied.
	MaxInflightBytes int64
	// StopAt, when set, ends the stream once the position acknowledged to
	// the source reaches it.
	StopAt pglogrepl.LSN
	Logger *slog.Logger
	// Stats, when set, counts what is applied.
	Stats *Stats
}

// Stats counts applied work for progress lines and benchmarks.
type Stats struct {
	Txns      atomic.Int64
	Rows      atomic.Int64
	ServerEnd atomic.Uint64 // last WAL end the server announced
	// Positions are the current session's positions.
	Positions atomic.Pointer[position.Positions]
}

// LagBytes is how far the applied position is behind the WAL end the server
// last announced.
func (st *Stats) LagBytes() int64 {
	p := st.Positions.Load()
	if p == nil {
		return 0
	}
	return max(int64(st.ServerEnd.Load())-int64(p.Applied()), 0)
}

// Timing of the reader. readTimeout bounds each receive so that feedback
// goes out soon after the applier commits; keepAliveEvery keeps the
// walsender from timing out while the applier holds back the reader.
const (
	readTimeout    = 100 * time.Millisecond
	keepAliveEvery = 10 * time.Second
	arenaChunk     = 256 << 10
	shutdownGrace  = 5 * time.Second
	lazyReadQueued = 1024
	lazyReadPause  = time.Millisecond
)

// walMessage is one pgoutput message copied out of the connection's buffer.
type walMessage struct {
	data []byte
}

// errCaughtUp ends a stream that reached StopAt.
var errCaughtUp = errors.New("caught up")

// Stream runs START_REPLICATION on conn from start and hands every source
// transaction to app until ctx ends (nil), StopAt is acknowledged (nil) or
// an error occurs. Transactions whose commit lies before start are skipped:
// they were applied before.
//
// One goroutine reads the connection and owns all of its I/O, including the
// standby status updates; another decodes and applies. Between them sits a
// queue bounded by MaxInflightBytes.
func Stream(ctx context.Context, conn *pgconn.PgConn, start pglogrepl.LSN, app Applier, opts StreamOptions) error {
	if opts.Stats == nil {
		opts.Stats = &Stats{}
	}
	err := pglogrepl.StartReplication(ctx, conn, opts.Slot, start, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{
			"proto_version '1'",
			fmt.Sprintf("publication_names '%s'", opts.Publication),
		},
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55000" && strings.Contains(pgErr.Message, "cannot read from logical replication slot") {
			return fmt.Errorf("slot %s is invalidated: the source removed WAL it still needed (max_slot_wal_keep_size); start over with pgsync bootstrap --force: %w", opts.Slot, err)
		}
		return fmt.Errorf("start replication on slot %s at %s: %w", opts.Slot, start, err)
	}
	pos := position.New(start)
	opts.Stats.Positions.Store(pos)
	s := &stream{
		conn:  conn,
		app:   app,
		opts:  opts,
		pos:   pos,
		start: start,
		queue: make(chan walMessage, 1<<16),
		sem:   semaphore.NewWeighted(opts.MaxInflightBytes),
		stop:  make(chan struct{}),
		done:  make(chan error, 1),
	}
	// rctx ends when the dispatcher fails, so that a reader waiting for
	// queue space or data notices at once.
	rctx, failed := context.WithCancel(ctx)
	defer failed()
	go func() {
		err := s.dispatch(ctx)
		if err != nil {
			failed()
		}
		s.done <- err
	}()
	return s.read(rctx)
}

type stream struct {
	conn  *pgconn.PgConn
	app   Applier
	opts  StreamOptions
	pos   *position.Positions
	start pglogrepl.LSN

	queue chan walMessage
	sem   *semaphore.Weighted
	stop  chan struct{} // closed by the reader: the dispatcher finishes up
	done  chan error    // the dispatcher's result

	// reader state
	arena       []byte
	inTxn       bool
	lastReport  time.Time
	deadlineSet time.Time
}

// read is the reader goroutine's loop.
func (s *stream) read(ctx context.Context) error {
	for {
		if err := s.readOne(ctx); err != nil {
			return s.finish(err)
		}
	}
}

// finish stops the dispatcher, lets it commit what it can, and sends the
// final position. A cancelled ctx and reaching StopAt are clean ends.
func (s *stream) finish(readErr error) error {
	close(s.stop)
	var appErr error
	select {
	case appErr = <-s.done:
	case <-time.After(shutdownGrace + time.Second):
		appErr = errors.New("applier did not stop in time")
	}
	if !s.conn.IsClosed() {
		if err := s.report(false); err != nil && appErr == nil && !isStop(readErr) {
			readErr = errors.Join(readErr, err)
		}
	}
	if appErr != nil && !errors.Is(appErr, context.Canceled) {
		return appErr
	}
	if isStop(readErr) {
		return nil
	}
	return readErr
}

func isStop(err error) bool {
	return errors.Is(err, errCaughtUp) || errors.Is(err, context.Canceled)
}

func (s *stream) readOne(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A read deadline on the socket, renewed at most every half period,
	// costs far less per message than a context with a deadline.
	if now := time.Now(); now.Sub(s.deadlineSet) > readTimeout/2 {
		if err := s.conn.Conn().SetReadDeadline(now.Add(readTimeout)); err != nil {
			return fmt.Errorf("receive from slot %s: %w", s.opts.Slot, err)
		}
		s.deadlineSet = now
	}
	// While the applier has plenty queued (1024 messages are milliseconds of
	// work), let data gather in the socket, so that the reader does not wake
	// up for every segment the walsender sends: on a machine the servers
	// share, that CPU goes back to them (docs/benchmarks.md, catch-up).
	if len(s.queue) >= lazyReadQueued {
		time.Sleep(lazyReadPause)
	}
	msg, err := s.conn.ReceiveMessage(context.Background())
	if err != nil {
		if pgconn.Timeout(err) && ctx.Err() == nil {
			return s.afterMessage()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("receive from slot %s: %w", s.opts.Slot, err)
	}
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		if len(m.Data) == 0 {
			return fmt.Errorf("receive from slot %s: empty CopyData", s.opts.Slot)
		}
		switch m.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
			if err != nil {
				return fmt.Errorf("keepalive from slot %s: %w", s.opts.Slot, err)
			}
			s.opts.Stats.ServerEnd.Store(uint64(ka.ServerWALEnd))
			// WAL the publication does not cover may be acknowledged only
			// when everything received is applied and nothing is half read.
			if !s.inTxn && s.pos.Idle() && len(s.queue) == 0 && ka.ServerWALEnd > s.pos.Reported() {
				if err := s.reportAt(ka.ServerWALEnd); err != nil {
					return err
				}
			} else if ka.ReplyRequested {
				if err := s.report(true); err != nil {
					return err
				}
			}
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(m.Data[1:])
			if err != nil {
				return fmt.Errorf("xlogdata from slot %s: %w", s.opts.Slot, err)
			}
			s.opts.Stats.ServerEnd.Store(uint64(xld.ServerWALEnd))
			if err := s.enqueue(ctx, xld.WALData); err != nil {
				return err
			}
		}
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("slot %s: %w", s.opts.Slot, pgconn.ErrorResponseToPgError(m))
	case *pgproto3.CopyDone:
		return fmt.Errorf("slot %s: server ended the stream", s.opts.Slot)
	}
	return s.afterMessage()
}

// afterMessage reports a changed applied position and checks StopAt.
func (s *stream) afterMessage() error {
	if s.pos.Applied() > s.pos.Reported() {
		if err := s.report(false); err != nil {
			return err
		}
	}
	if s.opts.StopAt != 0 && s.pos.Reported() >= s.opts.StopAt {
		return errCaughtUp
	}
	return nil
}

// enqueue copies data out of the connection's buffer (it is reused by the
// next receive) into an arena chunk and queues it, waiting while the
// inflight bytes are at their bound.
func (s *stream) enqueue(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	n := len(data)
	weight := int64(n)
	if weight > s.opts.MaxInflightBytes {
		weight = s.opts.MaxInflightBytes // one huge value still passes, alone
	}
	for !s.sem.TryAcquire(weight) {
		wctx, cancel := context.WithTimeout(ctx, keepAliveEvery)
		err := s.sem.Acquire(wctx, weight)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The applier is busy: tell the walsender we are alive.
		if err := s.report(true); err != nil {
			return err
		}
	}
	if len(s.arena) < n {
		s.arena = make([]byte, max(arenaChunk, n))
	}
	buf := s.arena[:n:n]
	s.arena = s.arena[n:]
	copy(buf, data)
	switch buf[0] {
	case pgoutput.MsgBegin:
		s.inTxn = true
	case pgoutput.MsgCommit:
		s.inTxn = false
		if len(buf) >= 18 {
			s.pos.AdvanceReceived(pglogrepl.LSN(binary.BigEndian.Uint64(buf[10:18])))
		}
	}
	select {
	case s.queue <- walMessage{data: buf}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// report sends the applied position if it changed, or in any case when
// force is set (the server asked, or it must hear from us).
func (s *stream) report(force bool) error {
	at := max(s.pos.Applied(), s.pos.Reported())
	if !force && at == s.pos.Reported() && !s.lastReport.IsZero() {
		return nil
	}
	return s.reportAt(at)
}

func (s *stream) reportAt(at pglogrepl.LSN) error {
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: at,
		WALFlushPosition: at,
		WALApplyPosition: at,
	})
	if err != nil {
		return fmt.Errorf("send feedback to slot %s at %s: %w", s.opts.Slot, at, err)
	}
	s.pos.AdvanceReported(at)
	s.lastReport = time.Now()
	return nil
}

// dispatch is the applier goroutine's loop: decode and apply in order.
func (s *stream) dispatch(ctx context.Context) error {
	var (
		change   pgoutput.Change
		skipping bool
		inTxn    bool
	)
	actx := context.WithoutCancel(ctx) // a signal must not cut a target round trip in half
	// Queue space goes back to the reader in slices of releaseEvery bytes,
	// so that a reader waiting on a full queue wakes once per slice, not
	// once per message.
	releaseEvery := max(s.opts.MaxInflightBytes/8, 1)
	var unreleased int64
	for {
		var m walMessage
		select {
		case <-s.stop:
			return s.shutdown(actx, inTxn)
		case m = <-s.queue:
		default:
			// Nothing waiting: hand back all space before blocking.
			if unreleased > 0 {
				s.sem.Release(unreleased)
				unreleased = 0
			}
			select {
			case m = <-s.queue:
			case <-s.stop:
				return s.shutdown(actx, inTxn)
			}
		}
		err := s.handle(actx, m.data, &change, &skipping, &inTxn)
		unreleased += min(int64(len(m.data)), s.opts.MaxInflightBytes)
		if unreleased >= releaseEvery {
			s.sem.Release(unreleased)
			unreleased = 0
		}
		if err != nil {
			return err
		}
	}
}

// shutdown commits the open group when it ends on a transaction boundary;
// a half-applied source transaction is rolled back by the caller's Close.
func (s *stream) shutdown(ctx context.Context, inTxn bool) error {
	if inTxn {
		return nil
	}
	fctx, cancel := context.WithTimeout(ctx, shutdownGrace)
	defer cancel()
	committed, err := s.app.Flush(fctx)
	if err != nil {
		return err
	}
	if committed {
		s.pos.AdvanceApplied(s.app.GroupEnd())
	}
	return nil
}

func (s *stream) handle(ctx context.Context, msg []byte, change *pgoutput.Change, skipping, inTxn *bool) error {
	switch msg[0] {
	case pgoutput.MsgBegin:
		b, err := pgoutput.DecodeBegin(msg)
		if err != nil {
			return err
		}
		*inTxn = true
		// A commit record before the resume point was applied earlier.
		if b.FinalLSN < s.start {
			*skipping = true
			return nil
		}
		return s.app.Begin(ctx, b)
	case pgoutput.MsgCommit:
		c, err := pgoutput.DecodeCommit(msg)
		if err != nil {
			return err
		}
		*inTxn = false
		if *skipping {
			*skipping = false
			return nil
		}
		committed, err := s.app.Commit(ctx, c, len(s.queue) > 0)
		if err != nil {
			return err
		}
		s.opts.Stats.Txns.Add(1)
		if committed {
			s.pos.AdvanceApplied(c.EndLSN)
		}
		return nil
	case pgoutput.MsgRelation:
		r, err := pgoutput.DecodeRelation(msg)
		if err != nil {
			return err
		}
		return s.app.Relation(ctx, r)
	case pgoutput.MsgInsert, pgoutput.MsgUpdate, pgoutput.MsgDelete:
		if *skipping {
			return nil
		}
		if err := pgoutput.DecodeChange(msg, change); err != nil {
			return err
		}
		s.opts.Stats.Rows.Add(1)
		return s.app.Change(ctx, change)
	case pgoutput.MsgTruncate:
		if *skipping {
			return nil
		}
		t, err := pgoutput.DecodeTruncate(msg)
		if err != nil {
			return err
		}
		return s.app.Truncate(ctx, t)
	case pgoutput.MsgType, pgoutput.MsgOrigin, pgoutput.MsgMessage:
		return nil
	}
	return fmt.Errorf("unknown pgoutput message type %q", msg[0])
}
