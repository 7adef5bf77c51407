package catalog

import (
	"reflect"
	"testing"
)

// ct builds a ColumnType from format_type's two forms.
func ct(typ, base string) ColumnType { return ColumnType{Type: typ, BaseType: base} }

func TestHolds(t *testing.T) {
	var (
		int2      = ct("smallint", "smallint")
		int4      = ct("integer", "integer")
		int8      = ct("bigint", "bigint")
		num       = ct("numeric", "numeric")
		float4    = ct("real", "real")
		float8    = ct("double precision", "double precision")
		text      = ct("text", "text")
		varchar   = ct("character varying", "character varying")
		json      = ct("json", "json")
		jsonb     = ct("jsonb", "jsonb")
		ts        = ct("timestamp without time zone", "timestamp without time zone")
		tstz      = ct("timestamp with time zone", "timestamp with time zone")
		int4Array = ct("integer[]", "integer[]")
		int8Array = ct("bigint[]", "bigint[]")
	)
	tests := []struct {
		name           string
		source, target ColumnType
		ok             bool
		warn           string
		counterexample string
	}{
		{"same type", int4, int4, true, "", ""},
		{"same modifier", ct("character varying(5)", "character varying"), ct("character varying(5)", "character varying"), true, "", ""},

		// Integer widening, to numeric, to floats that hold it exactly.
		{"smallint to integer", int2, int4, true, "", ""},
		{"smallint to bigint", int2, int8, true, "", ""},
		{"integer to bigint", int4, int8, true, "", ""},
		{"bigint to integer", int8, int4, false, "", "2147483648"},
		{"integer to smallint", int4, int2, false, "", "32768"},
		{"bigint to smallint", int8, int2, false, "", "32768"},
		{"integer to numeric", int4, num, true, "", ""},
		{"bigint to numeric(19,0)", int8, ct("numeric(19,0)", "numeric"), true, "", ""},
		{"bigint to numeric(20)", int8, ct("numeric(20)", "numeric"), true, "", ""},
		{"integer to numeric(12,2)", int4, ct("numeric(12,2)", "numeric"), true, "", ""},
		{"integer to numeric(10,2)", int4, ct("numeric(10,2)", "numeric"), false, "", "100000000"},
		{"smallint to numeric(4,0)", int2, ct("numeric(4,0)", "numeric"), false, "", "10000"},
		{"integer to numeric(12,-2)", int4, ct("numeric(12,-2)", "numeric"), false, "", "1"},
		{"smallint to real", int2, float4, true, "", ""},
		{"integer to real", int4, float4, false, "", "16777217"},
		{"integer to double", int4, float8, true, "", ""},
		{"bigint to double", int8, float8, false, "", "9007199254740993"},
		{"numeric to integer", num, int4, false, "", "0.5"},

		// Floats.
		{"real to double", float4, float8, true, "", ""},
		{"double to real", float8, float4, false, "", "1e+300"},
		{"real to numeric", float4, num, false, "", ""},

		// Numeric modifiers.
		{"numeric(8,2) to numeric(12,4)", ct("numeric(8,2)", "numeric"), ct("numeric(12,4)", "numeric"), true, "", ""},
		{"numeric(8,2) to numeric", ct("numeric(8,2)", "numeric"), num, true, "", ""},
		{"numeric to numeric(10,2)", num, ct("numeric(10,2)", "numeric"), false, "", "100000000"},
		{"numeric(10,2) to numeric(8,2)", ct("numeric(10,2)", "numeric"), ct("numeric(8,2)", "numeric"), false, "", "1000000"},
		{"numeric(10,2) to numeric(10,1)", ct("numeric(10,2)", "numeric"), ct("numeric(10,1)", "numeric"), false, "", "0.01"},
		{"numeric(10,2) to numeric(12,1)", ct("numeric(10,2)", "numeric"), ct("numeric(12,1)", "numeric"), false, "", "0.01"},

		// Strings.
		{"varchar(10) to text", ct("character varying(10)", "character varying"), text, true, "", ""},
		{"varchar(10) to varchar", ct("character varying(10)", "character varying"), varchar, true, "", ""},
		{"varchar(10) to varchar(20)", ct("character varying(10)", "character varying"), ct("character varying(20)", "character varying"), true, "", ""},
		{"varchar(20) to varchar(5)", ct("character varying(20)", "character varying"), ct("character varying(5)", "character varying"), false, "", "a 20-character value"},
		{"varchar to varchar(5)", varchar, ct("character varying(5)", "character varying"), false, "", "a 6-character value"},
		{"text to varchar(5)", text, ct("character varying(5)", "character varying"), false, "", "a 6-character value"},
		{"char(4) to text", ct("character(4)", "character"), text, true, "", ""},
		{"char(4) to varchar(4)", ct("character(4)", "character"), ct("character varying(4)", "character varying"), true, "", ""},
		{"char(4) to varchar(3)", ct("character(4)", "character"), ct("character varying(3)", "character varying"), false, "", "a 4-character value"},
		{"char(3) to char(6)", ct("character(3)", "character"), ct("character(6)", "character"), true, "", ""},
		{"char(6) to char(3)", ct("character(6)", "character"), ct("character(3)", "character"), false, "", "a 6-character value"},
		{"char(3) to bpchar", ct("character(3)", "character"), ct("bpchar", "character"), true, "", ""},
		{"varchar(3) to char(3)", ct("character varying(3)", "character varying"), ct("character(3)", "character"), false, "", ""},
		{"text to integer", text, int4, false, "", ""},

		// Any type to text, arrays included.
		{"boolean to text", ct("boolean", "boolean"), text, true, "", ""},
		{"enum to text", ct("public.mood", "public.mood"), text, true, "", ""},
		{"integer[] to text", int4Array, text, true, "", ""},
		{"uuid to varchar", ct("uuid", "uuid"), varchar, true, "", ""},
		{"uuid to varchar(36)", ct("uuid", "uuid"), ct("character varying(36)", "character varying"), false, "", ""},

		// JSON, time, network, bits.
		{"json to jsonb", json, jsonb, true, "", ""},
		{"jsonb to json", jsonb, json, true, "", ""},
		{"timestamp to timestamptz", ts, tstz, true, TimestampWarning, ""},
		{"timestamp(3) to timestamptz", ct("timestamp(3) without time zone", "timestamp without time zone"), tstz, true, TimestampWarning, ""},
		{"timestamp to timestamptz(3)", ts, ct("timestamp(3) with time zone", "timestamp with time zone"), false, "", "'2000-01-01 00:00:00.123456'"},
		{"timestamptz to timestamp", tstz, ts, false, "", ""},
		{"timestamp(3) to timestamp", ct("timestamp(3) without time zone", "timestamp without time zone"), ts, true, "", ""},
		{"timestamp(3) to timestamp(0)", ct("timestamp(3) without time zone", "timestamp without time zone"), ct("timestamp(0) without time zone", "timestamp without time zone"), false, "", "'2000-01-01 00:00:00.123'"},
		{"time to time(2)", ct("time without time zone", "time without time zone"), ct("time(2) without time zone", "time without time zone"), false, "", "'00:00:00.123456'"},
		{"interval(2) to interval", ct("interval(2)", "interval"), ct("interval", "interval"), true, "", ""},
		{"interval to interval day to second", ct("interval", "interval"), ct("interval day to second", "interval"), true, "", ""},
		{"interval to interval day", ct("interval", "interval"), ct("interval day", "interval"), false, "", "'1 year 2 mons 3 days 04:05:06'"},
		{"interval day to interval hour", ct("interval day", "interval"), ct("interval hour", "interval"), true, "", ""},
		{"interval hour to interval year to month", ct("interval hour", "interval"), ct("interval year to month", "interval"), false, "", "'1 year 2 mons 3 days 04:05:06'"},
		{"interval(6) to interval day to second(3)", ct("interval", "interval"), ct("interval day to second(3)", "interval"), false, "", "'00:00:00.123456'"},
		{"interval year to interval", ct("interval year", "interval"), ct("interval", "interval"), true, "", ""},
		{"date to timestamp", ct("date", "date"), ts, false, "", ""},
		{"cidr to inet", ct("cidr", "cidr"), ct("inet", "inet"), true, "", ""},
		{"inet to cidr", ct("inet", "inet"), ct("cidr", "cidr"), false, "", ""},
		{"bit(8) to varbit(8)", ct("bit(8)", "bit"), ct("bit varying(8)", "bit varying"), true, "", ""},
		{"bit(8) to varbit(4)", ct("bit(8)", "bit"), ct("bit varying(4)", "bit varying"), false, "", "an 8-bit value"},
		{"bit(8) to bit(16)", ct("bit(8)", "bit"), ct("bit(16)", "bit"), false, "", "an 8-bit value"},
		{"varbit(12) to varbit(11)", ct("bit varying(12)", "bit varying"), ct("bit varying(11)", "bit varying"), false, "", "a 12-bit value"},
		{"varbit to varbit(10)", ct("bit varying", "bit varying"), ct("bit varying(10)", "bit varying"), false, "", "an 11-bit value"},
		{"varbit(4) to varbit(8)", ct("bit varying(4)", "bit varying"), ct("bit varying(8)", "bit varying"), true, "", ""},

		// Arrays follow their elements.
		{"integer[] to bigint[]", int4Array, int8Array, true, "", ""},
		{"bigint[] to integer[]", int8Array, int4Array, false, "", "2147483648"},
		{"json[] to jsonb[]", ct("json[]", "json[]"), ct("jsonb[]", "jsonb[]"), true, "", ""},
		{"integer[] to bigint", int4Array, int8, false, "", ""},
		{"integer to bigint[]", int4, int8Array, false, "", ""},
		{"char(3)[] to text[]", ct("character(3)[]", "character[]"), ct("text[]", "text[]"), true, "", ""},

		// Types this rule does not know: only the same one.
		{"domain", int4, ct("public.posint", "public.posint"), false, "", ""},
		{"extension modifier", ct("public.geometry(Point,4326)", "public.geometry"), ct("public.geometry(Point,3857)", "public.geometry"), false, "", ""},
	}
	for _, tt := range tests {
		ok, warn, ce := Holds(tt.source, tt.target)
		if ok != tt.ok || warn != tt.warn || ce != tt.counterexample {
			t.Errorf("%s: Holds(%q, %q) = %v, %q, %q; want %v, %q, %q", tt.name, tt.source.Type, tt.target.Type, ok, warn, ce, tt.ok, tt.warn, tt.counterexample)
		}
	}
}

