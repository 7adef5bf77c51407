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
	// finished a cutover that a kill had interrupted (its record on the
	// target said where).
	Reverse *ReverseReport `json:"reverse,omitempty"`
	Resumed bool           `json:"resumed,omitempty"`
	// AlreadyDone: the cutover had finished before; this one changed
	// nothing and reports how it ended.
	AlreadyDone   bool            `json:"already_done,omitempty"`
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
// source's WAL position, sets the target's sequences, reports the target
// ready and verifies. Its steps (cutoverSteps) record their progress on
// the target, so that a rerun after a kill at any statement finishes
// where an uninterrupted cutover ends, and a rerun of a finished one
// reports it and changes nothing. The report is returned on every exit;
// once roles are locked, every error says which and how to go on.
func (j *Job) Cutover(ctx context.Context, o CutoverOptions) (*CutoverReport, error) {
	rep := &CutoverReport{Job: j.opts.Job, Started: time.Now().UTC()}
	// A job bootstrapped by an earlier release may lack the tables cutover
	// writes (its steps, locked roles, large objects, the comparison).
	_, err := ledger.Upgrade(ctx, j.tgt)
	var r *cutoverRun
	if err == nil {
		r, err = j.newCutoverRun(ctx, o, rep)
	}
	if err == nil {
		err = runSteps(ctx, j.log, "cutover", cutoverSteps(r.sh, r))
		r.closeViews(ctx)
		if err == nil && r.found != "" {
			err = fmt.Errorf("%s at the cutover position, compared after the target was reported ready: %w", r.found, ErrTablesDiffer)
		}
	}
	rep.Finished = time.Now().UTC()
	switch {
	case err == nil || len(rep.LockedRoles) == 0:
	case r.rec.Step.Before(ledger.CutoverReversed):
		err = fmt.Errorf("%w; the source stays read-only for role(s) %s: rerun pgsync cutover with the same flags to finish (it resumes after step %q), or undo with pgsync cutover --unlock-source %s",
			err, strings.Join(rep.LockedRoles, ", "), r.rec.Step, strings.Join(rep.LockedRoles, ","))
	default:
		err = fmt.Errorf("%w; the job is reversed and the source stays read-only for role(s) %s: rerun pgsync cutover --reverse to finish (it resumes after step %q)",
			err, strings.Join(rep.LockedRoles, ", "), r.rec.Step)
	}
	return rep, err
}

// newCutoverRun reads the job's cutover record and plans from it; it
// writes nothing.
func (j *Job) newCutoverRun(ctx context.Context, o CutoverOptions, rep *CutoverReport) (*cutoverRun, error) {
	rec, err := ledger.ReadCutover(ctx, j.tgt, j.opts.Job)
	if err != nil {
		return &cutoverRun{rec: rec}, err
	}
	sh, err := planCutover(rec, o)
	r := &cutoverRun{j: j, o: o, rep: rep, sh: sh, rec: rec, roles: rec.LockedRoles}
	r.roles = append(r.roles, rolesNotIn(o.LockRoles, rec.LockedRoles)...)
	if rec.Step != ledger.CutoverNone {
		// Roles recorded may be locked already: every error says so.
		rep.LockedRoles = rec.LockedRoles
	}
	if rec.Goal != 0 {
		rep.SourceLSN, rep.AppliedLSN = rec.Goal.String(), rec.Goal.String()
	}
	if err != nil {
		return r, err
	}
	if o.Reverse != nil {
		r.back = replication.Names{Job: o.Reverse.Name, Slot: "pgsync_" + o.Reverse.Name, Publication: "pgsync_" + o.Reverse.Name}
	}
	if rec.Step != ledger.CutoverNone && rec.Step != ledger.CutoverDone {
		rep.Resumed = true
		j.log.Info("resuming the cutover recorded on the target", "job", j.opts.Job, "after_step", rec.Step.String(),
			"locked_roles", strings.Join(rec.LockedRoles, ","), "goal", rec.Goal.String())
	}
	return r, nil
}

// check refuses a cutover that has not locked anything yet while the
// target is further behind than o.MaxLagBytes, or whose way back could
// not be set up.
func (r *cutoverRun) check(ctx context.Context) error {
	j := r.j
	applied, head, err := j.appliedAndHead(ctx)
	if err != nil {
		return err
	}
	r.rep.LagBytesAtStart = max(int64(head)-int64(applied), 0)
	if r.rep.LagBytesAtStart > r.o.MaxLagBytes {
		return fmt.Errorf("job %s is %s behind the source, over --max-lag %s: %w; let pgsync run catch up first",
			j.opts.Job, humanize.IBytes(uint64(r.rep.LagBytesAtStart)), humanize.IBytes(uint64(r.o.MaxLagBytes)), ErrLagOverLimit)
	}
	if r.o.Reverse != nil {
		return j.checkReverse(ctx, r.o.Reverse)
	}
	return nil
}

