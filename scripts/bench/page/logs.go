package main

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

// The inputs that are not JSON: Go's benchmark output, benchstat's and
// pprof's text, and the series the harness samples (CSV).

// BenchStat is one Go benchmark over its rounds: the median ns/op and the
// largest B/op and allocs/op seen.
type BenchStat struct {
	NsOp     float64
	BytesOp  int64
	AllocsOp int64
	Rounds   int
	Name     string
	BaseNsOp float64 // the base build's median; 0 when it had no such benchmark
	HasBase  bool
}

var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+(?:[\d.]+ MB/s\s+)?(\d+) B/op\s+(\d+) allocs/op`)

// parseGoBench reads `go test -bench -benchmem` output into one BenchStat
// per benchmark name.
func parseGoBench(path string) (map[string]BenchStat, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ns := map[string][]float64{}
	out := map[string]BenchStat{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		b, _ := strconv.ParseInt(m[3], 10, 64)
		a, _ := strconv.ParseInt(m[4], 10, 64)
		ns[m[1]] = append(ns[m[1]], v)
		s := out[m[1]]
		s.Name = m[1]
		s.BytesOp = max(s.BytesOp, b)
		s.AllocsOp = max(s.AllocsOp, a)
		out[m[1]] = s
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no benchmark lines", path)
	}
	for k, s := range out {
		s.NsOp, _ = median(ns[k])
		s.Rounds = len(ns[k])
		out[k] = s
	}
	return out, nil
}

// BenchstatVerdict is one significant change in benchstat's sec/op table.
type BenchstatVerdict struct {
	Name, Change, P string
}

var benchstatRow = regexp.MustCompile(`(?m)^(\S+?)(?:-\d+)?\s+\S+ ± \S+\s+\S+ ± \S+\s+([+-][\d.]+%) \(p=([\d.]+)`)

// parseBenchstat returns benchstat's sec/op sections as text and the
// significant changes in them.
func parseBenchstat(path string) (text string, verdicts []BenchstatVerdict, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var secs []string
	for _, block := range strings.Split(string(data), "\n\n") {
		if !strings.Contains(block, "sec/op") {
			continue
		}
		secs = append(secs, strings.TrimSpace(block))
		for _, m := range benchstatRow.FindAllStringSubmatch(block, -1) {
			verdicts = append(verdicts, BenchstatVerdict{Name: m[1], Change: m[2], P: m[3]})
		}
	}
	if len(secs) == 0 {
		return "", nil, fmt.Errorf("%s: no sec/op table", path)
	}
	return strings.Join(secs, "\n\n"), verdicts, nil
}

// headLines returns the first n non-empty lines of a text file (pprof -top).
func headLines(path string, n int) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) != "" && len(out) < n {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n"), nil
}

// keyBuilds is the seconds of each primary key a bootstrap built after its
// copy: the harness's <name>-bootstrap.json, taken from its log.
func keyBuilds(path string) ([]float64, error) {
	var b benchres.Bootstrap
	if err := readJSON(path, &b); err != nil {
		return nil, err
	}
	if len(b.KeyBuildSeconds) == 0 {
		return nil, fmt.Errorf("%s: no primary key built", path)
	}
	return b.KeyBuildSeconds, nil
}

// bootParts is pg_dump's seconds and the seconds from "slot created" to
// "bootstrap done" of a bootstrap (<name>-bootstrap.json).
func bootParts(path string) (dump, slotToDone float64, err error) {
	var b benchres.Bootstrap
	if err := readJSON(path, &b); err != nil {
		return 0, 0, err
	}
	if b.PgDumpSeconds == nil || b.SlotToDoneSeconds == nil {
		return 0, 0, fmt.Errorf("%s: no pg_dump or slot-to-done seconds", path)
	}
	return *b.PgDumpSeconds, *b.SlotToDoneSeconds, nil
}

// XY is one sample of a series over time: seconds since its first sample.
type XY struct{ X, Y float64 }

// rssSeries reads the harness's RSS samples (unix_s,rss_kb,cpu_pct) as MB
// over seconds since the first sample; a sample of under 1 MB is the
// process not yet started.
func rssSeries(path string) ([]XY, error) {
	return csvSeries(path, "rss_kb", 1024, 1024)
}

// applySeries reads the series of a run's progress lines
// (<name>-applying.csv: unix_s,rows_per_s,lag_bytes) for one column, over
// seconds since the first line.
func applySeries(path, column string) ([]XY, error) {
	return csvSeries(path, column, 1, 0)
}

// csvSeries reads one column of a CSV whose first column is unix_s as Y
// (divided by scale) over seconds since the first row kept; a row whose
// value is empty or under least is passed over.
func csvSeries(path, column string, scale, least float64) ([]XY, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: empty", path)
	}
	col := slices.Index(rows[0], column)
	if col < 1 {
		return nil, fmt.Errorf("%s: no %s column after unix_s", path, column)
	}
	var out []XY
	t0 := -1.0
	for _, r := range rows[1:] {
		t, err1 := strconv.ParseFloat(r[0], 64)
		v, err2 := strconv.ParseFloat(r[col], 64)
		if err1 != nil || err2 != nil || v < least {
			continue
		}
		if t0 < 0 {
			t0 = t
		}
		out = append(out, XY{t - t0, v / scale})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no %s samples", path, column)
	}
	return out, nil
}

// baseHotpath finds the base build's hot-path file, hotpath-<commit>.txt,
// and returns its path and the commit its name carries.
func baseHotpath(dir string) (path, commit string, err error) {
	paths, _ := filepath.Glob(filepath.Join(dir, "hotpath-*.txt"))
	var found []string
	for _, p := range paths {
		c := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "hotpath-"), ".txt")
		if regexp.MustCompile(`^[0-9a-f]{7,40}$`).MatchString(c) {
			found = append(found, p)
			commit = c
		}
	}
	if len(found) != 1 {
		return "", "", fmt.Errorf("%s: %d hotpath-<commit>.txt files, want one", dir, len(found))
	}
	sort.Strings(found)
	return found[0], commit, nil
}
