package main

import "github.com/pgsync/pgsync/scripts/bench/benchres"

// The results of the bench scripts that are not harness scenarios: one
// struct per kind of JSON file they write under bench-results/, with only
// the keys this page uses. A key that may be null for one contender is a
// pointer tagged `bench:"optional"`; every other key must be present
// (readJSON). The harness's results are package benchres's.

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
	Command string               `json:"command"`
	Date    string               `json:"date"`
	Env     benchres.Environment `json:"environment"`
	Runs    []StreamRun          `json:"runs"`
}

// CutoverGap is scripts/cutover-gap-bench.sh's cutover-gap.json.
type CutoverGap struct {
	Command string               `json:"command"`
	Date    string               `json:"date"`
	Env     benchres.Environment `json:"environment"`
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

// Scale is scripts/scale.sh's scale.json: N jobs at once.
type Scale struct {
	Command string               `json:"command"`
	Date    string               `json:"date"`
	Env     benchres.Environment `json:"environment"`
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
	Command string               `json:"command"`
	Env     benchres.Environment `json:"environment"`
	Rows    int64                `json:"rows"`
	Rounds  []struct {
		WithPK        float64 `json:"with_pk_seconds"`
		WithPKCPU     float64 `json:"with_pk_target_cpu_seconds"`
		WithoutPKCopy float64 `json:"without_pk_copy_seconds"`
		AddPK         float64 `json:"add_pk_seconds"`
		WithoutPKCPU  float64 `json:"without_pk_target_cpu_seconds"`
	} `json:"rounds"`
}

// InsertCopy is one line of bench-results/insert-copy.jsonl
// (scripts/bench/cmd/insert-copy-bench): the target backend's CPU for 500,000 rows
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
