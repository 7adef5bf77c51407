package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/periodic"
	"github.com/pgsync/pgsync/pgconnect"
)

// Target is the applier side of a session: it knows the durable resume
// position and is closed when the session ends.
type Target interface {
	Applier
	ResumeLSN(ctx context.Context) (pglogrepl.LSN, error)
	Close(ctx context.Context) error
}

// ErrPaused is matched (errors.Is) by the error of a Target that ends a
// session on purpose: apply's TableBeingAddedError, at a table that
// pgsync add-tables is still copying. Stream starts the next session at once,
// without backoff, and that session's ResumeLSN waits.
var ErrPaused = errors.New("session paused by the target")

// GroupFailedError is a target transaction that held several source
// transactions (group commit) and failed on one that is not its first, At
// (its commit LSN). Nothing of the group is committed. Stream then starts a
// session that commits every source transaction up to At alone, so that
// those before At become durable and the failure repeats at At, alone,
// where the job stops (issue 23).
type GroupFailedError struct {
	At  pglogrepl.LSN
	Err error
}

func (e *GroupFailedError) Error() string { return e.Err.Error() }

// Unwrap returns the failure.
func (e *GroupFailedError) Unwrap() error { return e.Err }

// StreamOptions configures Stream: each session's SessionOptions, and
// what the loop over sessions needs.
type StreamOptions struct {
	SessionOptions
	SourceURL string
	// UntilCaughtUp ends Stream once every transaction committed on the
	// source before Stream started is applied and acknowledged.
	UntilCaughtUp bool
	// ProgressEvery is the period of the progress log line; 0 means 10s.
	ProgressEvery time.Duration
	// MaxBackoff caps the wait between reconnects; 0 means 10s, so that
	// streaming resumes soon after an outage ends.
	MaxBackoff time.Duration
	// Prepared, when set, returns the number of statements the Target holds
	// prepared, for the progress line (prepared_statements); the Target
	// keeps the count, not Stats.
	Prepared func() int64
}

// Stream streams the job's slot into targets opened by openTarget until ctx
// ends, reconnecting with backoff when the source or the target goes away.
// Each session resumes from the position recorded on the target, so a
// reconnect loses and repeats nothing.
func Stream(ctx context.Context, opts StreamOptions, openTarget func(context.Context) (Target, error)) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	opts.Logger = log
	if opts.Stats == nil {
		opts.Stats = &Stats{}
	}
	if opts.ProgressEvery == 0 {
		opts.ProgressEvery = 10 * time.Second
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	if opts.AbortedXids == nil {
		opts.AbortedXids = func(ctx context.Context, xids []uint32) ([]uint32, error) {
			return abortedXidsAt(ctx, opts.SourceURL, xids)
		}
	}
	if opts.UntilCaughtUp {
		head, err := currentWAL(ctx, opts.SourceURL)
		if err != nil {
			return err
		}
		opts.StopAt = head
		log.Info("running until caught up", "job_slot", opts.Slot, "source_wal_lsn", head.String())
	}
	stopProgress := logProgress(ctx, log, opts.Stats, opts.Prepared, opts.ProgressEvery, opts.StopAt)
	defer stopProgress()

	var wait time.Duration
	var lost time.Time   // when the connection was lost, zero while streaming
	var saidAt time.Time // the last reconnect line
	streamed := false    // a session reached the stream once
	for attempt := 0; ; attempt++ {
		began := time.Now()
		err := session(ctx, opts, openTarget, attempt, &streamed)
		if err == nil || ctx.Err() != nil {
			log.Info("stopped", "slot", opts.Slot, "txns", opts.Stats.Txns.Load(), "rows", opts.Stats.Rows.Load(),
				"spool_bytes", opts.Stats.SpoolBytes.Load(), "cpu_s", cpuSeconds())
			return nil
		}
		// A Target ends a session on purpose (a table being added): the
		// next session starts at once, and its ResumeLSN waits.
		if errors.Is(err, ErrPaused) {
			log.Info("pausing", "slot", opts.Slot, "reason", err.Error())
			continue
		}
		var group *GroupFailedError
		if errors.As(err, &group) && group.At > opts.CommitAloneThrough {
			log.Warn("a transaction failed inside a group of transactions: committing the group's earlier transactions one by one, then stopping at it",
				"failed_at", group.At.String(), "err", group.Err)
			opts.CommitAloneThrough = group.At
			continue
		}
		// A server that is unreachable at start is a configuration problem
		// to report at once; one that goes away later is waited for.
		if !streamed || !Transient(err) {
			return err
		}
		// A session that streamed for a while ends the outage before it: the
		// next loss starts a new one, with fast retries again.
		if lost.IsZero() || time.Since(began) > time.Minute {
			lost, wait, saidAt = time.Now(), 0, time.Time{}
		}
		wait = reconnectWait(time.Since(lost), wait, opts.MaxBackoff)
		switch {
		case errors.Is(err, ErrSourceSilent):
			log.Warn("no message from the source for "+seconds(opts.WALReceiverTimeout)+" (wal_receiver_timeout): reconnecting",
				"slot", opts.Slot, "in", wait.String())
		case sayReconnect(saidAt, wait):
			saidAt = time.Now()
			log.Warn("connection lost: reconnecting every "+fastRetryEvery.String()+" for the first "+fastRetryFor.String()+
				" (the time a standby takes to be promoted), then backing off up to "+opts.MaxBackoff.String(),
				"slot", opts.Slot, "in", wait.String(), "outage_s", fmt.Sprintf("%.1f", time.Since(lost).Seconds()),
				"source_hosts", pgconnect.Hosts(opts.SourceURL), "err", err)
		}
		opts.Stats.Reconnects.Add(1)
		select {
		case <-ctx.Done():
			log.Info("stopped", "slot", opts.Slot)
			return nil
		case <-time.After(wait):
		}
	}
}

