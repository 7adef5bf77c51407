// Package pgsynclog reads pgsync's text log (slog's key=value lines, which
// pgsync writes with PGSYNC_LOG_FORMAT=text) and takes from it the figures
// the benchmark pages use, so that a run's log can stay out of
// bench-results/: the harness keeps the figures, the log goes
// to the run's log directory.
package pgsynclog

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

// Fields splits one slog text line into its keys and values, unquoting
// quoted values; a line that is not key=value (a panic) gives none.
func Fields(line string) map[string]string {
	kv := make(map[string]string)
	for rest := strings.TrimSpace(line); rest != ""; rest = strings.TrimLeft(rest, " ") {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || strings.Contains(key, " ") {
			break
		}
		var val string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				break
			}
			val, _ = strconv.Unquote(q)
			rest = after[len(q):]
		} else {
			val, rest, _ = strings.Cut(after, " ")
		}
		kv[key] = val
	}
	return kv
}

// Line is one log line with a time and a message.
type Line struct {
	Time  time.Time
	Msg   string
	Attrs map[string]string // every key, time and msg included
}

// Read returns the lines of the log at path that have a time and a
// message, in order.
func Read(path string) ([]Line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Line
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		kv := Fields(s.Text())
		t, err := time.Parse(time.RFC3339Nano, kv["time"])
		if msg, ok := kv["msg"]; ok && err == nil {
			out = append(out, Line{Time: t, Msg: msg, Attrs: kv})
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// Bootstrap takes a bootstrap log's figures: each primary key's build
// and, when the log has them, pg_dump's seconds and the seconds from
// "slot created" to "bootstrap done".
func Bootstrap(path string) (benchres.Bootstrap, error) {
	b := benchres.Bootstrap{KeyBuildSeconds: []float64{}}
	lines, err := Read(path)
	if err != nil {
		return b, err
	}
	var slot, done time.Time
	for _, l := range lines {
		switch {
		case l.Msg == "created" && isPrimaryKey(l.Attrs["object"]):
			v, err := strconv.ParseFloat(l.Attrs["seconds"], 64)
			if err != nil {
				return b, fmt.Errorf("%s: seconds of %q: %w", path, l.Attrs["object"], err)
			}
			b.KeyBuildSeconds = append(b.KeyBuildSeconds, v)
		case l.Msg == "schema read with pg_dump":
			v, err := strconv.ParseFloat(l.Attrs["seconds"], 64)
			if err != nil {
				return b, fmt.Errorf("%s: pg_dump seconds: %w", path, err)
			}
			b.PgDumpSeconds = &v
		case l.Msg == "slot created":
			slot = l.Time
		case l.Msg == "bootstrap done":
			done = l.Time
		}
	}
	if !slot.IsZero() && !done.IsZero() {
		v := done.Sub(slot).Seconds()
		b.SlotToDoneSeconds = &v
	}
	return b, nil
}

// isPrimaryKey says whether a "created" line's object is a primary key:
// the built-in creator names it so, and pg_dump's post-data entry as the
// constraint it is, which the bench tables name <table>_pkey.
func isPrimaryKey(object string) bool {
	return strings.HasPrefix(object, "primary key ") ||
		strings.HasPrefix(object, "constraint ") && strings.HasSuffix(object, "_pkey")
}

// ApplyingHeader is the header of the CSV WriteApplying writes.
var ApplyingHeader = []string{"unix_s", "rows_per_s", "lag_bytes"}

// WriteApplying writes a run log's progress lines ("applying", one a
// second with --log-every 1s) as a CSV series of ApplyingHeader's
// columns; a line without a key leaves its cell empty, and a log without
// such lines gives the header alone.
func WriteApplying(logPath, csvPath string) error {
	lines, err := Read(logPath)
	if err != nil {
		return err
	}
	var rows [][]string
	for _, l := range lines {
		if l.Msg == "applying" {
			rows = append(rows, []string{strconv.FormatFloat(float64(l.Time.UnixNano())/1e9, 'f', 3, 64),
				l.Attrs["rows_per_s"], l.Attrs["lag_bytes"]})
		}
	}
	// A run shorter than a progress period logs none: its series is empty.
	f, err := os.Create(csvPath)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(ApplyingHeader)
	w.WriteAll(rows) // flushes
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", csvPath, err)
	}
	return f.Close()
}
