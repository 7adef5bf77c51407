package replication

import (
	"time"

	"github.com/jackc/pglogrepl"
)

// feedback is what the reader knows when it may send a standby status
// update. The decision is a pure function so that every case of it has a
// table-driven test (feedback_test.go).
type feedback struct {
	applied  pglogrepl.LSN // end of the last source transaction durable on the target
	reported pglogrepl.LSN // position last sent to the source
	// serverEnd is the WAL end of the keepalive just received, 0 when the
	// decision is not about a keepalive.
	serverEnd pglogrepl.LSN
	// drained holds when every message received is applied: no source
	// transaction is half received, none waits in a spool (a streamed
	// transaction still open on the source), none is queued, none is
	// uncommitted on the target.
	drained bool
	// mustSend holds when the server asked for a reply, or when the reader
	// has been waiting for the applier and must show the walsender that it
	// is alive.
	mustSend bool
	// quiet is the time since the last status update.
	quiet time.Duration
}

// decide returns the position to acknowledge and whether to send a status
// update at all. Positions only move forward and never past what the
// target holds durably: WAL up to a keepalive's end may be acknowledged
// only when nothing received is still waiting to be applied, because then
// everything the publication needed from that WAL is on the target.
// Without a new position, nothing is sent unless it must be, or unless the
// reader is behind and has been quiet for keepAliveEvery: then it may be
// slow to read the walsender's own ping, which waits behind the data.
// An idle reader (drained) answers pings and sends nothing else.
func (f feedback) decide() (at pglogrepl.LSN, send bool) {
	at = max(f.applied, f.reported)
	if f.drained && f.serverEnd > at {
		return f.serverEnd, true
	}
	return at, at > f.reported || f.mustSend || !f.drained && f.quiet >= keepAliveEvery
}

// appliedBefore is the skip rule after a restart: a source transaction
// whose commit record starts at commitLSN was applied by an earlier session
// when it lies before resume, the end of the last commit recorded in
// pgsync.progress. The walsender normally starts after it anyway; this rule
// makes the resume exact whatever it sends.
func appliedBefore(commitLSN, resume pglogrepl.LSN) bool { return commitLSN < resume }
