package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/apply"
	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ddl"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/metrics"
	"github.com/pgsync/pgsync/periodic"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/position"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/snapshot"
)

// RunOptions are what pgsync run takes besides the job's Options.
type RunOptions struct {
	// UntilCaughtUp ends run once every transaction the source committed
	// before the start is applied and acknowledged.
	UntilCaughtUp bool
	// ProgressEvery is the period of the progress log line.
	ProgressEvery time.Duration
	// ReadPauseQueued is the queue length from which the reader pauses
	// (0: the default, -1: never; for developers).
	ReadPauseQueued int
	// MaxInflightBytes bounds what the reader queues for the applier.
	MaxInflightBytes int64
	// WALReceiverTimeout: a source that sends nothing, not even a
	// keepalive, for that long is given up and reconnected to.
	WALReceiverTimeout time.Duration
	// MaxBatchRows and MaxBatchBytes end a batch of the target pipeline.
	MaxBatchRows  int
	MaxBatchBytes int64
	// MaxGroupBytes ends a group of source transactions committed as one
	// target transaction.
	MaxGroupBytes int64
	// ApplyStreamedAsReceived applies a streamed transaction through a
	// second target session as it arrives, not at its commit.
	ApplyStreamedAsReceived bool
	// AddColumns lets run add a column the source gained to the target.
	AddColumns bool
	// Selected says whether job.tables, read now, names a table: run asks
	// about a table being added, whose add the operator abandons by
	// taking it out of job.tables.
	Selected func(schema, name string) bool
	// MetricsAddr serves Prometheus metrics there when set.
	MetricsAddr string
	// SkipDDL are captured DDL statements, by the LSN of their message,
	// that run records as skipped before it starts (--skip-ddl): it then
	// applies their source transactions without them.
	SkipDDL []pglogrepl.LSN
}

// serverReadEvery is how often a run serving metrics reads the slot and
// the last comparison from the servers: the metrics show the last reading,
// not a query per scrape.
const serverReadEvery = 5 * time.Second

// Run streams the job's slot from its recorded position and applies each
// source transaction to the target, until ctx ends or, with UntilCaughtUp,
// until caught up. It opens and reopens its own connections.
func Run(ctx context.Context, opts Options, ro RunOptions, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	names := replication.Names{Job: opts.Job, Slot: opts.Slot, Publication: opts.Slot}
	stats := &replication.Stats{}
	// Kept by apply, read by the progress line and the metrics.
	prepared := &atomic.Int64{}
	streamOpts := replication.StreamOptions{
		SessionOptions: replication.SessionOptions{
			Names:              names,
			MaxInflightBytes:   ro.MaxInflightBytes,
			Logger:             log,
			Stats:              stats,
			ReadPauseQueued:    ro.ReadPauseQueued,
			WALReceiverTimeout: ro.WALReceiverTimeout,
		},
		SourceURL:     opts.SourceURL,
		UntilCaughtUp: ro.UntilCaughtUp,
		ProgressEvery: ro.ProgressEvery,
		Prepared:      prepared.Load,
	}
	if err := prepareTarget(ctx, opts, ro.SkipDDL); err != nil {
		return err
	}
	holds := watchHolds(ctx, opts, stats, log)
	defer holds.stop()
	streamOpts.HoldAt, streamOpts.Held = holds.at, holds.markHeld
	applyOpts := apply.Options{Job: opts.Job, Selected: ro.Selected, MaxBatchRows: ro.MaxBatchRows, MaxBatchBytes: ro.MaxBatchBytes,
		MaxGroupBytes: ro.MaxGroupBytes,
		Prepared:      prepared, Logger: log, AddColumns: ro.AddColumns, SourceColumns: sourceColumns(opts.SourceURL),
		// One for the whole run: the tables checked in a session are not
		// checked again after a reconnect unless they changed.
		Shapes: apply.NewShapeCache()}
	if err := captureOptions(ctx, opts, &streamOpts.SessionOptions, &applyOpts); err != nil {
		return err
	}
	if ro.ApplyStreamedAsReceived {
		applyOpts.Connect = func(ctx context.Context) (*pgx.Conn, error) {
			return pgconnect.ConnectTarget(ctx, opts.TargetURL)
		}
	}
	if ro.MetricsAddr != "" {
		reg := metrics.NewRegistry()
		applyOpts.Metrics = metrics.NewApply(reg)
		servers := &metrics.ServerReadings{}
		metrics.RegisterRun(reg, runReadings(stats, prepared, servers))
		stop := readServers(ctx, opts, names, servers)
		defer stop()
		if err := metrics.Serve(ctx, ro.MetricsAddr, reg, log); err != nil {
			return err
		}
	}
	err := replication.Stream(ctx, streamOpts, func(ctx context.Context) (replication.Target, error) {
		conn, err := pgconnect.ConnectTarget(ctx, opts.TargetURL)
		if err != nil {
			return nil, err
		}
		return apply.New(conn, applyOpts), nil
	})
	if (errors.Is(err, ErrSlotMissing) || errors.Is(err, ErrJobReversed)) && reversed(ctx, opts) {
		if stats.Positions.Load() == nil { // never streamed: a run started too late
			return fmt.Errorf("job %s: %w", opts.Job, ErrJobReversed)
		}
		// cutover --reverse ended the slot this run streamed: its work is
		// done.
		log.Info("run ends: cutover --reverse ended the job; its reverse job streams the other way", "job", opts.Job)
		return nil
	}
	return err
}

