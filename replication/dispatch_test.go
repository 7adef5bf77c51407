package replication

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/pgoutput"
	ot "github.com/pgsync/pgsync/pgoutput/pgoutputtest"
	"github.com/pgsync/pgsync/position"
)

// recordingApplier checks the Applier contract from the dispatcher's side:
// changes only inside a transaction, commits only after a begin, and it
// makes every commit durable.
type recordingApplier struct {
	t       *testing.T
	inTxn   bool
	begins  int
	commits []pglogrepl.LSN
	changes int
	// relations counts the Relation messages.
	relations int
	// trace lists what was applied: "begin <final LSN>", "<op> <first
	// value>", "truncate", "commit <end LSN>".
	trace []string
}

func (a *recordingApplier) Begin(_ context.Context, b pgoutput.Begin) error {
	if a.inTxn {
		a.t.Fatalf("Begin at %s inside a transaction", b.FinalLSN)
	}
	a.inTxn = true
	a.begins++
	a.trace = append(a.trace, "begin "+b.FinalLSN.String())
	return nil
}

func (a *recordingApplier) Relation(context.Context, *pgoutput.Relation) error {
	a.relations++
	return nil
}

func (a *recordingApplier) Change(_ context.Context, c *pgoutput.Change) error {
	if !a.inTxn {
		a.t.Fatal("Change outside a transaction")
	}
	a.changes++
	tuple := c.New
	if c.Op == pgoutput.MsgDelete {
		tuple = c.Old
	}
	first := ""
	if len(tuple.Values) > 0 {
		first = string(tuple.Values[0])
	}
	a.trace = append(a.trace, string(c.Op)+" "+first)
	return nil
}

func (a *recordingApplier) Truncate(context.Context, pgoutput.Truncate) error {
	if !a.inTxn {
		a.t.Fatal("Truncate outside a transaction")
	}
	a.trace = append(a.trace, "truncate")
	return nil
}

func (a *recordingApplier) Commit(_ context.Context, c pgoutput.Commit, _ bool) (pglogrepl.LSN, error) {
	if !a.inTxn {
		a.t.Fatalf("Commit at %s without Begin", c.CommitLSN)
	}
	a.inTxn = false
	a.commits = append(a.commits, c.EndLSN)
	a.trace = append(a.trace, "commit "+c.EndLSN.String())
	return c.EndLSN, nil
}

func (a *recordingApplier) Flush(context.Context) (pglogrepl.LSN, error) { return 0, nil }

func newTestDispatcher(t *testing.T, resume pglogrepl.LSN) (*dispatcher, *recordingApplier) {
	app := &recordingApplier{t: t}
	stats := &Stats{}
	spools, err := newSpoolSet(filepath.Join(t.TempDir(), "spool"), stats)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spools.close() })
	return &dispatcher{app: app, pos: position.New(resume), stats: stats, resume: resume, spools: spools, log: slog.New(slog.DiscardHandler)}, app
}

