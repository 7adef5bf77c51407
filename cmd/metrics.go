package cmd

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgsync/pgsync/config"
	"github.com/pgsync/pgsync/job"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/position"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/snapshot"
)

// registerRunMetrics exposes run's positions and counters, the number of
// statements apply holds prepared (prepared), and the slot's retained WAL
// read from the source at each scrape.
func registerRunMetrics(reg prometheus.Registerer, stats *replication.Stats, prepared func() int64, cfg *config.Config) (closeCollectors func()) {
	at := func(pick func(*position.Positions) uint64) func() float64 {
		return func() float64 {
			if p := stats.Positions.Load(); p != nil {
				return float64(pick(p))
			}
			return 0
		}
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_applied_lsn", Help: "WAL position (as a number) durably applied on the target."},
			at(func(p *position.Positions) uint64 { return uint64(p.Applied()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_confirmed_lsn", Help: "WAL position (as a number) last confirmed to the source."},
			at(func(p *position.Positions) uint64 { return uint64(p.Reported()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_source_wal_end_lsn", Help: "WAL end (as a number) the source last announced."},
			func() float64 { return float64(stats.ServerEnd.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_lag_bytes", Help: "WAL bytes between the source's last announced end and the later of the applied and confirmed positions."},
			func() float64 { return float64(stats.LagBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_lag_seconds", Help: "Age of the source commit of the last applied transaction while WAL waits; 0 when caught up."},
			func() float64 { return stats.LagSeconds(time.Now()) }),
		// pgsync_lag_bytes is as of the source's last message; this says
		// how old that is (issue 15).
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_source_silent_seconds",
			Help: "Seconds the source has sent nothing, not even a keepalive, while run waited for it; at tuning.wal_receiver_timeout run reconnects."},
			stats.SilentSeconds),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgsync_transactions_applied_total", Help: "Source transactions applied."},
			func() float64 { return float64(stats.Txns.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgsync_reconnects_total", Help: "Sessions lost (source or target) and started again."},
			func() float64 { return float64(stats.Reconnects.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_prepared_statements", Help: "Statements prepared on the target connection."},
			func() float64 { return float64(prepared()) }),
	)
	slot := &slotCollector{conn: collectorConn{kind: "source", url: cfg.SourceURL}, names: names(cfg)}
	last := &verifyCollector{conn: collectorConn{kind: "target", url: cfg.TargetURL}, job: cfg.Job}
	reg.MustRegister(slot, last)
	return func() { slot.conn.close(); last.conn.close() }
}

// verifyCollector reads the job's last comparison of the two sides
// (verify, verify --rows, cutover) on the target at each scrape, through
// a connection of its own.
type verifyCollector struct {
	conn collectorConn
	job  string
}

var (
	verifyAtDesc        = prometheus.NewDesc("pgsync_last_verify_timestamp_seconds", "When the job's last comparison of the two sides ran (verify, verify --rows or cutover; absent before the first).", nil, nil)
	verifyIdenticalDesc = prometheus.NewDesc("pgsync_last_verify_identical", "1 when the job's last comparison found both sides identical, 0 when it found a difference.", nil, nil)
	verifyLSNDesc       = prometheus.NewDesc("pgsync_last_verify_lsn", "Source position (as a number) the target held at the job's last comparison.", nil, nil)
)

func (c *verifyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- verifyAtDesc
	ch <- verifyIdenticalDesc
	ch <- verifyLSNDesc
}

func (c *verifyCollector) Collect(ch chan<- prometheus.Metric) {
	var v *job.Verification
	ok := c.conn.with(func(ctx context.Context, conn *pgx.Conn) (err error) {
		v, err = ledger.LastVerification(ctx, conn, c.job)
		return err
	})
	if !ok || v == nil {
		return
	}
	identical := 0.0
	if v.Identical {
		identical = 1
	}
	ch <- prometheus.MustNewConstMetric(verifyAtDesc, prometheus.GaugeValue, float64(v.At.UnixNano())/1e9)
	ch <- prometheus.MustNewConstMetric(verifyIdenticalDesc, prometheus.GaugeValue, identical)
	ch <- prometheus.MustNewConstMetric(verifyLSNDesc, prometheus.GaugeValue, float64(v.LSN))
}

// slotCollector reads the slot's retained WAL and safe_wal_size on the
// source at each scrape, through a connection of its own.
type slotCollector struct {
	conn  collectorConn
	names replication.Names
}

// collectorConn is a collector's own connection, opened at a scrape that
// finds none and dropped after an error, so that a server that comes back
// is read again.
type collectorConn struct {
	kind, url string
	mu        sync.Mutex
	conn      *pgx.Conn
}

// with runs read on the connection (opening it first), under a 2 s
// deadline; false when it could not connect or read failed.
func (c *collectorConn) with(read func(ctx context.Context, conn *pgx.Conn) error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if c.conn == nil || c.conn.IsClosed() {
		conn, err := pgconnect.Connect(ctx, c.kind, c.url)
		if err != nil {
			return false
		}
		c.conn = conn
	}
	if err := read(ctx, c.conn); err != nil {
		c.conn.Close(context.Background())
		c.conn = nil
		return false
	}
	return true
}

// close ends the connection.
func (c *collectorConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close(context.Background())
		c.conn = nil
	}
}

var (
	retainedDesc = prometheus.NewDesc("pgsync_retained_wal_bytes", "WAL the source keeps for the job's slot (current WAL position minus restart_lsn).", nil, nil)
	safeDesc     = prometheus.NewDesc("pgsync_safe_wal_size_bytes", "WAL the source may still write before it invalidates the slot (absent when max_slot_wal_keep_size is unlimited).", nil, nil)
	slotUpDesc   = prometheus.NewDesc("pgsync_slot_up", "1 when the last scrape could read the slot on the source.", nil, nil)
)

func (c *slotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- retainedDesc
	ch <- safeDesc
	ch <- slotUpDesc
}

func (c *slotCollector) Collect(ch chan<- prometheus.Metric) {
	var s replication.SlotStatus
	ok := c.conn.with(func(ctx context.Context, conn *pgx.Conn) (err error) {
		s, err = replication.Status(ctx, conn, c.names)
		return err
	})
	up := 0.0
	if ok && s.Exists {
		up = 1
		ch <- prometheus.MustNewConstMetric(retainedDesc, prometheus.GaugeValue, float64(int64(s.CurrentWALLSN)-int64(s.RestartLSN)))
		if s.SafeWALSize != nil {
			ch <- prometheus.MustNewConstMetric(safeDesc, prometheus.GaugeValue, float64(*s.SafeWALSize))
		}
	}
	ch <- prometheus.MustNewConstMetric(slotUpDesc, prometheus.GaugeValue, up)
}

// registerCopyMetrics exposes bootstrap's copy progress by table.
func registerCopyMetrics(reg prometheus.Registerer, p *snapshot.Progress) {
	reg.MustRegister(&copyCollector{p: p})
}

type copyCollector struct{ p *snapshot.Progress }

var (
	copyRowsDesc   = prometheus.NewDesc("pgsync_copy_rows_total", "Rows copied by bootstrap, by table.", []string{"table"}, nil)
	copyBytesDesc  = prometheus.NewDesc("pgsync_copy_bytes_total", "COPY bytes moved by bootstrap, by table.", []string{"table"}, nil)
	copyTablesDesc = prometheus.NewDesc("pgsync_copy_tables", "Tables of the copy by state (waiting, copying, done).", []string{"state"}, nil)
)

func (c *copyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- copyRowsDesc
	ch <- copyBytesDesc
	ch <- copyTablesDesc
}

func (c *copyCollector) Collect(ch chan<- prometheus.Metric) {
	tables := c.p.Tables()
	copying := 0
	for _, t := range tables {
		if !t.Done {
			copying++
		}
		ch <- prometheus.MustNewConstMetric(copyRowsDesc, prometheus.CounterValue, float64(t.Rows), t.Table)
		ch <- prometheus.MustNewConstMetric(copyBytesDesc, prometheus.CounterValue, float64(t.Bytes), t.Table)
	}
	total, done := c.p.TablesTotal.Load(), c.p.TablesDone.Load()
	ch <- prometheus.MustNewConstMetric(copyTablesDesc, prometheus.GaugeValue, float64(done), "done")
	ch <- prometheus.MustNewConstMetric(copyTablesDesc, prometheus.GaugeValue, float64(copying), "copying")
	ch <- prometheus.MustNewConstMetric(copyTablesDesc, prometheus.GaugeValue, float64(max(total-done-int64(copying), 0)), "waiting")
}