// prepareTarget refuses a job that is not ready to stream, and brings the
// target's ledger to this pgsync's version: a target an earlier release
// left upgrades itself at run's start, before the sessions and the hold
// watch read tables it may lack.
func prepareTarget(ctx context.Context, opts Options, skipDDL []pglogrepl.LSN) error {
	conn, err := pgconnect.Connect(ctx, "target", opts.TargetURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := ledger.ReadReady(ctx, conn, opts.Job); err != nil {
		return err
	}
	if err := ledger.Ensure(ctx, conn); err != nil {
		return err
	}
	if len(skipDDL) > 0 && !opts.DDLCapture {
		return fmt.Errorf("--skip-ddl: %w", ErrNoDDLCapture)
	}
	for _, lsn := range skipDDL {
		if err := ledger.RecordDDLSkip(ctx, conn, opts.Job, lsn); err != nil {
			return err
		}
	}
	return nil
}

// ErrNoDDLCapture: a flag about captured DDL given to a job without
// job.ddl = "capture".
var ErrNoDDLCapture = errors.New(`the job does not capture DDL (job.ddl is not "capture")`)

// captureOptions sets the options of job.ddl = "capture": the session
// asks for messages, or, when bootstrap installed the table path (a
// source older than 14), takes the rows of pgsync.ddl for them, and the
// Applier applies the captured statements, checking their signature with
// the key read from the source now.
func captureOptions(ctx context.Context, opts Options, so *replication.SessionOptions, ao *apply.Options) error {
	if !opts.DDLCapture {
		return nil
	}
	conn, err := pgconnect.Connect(ctx, "source", opts.SourceURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	in, err := ddl.ReadInstalled(ctx, conn, opts.Job, so.Publication)
	if err != nil {
		return err
	}
	if in.Key == "" {
		return fmt.Errorf("job %s: %w", opts.Job, ErrDDLCaptureMissing)
	}
	so.Messages, so.DDLTable, ao.DDL, ao.DDLKey = !in.Table, in.Table, true, in.Key
	return nil
}

// ErrDDLCaptureMissing: job.ddl = "capture", but the source has no
// capture of the job (bootstrapped before the key was set).
var ErrDDLCaptureMissing = errors.New(`job.ddl is "capture" but the source has no DDL capture of the job`)

// reversed says whether the target records the job as reversed.
func reversed(ctx context.Context, opts Options) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	conn, err := pgconnect.Connect(ctx, "target", opts.TargetURL)
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	p, err := ledger.ReadProgress(ctx, conn, opts.Job)
	return err == nil && p.State == ledger.JobReversed
}

// runReadings are run's metrics over its counters and positions.
func runReadings(stats *replication.Stats, prepared *atomic.Int64, servers *metrics.ServerReadings) metrics.RunReadings {
	at := func(pick func(*position.Positions) uint64) func() uint64 {
		return func() uint64 {
			if p := stats.Positions.Load(); p != nil {
				return pick(p)
			}
			return 0
		}
	}
	return metrics.RunReadings{
		AppliedLSN:          at(func(p *position.Positions) uint64 { return uint64(p.Applied()) }),
		ConfirmedLSN:        at(func(p *position.Positions) uint64 { return uint64(p.Reported()) }),
		SourceWALEndLSN:     func() uint64 { return uint64(stats.ServerEnd.Load()) },
		LagBytes:            stats.LagBytes,
		LagSeconds:          func() float64 { return stats.LagSeconds(time.Now()) },
		SourceSilentSeconds: stats.SilentSeconds,
		TransactionsApplied: stats.Txns.Load,
		Reconnects:          stats.Reconnects.Load,
		PreparedStatements:  prepared.Load,
		Servers:             servers,
	}
}

// readServers reads the slot on the source and the job's last comparison
// on the target into servers, now and every serverReadEvery, each through
// a connection of its own (dropped after an error and opened again at the
// next reading). The function it returns stops it and waits for it.
func readServers(ctx context.Context, opts Options, names replication.Names, servers *metrics.ServerReadings) (stop func()) {
	src := &readerConn{kind: "source", url: opts.SourceURL}
	tgt := &readerConn{kind: "target", url: opts.TargetURL}
	stopReading := periodic.StartAfter(ctx, 0, serverReadEvery, func(ctx context.Context) bool {
		var s replication.SlotStatus
		ok := src.with(ctx, func(ctx context.Context, conn *pgx.Conn) (err error) {
			s, err = replication.Status(ctx, conn, names)
			return err
		})
		servers.SetSlot(ok, s.Exists, int64(s.CurrentWALLSN)-int64(s.RestartLSN), s.SafeWALSize)
		var v *ledger.Verification
		if tgt.with(ctx, func(ctx context.Context, conn *pgx.Conn) (err error) {
			v, err = ledger.LastVerification(ctx, conn, opts.Job)
			return err
		}) && v != nil {
			servers.SetVerification(v.At, v.Identical, uint64(v.LSN))
		}
		return true
	})
	return func() {
		stopReading()
		src.close()
		tgt.close()
	}
}

// watchName is the application_name of run's sessions beside the one that
// applies: the metrics' readings and the holds' watch.
const watchName = "pgsync watch"

// readerConn is a reading's own connection, opened at a reading that finds
// none and dropped after an error, so that a server that comes back is
// read again.
type readerConn struct {
	kind, url string
	conn      *pgx.Conn
}

// with runs read on the connection (opening it first), under a 2 s
// deadline; false when it could not connect or read failed.
func (c *readerConn) with(ctx context.Context, read func(ctx context.Context, conn *pgx.Conn) error) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if c.conn == nil || c.conn.IsClosed() {
		conn, err := pgconnect.ConnectAs(ctx, c.kind, c.url, watchName)
		if err != nil {
			return false
		}
		c.conn = conn
	}
	if err := read(ctx, c.conn); err != nil {
		c.close()
		return false
	}
	return true
}

