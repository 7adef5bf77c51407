package main

// The typed results: one struct per kind of JSON file the bench scripts
// write under bench-results/, with only the keys this page uses. A key
// that may be null for one contender is a pointer tagged
// `bench:"optional"`; every other key must be present (readJSON).

// Environment is the machine and the build a result came from.
type Environment struct {
	CPU        string `json:"cpu"`
	PostgreSQL string `json:"postgresql"`
	Commit     string `json:"pgsync_commit"`
	Go         string `json:"go"`
}

// ServerCPU is the CPU seconds of the source's and the target's processes.
type ServerCPU struct {
	Source float64 `json:"source"`
	Target float64 `json:"target"`
}

// Bench is scripts/bench.sh's bench-<dataset>.json: the two-table copy by
// pgsync, a native subscription and a COPY pipe, then a CDC phase.
type Bench struct {
	Command      string      `json:"command"`
	Date         string      `json:"date"`
	Env          Environment `json:"environment"`
	RowsPerTable int64       `json:"rows_per_table"`
	Snapshot     struct {
		PgsyncSeconds   float64    `json:"pgsync_seconds"`
		CopyBytes       float64    `json:"copy_bytes"`
		RSSAvgMB        float64    `json:"pgsync_rss_avg_mb"`
		RSSPeakMB       float64    `json:"pgsync_rss_peak_mb"`
		CPUAvgPct       float64    `json:"pgsync_cpu_avg_pct"`
		PgsyncServerCPU *ServerCPU `json:"pgsync_server_cpu_seconds" bench:"optional"`
		NativeSeconds   float64    `json:"native_subscription_seconds"`
		NativeServerCPU *ServerCPU `json:"native_server_cpu_seconds" bench:"optional"`
		PipeSeconds     float64    `json:"copy_pipe_seconds"`
	} `json:"snapshot"`
	CDC struct {
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
	} `json:"cdc"`
	HashesMatch bool `json:"hashes_match"`
}

// CopyRun is one pgsync bootstrap of scripts/copy-bench.sh.
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

// Copy is scripts/copy-bench.sh's copy.json with its peers (COMPARE=1).
type Copy struct {
	Command   string      `json:"command"`
	Date      string      `json:"date"`
	Env       Environment `json:"environment"`
	Rows      int64       `json:"rows"`
	HeapBytes float64     `json:"heap_bytes"`
	Pgsync    []CopyRun   `json:"pgsync"`
	Native    struct {
		Seconds   float64 `json:"seconds"`
		SourceCPU float64 `json:"source_cpu_seconds"`
		TargetCPU float64 `json:"target_cpu_seconds"`
	} `json:"native_subscription"`
	PipeSeconds       float64 `json:"copy_pipe_seconds"`
	BinaryPipeSeconds float64 `json:"binary_copy_pipe_seconds"`
}

// CopyAlone is copy.json of a run without peers (COMPARE=0), whose peer
// keys are null.
type CopyAlone struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	Rows    int64       `json:"rows"`
	Tables  int         `json:"tables"`
	Pgsync  []CopyRun   `json:"pgsync"`
}

// PgsyncCPU is the CPU seconds of pgsync and the server processes it uses.
type PgsyncCPU struct {
	Pgsync        float64 `json:"pgsync"`
	Walsender     float64 `json:"walsender"`
	TargetBackend float64 `json:"target_backend"`
}

// Catchup is scripts/catchup-bench.sh's catchup.json: one backlog applied
// by pgsync, by a native subscriber and read by the discard floor.
type Catchup struct {
	Command  string      `json:"command"`
	Date     string      `json:"date"`
	Env      Environment `json:"environment"`
	Backlog  int64       `json:"backlog_transactions"`
	WALBytes float64     `json:"wal_bytes"`
	Pgsync   struct {
		Seconds       float64   `json:"seconds"`
		RSSPeakMB     float64   `json:"rss_peak_mb"`
		CPU           PgsyncCPU `json:"cpu_seconds"`
		TargetCommits int       `json:"target_commits"`
		HashesMatch   bool      `json:"hashes_match"`
	} `json:"pgsync"`
	Native struct {
		Seconds float64 `json:"seconds"`
		CPU     struct {
			Walsender   float64 `json:"walsender"`
			ApplyWorker float64 `json:"apply_worker"`
		} `json:"cpu_seconds"`
		HashesMatch bool `json:"hashes_match"`
	} `json:"native"`
	Floor struct {
		Seconds float64 `json:"seconds"`
		Runs    []struct {
			Seconds float64 `json:"seconds"`
			CPU     struct {
				Discard   float64 `json:"discard"`
				Walsender float64 `json:"walsender"`
			} `json:"cpu_seconds"`
		} `json:"runs"`
	} `json:"floor"`
	PeekSeconds       float64 `json:"peek_seconds"`
	PeekBinarySeconds float64 `json:"peek_binary_seconds"`
}

