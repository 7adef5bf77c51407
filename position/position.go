// Package position keeps the replication positions of one job in one place.
//
// received is the end of the last source transaction handed to the applier,
// applied the end of the last source transaction committed on the target
// (pgsync.progress holds the same value durably), and reported the position
// last acknowledged to the source in a standby status update. Each only moves
// forward.
package position

import (
	"sync/atomic"

	"github.com/jackc/pglogrepl"
)

// Positions is safe for concurrent use: the stream reader and the applier
// run in different goroutines.
type Positions struct {
	received atomic.Uint64
	applied  atomic.Uint64
	reported atomic.Uint64
}

// New starts every position at start, the durable resume point.
func New(start pglogrepl.LSN) *Positions {
	p := &Positions{}
	p.received.Store(uint64(start))
	p.applied.Store(uint64(start))
	p.reported.Store(uint64(start))
	return p
}

func advance(v *atomic.Uint64, to pglogrepl.LSN) bool {
	for {
		cur := v.Load()
		if uint64(to) <= cur {
			return false
		}
		if v.CompareAndSwap(cur, uint64(to)) {
			return true
		}
	}
}

// Received returns the end of the last transaction handed to the applier.
func (p *Positions) Received() pglogrepl.LSN { return pglogrepl.LSN(p.received.Load()) }

// Applied returns the end of the last transaction committed on the target.
func (p *Positions) Applied() pglogrepl.LSN { return pglogrepl.LSN(p.applied.Load()) }

// Reported returns the position last sent to the source.
func (p *Positions) Reported() pglogrepl.LSN { return pglogrepl.LSN(p.reported.Load()) }

// AdvanceReceived moves the received position forward.
func (p *Positions) AdvanceReceived(to pglogrepl.LSN) bool { return advance(&p.received, to) }

// AdvanceApplied moves the applied position forward.
func (p *Positions) AdvanceApplied(to pglogrepl.LSN) bool { return advance(&p.applied, to) }

// AdvanceReported moves the reported position forward.
func (p *Positions) AdvanceReported(to pglogrepl.LSN) bool { return advance(&p.reported, to) }

// Idle reports whether every transaction received has been applied: only
// then may the reported position move past it to the server's WAL end.
func (p *Positions) Idle() bool { return p.Applied() >= p.Received() }
