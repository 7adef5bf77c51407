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

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/largeobject"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/periodic"
	"github.com/pgsync/pgsync/pgconnect"
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
	LockedRoles []string `json:"locked_roles,omitempty"`
	// LockedAt is when the source stopped taking the locked roles' writes.
	LockedAt    time.Time            `json:"locked_at,omitzero"`
	SourceLSN   string               `json:"source_lsn,omitempty"` // the source's WAL position the target must reach
	AppliedLSN  string               `json:"applied_lsn,omitempty"`
	WaitSeconds float64              `json:"wait_seconds"`
	Sequences   []sequences.Sequence `json:"sequences_set"`
	// ReadyAt is when the target was reported ready for writes: it had
	// every change up to SourceLSN and its sequences were set.
	// WriteGapSeconds is the time from LockedAt to ReadyAt, in which the
	// application could write nowhere.
	LargeObjects    *LargeObjectsReport `json:"large_objects,omitempty"`
	ReadyAt         time.Time           `json:"ready_at,omitzero"`
	WriteGapSeconds float64             `json:"write_gap_seconds,omitempty"`
	// TargetSnapshot is the target's snapshot at SourceLSN, exported
	// before ReadyAt; the tables were compared at it, and at the locked
	// source's, while the application could already write to the target.
	TargetSnapshot string `json:"target_snapshot,omitempty"`
	// UnlockedRoles are the roles the cutover that made this job (a
	// reverse job) had locked on its target, given their writes back.
	UnlockedRoles []string `json:"unlocked_roles,omitempty"`
	// Reverse is the reverse job cutover --reverse set up. Resumed: it
	// finished the way back of a job an interrupted cutover --reverse had
	// already ended (nothing waited for, nothing compared again).
	Reverse       *ReverseReport  `json:"reverse,omitempty"`
	Resumed       bool            `json:"resumed,omitempty"`
	VerifySeconds float64         `json:"verify_seconds"`
	Tables        []verify.Result `json:"tables"`
	Identical     bool            `json:"identical"`
}

// CutoverOptions are cutover's flags.
type CutoverOptions struct {
	MaxLagBytes int64
	LockRoles   []string
	Timeout     time.Duration
	// Ready, when set, is called as soon as the target is ready for
	// writes, before the tables are compared.
	Ready func(*CutoverReport)
	// Reverse, when set, sets up the way back before the target is
	// reported ready (setUpReverse).
	Reverse *ReverseOptions
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
	// A job bootstrapped by an earlier release may lack the tables cutover
	// writes (locked roles, large objects, the comparison).
	_, err := ledger.Upgrade(ctx, j.tgt)
	if err == nil {
		err = j.cutover(ctx, o, rep)
	}
	rep.Finished = time.Now().UTC()
	if err != nil && len(rep.LockedRoles) > 0 {
		err = fmt.Errorf("%w; the source stays read-only for role(s) %s: undo with pgsync cutover --unlock-source %s",
			err, strings.Join(rep.LockedRoles, ", "), strings.Join(rep.LockedRoles, ","))
	}
	return rep, err
}