// BigTxn is scripts/bigtxn-bench.sh's bigtxn.json: one large transaction
// applied without streaming.
type BigTxn struct {
	Command     string      `json:"command"`
	Date        string      `json:"date"`
	Env         Environment `json:"environment"`
	Rows        int64       `json:"rows_in_transaction"`
	Seconds     float64     `json:"seconds"`
	RSSAvgMB    float64     `json:"rss_avg_mb"`
	RSSPeakMB   float64     `json:"rss_peak_mb"`
	CPU         PgsyncCPU   `json:"cpu_seconds"`
	HashesMatch bool        `json:"hashes_match"`
}

// StreamRun is one contender's run in scripts/stream-bench.sh.
type StreamRun struct {
	Who                string   `json:"who"`
	Rows               int64    `json:"rows"`
	Run                int      `json:"run"`
	SecondsAfterCommit float64  `json:"seconds_after_commit"`
	WalsenderCPU       float64  `json:"walsender_cpu_s"`
	RSSPeakMB          *float64 `json:"rss_peak_mb" bench:"optional"`
	SpoolBytes         *float64 `json:"spool_bytes" bench:"optional"`
}

// Stream is scripts/stream-bench.sh's stream.json: one large transaction
// committed while each contender streams.
type Stream struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	Runs    []StreamRun `json:"runs"`
}

// RoundTrip is one round trip of scripts/rtt-bench.sh.
type RoundTrip struct {
	RTTms         float64   `json:"rtt_ms"`
	NativeSeconds []float64 `json:"native_seconds"`
	PgsyncSeconds []float64 `json:"pgsync_seconds"`
	FloorSeconds  []float64 `json:"floor_seconds"`
	NativeSpread  float64   `json:"native_spread_seconds"`
	PgsyncSpread  float64   `json:"pgsync_spread_seconds"`
	HashesMatch   bool      `json:"hashes_match"`
}

// RTT is scripts/rtt-bench.sh's rtt.json: the catch-up with the source
// behind scripts/latency-proxy.
type RTT struct {
	Command    string      `json:"command"`
	Date       string      `json:"date"`
	Env        Environment `json:"environment"`
	Backlog    int64       `json:"backlog_transactions"`
	RoundTrips []RoundTrip `json:"round_trips"`
}

// Schema is scripts/schema-bench.sh's schema.json: a whole database into
// an empty target three ways.
type Schema struct {
	Command  string      `json:"command"`
	Date     string      `json:"date"`
	Env      Environment `json:"environment"`
	Pgcopydb string      `json:"pgcopydb"`
	Datasets []struct {
		Tables             int     `json:"tables"`
		Rows               int64   `json:"rows"`
		SchemaThenBoot     float64 `json:"schema_then_bootstrap_s"`
		SchemaThenBootSame bool    `json:"schema_then_bootstrap_identical"`
		BootSections       float64 `json:"bootstrap_pg_dump_sections_s"`
		BootSectionsSame   bool    `json:"bootstrap_pg_dump_sections_identical"`
		Pgcopydb           float64 `json:"pgcopydb_clone_s"`
		PgcopydbRows       int64   `json:"pgcopydb_rows"`
	} `json:"datasets"`
}