// reconnectSayEvery is how often the fast retries of an outage are logged:
// the first, then one line in this period, not four a second.
const reconnectSayEvery = 5 * time.Second

// sayReconnect reports whether a failed reconnect gets a log line: the
// first of an outage (saidAt zero), each of the slow retries (a wait of
// a second or more), and a fast one once reconnectSayEvery has passed
// since the last line.
func sayReconnect(saidAt time.Time, wait time.Duration) bool {
	return saidAt.IsZero() || wait >= time.Second || time.Since(saidAt) >= reconnectSayEvery
}

// The reconnect policy: a source that fails over has no primary for a few
// seconds, from the old primary's loss to the standby's promotion, and
// run should stream from the new primary within a second of the
// promotion; a longer outage (a server down for maintenance, the network)
// is retried less and less often.
const (
	fastRetryEvery = 250 * time.Millisecond
	fastRetryFor   = 30 * time.Second
)

// reconnectWait is the wait before the next reconnect, outage after the
// connection was lost, the previous wait being prev: fastRetryEvery for
// the first fastRetryFor, then doubling from a second up to maxWait. A
// retry costs the source a connection attempt (a refused one on a
// server that is down), four a second for half a minute at most.
func reconnectWait(outage, prev, maxWait time.Duration) time.Duration {
	switch {
	case outage < fastRetryFor:
		return fastRetryEvery
	case prev < time.Second:
		return min(time.Second, maxWait)
	}
	return min(prev*2, maxWait)
}

// session is one of Stream's sessions: it opens a target, reads where to
// resume from it, connects to the source's slot and streams until the
// session ends.
func session(ctx context.Context, opts StreamOptions, openTarget func(context.Context) (Target, error), attempt int, streamed *bool) error {
	target, err := openTarget(ctx)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		_ = target.Close(cctx)
	}()
	start, err := target.ResumeLSN(ctx)
	if err != nil {
		return err
	}
	conn, err := pgconnect.ConnectReplication(ctx, opts.SourceURL)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if err := awaitSlot(ctx, conn, opts.Names, attempt > 0, opts.Logger); err != nil {
		return err
	}
	*streamed = true
	if attempt == 0 {
		opts.Logger.Info("started", "slot", opts.Slot, "from_lsn", start.String())
	} else {
		opts.Logger.Info("reconnected", "slot", opts.Slot, "from_lsn", start.String(), "attempt", attempt)
	}
	return streamSession(ctx, conn, start, target, opts.SessionOptions)
}

