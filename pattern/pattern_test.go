package pattern

import "testing"

func TestParse(t *testing.T) {
	tests := []struct {
		in           string
		schema, name string
		bad          bool
	}{
		{in: "public.*", schema: "public", name: "%"},
		{in: "app_1.order_*", schema: `app\_1`, name: `order\_%`},
		{in: `"Sales Dept".*`, schema: "Sales Dept", name: "%"},
		{in: `public."Order Lines"`, schema: "public", name: "Order Lines"},
		{in: `"a.b"."x""y"`, schema: "a.b", name: `x"y`},
		{in: `"100%"."*_"`, schema: `100\%`, name: `*\_`}, // quoted: no globs
		{in: "public", bad: true},
		{in: "public.", bad: true},
		{in: `"unterminated.*`, bad: true},
		{in: `"".t`, bad: true},
		{in: "a.b.c", bad: true},
		{in: "sales dept.*", bad: true},
		{in: `"x"y.t`, bad: true},
	}
	for _, tt := range tests {
		s, n, err := Parse(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("Parse(%q) = %q, %q; want an error", tt.in, s, n)
			}
			continue
		}
		if err != nil || s != tt.schema || n != tt.name {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q", tt.in, s, n, err, tt.schema, tt.name)
		}
	}
}

func TestMatcher(t *testing.T) {
	m, err := NewMatcher([]string{"public.order_*", `"a.b"."x%"`, "app.*"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		schema, name string
		want         bool
	}{
		{"public", "order_lines", true},
		{"public", "order_", true},
		{"public", "orderXlines", false}, // '_' is literal in a glob
		{"public", "orders", false},
		{"a.b", "x%", true},
		{"a.b", "xy", false}, // quoted: '%' is literal
		{"a", "b.x%", false}, // parts are matched apart
		{"app", "anything", true},
		{"App", "anything", false},
	}
	for _, tt := range tests {
		if got := m.Matches(tt.schema, tt.name); got != tt.want {
			t.Errorf("Matches(%q, %q) = %t, want %t", tt.schema, tt.name, got, tt.want)
		}
	}
	if _, err := NewMatcher([]string{"nodot"}); err == nil {
		t.Error("NewMatcher(nodot): want an error")
	}
}
