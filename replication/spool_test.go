package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	ot "github.com/pgsync/pgsync/pgoutput/pgoutputtest"
	"github.com/pgsync/pgsync/position"
)

func newTestSpools(t *testing.T) *spoolSet {
	t.Helper()
	s, err := newSpoolSet(filepath.Join(t.TempDir(), "spool"), &Stats{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.close() })
	return s
}

// readAll reads a spool back, keeping every message it was handed: each
// must stay valid after the reads that follow (the applier keeps a run's
// values until it sends them).
func readAll(t *testing.T, sp *spool) []string {
	t.Helper()
	r := spoolReader{f: sp.f}
	var msgs [][]byte
	var xids []uint32
	for {
		xid, m, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
		xids = append(xids, xid)
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = fmt.Sprintf("%d:%s", xids[i], m)
	}
	return out
}

func TestSpoolReadsBackWhatWasAppended(t *testing.T) {
	s := newTestSpools(t)
	var want []string
	if err := s.start(100, true); err != nil {
		t.Fatal(err)
	}
	// Sizes that cross chunk boundaries, and one larger than a chunk.
	for i, n := range []int{0, 1, 100, arenaChunk - 7, 3, arenaChunk * 3, 50, arenaChunk / 2, arenaChunk / 2, 10} {
		body := bytes.Repeat([]byte{byte('a' + i)}, n)
		if err := s.append(100, 'I', body); err != nil {
			t.Fatal(err)
		}
		want = append(want, "100:I"+string(body))
		if i == 4 { // a second segment
			if err := s.stop(); err != nil {
				t.Fatal(err)
			}
			if err := s.start(100, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	sp, err := s.take(100)
	if err != nil || sp == nil {
		t.Fatalf("take: %v, %v", sp, err)
	}
	defer sp.remove()
	if got := readAll(t, sp); !reflect.DeepEqual(got, want) {
		t.Errorf("read back %d messages, want %d (or different bytes)", len(got), len(want))
	}
	if len(want) != 10 {
		t.Fatal(len(want))
	}
	if st, _ := sp.f.Stat(); st.Size() != sp.size || s.stats.SpoolBytes.Load() != sp.size {
		t.Errorf("file %d bytes, spool size %d, stats %d", st.Size(), sp.size, s.stats.SpoolBytes.Load())
	}
}

func TestSpoolAbortOfSubtransactionTruncates(t *testing.T) {
	s := newTestSpools(t)
	appendMsgs := func(msgs ...string) {
		t.Helper()
		for _, m := range msgs {
			var xid uint32
			var v string
			if _, err := fmt.Sscanf(m, "%d:%s", &xid, &v); err != nil {
				t.Fatal(err)
			}
			if err := s.append(xid, 'I', []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	segment := func(first bool, msgs ...string) {
		t.Helper()
		if err := s.start(100, first); err != nil {
			t.Fatal(err)
		}
		appendMsgs(msgs...)
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
	}
	// 100 is the transaction; 101 a savepoint, 102 one nested in it, 103
	// one after 101's release.
	segment(true, "100:a", "101:b", "102:c", "101:d", "100:e")
	segment(false, "103:f", "100:g")
	for _, abort := range []struct{ xid, subxid uint32 }{
		{100, 999}, // nothing of it was spooled
		{100, 103}, // f goes, and g after it (g was written after f)
		{100, 101}, // b, c, d, e go: 102 was nested in it, e came after
	} {
		if err := s.abort(abort.xid, abort.subxid); err != nil {
			t.Fatal(err)
		}
	}
	segment(false, "100:h", "104:i")
	sp, err := s.take(100)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.remove()
	if got, want := readAll(t, sp), []string{"100:Ia", "100:Ih", "104:Ii"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the aborts: %q, want %q", got, want)
	}
	if got := len(sp.subxacts); got != 1 {
		t.Errorf("%d subtransactions remembered, want 1 (104)", got)
	}
}

func TestSpoolAbortOfTransactionRemovesIt(t *testing.T) {
	s := newTestSpools(t)
	for _, xid := range []uint32{100, 200} {
		if err := s.start(xid, true); err != nil {
			t.Fatal(err)
		}
		if err := s.append(xid, 'I', []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.abort(100, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.path(100)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spool of an aborted transaction still there: %v", err)
	}
	if sp, err := s.take(100); sp != nil || err != nil {
		t.Errorf("take of an aborted transaction: %v, %v", sp, err)
	}
	if _, err := os.Stat(s.path(200)); err != nil {
		t.Errorf("spool of the other transaction: %v", err)
	}
	// A new session clears what a killed one left.
	if _, err := newSpoolSet(s.dir, &Stats{}); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(s.dir, "*")); len(left) != 0 {
		t.Errorf("left by the previous session: %v", left)
	}
}

func TestSpoolRefusesBrokenSequences(t *testing.T) {
	for name, steps := range map[string]func(s *spoolSet) error{
		"a later segment first": func(s *spoolSet) error { return s.start(1, false) },
		"start inside a segment": func(s *spoolSet) error {
			_ = s.start(1, true)
			return s.start(2, true)
		},
		"first segment twice": func(s *spoolSet) error {
			_ = s.start(1, true)
			_ = s.stop()
			return s.start(1, true)
		},
		"append outside a segment": func(s *spoolSet) error { return s.append(1, 'I', nil) },
		"stop outside a segment":   func(s *spoolSet) error { return s.stop() },
		"commit inside a segment": func(s *spoolSet) error {
			_ = s.start(1, true)
			_, err := s.take(1)
			return err
		},
		"abort inside a segment": func(s *spoolSet) error {
			_ = s.start(1, true)
			return s.abort(1, 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := steps(newTestSpools(t)); err == nil {
				t.Error("accepted")
			}
		})
	}
}

// TestDispatchStreamedTransactions interleaves two streamed transactions
// with ordinary ones: each streamed one is applied whole at its Stream
// Commit, in the order the commits arrive, without its aborted
// subtransaction; an aborted one leaves nothing.
func TestDispatchStreamedTransactions(t *testing.T) {
	d, app := newTestDispatcher(t, 0x100)
	rel := ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 23, Key: true}})
	ins := func(v string) []byte { return ot.Insert(1, []ot.Value{ot.T(v)}) }
	msgs := [][]byte{
		ot.StreamStart(500, true), ot.Streamed(500, rel), ot.Streamed(500, ins("a1")), ot.Origin(0, "o"), ot.StreamStop(),
		ot.Begin(0x200, 7), rel, ins("small1"), ot.Commit(0x200, 0x230), // commits while 500 is open
		ot.StreamStart(600, true), ot.Streamed(600, rel), ot.Streamed(600, ins("b1")), ot.StreamStop(),
		ot.StreamStart(500, false), ot.Streamed(500, ins("a2")), ot.Streamed(501, ins("a-sub")),
		ot.Streamed(502, ot.Type(16400, "public", "mood")), ot.Streamed(501, ot.Delete(1, 'K', []ot.Value{ot.T("a1")})), ot.StreamStop(),
		ot.StreamStart(700, true), ot.Streamed(700, ins("aborted")), ot.StreamStop(),
		ot.StreamStart(600, false), ot.Streamed(600, ot.Update(1, 0, nil, []ot.Value{ot.T("b2")})), ot.StreamStop(),
		ot.StreamAbort(500, 501),
		ot.StreamCommit(600, 0x300, 0x330, 0), // 600 commits first
		ot.StreamAbort(700, 700),
		ot.StreamStart(500, false), ot.Streamed(500, ot.Truncate(0, 1)), ot.Streamed(500, ins("a3")), ot.StreamStop(),
		ot.Begin(0x380, 8), ins("small2"), ot.Commit(0x380, 0x3b0),
		ot.StreamCommit(500, 0x400, 0x430, 0),
	}
	for i, m := range msgs {
		if err := d.handle(context.Background(), m); err != nil {
			t.Fatalf("message %d (%q): %v", i, m[0], err)
		}
	}
	want := []string{
		"begin 0/200", "I small1", "commit 0/230",
		"begin 0/300", "I b1", "U b2", "commit 0/330",
		"begin 0/380", "I small2", "commit 0/3B0",
		"begin 0/400", "I a1", "I a2", "truncate", "I a3", "commit 0/430",
	}
	if !reflect.DeepEqual(app.trace, want) {
		t.Errorf("applied:\n%s\nwant:\n%s", strings.Join(app.trace, "\n"), strings.Join(want, "\n"))
	}
	if got := d.pos.Applied(); got != 0x430 {
		t.Errorf("applied position %s, want 0/430", got)
	}
	if left, _ := filepath.Glob(filepath.Join(d.spools.dir, "*")); len(left) != 0 {
		t.Errorf("spools left: %v", left)
	}
	if d.stats.SpoolBytes.Load() == 0 || d.stats.Rows.Load() != 7 {
		t.Errorf("spool bytes %d, rows %d (want 7)", d.stats.SpoolBytes.Load(), d.stats.Rows.Load())
	}
}

// PostgreSQL 15 sends no Stream Abort for a subtransaction whose changes it
// spilled to disk before streaming them: the source's commit log says which
// subtransactions aborted, and their changes are skipped; a Relation they
// carried still describes the table.
func TestDispatchSkipsSubxactsTheSourceAborted(t *testing.T) {
	d, app := newTestDispatcher(t, 0)
	var asked [][]uint32
	d.abortedXids = func(_ context.Context, xids []uint32) ([]uint32, error) {
		asked = append(asked, xids)
		return []uint32{501}, nil
	}
	rel := ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 23, Key: true}})
	ins := func(v string) []byte { return ot.Insert(1, []ot.Value{ot.T(v)}) }
	for _, m := range [][]byte{
		ot.StreamStart(600, true), ot.Streamed(600, rel), ot.Streamed(600, ins("no subxacts")), ot.StreamStop(),
		ot.StreamCommit(600, 0x100, 0x130, 0), // not asked about: no subtransaction
		ot.StreamStart(500, true), ot.Streamed(500, ins("top")), ot.Streamed(501, rel), ot.Streamed(501, ins("aborted")),
		ot.Streamed(502, ins("released")), ot.Streamed(500, ins("top again")), ot.StreamStop(),
		ot.StreamCommit(500, 0x200, 0x230, 0),
	} {
		if err := d.handle(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"begin 0/100", "I no subxacts", "commit 0/130", "begin 0/200", "I top", "I released", "I top again", "commit 0/230"}
	if !reflect.DeepEqual(app.trace, want) {
		t.Errorf("applied %q, want %q", app.trace, want)
	}
	if !reflect.DeepEqual(asked, [][]uint32{{501, 502}}) {
		t.Errorf("asked the source about %v, want [[501 502]]", asked)
	}
	if app.relations != 2 {
		t.Errorf("%d Relations applied, want 2", app.relations)
	}

	// When the source cannot say, nothing is applied.
	d.abortedXids = func(context.Context, []uint32) ([]uint32, error) { return nil, errors.New("source gone") }
	for _, m := range [][]byte{ot.StreamStart(700, true), ot.Streamed(701, ins("x")), ot.StreamStop()} {
		if err := d.handle(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.handle(context.Background(), ot.StreamCommit(700, 0x300, 0x330, 0)); err == nil || d.pos.Applied() != 0x230 {
		t.Errorf("commit without the subtransactions' status: %v, position %s", err, d.pos.Applied())
	}
}

func TestFullXid(t *testing.T) {
	for _, tt := range []struct {
		next uint64
		xid  uint32
		want uint64
	}{
		{next: 1000, xid: 999, want: 999},
		{next: 3<<32 | 1000, xid: 999, want: 3<<32 | 999},
		{next: 3<<32 | 1000, xid: 4000000000, want: 2<<32 | 4000000000}, // before the counter wrapped
		{next: 3<<32 | 1000, xid: 1000, want: 2<<32 | 1000},
	} {
		if got := fullXid(tt.next, tt.xid); got != tt.want {
			t.Errorf("fullXid(%#x, %d) = %#x, want %#x", tt.next, tt.xid, got, tt.want)
		}
	}
}

// A streamed transaction that an earlier session applied (its commit lies
// before the resume point) is not applied again, and its spool goes.
func TestDispatchSkipsStreamedTransactionsBeforeResume(t *testing.T) {
	d, app := newTestDispatcher(t, 0x200)
	for _, m := range [][]byte{
		ot.StreamStart(500, true), ot.Streamed(500, ot.Insert(1, []ot.Value{ot.T("1")})), ot.StreamStop(),
		ot.StreamCommit(500, 0x1F0, 0x200, 0),
	} {
		if err := d.handle(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if len(app.trace) != 0 || d.pos.Applied() != 0x200 {
		t.Errorf("applied %v, position %s", app.trace, d.pos.Applied())
	}
	if left, _ := filepath.Glob(filepath.Join(d.spools.dir, "*")); len(left) != 0 {
		t.Errorf("spools left: %v", left)
	}
}

func TestDispatchRefusesBrokenStreams(t *testing.T) {
	ins := ot.Insert(1, []ot.Value{ot.T("1")})
	for name, msgs := range map[string][][]byte{
		"stream commit without a segment":   {ot.StreamCommit(5, 0x100, 0x130, 0)},
		"stream start inside a transaction": {ot.Begin(0x100, 1), ot.StreamStart(5, true)},
		"begin inside a segment":            {ot.StreamStart(5, true), ot.Begin(0x100, 1)},
		"commit inside a segment":           {ot.StreamStart(5, true), ot.Commit(0x100, 0x130)},
		"stream commit inside a segment":    {ot.StreamStart(5, true), ot.StreamCommit(5, 0x100, 0x130, 0)},
		"unstreamed change in a segment":    {ot.StreamStart(5, true), {'I', 0, 0}},
		"xid 0 in a segment":                {ot.StreamStart(5, true), ot.Streamed(0, ins)},
		"xid 0 stream":                      {ot.StreamStart(0, true)},
		"later segment without a first":     {ot.StreamStart(5, false)},
		"stream stop outside a segment":     {ot.StreamStop()},
		"streamed change outside a segment": {ot.Streamed(5, ins)},
	} {
		t.Run(name, func(t *testing.T) {
			d, app := newTestDispatcher(t, 0)
			var err error
			for _, m := range msgs {
				if err = d.handle(context.Background(), m); err != nil {
					break
				}
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if app.changes != 0 || d.pos.Applied() != 0 {
				t.Errorf("applied %d changes, position %s", app.changes, d.pos.Applied())
			}
		})
	}
}

// While a streamed transaction is open, its changes wait in a spool: the
// reader must not acknowledge a keepalive's WAL end past them, whatever the
// queue holds.
func TestOpenStreamsAreInFlight(t *testing.T) {
	r := &reader{pos: position.New(0x100), queue: make(chan walMessage, 1)}
	ack := func(serverEnd pglogrepl.LSN) pglogrepl.LSN { at, _ := r.feedback(serverEnd, false).decide(); return at }
	if got := ack(0x500); got != 0x500 {
		t.Fatalf("idle reader acknowledges %s, want 0/500", got)
	}
	for i, m := range [][]byte{
		ot.StreamStart(9, true),
		ot.StreamStop(),
		ot.StreamStart(10, true),
		ot.StreamStop(),
		ot.StreamAbort(10, 10), // 10 is gone, 9 still open
		ot.StreamAbort(9, 11),  // a subtransaction of 9 only
		ot.StreamCommit(9, 0x600, 0x630, 0),
	} {
		if err := r.track(m); err != nil {
			t.Fatal(err)
		}
		if got := ack(0x500); got != 0x100 {
			t.Errorf("step %d (%q): acknowledged %s, want 0/100: xid 9 is open or not yet applied", i, m[0], got)
		}
	}
	r.pos.AdvanceApplied(0x630)
	if got := ack(0x700); got != 0x700 {
		t.Errorf("drained reader acknowledges %s, want 0/700", got)
	}
}

func TestPluginArgs(t *testing.T) {
	v2 := []string{"proto_version '2'", "streaming 'on'", "publication_names 'p'"}
	v1 := []string{"proto_version '1'", "publication_names 'p'"}
	for version, want := range map[string][]string{
		"15.4 (Debian 15.4-1.pgdg120+1)": v2,
		"14beta1":                        v2,
		"17.0":                           v2,
		"13.16":                          v1,
		"10.23":                          v1,
		"9.6.24":                         v1,
		"":                               v1,
	} {
		if got := pluginArgs(version, "p", false); !reflect.DeepEqual(got, want) {
			t.Errorf("server %q: %q, want %q", version, got, want)
		}
	}
	// Messages (job.ddl = "capture") only where version 2 is asked for.
	withMessages := []string{"proto_version '2'", "streaming 'on'", "messages 'true'", "publication_names 'p'"}
	if got := pluginArgs("15.4", "p", true); !reflect.DeepEqual(got, withMessages) {
		t.Errorf("server 15.4 with messages: %q, want %q", got, withMessages)
	}
	if got := pluginArgs("13.16", "p", true); !reflect.DeepEqual(got, v1) {
		t.Errorf("server 13.16 with messages: %q, want %q", got, v1)
	}
}
