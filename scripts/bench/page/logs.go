package main

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The inputs that are not JSON: Go's benchmark output, benchstat's and
// pprof's text, pgsync's slog lines and the RSS samples the scripts take.

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

// slogLine is one line of pgsync's text log: its time, message and
// attributes.
type slogLine struct {
	Time  time.Time
	Msg   string
	Attrs map[string]string
}

var slogAttr = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

func parseSlog(line string) (slogLine, bool) {
	var s slogLine
	s.Attrs = map[string]string{}
	for _, m := range slogAttr.FindAllStringSubmatch(line, -1) {
		v := m[2]
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		switch m[1] {
		case "time":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return s, false
			}
			s.Time = t
		case "msg":
			s.Msg = v
		default:
			s.Attrs[m[1]] = v
		}
	}
	return s, s.Msg != "" && !s.Time.IsZero()
}

func readSlog(path string) ([]slogLine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []slogLine
	for _, l := range strings.Split(string(data), "\n") {
		if s, ok := parseSlog(l); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// keyBuilds is the seconds of each primary key a bootstrap built after its
// copy, in the order of its log.
func keyBuilds(path string) ([]float64, error) {
	lines, err := readSlog(path)
	if err != nil {
		return nil, err
	}
	var out []float64
	for _, s := range lines {
		if s.Msg == "created" && isPrimaryKey(s.Attrs["object"]) {
			v, err := strconv.ParseFloat(s.Attrs["seconds"], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: seconds of %q: %w", path, s.Attrs["object"], err)
			}
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no primary key built", path)
	}
	return out, nil
}

// isPrimaryKey says whether a "created" line's object is a primary key:
// the built-in creator names it so, and pg_dump's post-data entry as the
// constraint it is, which the bench tables name <table>_pkey.
func isPrimaryKey(object string) bool {
	return strings.HasPrefix(object, "primary key ") ||
		strings.HasPrefix(object, "constraint ") && strings.HasSuffix(object, "_pkey")
}

// bootParts is pg_dump's seconds and the seconds from "slot created" to
// "bootstrap done" in a bootstrap log.
func bootParts(path string) (dump, slotToDone float64, err error) {
	lines, err := readSlog(path)
	if err != nil {
		return 0, 0, err
	}
	var slot, done time.Time
	haveDump := false
	for _, s := range lines {
		switch s.Msg {
		case "schema read with pg_dump":
			dump, err = strconv.ParseFloat(s.Attrs["seconds"], 64)
			haveDump = err == nil
		case "slot created":
			slot = s.Time
		case "bootstrap done":
			done = s.Time
		}
	}
	if !haveDump || slot.IsZero() || done.IsZero() {
		return 0, 0, fmt.Errorf("%s: no pg_dump, slot created or bootstrap done line", path)
	}
	return dump, done.Sub(slot).Seconds(), nil
}

// XY is one sample of a series over time: seconds since its first sample.
type XY struct{ X, Y float64 }

// rssSeries reads the scripts' RSS samples (unix_s,rss_kb,cpu_pct) as MB
// over seconds since the first sample; a sample of under 1 MB is the
// process not yet started.
func rssSeries(path string) ([]XY, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []XY
	t0 := -1.0
	for _, r := range rows[1:] {
		t, err1 := strconv.ParseFloat(r[0], 64)
		kb, err2 := strconv.ParseFloat(r[1], 64)
		if err1 != nil || err2 != nil || kb < 1024 {
			continue
		}
		if t0 < 0 {
			t0 = t
		}
		out = append(out, XY{t - t0, kb / 1024})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no RSS samples", path)
	}
	return out, nil
}

// applySeries reads a run log's "applying" lines (one a second): the
// attribute key (rows_per_s, lag_bytes) over seconds since the first.
func applySeries(path, key string) ([]XY, error) {
	lines, err := readSlog(path)
	if err != nil {
		return nil, err
	}
	var out []XY
	var t0 time.Time
	for _, s := range lines {
		v, ok := s.Attrs[key]
		if s.Msg != "applying" || !ok {
			continue
		}
		y, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %s=%q: %w", path, key, v, err)
		}
		if t0.IsZero() {
			t0 = s.Time
		}
		out = append(out, XY{s.Time.Sub(t0).Seconds(), y})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no applying lines with %s", path, key)
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
