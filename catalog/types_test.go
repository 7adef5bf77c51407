package catalog

import "testing"

func TestCastType(t *testing.T) {
	tests := []struct{ base, want string }{
		// Bare names SQL reads with a modifier of 1 (issue 16).
		{"bit", `"bit"`},
		{"bit[]", `"bit"[]`},
		{"character", "bpchar"},
		{"character[]", "bpchar[]"},
		// Bare names without a modifier: unconstrained already.
		{"bit varying", "bit varying"},
		{"bit varying[]", "bit varying[]"},
		{"character varying", "character varying"},
		{"character varying[]", "character varying[]"},
		{"numeric", "numeric"},
		{"numeric[]", "numeric[]"},
		{"time without time zone", "time without time zone"},
		{"time with time zone[]", "time with time zone[]"},
		{"timestamp without time zone", "timestamp without time zone"},
		{"timestamp with time zone[]", "timestamp with time zone[]"},
		{"interval", "interval"},
		{"interval[]", "interval[]"},
		// Types that only look alike.
		{`"char"`, `"char"`},
		{`"char"[]`, `"char"[]`},
		{"public.bit", "public.bit"},
		{`"character"`, `"character"`},
		{"text", "text"},
		{"integer", "integer"},
	}
	for _, tt := range tests {
		if got := CastType(tt.base); got != tt.want {
			t.Errorf("CastType(%q) = %q, want %q", tt.base, got, tt.want)
		}
	}
}
