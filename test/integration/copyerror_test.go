//go:build integration

package integration

import (
	"strings"
	"testing"
)

// TestCopyReportsTheTargetsError: when the target refuses a table's rows,
// bootstrap reports the target's error, not the source's "copy reader
// stopped" that follows from it (issue 15). The source has more rows than
// the pipe holds, so the source is still sending when the target fails.
func TestCopyReportsTheTargetsError(t *testing.T) {
	tests := []struct {
		name   string
		values string // v of row g on the source
		target string // the target's table b
		want   []string
	}{
		{
			name:   "check constraint",
			values: "g",
			target: `CREATE TABLE b (id int PRIMARY KEY, v int CONSTRAINT b_v_negative CHECK (v < 0))`,
			want:   []string{"copy public.b: target: ", `"b_v_negative"`, "SQLSTATE 23514"},
		},
		{
			name:   "unique index",
			values: "g % 1000",
			target: `CREATE TABLE b (id int PRIMARY KEY, v int); CREATE UNIQUE INDEX b_v_unique ON b (v)`,
			want:   []string{"copy public.b: target: ", `"b_v_unique"`, "SQLSTATE 23505"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, `CREATE TABLE b (id int PRIMARY KEY, v int);
INSERT INTO b SELECT g, `+tt.values+` FROM generate_series(1, 300000) g;`, "[tuning]\nbuffer_size_kb = 16\nmax_parallel_copies = 1\n")
			e.tgtExec(tt.target)
			r := e.pgsync("bootstrap")
			if r.code != 1 {
				t.Fatalf("bootstrap: exit %d, want 1\n%s", r.code, r.stderr)
			}
			ok := !strings.Contains(r.stderr, "copy reader stopped")
			for _, want := range tt.want {
				ok = ok && strings.Contains(r.stderr, want)
			}
			if !ok {
				t.Errorf("stderr should hold %q and not the source's consequence, \"copy reader stopped\":\n%s", tt.want, r.stderr)
			}
		})
	}
}
