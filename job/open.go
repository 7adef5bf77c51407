package job

import (
	"context"
	"log/slog"

	"github.com/pgsync/pgsync/pgconnect"
)

// Open connects to the source and the target of opts and returns the job
// over them. Close ends both connections; on an error, those opened are
// closed already.
func Open(ctx context.Context, opts Options, log *slog.Logger) (*Job, error) {
	src, err := pgconnect.Connect(ctx, "source", opts.SourceURL)
	if err != nil {
		return nil, err
	}
	tgt, err := pgconnect.Connect(ctx, "target", opts.TargetURL)
	if err != nil {
		src.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	j := New(opts, src, tgt, log)
	if opts.SourcePrimaryURL != "" {
		if j.primary, err = pgconnect.Connect(ctx, "source primary", opts.SourcePrimaryURL); err != nil {
			j.primary = src
			j.Close(ctx)
			return nil, err
		}
	}
	return j, nil
}

// Close ends the job's connections.
func (j *Job) Close(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if j.primary != j.src {
		j.primary.Close(ctx)
	}
	j.src.Close(ctx)
	j.tgt.Close(ctx)
}

// Name returns the job's name (job.name).
func (j *Job) Name() string { return j.opts.Job }

// Slot returns the name of the job's slot, which its publication shares.
func (j *Job) Slot() string { return j.names.Slot }
