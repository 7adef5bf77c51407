package replication

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"golang.org/x/sync/semaphore"

	"github.com/pgsync/pgsync/pgoutput"
	"github.com/pgsync/pgsync/position"
)

// ErrStreamEnded is returned when the walsender ends the COPY stream.
var ErrStreamEnded = errors.New("the source ended the replication stream")

// ErrSourceSilent ends a session in which nothing at all, not even a
// keepalive, came from the source for SessionOptions.WALReceiverTimeout while
// the reader waited for it: a walsender that hangs (frozen, or cut off by a
// network that drops packets without a reset) would otherwise leave run
// waiting for ever, its log showing no lag (issue 15). Stream reconnects.
var ErrSourceSilent = errors.New("no message from the source")

// reader is the goroutine that owns the replication connection: it
// receives WAL data, queues it for the dispatcher and sends every standby
// status update. Every wait of the reader keeps the walsender informed, so
// that a slow target never makes the source drop the connection.
type reader struct {
	conn   *pgconn.PgConn
	slot   string
	pos    *position.Positions
	stats  *Stats
	stopAt pglogrepl.LSN

	queue       chan walMessage
	sem         *semaphore.Weighted
	maxInflight int64
	pauseQueued int // queue length from which each read waits lazyReadPause first

	arena []byte
	// collectNext: the last message was large (collectAfter); the
	// collector runs once the next one is received.
	collectNext bool
	inTxn       bool // a Begin was queued without its Commit
	// streams are the streamed transactions (protocol version 2) with a
	// segment queued and no Stream Commit or Abort yet: their changes wait
	// in a spool, so they are in flight as much as a half-received
	// transaction.
	streams     map[uint32]struct{}
	deadlineSet time.Time
	lastSent    time.Time // of the last status update
	// now is the clock as readOne last read it: every clockEvery messages,
	// and after a read that timed out. A clock read per message was a
	// tenth of run's CPU on a catch-up; the rules it serves (the read
	// deadline, wal_receiver_timeout, the keepalive period) are coarse.
	now        time.Time
	sinceClock int

	// The silence clock, as PostgreSQL's walreceiver keeps it for
	// wal_receiver_timeout (0: off). heard is set by every message received
	// and read at each renewal of the read deadline, which takes the time
	// anyway: a message costs no clock read of its own. lastHeard is the
	// renewal that last found heard set; pinged says whether the walsender
	// was asked for a keepalive since.
	silenceTimeout time.Duration
	heard          bool
	pinged         bool
	lastHeard      time.Time
}

// collectAfter is the message size from which the garbage collector runs
// once the message is no longer held: by the reader when the next message
// is received, by a spooled transaction's replay once the change is
// applied (docs/reliability.md, large values).
const collectAfter = 8 << 20

// read is the reader's loop; it returns when ctx ends, StopAt is
// acknowledged or the connection fails.
func (r *reader) read(ctx context.Context) error {
	for {
		if err := r.readOne(ctx); err != nil {
			return err
		}
	}
}

