package main

import (
	"slices"
	"testing"

	"github.com/pgsync/pgsync/scripts/bench/benchres"
)

// catchupRun is a catch-up result with only what the summary reads.
func catchupRun(native, pgsync, floor float64, nativeSame, pgsyncSame bool) benchres.Catchup {
	var c benchres.Catchup
	c.Native.Seconds, c.Native.HashesMatch = native, nativeSame
	c.Pgsync.Seconds, c.Pgsync.HashesMatch = pgsync, pgsyncSame
	c.Floor.Seconds = floor
	return c
}

// A round trip lists every run's seconds in order, spreads them max-min
// to the hundredth, and matches only if every pgsync and native run did.
func TestRoundTrip(t *testing.T) {
	runs := []benchres.Catchup{
		catchupRun(3.38, 11.70, 1.96, true, true),
		catchupRun(6.67, 2.87, 1.79, true, true),
		catchupRun(3.11, 9.44, 1.79, true, true),
	}
	r := roundTrip(2, runs)
	if r.RTTms != 2 || !r.HashesMatch {
		t.Fatalf("rtt %v, hashes_match %v; want 2, true", r.RTTms, r.HashesMatch)
	}
	if !slices.Equal(r.NativeSeconds, []float64{3.38, 6.67, 3.11}) || !slices.Equal(r.PgsyncSeconds, []float64{11.70, 2.87, 9.44}) ||
		!slices.Equal(r.FloorSeconds, []float64{1.96, 1.79, 1.79}) {
		t.Fatalf("seconds %v %v %v", r.NativeSeconds, r.PgsyncSeconds, r.FloorSeconds)
	}
	if r.NativeSpread != 3.56 || r.PgsyncSpread != 8.83 {
		t.Fatalf("spreads native %v, pgsync %v; want 3.56, 8.83", r.NativeSpread, r.PgsyncSpread)
	}
	runs[1].Native.HashesMatch = false
	if roundTrip(2, runs).HashesMatch {
		t.Fatal("a native run that differed: hashes_match must be false")
	}
	runs[1].Native.HashesMatch, runs[2].Pgsync.HashesMatch = true, false
	if roundTrip(2, runs).HashesMatch {
		t.Fatal("a pgsync run that differed: hashes_match must be false")
	}
	if one := roundTrip(0, runs[:1]); one.NativeSpread != 0 || one.PgsyncSpread != 0 {
		t.Fatalf("one run: spreads %v %v, want 0", one.NativeSpread, one.PgsyncSpread)
	}
}

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{4.2}, 0}, {[]float64{5.04, 4.15, 4.20}, 0.89}, {[]float64{2.5, 1.0, 1.75}, 1.5}} {
		if got := spread(c.in); got != c.want {
			t.Errorf("spread(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestParseRTTs(t *testing.T) {
	got, err := parseRTTs("0, 2,10")
	if err != nil || !slices.Equal(got, []int{0, 2, 10}) {
		t.Fatalf("parseRTTs = %v, %v; want [0 2 10]", got, err)
	}
	for _, bad := range []string{"direct", "0,-2", "2,2", "", "1.5"} {
		if got, err := parseRTTs(bad); err == nil {
			t.Errorf("parseRTTs(%q) = %v, want an error", bad, got)
		}
	}
}
