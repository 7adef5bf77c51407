// Package benchres holds the typed results the harness writes and the page
// reads: one struct per scenario, so that a measurement the page needs is a
// field the harness must fill, never a key a script may leave out. A field
// that may be null (a contender without a cutover has no write gap) is a
// pointer tagged `bench:"optional"`; the page refuses a file without any
// other.
package benchres

// Environment is the machine and the build a result came from. Commit is
// the version the pgsync binary was built with (git describe at build
// time), not the checkout's HEAD when the run ended.
type Environment struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	MemoryGiB  int    `json:"memory_gib"`
	PostgreSQL string `json:"postgresql"`
	Commit     string `json:"pgsync_commit"`
	Go         string `json:"go"`
}

// Move is the whole move under load (harness move): each contender brings
// a pgbench-shaped database into an empty target while pgbench writes at a
// fixed rate, runs times, back to back.
type Move struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	// Scale is pgbench's scale; DatabaseBytes the source database's size
	// when the first run started, DocumentsBytes its table of TOASTed
	// documents (pg_total_relation_size).
	Scale          int   `json:"scale"`
	DatabaseBytes  int64 `json:"database_bytes"`
	DocumentsBytes int64 `json:"documents_bytes"`
	// Rate is pgbench's fixed rate, in transactions a second.
	Rate int `json:"rate"`
	// ReadyLagSeconds and HoldSeconds define ready for cutover: the tool
	// has copied every table and the target's heartbeat stays within
	// ReadyLagSeconds of the source's for HoldSeconds.
	ReadyLagSeconds float64 `json:"ready_lag_seconds"`
	HoldSeconds     float64 `json:"hold_seconds"`
	// TimeoutSeconds bounds each contender's run: one not ready by then
	// is reported not ready.
	TimeoutSeconds float64   `json:"timeout_seconds"`
	Runs           []MoveRun `json:"runs"`
}

// MoveRun is one contender's run.
type MoveRun struct {
	Contender string `json:"contender"` // pgsync, native or pgcopydb
	Run       int    `json:"run"`       // 1-based, in the order run
	// Ready says whether the contender became ready for cutover within
	// the timeout; ReadySeconds is then the time from the start, and
	// NotReady says why when it did not.
	Ready        bool     `json:"ready"`
	ReadySeconds *float64 `json:"ready_seconds" bench:"optional"`
	NotReady     string   `json:"not_ready,omitempty" bench:"optional"`
	// CopiedSeconds is when the tool reported every table copied (and,
	// for pgsync, its keys, indexes and foreign keys built).
	CopiedSeconds *float64 `json:"copied_seconds" bench:"optional"`
	// WriteGapSeconds is the application's write gap at cutover, from its
	// last commit on the source to the target reported ready for writes;
	// nil for a contender without a cutover.
	WriteGapSeconds *float64 `json:"write_gap_seconds" bench:"optional"`
	// ToolCPUSeconds is the CPU time of the tool's processes from the
	// start until ready (or until the harness gave up): for pgsync and
	// pgcopydb the processes the harness started, with their children,
	// for native the subscriber's replication workers on the target. It is
	// sampled every SampleSeconds: what a process used after its last
	// sample is not in it. ToolPeakBytes is the highest sum of their
	// anonymous resident memory (RssAnon) in a sample.
	ToolCPUSeconds float64 `json:"tool_cpu_seconds"`
	ToolPeakBytes  int64   `json:"tool_peak_bytes"`
	// SourceCPUSeconds and TargetCPUSeconds are every process of each
	// cluster over the same stretch (the postmaster's own, its reaped
	// children's and its live children's times): pgbench's sessions too.
	SourceCPUSeconds float64 `json:"source_cpu_seconds"`
	TargetCPUSeconds float64 `json:"target_cpu_seconds"`
	// ContentEqual compares every table's row count and the sum of a
	// 64-bit hash of each row, on both sides, after the writes stopped and
	// the tool applied the last of them; Differences names the tables
	// that differ.
	ContentEqual bool     `json:"content_equal"`
	Differences  []string `json:"differences,omitempty" bench:"optional"`
	// Phases are pgsync's phases, from its logs, in order.
	Phases []Phase `json:"phases,omitempty" bench:"optional"`
	// Samples are taken every SampleSeconds from the start.
	SampleSeconds float64  `json:"sample_seconds"`
	Samples       []Sample `json:"samples"`
}

// Phase is one stretch of pgsync's move: a name and its start and end, in
// seconds from the start of the run.
type Phase struct {
	Name  string  `json:"name"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// Sample is one reading during a run.
type Sample struct {
	T float64 `json:"t"` // seconds from the start
	// LagSeconds is the source's clock minus the heartbeat the target
	// holds; nil while the target has no heartbeat yet.
	LagSeconds  *float64 `json:"lag_seconds" bench:"optional"`
	TargetBytes int64    `json:"target_bytes"` // pg_database_size
	ToolBytes   int64    `json:"tool_bytes"`   // the tool's resident memory
}
