package benchres

// The scenarios that were bash scripts before (stream, cutover-gap,
// scale, pk, bigrow, bigvalue, resume, autovacuum-hold): their JSON keys
// are the scripts', so that the results recorded by the scripts read as
// the harness's own.

// Stream is harness stream (stream.json): one large transaction committed
// while each contender streams.
type Stream struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	Runs    []StreamRun `json:"runs"`
}

// StreamRun is one contender's transaction: the seconds from the
// source's COMMIT returning to the last row on the target, the
// walsender's CPU over the whole transaction, and for pgsync its peak RSS
// and the bytes it spooled (nil for native).
type StreamRun struct {
	Who                string   `json:"who"` // native, pgsync or base (an earlier build)
	Rows               int64    `json:"rows"`
	Run                int      `json:"run"`
	SecondsAfterCommit float64  `json:"seconds_after_commit"`
	WalsenderCPU       float64  `json:"walsender_cpu_s"`
	RSSPeakMB          *float64 `json:"rss_peak_mb" bench:"optional"`
	SpoolBytes         *float64 `json:"spool_bytes" bench:"optional"`
}

// CutoverGap is harness cutover-gap (cutover-gap.json): the application's
// write gap at cutover, one run per pgbench scale.
type CutoverGap struct {
	Command string          `json:"command"`
	Date    string          `json:"date"`
	Env     Environment     `json:"environment"`
	Runs    []CutoverGapRun `json:"runs"`
}

// CutoverGapRun is one scale's cutover under pgbench's load.
type CutoverGapRun struct {
	Scale         int     `json:"scale"`
	DatabaseMB    float64 `json:"database_mb"`
	Bootstrap     float64 `json:"bootstrap_seconds"`
	SourceCommits int64   `json:"source_commits"`
	// AppGap is from the application's last commit on the source to the
	// target reported ready (cutover's ready_at); LockToReady is
	// cutover's own write_gap_seconds.
	AppGap      float64 `json:"app_write_gap_seconds"`
	LockToReady float64 `json:"lock_to_ready_seconds"`
	VerifyAfter float64 `json:"verify_after_ready_seconds"`
	Identical   bool    `json:"identical"`
}

// Scale is harness scale (scale.json): N jobs at once, one pgsync process
// each, under pgbench's writes.
type Scale struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	Runs    []ScaleRun  `json:"runs"`
}

// ScaleRun is one number of jobs: per process, the average of the
// processes' average RSS and the largest peak; aggregate, the sum over
// the processes at each sampling tick.
type ScaleRun struct {
	Workers        int     `json:"workers"`
	Consistent     int     `json:"jobs_consistent"`
	Committed      int64   `json:"transactions_committed"`
	ProcRSSAvgMB   float64 `json:"per_process_rss_avg_mb"`
	ProcRSSPeakMB  float64 `json:"per_process_rss_peak_mb"`
	TotalRSSAvgMB  float64 `json:"aggregate_rss_avg_mb"`
	TotalRSSPeakMB float64 `json:"aggregate_rss_peak_mb"`
}

// PKAfterCopy is harness pk (pk-after-copy.json): the same rows copied in
// binary into a table with its primary key, and into one without whose
// key is added after, interleaved, with the target's CPU.
type PKAfterCopy struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	Rows    int64       `json:"rows"`
	Rounds  []PKRound   `json:"rounds"`
}

// PKRound is one round of harness pk.
type PKRound struct {
	Round          int     `json:"round"`
	WithPK         float64 `json:"with_pk_seconds"`
	WithPKCPU      float64 `json:"with_pk_target_cpu_seconds"`
	WithoutPKCopy  float64 `json:"without_pk_copy_seconds"`
	AddPK          float64 `json:"add_pk_seconds"`
	WithoutPKTotal float64 `json:"without_pk_total_seconds"`
	WithoutPKCPU   float64 `json:"without_pk_target_cpu_seconds"`
}

// AutovacuumRun is one line of harness autovacuum-hold's JSONL: one copy
// by the base build (no hold) or this one.
type AutovacuumRun struct {
	Round       int     `json:"round"`
	Variant     string  `json:"variant"` // base or head
	Commit      string  `json:"commit"`
	CopySeconds float64 `json:"copy_seconds"` // the longest table copy
	PKSeconds   float64 `json:"pk_seconds"`   // the longest key build
	Seconds     float64 `json:"seconds"`
	TargetCPU   float64 `json:"target_cpu_seconds"`
	HashesMatch bool    `json:"hashes_match"`
	// Cancelled counts the autovacuum tasks the target cancelled during
	// the run (an index build that found autovacuum on its table).
	Cancelled     int      `json:"autovacuum_cancelled"`
	NativeSeconds *float64 `json:"native_seconds" bench:"optional"`
}

// BigRow is harness bigrow (bigrow.json): one row of two large values
// carried on every path, each path's peak RSS the kernel's (rusage).
type BigRow struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	RowMB   float64     `json:"row_mb"`
	GoalMB  float64     `json:"goal_mb"` // twice the row plus 30 MB
	PeakMB  BigRowPeaks `json:"peak_rss_mb"`
	// StreamedLogLines counts the streamed run's log lines that name a
	// stream: the transaction was streamed indeed.
	StreamedLogLines int  `json:"streamed_log_lines"`
	Identical        bool `json:"verify_identical"`
}

// BigRowPeaks is the peak RSS of each path, MB.
type BigRowPeaks struct {
	Copy     float64 `json:"copy"`
	CaughtUp float64 `json:"run_until_caught_up"`
	Run      float64 `json:"run"`
	Streamed float64 `json:"streamed"`
}

// BigValue is harness bigvalue (bigvalue.json): a large bytea and a large
// text inserted then updated, applied by run --until-caught-up.
type BigValue struct {
	Command          string      `json:"command"`
	Date             string      `json:"date"`
	Env              Environment `json:"environment"`
	ValueMB          int         `json:"value_mb"`
	MaxInflightBytes string      `json:"max_inflight_bytes"`
	Seconds          float64     `json:"seconds"`
	RSSPeakMB        float64     `json:"rss_peak_mb"`
	HashesMatch      bool        `json:"hashes_match"`
}

// Resume is harness resume (resume.json): a bootstrap killed once most
// tables were copied, then rerun: it copies only what was missing.
type Resume struct {
	Command       string      `json:"command"`
	Env           Environment `json:"environment"`
	Tables        int         `json:"tables"`
	RowsPerTable  int64       `json:"rows_per_table"`
	FullSeconds   float64     `json:"full_bootstrap_s"`
	CopiedAtKill  int         `json:"tables_copied_at_kill"`
	RowsAtKill    int64       `json:"target_rows_at_kill"`
	RerunSeconds  float64     `json:"rerun_s"`
	CopiedByRerun int         `json:"tables_copied_by_rerun"`
	RerunOverFull float64     `json:"rerun_over_full"`
	Verify        string      `json:"verify"` // identical or fail
}