// readTables resolves the job's tables (from the publication while it
// exists, from job.tables once it is dropped).
func (r *cutoverRun) readTables(ctx context.Context) (err error) {
	r.tables, err = r.j.Tables(ctx)
	return err
}

// openViews opens the sessions that will hold each side's snapshot for
// the comparison.
func (r *cutoverRun) openViews(ctx context.Context) (err error) {
	if r.srcView, err = pgconnect.Connect(ctx, "source", r.j.opts.SourceURL); err != nil {
		return err
	}
	r.tgtView, err = pgconnect.Connect(ctx, "target", r.j.opts.TargetURL)
	return err
}

// lock makes the source read-only for the cutover's roles.
func (r *cutoverRun) lock(ctx context.Context) error {
	r.rep.LockedAt = time.Now().UTC()
	return r.j.lockRoles(ctx, r.roles, r.rep)
}

// wait reads the goal, the source's position once the locked roles'
// sessions have exited, and waits until the target has applied it.
func (r *cutoverRun) wait(ctx context.Context) error {
	j, o, rep := r.j, r.o, r.rep
	// The primary's position: a standby source may not have replayed it
	// yet; the slot there passes it once it has.
	goal, err := replication.CommittedHead(ctx, j.primary)
	if err != nil {
		return err
	}
	r.rec.Goal, rep.SourceLSN = goal, goal.String()
	waitStart := time.Now()
	deadline := waitStart.Add(o.Timeout)
	var applied pglogrepl.LSN
	reached := func(ctx context.Context) (bool, error) {
		// The check before the lock found the job ready: each poll reads
		// its position in one round trip (ledger.ReadPosition).
		prog, err := ledger.ReadPosition(ctx, j.tgt, j.opts.Job)
		if err != nil {
			return false, err
		}
		now, _, err := j.appliedFrom(ctx, prog.LSN)
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
	return periodic.Await(ctx, wait, reached, say)
}

// largeObjects copies the large objects created or changed on the source
// since bootstrap, and removes those it removed: logical decoding does not
// carry them. This part of the write gap grows with their total size.
func (r *cutoverRun) largeObjects(ctx context.Context) (err error) {
	r.rep.LargeObjects, err = r.j.syncLargeObjects(ctx)
	return err
}

// holdSnapshots takes each side's snapshot for the comparison: the target
// has every change up to the goal, so its snapshot now is the source's at
// the goal, whatever the application writes once told.
func (r *cutoverRun) holdSnapshots(ctx context.Context) (err error) {
	if r.rep.TargetSnapshot, err = holdSnapshot(ctx, r.tgtView); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if _, err := holdSnapshot(ctx, r.srcView); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	return nil
}

// sequences sets the target's sequences to the source's.
func (r *cutoverRun) sequences(ctx context.Context) error {
	// The primary's values: a standby source's may be behind them.
	seqs, err := sequences.List(ctx, r.j.primary, r.j.tgt, r.tables)
	if err != nil {
		return err
	}
	moved, err := sequences.Sync(ctx, r.j.tgt, seqs)
	r.rep.Sequences = moved
	if errors.Is(err, sequences.ErrMissing) {
		r.j.log.Warn("sequences", "err", err)
		return nil
	}
	return err
}

// unlockRecorded gives back their writes on the target to the roles the
// cutover that made this job (a reverse job) locked there.
func (r *cutoverRun) unlockRecorded(ctx context.Context) (err error) {
	r.rep.UnlockedRoles, err = r.j.unlockRecorded(ctx)
	return err
}

// readyAt is the moment the target is ready for the application's writes.
func (r *cutoverRun) readyAt(context.Context) error {
	r.rep.ReadyAt = time.Now().UTC()
	if !r.rep.LockedAt.IsZero() {
		r.rep.WriteGapSeconds = r.rep.ReadyAt.Sub(r.rep.LockedAt).Seconds()
	}
	return nil
}

// recordReady records the cutover ready, then tells the operator.
func (r *cutoverRun) recordReady(ctx context.Context) error {
	r.rec.ReadyAt = r.rep.ReadyAt
	if err := r.recordStep(ledger.CutoverReady)(ctx); err != nil {
		return err
	}
	if r.o.Ready != nil {
		r.o.Ready(r.rep)
	}
	return nil
}

// compare compares both sides at the two snapshots, after the report: the
// locked source does not change, and the target's snapshot does not see
// the application's writes; its time is not the application's. What it
// found is recorded, and returned by Cutover once the step is recorded.
func (r *cutoverRun) compare(ctx context.Context) (err error) {
	rep := r.rep
	began := time.Now()
	rep.Tables, err = verify.Compare(ctx, r.srcView, r.tgtView, r.tables)
	rep.VerifySeconds = time.Since(began).Seconds()
	if err != nil {
		return fmt.Errorf("compare the tables at the cutover position (the target was reported ready at %s): %w", rep.ReadyAt.Format(time.RFC3339), err)
	}
	found := verdict(rep.Tables, nil)
	if found == "" && rep.LargeObjects != nil {
		los, err := largeobject.Compare(ctx, r.srcView, r.tgtView)
		if err != nil {
			return fmt.Errorf("compare the large objects at the cutover position: %w", err)
		}
		found = verdict(rep.Tables, &los)
	}
	goal, _ := pglogrepl.ParseLSN(rep.SourceLSN)
	if err := r.j.RecordVerification(ctx, Verification{Kind: "cutover", LSN: goal, Identical: found == "", Found: found}); err != nil {
		return err
	}
	r.found, rep.Identical = found, found == ""
	return nil
}

// comparisonInterrupted ends a cutover killed while it compared: the
// snapshots it compared are gone, and the application may already write on
// the target, so there is nothing left to compare at the cutover position.
func (r *cutoverRun) comparisonInterrupted(context.Context) error {
	r.rep.ReadyAt = r.rec.ReadyAt
	r.j.log.Warn("the comparison at the cutover position was interrupted; the target was reported ready before it: pgsync verify compares both sides",
		"job", r.j.opts.Job, "ready_at", r.rec.ReadyAt.Format(time.RFC3339))
	return nil
}

// reportDone reports a finished cutover, as it ended, and changes nothing.
func (r *cutoverRun) reportDone(ctx context.Context) error {
	rep, rec := r.rep, r.rec
	rep.AlreadyDone, rep.ReadyAt = true, rec.ReadyAt
	if rec.ReverseJob != "" {
		rep.Reverse = &ReverseReport{Job: rec.ReverseJob, From: rec.ReverseFrom}
		if r.o.Reverse != nil && r.o.Reverse.WriteConfig != nil {
			rep.Reverse.Config, _ = r.o.Reverse.WriteConfig(rec.ReverseJob) // already written: only its path
		}
	}
	v, err := r.j.lastVerification(ctx)
	if err != nil || v == nil || v.Kind != "cutover" || v.LSN != rec.Goal {
		return err // the comparison was interrupted, or verify compared since
	}
	r.found, rep.Identical = v.Found, v.Identical
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
	return j.appliedFrom(ctx, prog.LSN)
}

// appliedFrom is appliedAndHead for a job whose target has applied up to
// progress.
func (j *Job) appliedFrom(ctx context.Context, progress pglogrepl.LSN) (applied, head pglogrepl.LSN, err error) {
	slot, err := replication.Status(ctx, j.src, j.names)
	if err != nil {
		return 0, 0, err
	}
	if !slot.Exists {
		return 0, 0, fmt.Errorf("job %s: %w", j.opts.Job, replication.ErrSlotMissing)
	}
	return max(progress, slot.ConfirmedFlushLSN), slot.CurrentWALLSN, nil
}

// lockRoles makes roles read-only on the source for new sessions, all or
// none (one transaction), records them in rep, then ends their sessions
// on the source database and waits until each has exited: a session told
// to end could otherwise still commit after the goal position is read.
func (j *Job) lockRoles(ctx context.Context, roles []string, rep *CutoverReport) error {
	err := pgx.BeginFunc(ctx, j.primary, func(tx pgx.Tx) error {
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
	rep.LockedRoles = roles
	for _, role := range roles {
		j.log.Info("source locked for role", "role", role, "undo", "pgsync cutover --unlock-source "+role)
	}
	// Every session is told to end at once, then their exits are awaited
	// together: pg_terminate_backend(pid, timeout) waits for each in turn,
	// polling every 100 ms, which held the write gap 0.4 s with four
	// sessions (bench-results/cutover-gap.json).
	rows, err := j.primary.Query(ctx, `SELECT pid FROM (
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
		if err := j.primary.QueryRow(ctx, `SELECT coalesce(array_agg(format('pid %s (role %s)', pid, usename) ORDER BY pid), '{}')
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
// source again (new sessions). The job's recorded cutover, unless it
// reversed the job, forgets those roles, and is forgotten once it locks
// none: the cutover is undone, and the next one starts from the beginning.
func (j *Job) UnlockSource(ctx context.Context, roles []string) error {
	if err := unlockRoles(ctx, j.primary, roles); err != nil {
		return fmt.Errorf("the source: %w", err)
	}
	rec, err := ledger.ReadCutover(ctx, j.tgt, j.opts.Job)
	if err != nil || rec.Step == ledger.CutoverNone || rec.ReverseJob != "" && !rec.Step.Before(ledger.CutoverReversed) {
		return err // a reversed job stays reversed: its rollback is the reverse job's cutover
	}
	// Forgotten once no role is left locked and nothing of the way back
	// exists yet; a reverse slot on the target keeps the record, which
	// a rerun of cutover --reverse finishes.
	if rec.LockedRoles = rolesNotIn(rec.LockedRoles, roles); len(rec.LockedRoles) == 0 && (rec.ReverseJob == "" || rec.Step.Before(ledger.CutoverReverseSlot)) {
		return ledger.ForgetCutover(ctx, j.tgt, j.opts.Job)
	}
	return ledger.RecordCutover(ctx, j.tgt, rec.Step, rec)
}
