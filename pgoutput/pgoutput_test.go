package pgoutput_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgsync/pgsync/pgoutput"
	ot "github.com/pgsync/pgsync/pgoutput/pgoutputtest"
)

func TestDecodeBeginCommit(t *testing.T) {
	b, err := pgoutput.DecodeBegin(ot.Begin(0x1_0000_0010, 77))
	if err != nil || b.FinalLSN != 0x1_0000_0010 || b.Xid != 77 {
		t.Errorf("begin = %+v, %v", b, err)
	}
	c, err := pgoutput.DecodeCommit(ot.Commit(0x20, 0x48))
	if err != nil || c.CommitLSN != 0x20 || c.EndLSN != 0x48 {
		t.Errorf("commit = %+v, %v", c, err)
	}
}

func TestDecodeStreamMessages(t *testing.T) {
	s, err := pgoutput.DecodeStreamStart(ot.StreamStart(900, true))
	if err != nil || s != (pgoutput.StreamStart{Xid: 900, First: true}) {
		t.Errorf("stream start = %+v, %v", s, err)
	}
	s, err = pgoutput.DecodeStreamStart(ot.StreamStart(900, false))
	if err != nil || s != (pgoutput.StreamStart{Xid: 900}) {
		t.Errorf("later stream start = %+v, %v", s, err)
	}
	const micros = 800_000_000_123_456 // 2025-05-08, to the microsecond
	c, err := pgoutput.DecodeStreamCommit(ot.StreamCommit(900, 0x1_0000_0020, 0x1_0000_0048, micros))
	want := pgoutput.StreamCommit{Xid: 900, Commit: pgoutput.Commit{CommitLSN: 0x1_0000_0020, EndLSN: 0x1_0000_0048,
		Time: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(micros * time.Microsecond)}}
	if err != nil || c != want {
		t.Errorf("stream commit = %+v, %v; want %+v", c, err, want)
	}
	a, err := pgoutput.DecodeStreamAbort(ot.StreamAbort(900, 904))
	if err != nil || a != (pgoutput.StreamAbort{Xid: 900, SubXid: 904}) {
		t.Errorf("stream abort = %+v, %v", a, err)
	}
}

// Inside a stream, each message that carries an xid decodes, once split, as
// the protocol 1 message it wraps.
func TestSplitStreamed(t *testing.T) {
	for _, m := range [][]byte{
		ot.Relation(16384, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 23, Key: true}}),
		ot.Type(16400, "public", "mood"),
		ot.Insert(16384, []ot.Value{ot.T("1")}),
		ot.Update(16384, 'K', []ot.Value{ot.T("1")}, []ot.Value{ot.T("2")}),
		ot.Delete(16384, 'K', []ot.Value{ot.T("2")}),
		ot.Truncate(pgoutput.TruncateCascade, 16384, 16390),
		ot.Message(true, 0x30, "app", []byte("hello")),
	} {
		xid, body, err := pgoutput.SplitStreamed(ot.Streamed(0xDEADBEEF, m))
		if err != nil || xid != 0xDEADBEEF {
			t.Errorf("%q: xid %d, %v", m[0], xid, err)
			continue
		}
		if got := append([]byte{m[0]}, body...); !bytes.Equal(got, m) {
			t.Errorf("%q: split to %q, want %q", m[0], got, m)
		}
	}
	for _, m := range [][]byte{
		ot.Origin(0x10, "node_a"), // no xid, even in a stream
		ot.Begin(1, 2), ot.Commit(1, 2), ot.StreamStart(1, true), ot.StreamStop(),
		{'I', 0, 0, 1}, // too short for an xid
		{},
	} {
		if _, _, err := pgoutput.SplitStreamed(m); err == nil {
			t.Errorf("%q split without error", m)
		}
	}
}

func TestDecodeRelation(t *testing.T) {
	msg := ot.Relation(16384, "public", "Mixed Case", 'f', []ot.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "v", TypeOID: 25}})
	r, err := pgoutput.DecodeRelation(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := &pgoutput.Relation{ID: 16384, Schema: "public", Name: "Mixed Case", ReplicaIdentity: 'f',
		Columns: []pgoutput.Column{{Name: "id", TypeOID: 23, TypMod: -1, Key: true}, {Name: "v", TypeOID: 25, TypMod: -1}}}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("relation = %+v, want %+v", r, want)
	}
}

func values(t pgoutput.Tuple) []string {
	out := make([]string, len(t.Kinds))
	for i, k := range t.Kinds {
		out[i] = string(k) + ":" + string(t.Values[i])
	}
	return out
}