// Freeze is scripts/freeze-bench.sh's freeze.json: the first VACUUM
// (FREEZE) after three ways of loading.
type Freeze struct {
	Command      string      `json:"command"`
	Date         string      `json:"date"`
	Env          Environment `json:"environment"`
	RowsPerTable int64       `json:"rows_per_table"`
	Runs         []struct {
		Who           string  `json:"who"`
		LoadSeconds   float64 `json:"load_seconds"`
		VacuumSeconds float64 `json:"vacuum_freeze_seconds"`
		VacuumWAL     float64 `json:"vacuum_freeze_wal_bytes"`
	} `json:"runs"`
}

// CutoverGap is scripts/cutover-gap-bench.sh's cutover-gap.json.
type CutoverGap struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	Runs    []struct {
		Scale         int     `json:"scale"`
		DatabaseMB    float64 `json:"database_mb"`
		Bootstrap     float64 `json:"bootstrap_seconds"`
		SourceCommits int64   `json:"source_commits"`
		AppGap        float64 `json:"app_write_gap_seconds"`
		LockToReady   float64 `json:"lock_to_ready_seconds"`
		VerifyAfter   float64 `json:"verify_after_ready_seconds"`
		Identical     bool    `json:"identical"`
	} `json:"runs"`
}

// VerifyRows is scripts/verify-rows-bench.sh's verify-rows.json.
type VerifyRows struct {
	Command         string      `json:"command"`
	Date            string      `json:"date"`
	Env             Environment `json:"environment"`
	Rows            int64       `json:"rows"`
	TableMB         float64     `json:"table_mb"`
	CopySeconds     float64     `json:"copy_seconds"`
	VerifySeconds   float64     `json:"verify_seconds"`
	VerifyRSSPeakMB float64     `json:"verify_rss_peak_mb"`
	RowsSeconds     float64     `json:"verify_rows_seconds"`
	RowsRSSPeakMB   float64     `json:"verify_rows_rss_peak_mb"`
	Planted         int         `json:"differences_planted"`
	Named           int         `json:"differences_named"`
}

// Scale is scripts/scale.sh's scale.json: N jobs at once.
type Scale struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Env     Environment `json:"environment"`
	Runs    []struct {
		Workers        int     `json:"workers"`
		Consistent     int     `json:"jobs_consistent"`
		Committed      int64   `json:"transactions_committed"`
		ProcRSSAvgMB   float64 `json:"per_process_rss_avg_mb"`
		ProcRSSPeakMB  float64 `json:"per_process_rss_peak_mb"`
		TotalRSSAvgMB  float64 `json:"aggregate_rss_avg_mb"`
		TotalRSSPeakMB float64 `json:"aggregate_rss_peak_mb"`
	} `json:"runs"`
}

// PKAfterCopy is scripts/pk-bench.sh's pk-after-copy.json.
type PKAfterCopy struct {
	Command string      `json:"command"`
	Env     Environment `json:"environment"`
	Rows    int64       `json:"rows"`
	Rounds  []struct {
		WithPK        float64 `json:"with_pk_seconds"`
		WithPKCPU     float64 `json:"with_pk_target_cpu_seconds"`
		WithoutPKCopy float64 `json:"without_pk_copy_seconds"`
		AddPK         float64 `json:"add_pk_seconds"`
		WithoutPKCPU  float64 `json:"without_pk_target_cpu_seconds"`
	} `json:"rounds"`
}

// InsertCopy is one line of bench-results/insert-copy.jsonl
// (scripts/insert-copy-bench): the target backend's CPU for 500,000 rows
// inserted as multi-row INSERTs or as COPY. Its lines carry no commit.
type InsertCopy struct {
	Mode       string  `json:"mode"`
	RowsPerStm int     `json:"rows_per_statement"`
	Seconds    float64 `json:"seconds"`
	BackendCPU float64 `json:"backend_cpu_seconds"`
}

// AutovacuumRun is one line of the autovacuum-hold experiment's JSONL.
type AutovacuumRun struct {
	Round         int      `json:"round"`
	Variant       string   `json:"variant"`
	Commit        string   `json:"commit"`
	CopySeconds   float64  `json:"copy_seconds"`
	PKSeconds     float64  `json:"pk_seconds"`
	Seconds       float64  `json:"seconds"`
	Cancelled     int      `json:"autovacuum_cancelled"`
	NativeSeconds *float64 `json:"native_seconds" bench:"optional"`
}
