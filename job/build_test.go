package job

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/pgsync/pgsync/catalog"
)

// TestSettleBuild: what a build's errors mean for its step. Each object
// not built is returned: a primary key, or an error that ended the build,
// stops the step; any other object is a warning and a name in failed.
func TestSettleBuild(t *testing.T) {
	errDup := errors.New("could not create unique index")
	idx := &objectError{object: "index a_v on public.a", err: errDup}
	fk := &objectError{object: "foreign key b_a on public.b", err: errDup}
	pk := &objectError{object: "primary key a_pkey on public.a", primaryKey: true, err: errDup}
	for _, tt := range []struct {
		name       string
		err        error
		wantFailed []string
		wantStop   []string // in the stop error's text
		wantWarned []string // in the log
	}{
		{"nothing failed", nil, nil, nil, nil},
		{"an index fails", errors.Join(idx), []string{idx.object}, nil, []string{idx.object}},
		{"two fail, both reported", errors.Join(idx, fk), []string{idx.object, fk.object}, nil, []string{idx.object, fk.object}},
		{"a primary key stops the step, the others are still reported", errors.Join(idx, pk, fk),
			[]string{idx.object, fk.object}, []string{pk.object}, []string{idx.object, fk.object}},
		{"the build ended", errors.Join(idx, context.Canceled), []string{idx.object}, []string{"context canceled"}, []string{idx.object}},
		{"an error not joined", context.Canceled, nil, []string{"context canceled"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			j := &Job{log: slog.New(slog.NewTextHandler(&log, nil))}
			failed, stop := j.settleBuild(tt.err)
			if !slices.Equal(failed, tt.wantFailed) {
				t.Errorf("failed %q, want %q", failed, tt.wantFailed)
			}
			if (stop != nil) != (len(tt.wantStop) > 0) {
				t.Fatalf("stop %v, want one naming %q", stop, tt.wantStop)
			}
			for _, w := range tt.wantStop {
				if !strings.Contains(stop.Error(), w) {
					t.Errorf("stop %q does not name %q", stop, w)
				}
			}
			if n := strings.Count(log.String(), "not created"); n != len(tt.wantWarned) {
				t.Errorf("%d warnings, want %d:\n%s", n, len(tt.wantWarned), log.String())
			}
			for _, w := range tt.wantWarned {
				if !strings.Contains(log.String(), w) {
					t.Errorf("no warning names %q:\n%s", w, log.String())
				}
			}
			if slices.Contains(tt.wantStop, pk.object) && !errors.Is(stop, errDup) {
				t.Errorf("stop %v does not wrap the primary key's error", stop)
			}
		})
	}
}

// TestBuiltinPhases: the foreign keys come after every other object, and
// each object keeps its name and whether it is a primary key.
func TestBuiltinPhases(t *testing.T) {
	tbl := &catalog.Table{Schema: "public", Name: "a"}
	objs := []catalog.Object{
		{Table: tbl, Kind: "check", Name: "a_c"},
		{Table: tbl, Kind: "foreign key", Name: "a_b"},
		{Table: tbl, Kind: "index", Name: "a_v"},
		{Table: tbl, Kind: "primary key", Name: "a_pkey"},
	}
	phases := builtinPhases(objs)
	var names [][]string
	var keys []string
	for _, p := range phases {
		var n []string
		for _, o := range p {
			n = append(n, o.name)
			if o.primaryKey {
				keys = append(keys, o.name)
			}
		}
		names = append(names, n)
	}
	want := [][]string{{"check a_c on public.a", "index a_v on public.a", "primary key a_pkey on public.a"}, {"foreign key a_b on public.a"}}
	if !slices.EqualFunc(names, want, slices.Equal) {
		t.Errorf("phases %q, want %q", names, want)
	}
	if !slices.Equal(keys, []string{"primary key a_pkey on public.a"}) {
		t.Errorf("primary keys %q", keys)
	}
}

// TestRemaining: what the key builder built during the copy is not built
// again after it.
func TestRemaining(t *testing.T) {
	tbl := &catalog.Table{Schema: "public", Name: "a"}
	objs := []catalog.Object{{Table: tbl, Kind: "primary key", Name: "a_pkey"}, {Table: tbl, Kind: "index", Name: "a_v"}}
	for _, tt := range []struct {
		built []string
		want  int
	}{
		{nil, 2},
		{[]string{"primary key a_pkey on public.a"}, 1},
		{[]string{"primary key a_pkey on public.a", "index a_v on public.a"}, 0},
	} {
		if got := remaining(objs, tt.built); len(got) != tt.want {
			t.Errorf("remaining after %q: %d objects, want %d", tt.built, len(got), tt.want)
		}
	}
}