func (r *reader) readOne(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A read deadline on the socket, renewed at most every half period,
	// costs far less per message than a context with a deadline. A read
	// that reaches an old deadline times out at once, and the clock is
	// read again.
	if r.sinceClock++; r.sinceClock >= clockEvery || r.now.IsZero() {
		r.sinceClock = 0
		r.now = time.Now()
	}
	if now := r.now; now.Sub(r.deadlineSet) > readTimeout/2 {
		if err := r.checkSilence(now); err != nil {
			return err
		}
		if err := r.conn.Conn().SetReadDeadline(now.Add(readTimeout)); err != nil {
			return fmt.Errorf("receive from slot %s: %w", r.slot, err)
		}
		r.deadlineSet = now
	}
	// While the applier has plenty queued (1024 messages are milliseconds of
	// work), let data gather in the socket, so that the reader does not wake
	// up for every segment the walsender sends: on a machine the servers
	// share, that CPU goes back to them (docs/benchmarks.md, catch-up).
	if len(r.queue) >= r.pauseQueued {
		time.Sleep(lazyReadPause)
	}
	msg, err := r.conn.ReceiveMessage(context.Background())
	if err != nil {
		if pgconn.Timeout(err) && ctx.Err() == nil {
			r.sinceClock = clockEvery
			return r.afterMessage()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("receive from slot %s: %w", r.slot, err)
	}
	r.heard = true
	if r.collectNext {
		// pgx let go of the previous message's large buffer when it read
		// this one: collect it now, before a next large message is
		// allocated, so that two are never resident at once. Collecting
		// any earlier finds the buffer still held by the connection.
		r.collectNext = false
		runtime.GC()
	}
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		if len(m.Data) == 0 {
			return fmt.Errorf("receive from slot %s: empty CopyData", r.slot)
		}
		switch m.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
			if err != nil {
				return fmt.Errorf("keepalive from slot %s: %w", r.slot, err)
			}
			// Acknowledge first: a caught-up reader then never shows the
			// keepalive's end as lag, even for an instant.
			if err := r.report(ka.ServerWALEnd, ka.ReplyRequested); err != nil {
				return err
			}
			r.stats.ServerEnd.Store(uint64(ka.ServerWALEnd))
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(m.Data[1:])
			if err != nil {
				return fmt.Errorf("xlogdata from slot %s: %w", r.slot, err)
			}
			r.stats.ServerEnd.Store(uint64(xld.ServerWALEnd))
			if err := r.enqueue(ctx, xld.WALData, pglogrepl.LSN(xld.WALStart)); err != nil {
				return err
			}
		}
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("slot %s: %w", r.slot, pgconn.ErrorResponseToPgError(m))
	case *pgproto3.CopyDone:
		return fmt.Errorf("slot %s: %w", r.slot, ErrStreamEnded)
	}
	return r.afterMessage()
}

// checkSilence runs at each renewal of the read deadline, that is at least
// every readTimeout while the reader waits on the socket. It restarts the
// silence clock when a message came since the last renewal, asks the
// walsender for a keepalive once the silence reaches half the timeout, and
// ends the session with ErrSourceSilent when it reaches the timeout. Time
// the reader spends waiting for the applier is not silence: the message it
// waits to queue restarts the clock at the next renewal.
func (r *reader) checkSilence(now time.Time) error {
	if r.heard || r.lastHeard.IsZero() {
		r.heard, r.pinged, r.lastHeard = false, false, now
	}
	silent := now.Sub(r.lastHeard)
	r.stats.Silence.Store(int64(silent))
	ping, end := silenceStep(silent, r.silenceTimeout, r.pinged)
	if end {
		return fmt.Errorf("slot %s: %w for %s (wal_receiver_timeout)", r.slot, ErrSourceSilent, seconds(r.silenceTimeout))
	}
	if ping {
		r.pinged = true
		return r.ping()
	}
	return nil
}

// silenceStep is the rule of wal_receiver_timeout: after a silence of half
// the timeout, ask the walsender for a keepalive once (an idle walsender
// sends one on its own only every half wal_sender_timeout, which may be
// longer, or never when it is 0); at the timeout, give up the connection.
// A timeout of 0 turns both off, as in PostgreSQL.
func silenceStep(silent, timeout time.Duration, pinged bool) (ping, end bool) {
	if timeout <= 0 {
		return false, false
	}
	if silent >= timeout {
		return false, true
	}
	return !pinged && silent >= timeout/2, false
}

// seconds formats d as the configuration writes it: "60s", not "1m0s".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// afterMessage reports a changed applied position and checks StopAt.
func (r *reader) afterMessage() error {
	if err := r.report(0, false); err != nil {
		return err
	}
	if r.stopAt != 0 && r.pos.Reported() >= r.stopAt {
		return errCaughtUp
	}
	return nil
}

// enqueue copies data out of the connection's buffer (it is reused by the
// next receive) into an arena chunk and queues it, waiting while the queue
// is full by bytes or by count. A message larger than a chunk is queued
// without a copy, and enqueue returns once the dispatcher is done with it.
func (r *reader) enqueue(ctx context.Context, data []byte, walStart pglogrepl.LSN) error {
	if len(data) == 0 {
		return nil
	}
	n := len(data)
	weight := min(int64(n), r.maxInflight) // one huge value still passes, alone
	if !r.sem.TryAcquire(weight) {
		err := r.waitAlive(ctx, func(wctx context.Context) error { return r.sem.Acquire(wctx, weight) })
		if err != nil {
			return err
		}
	}
	m := walMessage{weight: weight, walStart: walStart}
	if n > arenaChunk {
		// A large message is not copied: the dispatcher applies it from
		// the connection's buffer while the reader waits (below), so a
		// large value is held once, not twice.
		m.data, m.done = data, make(chan struct{})
		r.collectNext = n >= collectAfter
	} else {
		if len(r.arena) < n {
			r.arena = make([]byte, arenaChunk)
		}
		m.data = r.arena[:n:n]
		r.arena = r.arena[n:]
		copy(m.data, data)
	}
	if err := r.track(m.data); err != nil {
		return err
	}
	select {
	case r.queue <- m:
	default:
		err := r.waitAlive(ctx, func(wctx context.Context) error {
			select {
			case r.queue <- m:
				return nil
			case <-wctx.Done():
				return wctx.Err()
			}
		})
		if err != nil {
			return err
		}
	}
	if m.done == nil {
		return nil
	}
	return r.waitAlive(ctx, func(wctx context.Context) error {
		select {
		case <-m.done:
			return nil
		case <-wctx.Done():
			return wctx.Err()
		}
	})
}

