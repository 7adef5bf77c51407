package benchres

// The scenarios beside the whole move. Their JSON keys are the ones the bash
// scripts they replace wrote, so that the results recorded before the
// harness read as the harness's own; the ratios the scripts also wrote are
// left to the page, which computes them. Sizes are in MB (10^6 bytes for rates,
// 2^20 for resident memory, as the scripts had them); CPU in seconds.

// ServerCPU is the CPU seconds of the source's and the target's processes
// that ended during a step (its backends, walsenders and workers).
type ServerCPU struct {
	Source float64 `json:"source"`
	Target float64 `json:"target"`
}

// PgsyncCPU is the CPU seconds of pgsync and the server processes it uses.
type PgsyncCPU struct {
	Pgsync        float64 `json:"pgsync"`
	Walsender     float64 `json:"walsender"`
	TargetBackend float64 `json:"target_backend"`
}

// CDC is harness cdc (once scripts/bench.sh): the two-table copy by pgsync, a
// native subscription and a COPY pipe, then pgsync run while pgbench
// writes for CDC.Seconds (bench-<dataset>.json).
type CDC struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	// RTTms is the round trip of the latency proxy in front of the source,
	// when one was.
	RTTms        *float64    `json:"rtt_ms,omitempty" bench:"optional"`
	RowsPerTable int64       `json:"rows_per_table"`
	SourceBytes  int64       `json:"source_bytes_on_disk"`
	Snapshot     CDCSnapshot `json:"snapshot"`
	CDC          CDCStream   `json:"cdc"`
	HashesMatch  bool        `json:"hashes_match"`
}

// CDCSnapshot is the initial copy three ways.
type CDCSnapshot struct {
	PgsyncSeconds   float64    `json:"pgsync_seconds"`
	CopyBytes       float64    `json:"copy_bytes"`
	RSSAvgMB        float64    `json:"pgsync_rss_avg_mb"`
	RSSPeakMB       float64    `json:"pgsync_rss_peak_mb"`
	CPUAvgPct       float64    `json:"pgsync_cpu_avg_pct"`
	PgsyncServerCPU *ServerCPU `json:"pgsync_server_cpu_seconds" bench:"optional"`
	NativeSeconds   float64    `json:"native_subscription_seconds"`
	NativeServerCPU *ServerCPU `json:"native_server_cpu_seconds" bench:"optional"`
	PipeSeconds     float64    `json:"copy_pipe_seconds"`
}

// CDCStream is pgsync run under pgbench's writes.
type CDCStream struct {
	Seconds      float64 `json:"seconds"`
	Writers      int     `json:"writers"`
	TxnCommitted int64   `json:"transactions_committed"`
	TxnApplied   int64   `json:"transactions_applied"`
	RowsApplied  int64   `json:"rows_applied"`
	TxnPerS      float64 `json:"txn_per_s"`
	RowsPerS     float64 `json:"rows_per_s"`
	DrainSeconds float64 `json:"drain_seconds_after_writers_stop"`
	RSSAvgMB     float64 `json:"rss_avg_mb"`
	RSSPeakMB    float64 `json:"rss_peak_mb"`
	CPUAvgPct    float64 `json:"cpu_avg_pct"`
}

// CopyRun is one pgsync bootstrap of harness copy.
type CopyRun struct {
	Streams     int     `json:"streams"`
	Seconds     float64 `json:"seconds"`
	CopyBytes   float64 `json:"copy_bytes"`
	Parts       int     `json:"parts"`
	MBPerS      float64 `json:"mb_per_s"`
	RSSAvgMB    float64 `json:"rss_avg_mb"`
	RSSPeakMB   float64 `json:"rss_peak_mb"`
	CPUAvgPct   float64 `json:"pgsync_cpu_avg_pct"`
	SourceCPU   float64 `json:"source_cpu_seconds"`
	TargetCPU   float64 `json:"target_cpu_seconds"`
	HashesMatch bool    `json:"hashes_match"`
}