func TestNarrowing(t *testing.T) {
	if got, want := Narrowing(ct("bigint", "bigint"), ct("integer", "integer"), "2147483648"), "bigint to integer: 2147483648 would not fit"; got != want {
		t.Errorf("Narrowing = %q, want %q", got, want)
	}
	if got, want := Narrowing(ct("text", "text"), ct("integer", "integer"), ""), "text to integer: the target's type does not hold every value of the source's"; got != want {
		t.Errorf("Narrowing = %q, want %q", got, want)
	}
}

func TestComparisonCast(t *testing.T) {
	tests := []struct {
		source, target ColumnType
		want           string
	}{
		{ct("integer", "integer"), ct("integer", "integer"), ""},
		// Text forms that agree: no cast.
		{ct("integer", "integer"), ct("bigint", "bigint"), ""},
		{ct("integer[]", "integer[]"), ct("bigint[]", "bigint[]"), ""},
		{ct("integer", "integer"), ct("double precision", "double precision"), ""},
		{ct("real", "real"), ct("double precision", "double precision"), ""}, // 1.1 stays 1.1
		{ct("character varying(10)", "character varying"), ct("text", "text"), ""},
		{ct("character(4)", "character"), ct("text", "text"), ""}, // ::text would trim the padding
		{ct("character(4)", "character"), ct("character varying(10)", "character varying"), ""},
		{ct("boolean", "boolean"), ct("text", "text"), ""}, // ::text would give "true", the output "t"
		{ct("bit(8)", "bit"), ct("bit varying(8)", "bit varying"), ""},
		// Text forms the target's type changes: cast as its input does.
		{ct("json", "json"), ct("jsonb", "jsonb"), "jsonb"},
		{ct("json[]", "json[]"), ct("jsonb[]", "jsonb[]"), "jsonb[]"},
		{ct("timestamp without time zone", "timestamp without time zone"), ct("timestamp with time zone", "timestamp with time zone"), "timestamp with time zone"},
		{ct("integer", "integer"), ct("numeric(12,2)", "numeric"), "numeric(12,2)"},
		{ct("numeric(8,2)", "numeric"), ct("numeric(12,4)", "numeric"), "numeric(12,4)"},
		{ct("character(3)", "character"), ct("character(6)", "character"), "character(6)"},
		{ct("cidr", "cidr"), ct("inet", "inet"), "inet"},
	}
	for _, tt := range tests {
		if got := ComparisonCast(tt.source, tt.target); got != tt.want {
			t.Errorf("ComparisonCast(%q, %q) = %q, want %q", tt.source.Type, tt.target.Type, got, tt.want)
		}
	}
}

