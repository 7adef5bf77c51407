package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

// Results is everything the two pages are made of, read from
// bench-results/ under the repository root.
type Results struct {
	Dir string // bench-results/, as the pages name it

	// Move is the harness's whole move under load (move/move.json);
	// Move10GB the same at about 10 GB (move-10gb/move.json), outside
	// make bench.
	Move, Move10GB benchres.Move
	// Tables is the many-tables measurement, tables-<n>/tables.json by
	// the number of tables.
	Tables []Named[benchres.Tables]

	Bench100MB, Bench1GB benchres.CDC
	Copy                 benchres.Copy
	Copy10GB             benchres.Copy
	BigTxn               benchres.BigTxn
	BigTxnRuns           []Named[benchres.BigTxn]
	CatchupRuns          []Named[benchres.Catchup] // catchup-runs/<n>-pause|nopause
	Catchup              benchres.Catchup          // the speed issue's run (catchup.json)
	CatchupProfile       benchres.Catchup
	Stream               benchres.Stream
	StreamGOGC200        benchres.Stream
	RTT                  benchres.RTT
	RTTRuns              []Named[benchres.Catchup] // rtt/<rtt>ms-<run>
	RTTCopy              []Named[benchres.CDC]     // rtt-copy/<rtt>ms
	Schema               benchres.Schema
	Freeze               benchres.Freeze
	CutoverGap           benchres.CutoverGap
	VerifyRows           benchres.VerifyRows
	Scale                benchres.Scale
	PKAfterCopy          benchres.PKAfterCopy
	InsertCopy           []InsertCopy
	RangesRejected       benchres.CDC
	EarlierCopy          []Named[benchres.Copy] // earlier/copy-<commit>.json
	EarlierBench         []Named[benchres.CDC]  // earlier/bench-1gb-<commit>.json
	AutovacuumHold       []benchres.AutovacuumRun
	AutovacuumHold2      []benchres.AutovacuumRun
	Experiments          map[string][]Named[benchres.Catchup] // experiments/<name>/<run>/catchup.json
}

// Named is a result with the name of the folder or file it came from,
// which is how the scripts tell runs apart (1-pause, gogc200-2, ...).
type Named[T any] struct {
	Name string
	R    T
}

// loader reads files under one results directory and keeps the first
// error, so that load reads as a list of files.
type loader struct {
	dir string
	err error
}

func (l *loader) json(rel string, v any) {
	if l.err != nil {
		return
	}
	l.err = readJSON(filepath.Join(l.dir, rel), v)
}

// glob returns the paths under dir matching pattern, sorted, or an error
// when none does: a scenario whose files are all gone is a missing
// measurement too.
func (l *loader) glob(pattern string) []string {
	if l.err != nil {
		return nil
	}
	paths, err := filepath.Glob(filepath.Join(l.dir, pattern))
	if err != nil {
		l.err = err
		return nil
	}
	if len(paths) == 0 {
		l.err = fmt.Errorf("%s: no file matches", filepath.Join(l.dir, pattern))
		return nil
	}
	sort.Strings(paths)
	return paths
}

// named reads every file matching pattern into a Named[T], named by the
// folder that holds it (or, with byFile, by the file's name less prefix
// and extension).
func named[T any](l *loader, pattern string, name func(path string) string) []Named[T] {
	var out []Named[T]
	for _, p := range l.glob(pattern) {
		var v T
		if l.err == nil {
			l.err = readJSON(p, &v)
		}
		out = append(out, Named[T]{Name: name(p), R: v})
	}
	return out
}

func parentName(p string) string { return filepath.Base(filepath.Dir(p)) }

func fileCommit(prefix string) func(string) string {
	return func(p string) string {
		return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), prefix), ".json")
	}
}

// experimentNames are the interleaved experiments on the catch-up that the
// details page shows, in its order.
var experimentNames = []string{"cpu-per-row", "gogc", "write-buffer", "reader-clock", "batch-rows", "run-procs", "rtt-mode", "gulp-reads", "async-commit"}

func load(root string) (*Results, error) {
	l := &loader{dir: filepath.Join(root, "bench-results")}
	r := &Results{Dir: "bench-results", Experiments: map[string][]Named[benchres.Catchup]{}}
	l.json("move/move.json", &r.Move)
	l.json("move-10gb/move.json", &r.Move10GB)
	r.Tables = named[benchres.Tables](l, "tables-*/tables.json", parentName)
	l.json("bench-100mb.json", &r.Bench100MB)
	l.json("bench-1gb.json", &r.Bench1GB)
	l.json("copy.json", &r.Copy)
	l.json("copy-10gb/copy.json", &r.Copy10GB)
	l.json("bigtxn.json", &r.BigTxn)
	r.BigTxnRuns = named[benchres.BigTxn](l, "bigtxn-runs/*/bigtxn.json", parentName)
	r.CatchupRuns = named[benchres.Catchup](l, "catchup-runs/*/catchup.json", parentName)
	l.json("catchup.json", &r.Catchup)
	l.json("catchup-profile/catchup.json", &r.CatchupProfile)
	l.json("stream.json", &r.Stream)
	l.json("experiments/gogc/stream-gogc200.json", &r.StreamGOGC200)
	l.json("rtt.json", &r.RTT)
	r.RTTRuns = named[benchres.Catchup](l, "rtt/*/catchup.json", parentName)
	r.RTTCopy = named[benchres.CDC](l, "rtt-copy/*/bench-100mb.json", parentName)
	l.json("schema.json", &r.Schema)
	l.json("freeze.json", &r.Freeze)
	l.json("cutover-gap.json", &r.CutoverGap)
	l.json("verify-rows.json", &r.VerifyRows)
	l.json("scale.json", &r.Scale)
	l.json("pk-after-copy.json", &r.PKAfterCopy)
	if rej := named[benchres.CDC](l, "rejected/bench-1gb-ranges-*.json", parentName); len(rej) == 1 {
		r.RangesRejected = rej[0].R
	} else if l.err == nil {
		l.err = fmt.Errorf("%s/rejected: %d bench-1gb-ranges-*.json files, want one", l.dir, len(rej))
	}
	r.EarlierCopy = named[benchres.Copy](l, "earlier/copy-*.json", fileCommit("copy-"))
	r.EarlierBench = named[benchres.CDC](l, "earlier/bench-1gb-*.json", fileCommit("bench-1gb-"))
	for _, name := range experimentNames {
		r.Experiments[name] = named[benchres.Catchup](l, "experiments/"+name+"/*/catchup.json", parentName)
	}
	if l.err != nil {
		return nil, l.err
	}
	if r.Copy.Native == nil || r.Copy.PipeSeconds == nil || r.Copy.BinaryPipeSeconds == nil {
		return nil, fmt.Errorf("%s/copy.json: no native subscription or COPY pipe beside pgsync (harness copy ran with -compare=false)", l.dir)
	}
	var err error
	if r.InsertCopy, err = readJSONL[InsertCopy](filepath.Join(l.dir, "insert-copy.jsonl")); err != nil {
		return nil, err
	}
	if r.AutovacuumHold, err = readJSONL[benchres.AutovacuumRun](filepath.Join(l.dir, "experiments/autovacuum-hold/runs.jsonl")); err != nil {
		return nil, err
	}
	if r.AutovacuumHold2, err = readJSONL[benchres.AutovacuumRun](filepath.Join(l.dir, "experiments/autovacuum-hold/runs-2-tables.jsonl")); err != nil {
		return nil, err
	}
	return r, nil
}

// exists says whether a file is there, for the charts' optional samples.
func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