// CopyNative is a native subscription's initial copy of the same tables.
type CopyNative struct {
	Seconds   float64 `json:"seconds"`
	SourceCPU float64 `json:"source_cpu_seconds"`
	TargetCPU float64 `json:"target_cpu_seconds"`
}

// Copy is harness copy (copy.json): one large table (or two) copied by
// pgsync bootstrap with each number of streams, and, unless run without
// peers, by a native subscription and by COPY pipes, whose fields are then
// null.
type Copy struct {
	Command           string      `json:"command"`
	Date              string      `json:"date"`
	Env               Environment `json:"environment"`
	Rows              int64       `json:"rows"`
	Tables            int         `json:"tables"`
	HeapBytes         float64     `json:"heap_bytes"`
	Pgsync            []CopyRun   `json:"pgsync"`
	Native            *CopyNative `json:"native_subscription" bench:"optional"`
	PipeSeconds       *float64    `json:"copy_pipe_seconds" bench:"optional"`
	BinaryPipeSeconds *float64    `json:"binary_copy_pipe_seconds" bench:"optional"`
}

// Catchup is harness catchup (catchup.json): one
// backlog applied by pgsync run --until-caught-up and by a native
// subscriber that was disabled while it was written, and read by the floor.
type Catchup struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	RTTms   *float64    `json:"rtt_ms,omitempty" bench:"optional"`
	Backlog int64       `json:"backlog_transactions"`
	// BacklogSeconds is how long pgbench took to write the backlog on the
	// source (with job.ddl = "capture", beside the event triggers).
	BacklogSeconds float64 `json:"backlog_seconds,omitempty" bench:"optional"`
	WALBytes       float64 `json:"wal_bytes"`
	// DDL is pgsync's job.ddl when the measurement set it.
	DDL    string        `json:"ddl,omitempty" bench:"optional"`
	Pgsync CatchupPgsync `json:"pgsync"`
	Native CatchupNative `json:"native"`
	Floor  Floor         `json:"floor"`
	// PeekSeconds is the server's decoding of the backlog alone
	// (pg_logical_slot_peek_binary_changes), PeekBinarySeconds the same
	// with pgoutput's binary option.
	PeekSeconds       float64 `json:"peek_seconds"`
	PeekBinarySeconds float64 `json:"peek_binary_seconds"`
}

// CatchupPgsync is pgsync's catch-up.
type CatchupPgsync struct {
	Seconds     float64   `json:"seconds"`
	TxnApplied  int64     `json:"transactions_applied"`
	RowsApplied int64     `json:"row_ops_applied"`
	RSSAvgMB    float64   `json:"rss_avg_mb"`
	RSSPeakMB   float64   `json:"rss_peak_mb"`
	CPUAvgPct   float64   `json:"cpu_avg_pct"`
	CPU         PgsyncCPU `json:"cpu_seconds"`
	// TargetCommits counts the target's commits in the database during
	// the run: pgsync's grouped transactions, what synchronous_commit
	// costs.
	TargetCommits int  `json:"target_commits"`
	HashesMatch   bool `json:"hashes_match"`
}

// CatchupNative is the native subscriber's catch-up.
type CatchupNative struct {
	Seconds     float64   `json:"seconds"`
	CPU         NativeCPU `json:"cpu_seconds"`
	HashesMatch bool      `json:"hashes_match"`
}

// NativeCPU is the CPU seconds of a native subscription's processes.
type NativeCPU struct {
	Walsender   float64 `json:"walsender"`
	ApplyWorker float64 `json:"apply_worker"`
}

// Floor is the same backlog streamed from a slot at the same point by a
// consumer that reads and discards it (scripts/bench/cmd/discard): Seconds is the
// faster of Runs.
type Floor struct {
	What    string     `json:"what"`
	Seconds float64    `json:"seconds"`
	Runs    []FloorRun `json:"runs"`
}

// FloorRun is one read of the floor.
type FloorRun struct {
	Seconds float64  `json:"seconds"`
	CPU     FloorCPU `json:"cpu_seconds"`
}