func TestDifferentTypesAndWarnings(t *testing.T) {
	src := &Table{Schema: "public", Name: "t", Columns: []Column{
		{Name: "id", Type: "bigint", BaseType: "bigint"},
		{Name: "code", Type: "character varying(20)", BaseType: "character varying"},
		{Name: "doc", Type: "json", BaseType: "json"},
		{Name: "at", Type: "timestamp without time zone", BaseType: "timestamp without time zone"},
		{Name: "total", Type: "integer", BaseType: "integer", Generated: "id * 2"},
		{Name: "gone", Type: "text", BaseType: "text"},
	}}
	tgt := &Table{Schema: "public", Name: "t", Columns: []Column{
		{Name: "id", Type: "integer", BaseType: "integer"},
		{Name: "code", Type: "character varying(5)", BaseType: "character varying"},
		{Name: "doc", Type: "jsonb", BaseType: "jsonb"},
		{Name: "at", Type: "timestamp with time zone", BaseType: "timestamp with time zone"},
		{Name: "total", Type: "smallint", BaseType: "smallint"}, // generated: computed on each side
	}}
	want := []string{
		"column id: bigint to integer: 2147483648 would not fit",
		"column code: character varying(20) to character varying(5): a 20-character value would not fit",
	}
	if got := DifferentTypes(src, tgt); !reflect.DeepEqual(got, want) {
		t.Errorf("DifferentTypes = %q, want %q", got, want)
	}
	wantWarn := []string{"column at: timestamp without time zone to timestamp with time zone: " + TimestampWarning}
	if got := TypeWarnings(src, tgt); !reflect.DeepEqual(got, wantWarn) {
		t.Errorf("TypeWarnings = %q, want %q", got, wantWarn)
	}
}

