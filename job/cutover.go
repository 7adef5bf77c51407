package job

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/apply"
	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/sequences"
	"github.com/pgsync/pgsync/verify"
)

// CutoverReport is what cutover did, for the operator's records. Every
// exit of Cutover returns one, so that what it changed is always told.
type CutoverReport struct {
	Job             string    `json:"job"`
	Started         time.Time `json:"started"`
	Finished        time.Time `json:"finished"`
	LagBytesAtStart int64     `json:"lag_bytes_at_start"`
	// LockedRoles are the roles cutover made read-only on the source;
	// they stay so until pgsync cutover --unlock-source.
	LockedRoles []string             `json:"locked_roles,omitempty"`
	SourceLSN   string               `json:"source_lsn,omitempty"` // the source's WAL position the target must reach
	AppliedLSN  string               `json:"applied_lsn,omitempty"`
	WaitSeconds float64              `json:"wait_seconds"`
	Tables      []verify.Result      `json:"tables"`
	Sequences   []sequences.Sequence `json:"sequences_set"`
	Identical   bool                 `json:"identical"`
}

// CutoverOptions are cutover's flags.
type CutoverOptions struct {
	MaxLagBytes int64
	LockRoles   []string
	Timeout     time.Duration
}

// Sentinel errors of cutover.
var (
	ErrLagOverLimit = errors.New("the target is too far behind the source")
	ErrWaitTimeout  = errors.New("the target did not reach the source's position in time")
	ErrTablesDiffer = errors.New("tables differ")
	ErrLockSource   = errors.New("cannot lock the source")
)

// terminateWait bounds the wait for a terminated session to exit.
const terminateWait = 5 * time.Second

// Cutover checks the lag, optionally makes the source read-only for
// o.LockRoles, waits until the target has applied everything up to the
// source's WAL position, sets the target's sequences and verifies. The
// report is returned on every exit; once roles are locked, every error
// says which and how to undo it.
func (j *Job) Cutover(ctx context.Context, o CutoverOptions) (*CutoverReport, error) {
	rep := &CutoverReport{Job: j.opts.Job, Started: time.Now().UTC()}
	err := j.cutover(ctx, o, rep)
	rep.Finished = time.Now().UTC()
	if err != nil && len(rep.LockedRoles) > 0 {
		err = fmt.Errorf("%w; the source stays read-only for role(s) %s: undo with pgsync cutover --unlock-source %s",
			err, strings.Join(rep.LockedRoles, ", "), strings.Join(rep.LockedRoles, ","))
	}
	return rep, err
}