// track follows the transaction boundaries of the messages queued, for the
// received position and for the feedback decision (whether anything is in
// flight).
func (r *reader) track(msg []byte) error {
	switch msg[0] {
	case pgoutput.MsgBegin:
		r.inTxn = true
	case pgoutput.MsgCommit:
		r.inTxn = false
		c, err := pgoutput.DecodeCommit(msg)
		if err != nil {
			return fmt.Errorf("commit message from slot %s: %w", r.slot, err)
		}
		r.pos.AdvanceReceived(c.EndLSN)
	case pgoutput.MsgStreamStart:
		s, err := pgoutput.DecodeStreamStart(msg)
		if err != nil {
			return fmt.Errorf("stream start message from slot %s: %w", r.slot, err)
		}
		if r.streams == nil {
			r.streams = map[uint32]struct{}{}
		}
		r.streams[s.Xid] = struct{}{}
	case pgoutput.MsgStreamCommit:
		c, err := pgoutput.DecodeStreamCommit(msg)
		if err != nil {
			return fmt.Errorf("stream commit message from slot %s: %w", r.slot, err)
		}
		delete(r.streams, c.Xid)
		r.pos.AdvanceReceived(c.EndLSN)
	case pgoutput.MsgStreamAbort:
		a, err := pgoutput.DecodeStreamAbort(msg)
		if err != nil {
			return fmt.Errorf("stream abort message from slot %s: %w", r.slot, err)
		}
		if a.SubXid == a.Xid {
			delete(r.streams, a.Xid)
		}
	}
	return nil
}

// waitAlive calls wait with contexts of keepAliveEvery until it succeeds,
// sending a status update between attempts: while the applier is slow the
// reader reads nothing, and the walsender would otherwise end the
// connection after wal_sender_timeout.
func (r *reader) waitAlive(ctx context.Context, wait func(context.Context) error) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, keepAliveEvery)
		err := wait(wctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := r.report(0, true); err != nil {
			return err
		}
	}
}

// report sends a standby status update when the feedback decision says
// so. serverEnd is a keepalive's WAL end (0 otherwise); mustSend forces an
// update even without a new position.
func (r *reader) report(serverEnd pglogrepl.LSN, mustSend bool) error {
	at, send := r.feedback(serverEnd, mustSend).decide()
	if !send {
		return nil
	}
	return r.send(at, false)
}

// ping sends a status update that asks the walsender to answer at once
// with a keepalive, as PostgreSQL's walreceiver does at half of
// wal_receiver_timeout.
func (r *reader) ping() error {
	at, _ := r.feedback(0, true).decide()
	return r.send(at, true)
}

func (r *reader) feedback(serverEnd pglogrepl.LSN, mustSend bool) feedback {
	return feedback{
		applied:   r.pos.Applied(),
		reported:  r.pos.Reported(),
		serverEnd: serverEnd,
		drained:   !r.inTxn && len(r.streams) == 0 && len(r.queue) == 0 && r.pos.Idle(),
		mustSend:  mustSend,
		quiet:     r.now.Sub(r.lastSent),
	}
}

// send sends a standby status update at position at.
func (r *reader) send(at pglogrepl.LSN, replyRequested bool) error {
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), r.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: at,
		WALFlushPosition: at,
		WALApplyPosition: at,
		ReplyRequested:   replyRequested,
	})
	if err != nil {
		return fmt.Errorf("send feedback to slot %s at %s: %w", r.slot, at, err)
	}
	r.pos.AdvanceReported(at)
	r.lastSent = time.Now()
	return nil
}
