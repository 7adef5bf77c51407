// Package metrics serves pgsync's Prometheus metrics (--metrics-addr) and
// holds the instruments the apply path updates. Names follow Prometheus'
// conventions: pgsync_ prefix, _total for counters, base units (_bytes,
// _seconds).
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Apply are the instruments of the apply path.
type Apply struct {
	rows    *prometheus.CounterVec
	skipped *prometheus.CounterVec
	// GroupRows is the number of row changes in each target transaction.
	GroupRows prometheus.Histogram
	// CommitSeconds is how long each target commit took, from the progress
	// row to the server's COMMIT reply (the check of every result
	// included).
	CommitSeconds prometheus.Histogram
}

// NewApply registers the apply instruments in reg.
func NewApply(reg prometheus.Registerer) *Apply {
	a := &Apply{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgsync_rows_applied_total",
			Help: "Row changes sent to the target, by table and operation (insert, update, delete).",
		}, []string{"table", "op"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgsync_rows_skipped_by_trigger_total",
			Help: "Row changes a target trigger enabled for replicas skipped (returned NULL), committed, by table and operation; native replication skips them too.",
		}, []string{"table", "op"}),
		GroupRows: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pgsync_target_transaction_rows",
			Help:    "Row changes per target transaction (a group of source transactions).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}),
		CommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pgsync_target_commit_seconds",
			Help:    "Time from the progress row to the target's COMMIT reply, results checked.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
	}
	reg.MustRegister(a.rows, a.skipped, a.GroupRows, a.CommitSeconds)
	return a
}

// RowCounter returns the counter of op ("insert", "update", "delete") on
// table; callers keep it, so that counting a row is one atomic add.
func (a *Apply) RowCounter(table, op string) prometheus.Counter {
	return a.rows.WithLabelValues(table, op)
}

// SkippedCounter returns the counter of op's rows on table that a target
// trigger skipped.
func (a *Apply) SkippedCounter(table, op string) prometheus.Counter {
	return a.skipped.WithLabelValues(table, op)
}

// NewRegistry returns a registry with the Go runtime's and the process's
// collectors (memory, CPU, file descriptors).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Serve serves reg on addr at /metrics until ctx ends. The listener is
// opened before it returns, so that a bad address is an error at start.
func Serve(ctx context.Context, addr string, reg *prometheus.Registry, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", "addr", addr, "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String(), "path", "/metrics")
	return nil
}
