package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RunReadings are what run's metrics show, read at each scrape: figures
// the running job keeps (functions over its counters and positions) and
// what it last read of the two servers (Servers).
type RunReadings struct {
	AppliedLSN, ConfirmedLSN, SourceWALEndLSN func() uint64
	LagBytes                                  func() int64
	LagSeconds, SourceSilentSeconds           func() float64
	TransactionsApplied, Reconnects           func() int64
	PreparedStatements                        func() int64
	// Servers is what the job last read of the slot and of the last
	// comparison; it reads them in the background, not at each scrape.
	Servers *ServerReadings
}

// ServerReadings are the last readings of the source's slot and of the
// job's last comparison of the two sides, set by the job and read by the
// collectors.
type ServerReadings struct {
	mu          sync.Mutex
	slotRead    bool
	slotExists  bool
	retained    int64
	safe        *int64
	verified    bool
	verifiedAt  time.Time
	identical   bool
	verifiedLSN uint64
}

// SetSlot records the slot's last reading: read false when it could not be
// read; otherwise whether it exists, the WAL it retains, and the WAL the
// source may still write before invalidating it (nil: unlimited).
func (s *ServerReadings) SetSlot(read, exists bool, retained int64, safe *int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slotRead, s.slotExists, s.retained, s.safe = read, exists, retained, safe
}

// SetVerification records the job's last comparison, when there is one.
func (s *ServerReadings) SetVerification(at time.Time, identical bool, lsn uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.verified, s.verifiedAt, s.identical, s.verifiedLSN = true, at, identical, lsn
}

// RegisterRun registers run's metrics in reg.
func RegisterRun(reg prometheus.Registerer, r RunReadings) {
	u := func(f func() uint64) func() float64 { return func() float64 { return float64(f()) } }
	i := func(f func() int64) func() float64 { return func() float64 { return float64(f()) } }
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_applied_lsn", Help: "WAL position (as a number) durably applied on the target."}, u(r.AppliedLSN)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_confirmed_lsn", Help: "WAL position (as a number) last confirmed to the source."}, u(r.ConfirmedLSN)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_source_wal_end_lsn", Help: "WAL end (as a number) the source last announced."}, u(r.SourceWALEndLSN)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_lag_bytes", Help: "WAL bytes between the source's last announced end and the later of the applied and confirmed positions."},
			i(r.LagBytes)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_lag_seconds", Help: "Age of the source commit of the last applied transaction while WAL waits; 0 when caught up."}, r.LagSeconds),
		// pgsync_lag_bytes is as of the source's last message; this says
		// how old that is (issue 15).
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_source_silent_seconds",
			Help: "Seconds the source has sent nothing, not even a keepalive, while run waited for it; at tuning.wal_receiver_timeout run reconnects."},
			r.SourceSilentSeconds),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgsync_transactions_applied_total", Help: "Source transactions applied."}, i(r.TransactionsApplied)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgsync_reconnects_total", Help: "Sessions lost (source or target) and started again."}, i(r.Reconnects)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgsync_prepared_statements", Help: "Statements prepared on the target connection."}, i(r.PreparedStatements)),
		&serverCollector{r.Servers},
	)
}

// serverCollector shows the ServerReadings; a series whose reading is
// missing is left out.
type serverCollector struct{ s *ServerReadings }

var (
	retainedDesc        = prometheus.NewDesc("pgsync_retained_wal_bytes", "WAL the source keeps for the job's slot (current WAL position minus restart_lsn).", nil, nil)
	safeDesc            = prometheus.NewDesc("pgsync_safe_wal_size_bytes", "WAL the source may still write before it invalidates the slot (absent when max_slot_wal_keep_size is unlimited).", nil, nil)
	slotUpDesc          = prometheus.NewDesc("pgsync_slot_up", "1 when the last reading of the slot on the source found it.", nil, nil)
	verifyAtDesc        = prometheus.NewDesc("pgsync_last_verify_timestamp_seconds", "When the job's last comparison of the two sides ran (verify, verify --rows or cutover; absent before the first).", nil, nil)
	verifyIdenticalDesc = prometheus.NewDesc("pgsync_last_verify_identical", "1 when the job's last comparison found both sides identical, 0 when it found a difference.", nil, nil)
	verifyLSNDesc       = prometheus.NewDesc("pgsync_last_verify_lsn", "Source position (as a number) the target held at the job's last comparison.", nil, nil)
)

func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{retainedDesc, safeDesc, slotUpDesc, verifyAtDesc, verifyIdenticalDesc, verifyLSNDesc} {
		ch <- d
	}
}

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	up := 0.0
	if s.slotRead && s.slotExists {
		up = 1
		ch <- prometheus.MustNewConstMetric(retainedDesc, prometheus.GaugeValue, float64(s.retained))
		if s.safe != nil {
			ch <- prometheus.MustNewConstMetric(safeDesc, prometheus.GaugeValue, float64(*s.safe))
		}
	}
	ch <- prometheus.MustNewConstMetric(slotUpDesc, prometheus.GaugeValue, up)
	if s.verified {
		identical := 0.0
		if s.identical {
			identical = 1
		}
		ch <- prometheus.MustNewConstMetric(verifyAtDesc, prometheus.GaugeValue, float64(s.verifiedAt.UnixNano())/1e9)
		ch <- prometheus.MustNewConstMetric(verifyIdenticalDesc, prometheus.GaugeValue, identical)
		ch <- prometheus.MustNewConstMetric(verifyLSNDesc, prometheus.GaugeValue, float64(s.verifiedLSN))
	}
}

// CopyTable is one table's copy progress.
type CopyTable struct {
	Table       string
	Rows, Bytes int64
	Done        bool
}

// RegisterCopy registers bootstrap's copy metrics: by table, from tables,
// and the tables of the copy by state, from total and done.
func RegisterCopy(reg prometheus.Registerer, tables func() []CopyTable, total, done func() int64) {
	reg.MustRegister(&copyCollector{tables: tables, total: total, done: done})
}

type copyCollector struct {
	tables      func() []CopyTable
	total, done func() int64
}

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
	copying := 0
	for _, t := range c.tables() {
		if !t.Done {
			copying++
		}
		ch <- prometheus.MustNewConstMetric(copyRowsDesc, prometheus.CounterValue, float64(t.Rows), t.Table)
		ch <- prometheus.MustNewConstMetric(copyBytesDesc, prometheus.CounterValue, float64(t.Bytes), t.Table)
	}
	total, done := c.total(), c.done()
	ch <- prometheus.MustNewConstMetric(copyTablesDesc, prometheus.GaugeValue, float64(done), "done")
	ch <- prometheus.MustNewConstMetric(copyTablesDesc, prometheus.GaugeValue, float64(copying), "copying")
	ch <- prometheus.MustNewConstMetric(copyTablesDesc, prometheus.GaugeValue, float64(max(total-done-int64(copying), 0)), "waiting")
}
