package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The arithmetic of the page: small pure functions, each tested in
// summary_test.go, so that a ratio or a median on the page is computed in
// one place.

// ratio is a/b, the way every comparison on the page reads: below 1, the
// first contender took less. A zero or negative b has no ratio.
func ratio(a, b float64) (float64, error) {
	if b <= 0 || math.IsNaN(b) {
		return 0, fmt.Errorf("ratio %g/%g: the divisor is not positive", a, b)
	}
	return a / b, nil
}

// median of xs; an empty xs is an error rather than a zero.
func median(xs []float64) (float64, error) {
	if len(xs) == 0 {
		return 0, fmt.Errorf("median of no values")
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], nil
	}
	return (s[n/2-1] + s[n/2]) / 2, nil
}

// spread is the largest value less the smallest.
func spread(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs) - slices.Min(xs)
}

// mean of xs; an empty xs is an error.
func mean(xs []float64) (float64, error) {
	if len(xs) == 0 {
		return 0, fmt.Errorf("mean of no values")
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs)), nil
}

// span writes the range of xs with prec decimals, "lo-hi", or one value
// when both ends print the same.
func span(xs []float64, prec int) string {
	if len(xs) == 0 {
		return "none"
	}
	lo := strconv.FormatFloat(slices.Min(xs), 'f', prec, 64)
	hi := strconv.FormatFloat(slices.Max(xs), 'f', prec, 64)
	if lo == hi {
		return lo
	}
	return lo + "-" + hi
}

// ratios is a[i]/b[i] for each pair; the slices must be as long.
func ratios(a, b []float64) ([]float64, error) {
	if len(a) != len(b) {
		return nil, fmt.Errorf("ratios of %d and %d values", len(a), len(b))
	}
	out := make([]float64, len(a))
	for i := range a {
		r, err := ratio(a[i], b[i])
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Goal is a target of an issue for a ratio or a figure: met when the
// measured value is at most (or, with AtLeast, at least) Limit.
type Goal struct {
	Limit   float64
	AtLeast bool
}

// Met says whether v meets the goal. A limit printed with two decimals is
// met by a value that prints as the same (0.6 is met by 0.604).
func (g Goal) Met(v float64) bool {
	const eps = 0.005
	if g.AtLeast {
		return v >= g.Limit-eps
	}
	return v <= g.Limit+eps
}