// FloorCPU is the CPU seconds of the floor's reader and its walsender.
type FloorCPU struct {
	Discard   float64 `json:"discard"`
	Walsender float64 `json:"walsender"`
}

// BigTxn is harness bigtxn (bigtxn.json): one large transaction applied by
// pgsync run --until-caught-up, its memory sampled throughout.
type BigTxn struct {
	Command     string      `json:"command"`
	Date        string      `json:"date"`
	Env         Environment `json:"environment"`
	Rows        int64       `json:"rows_in_transaction"`
	Seconds     float64     `json:"seconds"`
	RSSAvgMB    float64     `json:"rss_avg_mb"`
	RSSPeakMB   float64     `json:"rss_peak_mb"`
	CPU         PgsyncCPU   `json:"cpu_seconds"`
	CPUAvgPct   float64     `json:"cpu_avg_pct"`
	HashesMatch bool        `json:"hashes_match"`
}

// RoundTrip is one round trip of harness rtt: every run's catch-up.
type RoundTrip struct {
	RTTms         float64   `json:"rtt_ms"`
	NativeSeconds []float64 `json:"native_seconds"`
	PgsyncSeconds []float64 `json:"pgsync_seconds"`
	FloorSeconds  []float64 `json:"floor_seconds"`
	NativeSpread  float64   `json:"native_spread_seconds"`
	PgsyncSpread  float64   `json:"pgsync_spread_seconds"`
	HashesMatch   bool      `json:"hashes_match"`
}

// RTT is harness rtt (rtt.json): the catch-up with the source behind
// scripts/bench/cmd/latency-proxy, runs interleaved over the round trips.
type RTT struct {
	Command    string      `json:"command"`
	Date       string      `json:"date"`
	Env        Environment `json:"environment"`
	Backlog    int64       `json:"backlog_transactions"`
	RoundTrips []RoundTrip `json:"round_trips"`
}

// Schema is harness schema (schema.json): a whole database into an empty
// target three ways.
type Schema struct {
	Command  string          `json:"command"`
	Date     string          `json:"date"`
	Env      Environment     `json:"environment"`
	Pgcopydb string          `json:"pgcopydb"`
	Datasets []SchemaDataset `json:"datasets"`
}

// SchemaDataset is one dataset of harness schema: (a) pg_dump
// --schema-only restored, then bootstrap; (b) bootstrap with pg_dump's
// sections; (c) pgcopydb clone.
type SchemaDataset struct {
	Tables             int     `json:"tables"`
	Rows               int64   `json:"rows"`
	SchemaThenBoot     float64 `json:"schema_then_bootstrap_s"`
	SchemaThenBootSame bool    `json:"schema_then_bootstrap_identical"`
	BootSections       float64 `json:"bootstrap_pg_dump_sections_s"`
	BootSectionsSame   bool    `json:"bootstrap_pg_dump_sections_identical"`
	Pgcopydb           float64 `json:"pgcopydb_clone_s"`
	PgcopydbRows       int64   `json:"pgcopydb_rows"`
}

// Freeze is harness freeze (freeze.json): the first VACUUM (FREEZE) after
// three ways of loading the same tables.
type Freeze struct {
	Command      string      `json:"command"`
	Date         string      `json:"date"`
	Env          Environment `json:"environment"`
	RowsPerTable int64       `json:"rows_per_table"`
	Runs         []FreezeRun `json:"runs"`
}

// FreezeRun is one way of loading: pgsync, plain or frozen.
type FreezeRun struct {
	Who           string  `json:"who"`
	LoadSeconds   float64 `json:"load_seconds"`
	VacuumSeconds float64 `json:"vacuum_freeze_seconds"`
	VacuumWAL     float64 `json:"vacuum_freeze_wal_bytes"`
}