func (j *Job) cutover(ctx context.Context, o CutoverOptions, rep *CutoverReport) error {
	if o.Reverse != nil {
		if done, err := j.resumeReverse(ctx, o.Reverse, rep, o.Ready); done || err != nil {
			return err
		}
	}
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
	if o.Reverse != nil {
		if err := j.checkReverse(ctx, o.Reverse); err != nil {
			return err
		}
	}
	// The sessions that hold each side's snapshot for the comparison are
	// opened now, before the write gap begins.
	srcView, err := pgconnect.Connect(ctx, "source", j.opts.SourceURL)
	if err != nil {
		return err
	}
	defer srcView.Close(context.WithoutCancel(ctx))
	tgtView, err := pgconnect.Connect(ctx, "target", j.opts.TargetURL)
	if err != nil {
		return err
	}
	defer tgtView.Close(context.WithoutCancel(ctx))
	if len(o.LockRoles) > 0 {
		rep.LockedAt = time.Now().UTC()
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
	reached := func(ctx context.Context) (bool, error) {
		now, _, err := j.appliedAndHead(ctx)
		if err != nil {
			return false, err
		}
		applied = now
		rep.AppliedLSN = applied.String()
		rep.WaitSeconds = time.Since(waitStart).Seconds()
		if applied >= goal {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("the target reached %s, not the source's %s, within --timeout %s: %w", applied, goal, o.Timeout, ErrWaitTimeout)
		}
		return false, nil
	}
	say := func(waited time.Duration) {
		j.log.Info("waiting for the target to apply up to the source's position; pgsync run applies it, --timeout ends the wait",
			"goal", goal.String(), "applied", applied.String(), "waited_s", fmt.Sprintf("%.0f", waited.Seconds()), "timeout", o.Timeout.String())
	}
	// Polled often at first: the application's writes are held while
	// this waits, and the last transactions usually arrive within
	// milliseconds (a 200 ms poll was most of the gap under load).
	wait := periodic.Wait{Poll: 100 * time.Millisecond, StartPoll: 5 * time.Millisecond, StartFor: time.Second,
		SayAfter: 10 * time.Second, SayEvery: 10 * time.Second}
	if err := periodic.Await(ctx, wait, reached, say); err != nil {
		return err
	}

	// Logical decoding does not carry large objects: those created or
	// changed on the source since bootstrap are copied now, under the
	// lock, and those it removed are removed. This part of the write gap
	// grows with their total size (each is hashed on both sides).
	if rep.LargeObjects, err = j.syncLargeObjects(ctx); err != nil {
		return err
	}
	// The target has every change up to goal: its snapshot now is the
	// source's at goal, whatever the application writes once told.
	if rep.TargetSnapshot, err = holdSnapshot(ctx, tgtView); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if _, err := holdSnapshot(ctx, srcView); err != nil {
		return fmt.Errorf("source: %w", err)
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
	if rep.UnlockedRoles, err = j.unlockRecorded(ctx); err != nil {
		return err
	}
	if o.Reverse != nil {
		if rep.Reverse, err = j.setUpReverse(ctx, o.Reverse, tables, goal, rep.LockedRoles); err != nil {
			return err
		}
	}
	rep.ReadyAt = time.Now().UTC()
	if !rep.LockedAt.IsZero() {
		rep.WriteGapSeconds = rep.ReadyAt.Sub(rep.LockedAt).Seconds()
	}
	if o.Ready != nil {
		o.Ready(rep)
	}
	// Verified after the report, against the two snapshots: the locked
	// source does not change, and the target's snapshot does not see the
	// application's writes. Its time is not the application's (issue 24).
	verifyBegan := time.Now()
	rep.Tables, err = verify.Compare(ctx, srcView, tgtView, tables)
	rep.VerifySeconds = time.Since(verifyBegan).Seconds()
	if err != nil {
		return fmt.Errorf("compare the tables at the cutover position (the target was reported ready at %s): %w", rep.ReadyAt.Format(time.RFC3339), err)
	}
	found := verdict(rep.Tables, nil)
	if found == "" && rep.LargeObjects != nil {
		los, err := largeobject.Compare(ctx, srcView, tgtView)
		if err != nil {
			return fmt.Errorf("compare the large objects at the cutover position: %w", err)
		}
		found = verdict(rep.Tables, &los)
	}
	if err := j.RecordVerification(ctx, Verification{Kind: "cutover", LSN: goal, Identical: found == "", Found: found}); err != nil {
		return err
	}
	if found != "" {
		return fmt.Errorf("%s at the cutover position, compared after the target was reported ready: %w", found, ErrTablesDiffer)
	}
	rep.Identical = true
	return nil
}

// syncLargeObjects brings the target's large objects in line with the
// source's; nil when neither side has any.
func (j *Job) syncLargeObjects(ctx context.Context) (*LargeObjectsReport, error) {
	began := time.Now()
	found, copied, removed, err := largeobject.Sync(ctx, j.src, j.tgt, j.opts.Job)
	if err != nil {
		return nil, err
	}
	if found.Source == 0 && found.Target == 0 {
		return nil, nil
	}
	return &LargeObjectsReport{Source: found.Source, Copied: copied, Removed: removed, Seconds: time.Since(began).Seconds()}, nil
}

// LargeObjectsReport is what cutover did to the large objects.
type LargeObjectsReport struct {
	Source  int     `json:"source"`  // on the source
	Copied  int     `json:"copied"`  // created or changed since bootstrap, copied
	Removed int     `json:"removed"` // removed from the source since, removed (pgsync's own only)
	Seconds float64 `json:"seconds"`
}

// holdSnapshot begins a read-only REPEATABLE READ transaction on conn and
// exports its snapshot, which holds from now until conn closes.
func holdSnapshot(ctx context.Context, conn *pgx.Conn) (string, error) {
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return "", fmt.Errorf("begin the comparison's snapshot: %w", err)
	}
	var name string
	if err := conn.QueryRow(ctx, "SELECT pg_export_snapshot()").Scan(&name); err != nil {
		return "", fmt.Errorf("export the comparison's snapshot: %w", err)
	}
	return name, nil
}

// appliedAndHead returns the position the target has applied (or the slot
// confirmed, when that is further: WAL without the job's changes) and the
// source's current WAL position.
func (j *Job) appliedAndHead(ctx context.Context) (applied, head pglogrepl.LSN, err error) {
	// The job's record first: a reversed or unfinished job is named as
	// such, not by its missing slot.
	prog, err := ledger.ReadReady(ctx, j.tgt, j.opts.Job)
	if err != nil {
		return 0, 0, err
	}
	slot, err := replication.Status(ctx, j.src, j.names)
	if err != nil {
		return 0, 0, err
	}
	if !slot.Exists {
		return 0, 0, fmt.Errorf("job %s: %w", j.opts.Job, replication.ErrSlotMissing)
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
	// Every session is told to end at once, then their exits are awaited
	// together: pg_terminate_backend(pid, timeout) waits for each in turn,
	// polling every 100 ms, which held the write gap 0.4 s with four
	// sessions (bench-results/cutover-gap.json).
	rows, err := j.src.Query(ctx, `SELECT pid FROM (
  SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity
  WHERE usename = ANY ($1) AND datname = current_database() AND pid <> pg_backend_pid()) s`, roles)
	if err != nil {
		return fmt.Errorf("end the sessions of role(s) %s on the source: %w", strings.Join(roles, ", "), err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("end the sessions of role(s) %s on the source: %w", strings.Join(roles, ", "), err)
	}
	if len(pids) == 0 {
		return nil
	}
	deadline := time.Now().Add(terminateWait)
	exited := func(ctx context.Context) (bool, error) {
		var left []string
		if err := j.src.QueryRow(ctx, `SELECT coalesce(array_agg(format('pid %s (role %s)', pid, usename) ORDER BY pid), '{}')
FROM pg_stat_activity WHERE pid = ANY ($1)`, pids).Scan(&left); err != nil {
			return false, fmt.Errorf("wait for the sessions of role(s) %s to end: %w", strings.Join(roles, ", "), err)
		}
		if len(left) == 0 {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("%w: session(s) %s did not exit within %s of pg_terminate_backend, and could still commit; rerun cutover", ErrLockSource, strings.Join(left, ", "), terminateWait)
		}
		return false, nil
	}
	// Nothing said while it waits: the wait is bounded by terminateWait,
	// and its error names the sessions left.
	return periodic.Await(ctx, periodic.Wait{Poll: 2 * time.Millisecond}, exited, nil)
}

// UnlockSource undoes cutover's lock for roles: they may write on the
// source again (new sessions).
func (j *Job) UnlockSource(ctx context.Context, roles []string) error {
	if err := unlockRoles(ctx, j.src, roles); err != nil {
		return fmt.Errorf("the source: %w", err)
	}
	return nil
}