func TestDecodeChanges(t *testing.T) {
	cases := []struct {
		name     string
		msg      []byte
		op       byte
		oldKind  byte
		old, new []string
	}{
		{"insert", ot.Insert(5, []ot.Value{ot.T("1"), ot.Null, ot.T("")}), 'I', 0, []string{}, []string{"t:1", "n:", "t:"}},
		{"update without old", ot.Update(5, 0, nil, []ot.Value{ot.T("1"), ot.Unchanged}), 'U', 0, []string{}, []string{"t:1", "u:"}},
		{"update with key", ot.Update(5, 'K', []ot.Value{ot.T("1"), ot.Null}, []ot.Value{ot.T("2"), ot.T("x")}), 'U', 'K', []string{"t:1", "n:"}, []string{"t:2", "t:x"}},
		{"update with old row", ot.Update(5, 'O', []ot.Value{ot.T("1"), ot.T("a")}, []ot.Value{ot.T("1"), ot.T("b")}), 'U', 'O', []string{"t:1", "t:a"}, []string{"t:1", "t:b"}},
		{"delete", ot.Delete(5, 'K', []ot.Value{ot.T("9"), ot.Null}), 'D', 'K', []string{"t:9", "n:"}, []string{}},
	}
	var c pgoutput.Change // reused across cases, as the applier does
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := pgoutput.DecodeChange(tc.msg, &c); err != nil {
				t.Fatal(err)
			}
			if c.Op != tc.op || c.OldKind != tc.oldKind || c.RelationID != 5 {
				t.Errorf("op %q old %q rel %d", c.Op, c.OldKind, c.RelationID)
			}
			if got := values(c.Old); !reflect.DeepEqual(got, tc.old) {
				t.Errorf("old = %v, want %v", got, tc.old)
			}
			if got := values(c.New); !reflect.DeepEqual(got, tc.new) {
				t.Errorf("new = %v, want %v", got, tc.new)
			}
		})
	}
}

func TestDecodeTruncate(t *testing.T) {
	tr, err := pgoutput.DecodeTruncate(ot.Truncate(pgoutput.TruncateCascade|pgoutput.TruncateRestartIdentity, 1, 2, 3))
	if err != nil || tr.Options != 3 || !reflect.DeepEqual(tr.RelationIDs, []uint32{1, 2, 3}) {
		t.Errorf("truncate = %+v, %v", tr, err)
	}
}

// Every prefix of a valid message is an error, never a panic: the bytes
// come from the network.
func TestDecodeTruncatedMessages(t *testing.T) {
	msgs := [][]byte{
		ot.Begin(1, 2), ot.Commit(1, 2),
		ot.Relation(1, "s", "t", 'd', []ot.Column{{Name: "a", TypeOID: 23, Key: true}}),
		ot.Insert(1, []ot.Value{ot.T("abc"), ot.Null}),
		ot.Update(1, 'O', []ot.Value{ot.T("a")}, []ot.Value{ot.T("b")}),
		ot.Delete(1, 'K', []ot.Value{ot.T("a")}),
		ot.Truncate(0, 1, 2),
		ot.StreamStart(7, true), ot.StreamCommit(7, 1, 2, 3), ot.StreamAbort(7, 8),
		ot.Message(true, 0x30, "pgsync_ddl", []byte(`{"q":1}`)),
	}
	var c pgoutput.Change
	for _, m := range msgs {
		for n := 1; n < len(m); n++ {
			if err := decodeAny(m[:n], &c); err == nil {
				t.Errorf("%q cut to %d bytes decoded without error", m[0], n)
			}
		}
		if err := decodeAny(m, &c); err != nil {
			t.Errorf("%q: %v", m[0], err)
		}
	}
}

func decodeAny(m []byte, c *pgoutput.Change) error {
	var err error
	switch m[0] {
	case 'B':
		_, err = pgoutput.DecodeBegin(m)
	case 'C':
		_, err = pgoutput.DecodeCommit(m)
	case 'R':
		_, err = pgoutput.DecodeRelation(m)
	case 'T':
		_, err = pgoutput.DecodeTruncate(m)
	case 'S':
		_, err = pgoutput.DecodeStreamStart(m)
	case 'c':
		_, err = pgoutput.DecodeStreamCommit(m)
	case 'A':
		_, err = pgoutput.DecodeStreamAbort(m)
	case 'M':
		_, err = pgoutput.DecodeMessage(m)
	default:
		err = pgoutput.DecodeChange(m, c)
	}
	return err
}

