package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

// sampler reads, every sampleEvery from t0, the target's heartbeat lag,
// the target database's size, the tool's memory and whether it has
// copied every table.
type sampler struct {
	tool   contender
	t0     time.Time
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	taken   []sampled
	failure error         // the tool's, from copied
	ticks   map[int]int64 // the highest CPU ticks seen, by tool process
}

func newSampler(ctx context.Context, tool contender, t0 time.Time) (*sampler, error) {
	sizes, err := pgx.Connect(ctx, url(targetPort, "postgres"))
	if err != nil {
		return nil, err
	}
	beats, err := pgx.Connect(ctx, url(targetPort, moveDB))
	if err != nil {
		sizes.Close(ctx)
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{tool: tool, t0: t0, cancel: cancel, done: make(chan struct{}), ticks: make(map[int]int64)}
	go func() {
		defer close(s.done)
		defer sizes.Close(context.Background())
		defer beats.Close(context.Background())
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			s.sample(ctx, sizes, beats)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s, nil
}

func (s *sampler) sample(ctx context.Context, sizes, beats *pgx.Conn) {
	var x sampled
	x.T = time.Since(s.t0).Seconds()
	var at time.Time
	if err := beats.QueryRow(ctx, "SELECT at FROM move_heartbeat WHERE id = 1").Scan(&at); err == nil {
		lag := max(time.Since(at).Seconds(), 0)
		x.LagSeconds = &lag
	}
	_ = sizes.QueryRow(ctx, "SELECT pg_database_size($1)", moveDB).Scan(&x.TargetBytes)
	all := processes()
	x.sourceCPU, _ = clusterCPU(filepath.Join(benchPGDir, "source"), all)
	x.targetCPU, _ = clusterCPU(filepath.Join(benchPGDir, "target"), all)
	copied, err := s.tool.copied(ctx)
	x.copied = copied && err == nil
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, root := range s.tool.toolPIDs(ctx) {
		for _, pid := range descendants(all, root) {
			x.ToolBytes += rssAnon(pid)
			s.ticks[pid] = max(s.ticks[pid], all[pid].ticks+all[pid].children)
		}
	}
	for _, t := range s.ticks {
		x.toolCPU += float64(t) / clockTicks
	}
	if err != nil && s.failure == nil && ctx.Err() == nil {
		s.failure = err
	}
	s.taken = append(s.taken, x)
}

func (s *sampler) stop() { s.cancel(); <-s.done }

func (s *sampler) samples() []benchres.Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]benchres.Sample, len(s.taken))
	for i, x := range s.taken {
		out[i] = x.Sample
	}
	return out
}

// at is the sample taken at t seconds from t0, or the last one.
func (s *sampler) at(t float64) sampled {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.taken {
		if x.T >= t {
			return x
		}
	}
	return s.taken[len(s.taken)-1]
}

// waitReady waits until the tool is ready for cutover: copied, and every
// sample's lag under readyLag for hold. It returns ready, the seconds from
// t0 to the first sample of that stretch, and copied, those to the first
// sample where the tool had copied every table (-1: never); or why it was
// not ready within timeout or the tool failed.
func (s *sampler) waitReady(ctx context.Context, timeout time.Duration) (ready, copied float64, why string, err error) {
	lastSaid := time.Now()
	for {
		select {
		case <-ctx.Done():
			return 0, 0, "", ctx.Err()
		case <-time.After(sampleEvery):
		}
		s.mu.Lock()
		taken, failure := s.taken, s.failure
		s.mu.Unlock()
		start, copied, ok := readyIn(taken)
		if ok {
			return start, copied, "", nil
		}
		if failure != nil {
			return 0, copied, failure.Error(), nil
		}
		if time.Since(s.t0) > timeout {
			return 0, copied, fmt.Sprintf("not ready within %s (%s)", timeout, progress(taken, copied)), nil
		}
		// A run may take its whole timeout: say what it waits for.
		if time.Since(lastSaid) >= 10*time.Second {
			say("move", "%.0f s: waiting for ready (%s); -timeout %s or Ctrl-C ends the wait",
				time.Since(s.t0).Seconds(), progress(taken, copied), timeout)
			lastSaid = time.Now()
		}
	}
}

// progress says where a run stands: copying or copied, and the last lag.
func progress(taken []sampled, copied float64) string {
	last := "no heartbeat on the target"
	if n := len(taken); n > 0 && taken[n-1].LagSeconds != nil {
		last = fmt.Sprintf("lag %.1f s", *taken[n-1].LagSeconds)
	}
	state := "copying"
	if copied >= 0 {
		state = "copied"
	}
	return state + ", " + last
}

// readyIn decides readiness from the samples taken so far: ready is the
// first sample of a stretch of at least hold in which the tool had copied
// every table and every lag was under readyLag; copied is the first sample
// where the tool had copied every table (-1: none).
func readyIn(taken []sampled) (ready, copied float64, ok bool) {
	copied, start := -1.0, -1.0
	for _, x := range taken {
		if x.copied && copied < 0 {
			copied = x.T
		}
		if !x.copied || x.LagSeconds == nil || *x.LagSeconds >= readyLag.Seconds() {
			start = -1
			continue
		}
		if start < 0 {
			start = x.T
		}
		if x.T-start >= hold.Seconds() {
			return start, copied, true
		}
	}
	return 0, copied, false
}
