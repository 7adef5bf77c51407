package main

import (
	"math"
	"testing"
)

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		a, b, want float64
		err        bool
	}{
		{12.59, 17.51, 0.719, false},
		{8.92, 13.81, 0.646, false},
		{1, 1, 1, false},
		{0, 3, 0, false},
		{1, 0, 0, true},
		{1, -2, 0, true},
		{1, math.NaN(), 0, true},
	} {
		got, err := ratio(tc.a, tc.b)
		if (err != nil) != tc.err {
			t.Fatalf("ratio(%g, %g) error = %v, want error %v", tc.a, tc.b, err, tc.err)
		}
		if !tc.err && math.Abs(got-tc.want) > 0.0005 {
			t.Errorf("ratio(%g, %g) = %.4f, want %.3f", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestRatios(t *testing.T) {
	got, err := ratios([]float64{2, 3}, []float64{4, 1.5})
	if err != nil || len(got) != 2 || got[0] != 0.5 || got[1] != 2 {
		t.Fatalf("ratios = %v, %v", got, err)
	}
	if _, err := ratios([]float64{1}, []float64{1, 2}); err == nil {
		t.Fatal("ratios of unequal lengths: no error")
	}
	if _, err := ratios([]float64{1}, []float64{0}); err == nil {
		t.Fatal("ratios by zero: no error")
	}
}

func TestMedianMeanSpread(t *testing.T) {
	for _, tc := range []struct {
		xs                 []float64
		median, mean, sprd float64
	}{
		{[]float64{3}, 3, 3, 0},
		{[]float64{3, 1}, 2, 2, 2},
		{[]float64{11.7, 2.87, 9.44}, 9.44, 8.003, 8.83},
		{[]float64{4, 1, 3, 2}, 2.5, 2.5, 3},
	} {
		m, err := median(tc.xs)
		if err != nil || math.Abs(m-tc.median) > 1e-9 {
			t.Errorf("median(%v) = %g, %v; want %g", tc.xs, m, err, tc.median)
		}
		a, err := mean(tc.xs)
		if err != nil || math.Abs(a-tc.mean) > 0.001 {
			t.Errorf("mean(%v) = %g, %v; want %g", tc.xs, a, err, tc.mean)
		}
		if s := spread(tc.xs); math.Abs(s-tc.sprd) > 1e-9 {
			t.Errorf("spread(%v) = %g, want %g", tc.xs, s, tc.sprd)
		}
	}
	if _, err := median(nil); err == nil {
		t.Error("median of nothing: no error")
	}
	if _, err := mean(nil); err == nil {
		t.Error("mean of nothing: no error")
	}
	xs := []float64{3, 1, 2}
	median(xs)
	if xs[0] != 3 {
		t.Error("median sorted its argument in place")
	}
}

func TestSpan(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		prec int
		want string
	}{
		{[]float64{2.64, 2.80}, 2, "2.64-2.80"},
		{[]float64{2.80, 2.64}, 2, "2.64-2.80"},
		{[]float64{1.001, 1.004}, 2, "1.00"},
		{[]float64{33, 114, 52}, 0, "33-114"},
		{nil, 2, "none"},
	} {
		if got := span(tc.xs, tc.prec); got != tc.want {
			t.Errorf("span(%v, %d) = %q, want %q", tc.xs, tc.prec, got, tc.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 8000000: "8,000,000", -52929: "-52,929"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestGoalMet(t *testing.T) {
	for _, tc := range []struct {
		g    Goal
		v    float64
		want bool
	}{
		{Goal{Limit: 0.6}, 0.48, true},
		{Goal{Limit: 0.6}, 0.604, true},
		{Goal{Limit: 0.6}, 0.62, false},
		{Goal{Limit: 1.7, AtLeast: true}, 1.39, false},
		{Goal{Limit: 1.7, AtLeast: true}, 1.72, true},
	} {
		if got := tc.g.Met(tc.v); got != tc.want {
			t.Errorf("%+v.Met(%g) = %v, want %v", tc.g, tc.v, got, tc.want)
		}
	}
}