// abortedXidsAt asks the source at url, over a connection of its own (a
// streamed transaction with subtransactions is rare enough not to hold one
// open), which of xids aborted.
func abortedXidsAt(ctx context.Context, url string, xids []uint32) ([]uint32, error) {
	conn, err := pgconnect.Connect(ctx, "source", url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return AbortedXids(ctx, conn, xids)
}

func currentWAL(ctx context.Context, url string) (pglogrepl.LSN, error) {
	conn, err := pgconnect.Connect(ctx, "source", url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return CommittedHead(ctx, conn)
}

// logProgress writes one line per period while work is applied. Its
// lag_bytes is as of the last message from the source (Stats.LagBytes):
// when the source has sent nothing for a whole period, the source alone
// knows how far its WAL has gone, and the line gives silent_s, the seconds
// since the last message, instead of a lag it cannot know (issue 15).
// prepared, when not nil, adds prepared_statements. spool_bytes counts what
// streamed transactions wrote to their spools, so a period that only spools
// a large transaction still gets its line. With stopAt set (run
// --until-caught-up), a period that applied nothing gets a waiting line
// instead: the walsender may decode WAL of other tables for long before
// it reaches stopAt, and the wait must say what it waits for.
func logProgress(ctx context.Context, log *slog.Logger, st *Stats, prepared func() int64, every time.Duration, stopAt pglogrepl.LSN) func() {
	lastTxns, lastRows, lastSpool := st.Txns.Load(), st.Rows.Load(), st.SpoolBytes.Load()
	// The stop waits for the goroutine: no line is logged after it.
	return periodic.Start(ctx, every, func(context.Context) bool {
		txns, rows, spool := st.Txns.Load(), st.Rows.Load(), st.SpoolBytes.Load()
		switch progressLineOf(txns != lastTxns || rows != lastRows || spool != lastSpool, stopAt) {
		case progressQuiet:
			return true
		case progressWaiting:
			log.Info("waiting: nothing to apply yet; run --until-caught-up exits once the source has sent up to stop_at and it is applied (SIGINT ends it sooner)",
				"stop_at", stopAt.String(), "source_sent", pglogrepl.LSN(st.ServerEnd.Load()).String())
			return true
		}
		secs := every.Seconds()
		args := []any{"txn_per_s", int64(float64(txns-lastTxns) / secs), "rows_per_s", int64(float64(rows-lastRows) / secs),
			lagAttr(st.LagBytes(), time.Duration(st.Silence.Load()), every), "txns", txns, "rows", rows, "spool_bytes", spool}
		if prepared != nil {
			args = append(args, "prepared_statements", prepared())
		}
		log.Info("applying", args...)
		lastTxns, lastRows, lastSpool = txns, rows, spool
		return true
	})
}

// The progress line of one period.
const (
	progressQuiet   = iota // nothing applied, nothing to say
	progressWaiting        // nothing applied while run --until-caught-up waits
	progressApplying
)

// progressLineOf decides a period's progress line: a line of rates when
// anything was applied; when nothing was, a waiting line for run
// --until-caught-up (stopAt set), which must say what it waits for, and
// none for run, which may be idle for hours.
func progressLineOf(applied bool, stopAt pglogrepl.LSN) int {
	switch {
	case applied:
		return progressApplying
	case stopAt != 0:
		return progressWaiting
	}
	return progressQuiet
}

// lagAttr is the progress line's lag: the bytes the source's last message
// said were left, or, once the source has sent nothing for a whole
// period, how long it has been silent (only the source knows how far its
// WAL went since).
func lagAttr(lagBytes int64, silence, every time.Duration) slog.Attr {
	if silence >= every {
		return slog.Int64("silent_s", int64(silence.Seconds()))
	}
	return slog.Int64("lag_bytes", lagBytes)
}

// Transient reports whether err may go away in a new session: a lost,
// refused or silent connection, a server shutting down or starting up, and a
// serialization failure or deadlock on the target (the group is rolled
// back and applied again). Errors of the data (a missing column, a
// diverged row, a constraint of the target) and of the slot are permanent.
func Transient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection_exception
			return true
		}
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
			"53300",          // too_many_connections
			"40001", "40P01": // serialization_failure, deadlock_detected
			return true
		}
		return false
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connectErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, ErrStreamEnded) || errors.Is(err, ErrSourceSilent) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}

// cpuSeconds is the CPU time the process has used, for the last log line
// (benchmarks compare it with the servers' processes).
func cpuSeconds() string {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return "unknown"
	}
	return strconv.FormatFloat(time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds(), 'f', 2, 64)
}