func TestNeedsText(t *testing.T) {
	table := func(cols ...Column) *Table { return &Table{Schema: "public", Name: "t", Columns: cols} }
	col := func(name, typ, base string) Column { return Column{Name: name, Type: typ, BaseType: base} }
	tests := []struct {
		name     string
		src, tgt *Table
		want     bool
	}{
		{"same types", table(col("id", "integer", "integer")), table(col("id", "integer", "integer")), false},
		{"modifiers only", table(col("v", "character varying(5)", "character varying"), col("n", "numeric(8,2)", "numeric")),
			table(col("v", "character varying(9)", "character varying"), col("n", "numeric(12,4)", "numeric")), false},
		{"integer to bigint", table(col("id", "integer", "integer")), table(col("id", "bigint", "bigint")), true},
		{"json to jsonb", table(col("id", "integer", "integer"), col("j", "json", "json")), table(col("id", "integer", "integer"), col("j", "jsonb", "jsonb")), true},
		{"a generated column", table(Column{Name: "g", Type: "integer", BaseType: "integer", Generated: "1"}), table(col("g", "bigint", "bigint")), false},
		{"an extra target column", table(col("id", "integer", "integer")), table(col("id", "integer", "integer"), col("x", "text", "text")), false},
	}
	for _, tt := range tests {
		if got := NeedsText(tt.src, tt.tgt); got != tt.want {
			t.Errorf("%s: NeedsText = %v, want %v", tt.name, got, tt.want)
		}
	}
}
