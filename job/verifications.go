package job

import (
	"context"
	"errors"
	"time"

	"github.com/pgsync/pgsync/ledger"
)

// Verification is the record of one comparison of the two sides (the
// ledger's pgsync.verifications).
type Verification = ledger.Verification

// RecordVerification records v as the job's last comparison, at lsn when
// given, else at the position the target has applied. A target without
// pgsync's schema (a job never bootstrapped) records nothing.
func (j *Job) RecordVerification(ctx context.Context, v Verification) error {
	if v.LSN == 0 {
		prog, err := ledger.ReadProgress(ctx, j.tgt, j.opts.Job)
		switch {
		case errors.Is(err, ledger.ErrNoProgress):
		case err != nil:
			return err
		default:
			v.LSN = prog.LSN
		}
	}
	if v.At.IsZero() {
		v.At = time.Now().UTC()
	}
	return ledger.RecordVerification(ctx, j.tgt, j.opts.Job, v)
}

// lastVerification reads the job's last comparison; nil when none.
func (j *Job) lastVerification(ctx context.Context) (*Verification, error) {
	return ledger.LastVerification(ctx, j.tgt, j.opts.Job)
}