// TestDecodeMessage: a logical decoding message's flags, LSN, prefix and
// content, transactional or not, empty content included; AppendMessage
// encodes it back.
func TestDecodeMessage(t *testing.T) {
	for _, tc := range []struct {
		transactional bool
		lsn           uint64
		prefix        string
		content       string
	}{
		{true, 0x1_0000_0040, "pgsync_ddl", `{"query":"ALTER TABLE t ADD c int"}`},
		{false, 0x20, "other", ""},
	} {
		wire := ot.Message(tc.transactional, tc.lsn, tc.prefix, []byte(tc.content))
		m, err := pgoutput.DecodeMessage(wire)
		if err != nil || m.Transactional != tc.transactional || uint64(m.LSN) != tc.lsn || m.Prefix != tc.prefix || string(m.Content) != tc.content {
			t.Errorf("message = %+v (content %q), %v; want %+v", m, m.Content, err, tc)
		}
		// AppendMessage is its inverse, byte for byte.
		if got := pgoutput.AppendMessage([]byte("x"), m); string(got) != "x"+string(wire) {
			t.Errorf("AppendMessage(%+v) = %q, want %q", m, got[1:], wire)
		}
	}
}

func TestDecodeRejectsUnknownKinds(t *testing.T) {
	msg := ot.Insert(1, []ot.Value{ot.T("a")})
	msg[len(msg)-1-4-1] = 'z' // the kind byte of the only column
	var c pgoutput.Change
	if err := pgoutput.DecodeChange(msg, &c); err == nil || !strings.Contains(err.Error(), "unknown tuple value kind") {
		t.Errorf("err = %v", err)
	}
	if err := pgoutput.DecodeChange([]byte{'X', 0, 0, 0, 1}, &c); err == nil {
		t.Error("a non-change message decoded as a change")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(ot.Insert(1, []ot.Value{ot.T("abc"), ot.Null, ot.Unchanged}))
	f.Add(ot.Update(1, 'K', []ot.Value{ot.T("a")}, []ot.Value{ot.T("b")}))
	f.Add(ot.Relation(1, "s", "t", 'd', []ot.Column{{Name: "a", TypeOID: 23, Key: true}}))
	f.Add(ot.Truncate(1, 5))
	f.Add(ot.StreamStart(7, true))
	f.Add(ot.StreamCommit(7, 0x100, 0x130, 1))
	f.Add(ot.StreamAbort(7, 9))
	f.Add(ot.Message(true, 0x40, "pgsync_ddl", []byte("{}")))
	f.Add(ot.Streamed(9, ot.Insert(1, []ot.Value{ot.T("abc")})))
	f.Fuzz(func(t *testing.T, m []byte) {
		if len(m) == 0 {
			return
		}
		var c pgoutput.Change
		_ = decodeAny(m, &c)
		// A streamed message, once split, is its type byte and a body
		// that ends the message, the xid between them; the body then
		// decodes or fails like any message.
		if _, body, err := pgoutput.SplitStreamed(m); err == nil {
			if len(body) != len(m)-5 || !bytes.Equal(body, m[5:]) {
				t.Fatalf("split %q into a body of %d bytes", m, len(body))
			}
			_ = decodeAny(append([]byte{m[0]}, body...), &c)
		}
	})
}

// benchRow is a row shaped like the benchmark dataset: about 140 bytes of
// text over five columns.
var benchRow = []ot.Value{ot.T("123456"), ot.T("customer-123456-some-descriptive-text-to-pad-the-row-out"), ot.T("4242"),
	ot.T("2026-11-30 12:34:56.123456+00"), ot.T("98765.4321")}

// BenchmarkDecodeChange measures decoding one row change. Its allocs/op is
// the figure later changes must not make worse (docs/benchmarks.md).
func BenchmarkDecodeChange(b *testing.B) {
	msgs := map[string][]byte{
		"insert": ot.Insert(1, benchRow),
		"update": ot.Update(1, 0, nil, benchRow),
		"delete": ot.Delete(1, 'K', []ot.Value{ot.T("123456"), ot.Null, ot.Null, ot.Null, ot.Null}),
	}
	for _, name := range []string{"insert", "update", "delete"} {
		msg := msgs[name]
		b.Run(name, func(b *testing.B) {
			var c pgoutput.Change
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				if err := pgoutput.DecodeChange(msg, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