func TestDispatchSkipsTransactionsBeforeResume(t *testing.T) {
	d, app := newTestDispatcher(t, 0x200)
	rel := ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 23, Key: true}})
	msgs := [][]byte{
		rel,
		ot.Begin(0x100, 1), ot.Insert(1, []ot.Value{ot.T("1")}), ot.Commit(0x100, 0x130), // applied before: skipped
		ot.Begin(0x1F0, 2), ot.Insert(1, []ot.Value{ot.T("2")}), ot.Commit(0x1F0, 0x200), // the last one applied: skipped
		ot.Begin(0x200, 3), ot.Insert(1, []ot.Value{ot.T("3")}), ot.Commit(0x200, 0x230), // new
		ot.Begin(0x300, 4), ot.Truncate(0, 1), ot.Commit(0x300, 0x330),
	}
	for _, m := range msgs {
		if err := d.handle(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if app.begins != 2 || app.changes != 1 || len(app.commits) != 2 {
		t.Errorf("begins %d, changes %d, commits %v; want 2, 1, two commits", app.begins, app.changes, app.commits)
	}
	if got := d.pos.Applied(); got != 0x330 {
		t.Errorf("applied = %s, want 0/330", got)
	}
}

func TestDispatchRefusesBrokenSequences(t *testing.T) {
	ins := ot.Insert(1, []ot.Value{ot.T("1")})
	for name, msgs := range map[string][][]byte{
		"change outside a transaction": {ins},
		"commit without begin":         {ot.Commit(0x100, 0x130)},
		"begin inside a transaction":   {ot.Begin(0x100, 1), ot.Begin(0x200, 2)},
		"truncate outside":             {ot.Truncate(0, 1)},
		"unknown type":                 {{'Z', 0, 0}},
		"empty message":                {{}},
		"short begin":                  {{'B', 0, 0}},
	} {
		t.Run(name, func(t *testing.T) {
			d, _ := newTestDispatcher(t, 0)
			var err error
			for _, m := range msgs {
				if err = d.handle(context.Background(), m); err != nil {
					break
				}
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if d.pos.Applied() != 0 {
				t.Errorf("position moved to %s", d.pos.Applied())
			}
		})
	}
}

// FuzzDispatch feeds arbitrary message sequences (each message prefixed by
// its 2-byte length) to the dispatcher: it applies them or stops with an
// error, never panics, never hands the applier a change outside a
// transaction, and moves the applied position only to the end of a commit
// it handed over, never backwards.
func FuzzDispatch(f *testing.F) {
	rel := ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "v", TypeOID: 25}})
	f.Add(frame(rel, ot.Begin(0x100, 1), ot.Insert(1, []ot.Value{ot.T("1"), ot.Null}), ot.Commit(0x100, 0x130)))
	f.Add(frame(ot.Begin(0x100, 1), ot.Update(1, 'K', []ot.Value{ot.T("1"), ot.Null}, []ot.Value{ot.T("2"), ot.Unchanged}),
		ot.Delete(1, 'K', []ot.Value{ot.T("2"), ot.Null}), ot.Commit(0x100, 0x130), ot.Begin(0x10, 2), ot.Commit(0x10, 0x20)))
	f.Add(frame(ot.Begin(0x100, 1), ot.Truncate(3, 1, 2), ot.Commit(0x100, 0x130)))
	f.Add(frame(ot.Commit(0x100, 0x130), ot.Begin(0x100, 1)))
	f.Add(frame(ot.StreamStart(9, true), ot.Streamed(9, rel), ot.Streamed(9, ot.Insert(1, []ot.Value{ot.T("1"), ot.Null})),
		ot.Streamed(10, ot.Insert(1, []ot.Value{ot.T("2"), ot.Null})), ot.StreamStop(),
		ot.Begin(0x100, 1), ot.Insert(1, []ot.Value{ot.T("3"), ot.Null}), ot.Commit(0x100, 0x130),
		ot.StreamAbort(9, 10), ot.StreamCommit(9, 0x200, 0x230, 0)))
	f.Add(frame(ot.StreamStart(9, true), ot.Streamed(9, ot.Truncate(0, 1)), ot.StreamStop(), ot.StreamAbort(9, 9), ot.StreamCommit(9, 0x200, 0x230, 0)))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, app := newTestDispatcher(t, 0x80)
		last := d.pos.Applied()
		for len(data) >= 2 {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				n = len(data)
			}
			msg := data[:n]
			data = data[n:]
			err := d.handle(context.Background(), msg)
			applied := d.pos.Applied()
			if applied < last {
				t.Fatalf("applied went back from %s to %s", last, applied)
			}
			if applied != last && (len(app.commits) == 0 || app.commits[len(app.commits)-1] != applied) {
				t.Fatalf("applied moved to %s, not the end of a commit handed over (%v)", applied, app.commits)
			}
			last = applied
			if err != nil {
				return
			}
		}
	})
}

func frame(msgs ...[]byte) []byte {
	var b []byte
	for _, m := range msgs {
		if len(m) > 0xFFFF {
			panic(fmt.Sprintf("message of %d bytes", len(m)))
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	return b
}

// ddlRecorder is a recordingApplier that takes captured DDL
// (DDLApplier) and traces it as "ddl <content>".
type ddlRecorder struct{ *recordingApplier }

func (a ddlRecorder) DDL(_ context.Context, m pgoutput.Message) error {
	if !a.inTxn {
		a.t.Fatal("DDL outside a transaction")
	}
	a.trace = append(a.trace, "ddl "+string(m.Content))
	return nil
}

// TestDispatchDDLMessages: a transactional message of ddl.Prefix goes to
// the Applier at its place between the transaction's changes; one of
// another prefix, a non-transactional one, and one in a transaction
// applied before are not handed over.
func TestDispatchDDLMessages(t *testing.T) {
	d, app := newTestDispatcher(t, 0x200)
	rec := ddlRecorder{app}
	d.app = rec
	rel := ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 23, Key: true}})
	msgs := [][]byte{
		rel,
		ot.Begin(0x100, 1), ot.Message(true, 0xF0, "pgsync_ddl", []byte("old")), ot.Commit(0x100, 0x130), // applied before
		ot.Begin(0x300, 2), ot.Insert(1, []ot.Value{ot.T("1")}),
		ot.Message(true, 0x2F0, "pgsync_ddl", []byte("ALTER")),
		ot.Message(true, 0x2F8, "someone_else", []byte("x")),
		ot.Insert(1, []ot.Value{ot.T("2")}), ot.Commit(0x300, 0x330),
		ot.Message(false, 0x340, "pgsync_ddl", []byte("not transactional")),
	}
	for _, m := range msgs {
		if err := d.handle(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	want := "begin 0/300,I 1,ddl ALTER,I 2,commit 0/330"
	if got := strings.Join(rec.trace, ","); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
	// An Applier that takes no DDL is not handed one silently.
	d2, _ := newTestDispatcher(t, 0)
	for _, m := range [][]byte{ot.Begin(0x300, 2), ot.Message(true, 0x2F0, "pgsync_ddl", []byte("ALTER"))} {
		if err := d2.handle(context.Background(), m); err != nil && m[0] != 'M' {
			t.Fatal(err)
		} else if m[0] == 'M' && err == nil {
			t.Error("a DDL message handed to an Applier without DDL returned no error")
		}
	}
}