// VerifyRows is harness verify (verify-rows.json): verify and verify
// --rows beside the copy of the same table, with differences planted on
// the target.
type VerifyRows struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	Rows    int64       `json:"rows"`
	TableMB float64     `json:"table_mb"`
	// BootstrapSeconds is the whole bootstrap, CopySeconds its copy of the
	// table (from its log).
	BootstrapSeconds float64 `json:"bootstrap_seconds"`
	CopySeconds      float64 `json:"copy_seconds"`
	VerifySeconds    float64 `json:"verify_seconds"`
	VerifyRSSPeakMB  float64 `json:"verify_rss_peak_mb"`
	RowsSeconds      float64 `json:"verify_rows_seconds"`
	RowsRSSPeakMB    float64 `json:"verify_rows_rss_peak_mb"`
	Planted          int     `json:"differences_planted"`
	Named            int     `json:"differences_named"`
}

// Bootstrap is what the pages take from one pgsync bootstrap's log
// (harness copy's copy-<n>-bootstrap.json, cdc's <tag>-bootstrap.json),
// kept beside the result while the log goes to the run's log directory.
type Bootstrap struct {
	// KeyBuildSeconds is each primary key's build after the copy, in the
	// order of the log.
	KeyBuildSeconds []float64 `json:"key_build_seconds"`
	// PgDumpSeconds is pg_dump's reading of the schema, SlotToDoneSeconds
	// the time from the slot's creation to the end; nil when the log has
	// no such line.
	PgDumpSeconds     *float64 `json:"pg_dump_seconds" bench:"optional"`
	SlotToDoneSeconds *float64 `json:"slot_to_done_seconds" bench:"optional"`
}

// Tables is the many-tables measurement (harness tables): pgsync's
// commands timed on a schema of many small tables, at each round trip to
// the source.
type Tables struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	Tables  int         `json:"tables"`
	Schemas int         `json:"schemas"`
	Rows    int         `json:"rows_per_table"`
	Runs    []TablesRun `json:"runs"`
}

// TablesRun is one round trip's commands, each in seconds.
type TablesRun struct {
	RTTms            int     `json:"rtt_ms"`
	CheckSeconds     float64 `json:"check_seconds"`
	BootstrapSeconds float64 `json:"bootstrap_seconds"`
	CatchupTxns      int     `json:"catchup_transactions"`
	CatchupSeconds   float64 `json:"catchup_seconds"`
	StatusSeconds    float64 `json:"status_seconds"`
	VerifySeconds    float64 `json:"verify_seconds"`
	Identical        bool    `json:"identical"`
	// Cutover is cutover --lock-source while run streams, the last step:
	// its whole time, from its start to the target's ready report, and the
	// write gap it reports (the role's lock to ready).
	CutoverSeconds         *float64 `json:"cutover_seconds" bench:"optional"`
	CutoverReadySeconds    *float64 `json:"cutover_ready_seconds" bench:"optional"`
	CutoverWriteGapSeconds *float64 `json:"cutover_write_gap_seconds" bench:"optional"`
	// The same schema and rows moved by the other tools into an empty
	// target, through the same round trip: native is pg_dump
	// --schema-only into psql, then a subscription until every table is
	// ready; pgcopydb is pgcopydb clone.
	NativeSchemaSeconds *float64 `json:"native_schema_seconds" bench:"optional"`
	NativeSyncSeconds   *float64 `json:"native_sync_seconds" bench:"optional"`
	PgcopydbSeconds     *float64 `json:"pgcopydb_seconds" bench:"optional"`
	// The rows each contender left on the target, counted over every
	// table once it ended (the source holds tables x rows_per_table).
	PgsyncRows   *int64 `json:"pgsync_rows" bench:"optional"`
	NativeRows   *int64 `json:"native_rows" bench:"optional"`
	PgcopydbRows *int64 `json:"pgcopydb_rows" bench:"optional"`
}

// NativeSeconds is native's whole time (schema, then sync), or nil when it
// was not measured.
func (r TablesRun) NativeSeconds() *float64 {
	if r.NativeSchemaSeconds == nil || r.NativeSyncSeconds == nil {
		return nil
	}
	v := *r.NativeSchemaSeconds + *r.NativeSyncSeconds
	return &v
}
