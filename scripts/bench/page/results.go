package main

// The one result that is not the harness's: the lines of
// scripts/bench/cmd/insert-copy-bench, with only the keys this page uses
// (readJSON requires each). The harness's results are package
// benchres's.

// InsertCopy is one line of bench-results/insert-copy.jsonl
// (scripts/bench/cmd/insert-copy-bench): the target backend's CPU for 500,000 rows
// inserted as multi-row INSERTs or as COPY. Its lines carry no commit.
type InsertCopy struct {
	Mode       string  `json:"mode"`
	RowsPerStm int     `json:"rows_per_statement"`
	Seconds    float64 `json:"seconds"`
	BackendCPU float64 `json:"backend_cpu_seconds"`
}