func (j *Job) cutover(ctx context.Context, o CutoverOptions, rep *CutoverReport) error {
	applied, head, err := j.appliedAndHead(ctx)
	if err != nil {
		return err
	}
	rep.LagBytesAtStart = max(int64(head)-int64(applied), 0)
	if rep.LagBytesAtStart > o.MaxLagBytes {
		return fmt.Errorf("job %s is %s behind the source, over --max-lag %s: %w; let pgsync run catch up first",
			j.opts.Job, humanize.IBytes(uint64(rep.LagBytesAtStart)), humanize.IBytes(uint64(o.MaxLagBytes)), ErrLagOverLimit)
	}
	tables, err := j.Tables(ctx)
	if err != nil {
		return err
	}
	if len(o.LockRoles) > 0 {
		if err := j.lockRoles(ctx, o.LockRoles, rep); err != nil {
			return err
		}
	}
	// Everything committed on the source up to now must reach the target;
	// the locked roles' sessions have exited, so none commits after this.
	goal, err := replication.CommittedHead(ctx, j.src)
	if err != nil {
		return err
	}
	rep.SourceLSN = goal.String()
	waitStart := time.Now()
	deadline := waitStart.Add(o.Timeout)
	lastSaid := waitStart
	for {
		applied, _, err = j.appliedAndHead(ctx)
		if err != nil {
			return err
		}
		rep.AppliedLSN = applied.String()
		rep.WaitSeconds = time.Since(waitStart).Seconds()
		if applied >= goal {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the target reached %s, not the source's %s, within --timeout %s: %w: is pgsync run running? (pgsync status)", applied, goal, o.Timeout, ErrWaitTimeout)
		}
		if time.Since(lastSaid) >= 10*time.Second {
			j.log.Info("waiting for the target to apply up to the source's position; pgsync run applies it, --timeout ends the wait",
				"goal", goal.String(), "applied", applied.String(), "waited_s", fmt.Sprintf("%.0f", time.Since(waitStart).Seconds()), "timeout", o.Timeout.String())
			lastSaid = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}

	seqs, err := sequences.List(ctx, j.src, j.tgt, tables)
	if err != nil {
		return err
	}
	moved, err := sequences.Sync(ctx, j.tgt, seqs)
	rep.Sequences = moved
	if err != nil && !errors.Is(err, sequences.ErrMissing) {
		return err
	}
	if err != nil {
		j.log.Warn("sequences", "err", err)
	}
	rep.Tables, err = verify.Compare(ctx, j.src, j.tgt, tables)
	if err != nil {
		return err
	}
	var differ []string
	for _, r := range rep.Tables {
		if !r.Match() {
			differ = append(differ, r.Table)
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("%d of %d tables differ after the wait: %s: %w (were writes still arriving on the source? use --lock-source)", len(differ), len(rep.Tables), strings.Join(differ, ", "), ErrTablesDiffer)
	}
	rep.Identical = true
	return nil
}

// appliedAndHead returns the position the target has applied (or the slot
// confirmed, when that is further: WAL without the job's changes) and the
// source's current WAL position.
func (j *Job) appliedAndHead(ctx context.Context) (applied, head pglogrepl.LSN, err error) {
	slot, err := replication.Status(ctx, j.src, j.opts.Names)
	if err != nil {
		return 0, 0, err
	}
	if !slot.Exists {
		return 0, 0, fmt.Errorf("job %s: %w", j.opts.Job, replication.ErrSlotMissing)
	}
	prog, err := apply.ReadProgress(ctx, j.tgt, j.opts.Job)
	if err != nil {
		return 0, 0, err
	}
	if prog.State != apply.StateReady {
		return 0, 0, fmt.Errorf("job %s (state %s): %w", j.opts.Job, prog.State, ErrNotBootstrapped)
	}
	return max(prog.LSN, slot.ConfirmedFlushLSN), slot.CurrentWALLSN, nil
}

// lockRoles makes roles read-only on the source for new sessions, all or
// none (one transaction), records them in rep, then ends their sessions
// on the source database and waits until each has exited: a session told
// to end could otherwise still commit after the goal position is read.
func (j *Job) lockRoles(ctx context.Context, roles []string, rep *CutoverReport) error {
	err := pgx.BeginFunc(ctx, j.src, func(tx pgx.Tx) error {
		for _, role := range roles {
			if _, err := tx.Exec(ctx, "ALTER ROLE "+catalog.QuoteIdent(role)+" SET default_transaction_read_only = on"); err != nil {
				return fmt.Errorf("role %s: %w", role, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w (no role was locked): %w", ErrLockSource, err)
	}
	rep.LockedRoles = append(rep.LockedRoles, roles...)
	for _, role := range roles {
		j.log.Info("source locked for role", "role", role, "undo", "pgsync cutover --unlock-source "+role)
	}
	rows, err := j.src.Query(ctx, `SELECT pid, usename::text, pg_terminate_backend(pid, $2)
FROM pg_stat_activity
WHERE usename = ANY ($1) AND datname = current_database() AND pid <> pg_backend_pid()`, roles, terminateWait.Milliseconds())
	if err != nil {
		return fmt.Errorf("end the sessions of role(s) %s on the source: %w", strings.Join(roles, ", "), err)
	}
	var stuck []string
	for rows.Next() {
		var pid int32
		var user string
		var ended bool
		if err := rows.Scan(&pid, &user, &ended); err != nil {
			rows.Close()
			return fmt.Errorf("end the sessions of role(s) %s on the source: %w", strings.Join(roles, ", "), err)
		}
		if !ended {
			stuck = append(stuck, fmt.Sprintf("pid %d (role %s)", pid, user))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("end the sessions of role(s) %s on the source: %w", strings.Join(roles, ", "), err)
	}
	if len(stuck) > 0 {
		return fmt.Errorf("%w: session(s) %s did not exit within %s of pg_terminate_backend, and could still commit; rerun cutover", ErrLockSource, strings.Join(stuck, ", "), terminateWait)
	}
	return nil
}

// UnlockSource undoes cutover's lock for roles: they may write on the
// source again (new sessions).
func (j *Job) UnlockSource(ctx context.Context, roles []string) error {
	return pgx.BeginFunc(ctx, j.src, func(tx pgx.Tx) error {
		for _, role := range roles {
			if _, err := tx.Exec(ctx, "ALTER ROLE "+catalog.QuoteIdent(role)+" RESET default_transaction_read_only"); err != nil {
				return fmt.Errorf("unlock the source for role %s: %w", role, err)
			}
		}
		return nil
	})
}