// close ends the connection.
func (c *readerConn) close() {
	if c.conn != nil {
		c.conn.Close(context.Background())
		c.conn = nil
	}
}

// sourceColumns reads a source table's column definitions over a
// connection of its own, opened for the one read: the applier asks only
// when the source's schema changed, rarely enough not to hold one open.
func sourceColumns(url string) func(ctx context.Context, schema, table string) ([]catalog.ColumnDef, error) {
	return func(ctx context.Context, schema, table string) ([]catalog.ColumnDef, error) {
		conn, err := pgconnect.Connect(ctx, "source", url)
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		return catalog.SourceColumns(ctx, conn, schema, table)
	}
}

// CopyProgress is a copy's progress, which bootstrap and add-tables keep
// and a progress bar or the metrics read.
type CopyProgress = snapshot.Progress

// ServeCopyMetrics serves the copy's metrics, read from progress, at addr
// until ctx ends.
func ServeCopyMetrics(ctx context.Context, addr string, progress *CopyProgress, log *slog.Logger) error {
	reg := metrics.NewRegistry()
	metrics.RegisterCopy(reg, func() []metrics.CopyTable {
		tables := progress.Tables()
		out := make([]metrics.CopyTable, len(tables))
		for i, t := range tables {
			out[i] = metrics.CopyTable{Table: t.Table, Rows: t.Rows, Bytes: t.Bytes, Done: t.Done}
		}
		return out
	}, progress.TablesTotal.Load, progress.TablesDone.Load)
	return metrics.Serve(ctx, addr, reg, log)
}

// holdWatch follows the job's hold requests (ledger.Hold) for run: an
// online verify asks run to hold at a source position (hold.go in
// replication).
type holdWatch struct {
	opts    Options
	current atomic.Uint64 // the requested position, 0 for none
	stop    func()
}

// holdEvery is how often run looks for a hold request: a verify waits at
// most about that long for run to hold.
const holdEvery = 50 * time.Millisecond

// watchHolds reads the job's hold request every holdEvery on a connection
// of its own. A request run is idle for (every transaction before its
// position applied, as the slot's reported position says) is marked held
// here; one a transaction reaches is marked by the dispatcher.
func watchHolds(ctx context.Context, opts Options, stats *replication.Stats, log *slog.Logger) *holdWatch {
	w := &holdWatch{opts: opts}
	tgt := &readerConn{kind: "target", url: opts.TargetURL}
	stopWatching := periodic.Start(ctx, holdEvery, func(ctx context.Context) bool {
		var h ledger.Hold
		if !tgt.with(ctx, func(ctx context.Context, conn *pgx.Conn) (err error) {
			h, err = ledger.ReadHold(ctx, conn, opts.Job)
			return err
		}) {
			return true
		}
		w.current.Store(uint64(h.At))
		if h.At == 0 || h.Held {
			return true
		}
		if p := stats.Positions.Load(); p != nil && p.Reported() >= h.At {
			// Idle past the position: nothing before it is left to apply,
			// and the dispatcher holds the next transaction.
			if tgt.with(ctx, func(ctx context.Context, conn *pgx.Conn) error { return ledger.MarkHeld(ctx, conn, opts.Job, h.At) }) {
				log.Info("holding for an online verify", "at", h.At.String())
			}
		}
		return true
	})
	w.stop = func() {
		stopWatching()
		tgt.close()
	}
	return w
}

// at returns the position of the current hold request, 0 for none.
func (w *holdWatch) at() pglogrepl.LSN { return pglogrepl.LSN(w.current.Load()) }

// markHeld records that run holds at at, on a connection of its own (the
// dispatcher's goroutine calls it).
func (w *holdWatch) markHeld(ctx context.Context, at pglogrepl.LSN) error {
	conn, err := pgconnect.ConnectAs(ctx, "target", w.opts.TargetURL, watchName)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return ledger.MarkHeld(ctx, conn, w.opts.Job, at)
}
