package replication

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/pgoutput"
	ot "github.com/pgsync/pgsync/pgoutput/pgoutputtest"
)

// openingApplier is a recordingApplier that can open a StreamedApplier; both
// write into one trace, the main one's lines prefixed "main", the streamed
// one's "early".
type openingApplier struct {
	recordingApplier
	trace *[]string
}

func (a *openingApplier) Flush(context.Context) (pglogrepl.LSN, error) {
	*a.trace = append(*a.trace, "main flush")
	return 0, nil
}

func (a *openingApplier) OpenStreamed(context.Context) (StreamedApplier, error) {
	*a.trace = append(*a.trace, "early open")
	return &earlyFake{trace: a.trace}, nil
}

// earlyFake is a StreamedApplier that records what it is given.
type earlyFake struct {
	trace *[]string
}

func (e *earlyFake) add(s string) { *e.trace = append(*e.trace, "early "+s) }

func (e *earlyFake) Begin(_ context.Context, b pgoutput.Begin) error {
	e.add("begin " + b.FinalLSN.String())
	return nil
}
func (e *earlyFake) Relation(context.Context, *pgoutput.Relation) error {
	e.add("relation")
	return nil
}
func (e *earlyFake) Change(_ context.Context, c *pgoutput.Change) error {
	e.add(string(c.Op) + " " + string(c.New.Values[0]))
	return nil
}
func (e *earlyFake) Truncate(context.Context, pgoutput.Truncate) error { e.add("truncate"); return nil }
func (e *earlyFake) Commit(_ context.Context, c pgoutput.Commit, more bool) (pglogrepl.LSN, error) {
	if more {
		e.add("commit with more")
	}
	e.add("commit " + c.EndLSN.String())
	return c.EndLSN, nil
}
func (e *earlyFake) Flush(context.Context) (pglogrepl.LSN, error) { return 0, nil }
func (e *earlyFake) Push(context.Context) error                   { e.add("push"); return nil }
func (e *earlyFake) Close(context.Context) error                  { e.add("close"); return nil }

func newEarlyDispatcher(t *testing.T) (*dispatcher, *openingApplier, *[]string) {
	d, rec := newTestDispatcher(t, 0x100)
	trace := &rec.trace
	app := &openingApplier{recordingApplier: *rec, trace: trace}
	app.recordingApplier.trace = nil
	d.app = app
	return d, app, trace
}

// TestDispatchAppliesStreamedTransactionAsItArrives: the streamed
// transaction goes to a second Applier as its segments arrive; the main
// one commits its group before each segment and before the streamed
// commit, which comes in the source's commit order with the position at
// its end; the relations it described then go to the main Applier.
func TestDispatchAppliesStreamedTransactionAsItArrives(t *testing.T) {
	d, app, trace := newEarlyDispatcher(t)
	rel := ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 23, Key: true}})
	ins := func(v string) []byte { return ot.Insert(1, []ot.Value{ot.T(v)}) }
	msgs := [][]byte{
		ot.StreamStart(500, true), ot.Streamed(500, rel), ot.Streamed(500, ins("a1")), ot.StreamStop(),
		ot.Begin(0x200, 7), ins("small1"), ot.Commit(0x200, 0x230),
		ot.StreamStart(500, false), ot.Streamed(500, ins("a2")), ot.StreamStop(),
		ot.StreamCommit(500, 0x300, 0x330, 0),
	}
	for i, m := range msgs {
		if err := d.handle(context.Background(), m); err != nil {
			t.Fatalf("message %d (%q): %v", i, m[0], err)
		}
	}
	// The main Applier's own lines go to its recordingApplier trace.
	main := app.recordingApplier.trace
	if want := []string{"begin 0/200", "I small1", "commit 0/230"}; !reflect.DeepEqual(main, want) {
		t.Errorf("main Applier:\n%s\nwant:\n%s", strings.Join(main, "\n"), strings.Join(want, "\n"))
	}
	want := []string{
		"early open", "main flush", "early begin 0/0", "early relation", "early I a1", "early push",
		"main flush", "early begin 0/0", "early I a2", "early push",
		"main flush", "early begin 0/300", "early commit 0/330", "early close",
	}
	if !reflect.DeepEqual(*trace, want) {
		t.Errorf("sequence:\n%s\nwant:\n%s", strings.Join(*trace, "\n"), strings.Join(want, "\n"))
	}
	if app.relations != 1 {
		t.Errorf("the main Applier got %d Relation messages after the commit, want the 1 the stream carried", app.relations)
	}
	if got := d.pos.Applied(); got != 0x330 {
		t.Errorf("applied position %s, want 0/330", got)
	}
	if d.stats.Rows.Load() != 3 || d.stats.Txns.Load() != 2 {
		t.Errorf("rows %d txns %d, want 3 and 2", d.stats.Rows.Load(), d.stats.Txns.Load())
	}
}

// TestDispatchGivesUpEarlyApplyAtSubtransaction: a change of a
// subtransaction ends the early apply (it may still roll back alone); the
// transaction is applied whole from its spool at its commit, by the main
// Applier, and the rows counted early are not counted twice.
func TestDispatchGivesUpEarlyApplyAtSubtransaction(t *testing.T) {
	d, app, trace := newEarlyDispatcher(t)
	rel := ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 23, Key: true}})
	ins := func(v string) []byte { return ot.Insert(1, []ot.Value{ot.T(v)}) }
	msgs := [][]byte{
		ot.StreamStart(500, true), ot.Streamed(500, rel), ot.Streamed(500, ins("a1")),
		ot.Streamed(501, ins("sub")), ot.Streamed(500, ins("a2")), ot.StreamStop(),
		ot.StreamCommit(500, 0x300, 0x330, 0),
	}
	for i, m := range msgs {
		if err := d.handle(context.Background(), m); err != nil {
			t.Fatalf("message %d (%q): %v", i, m[0], err)
		}
	}
	want := []string{"early open", "main flush", "early begin 0/0", "early relation", "early I a1", "early close"}
	if !reflect.DeepEqual(*trace, want) {
		t.Errorf("sequence:\n%s\nwant:\n%s", strings.Join(*trace, "\n"), strings.Join(want, "\n"))
	}
	main := app.recordingApplier.trace
	if want := []string{"begin 0/300", "I a1", "I sub", "I a2", "commit 0/330"}; !reflect.DeepEqual(main, want) {
		t.Errorf("replayed by the main Applier:\n%s\nwant:\n%s", strings.Join(main, "\n"), strings.Join(want, "\n"))
	}
	if d.stats.Rows.Load() != 3 {
		t.Errorf("rows %d, want 3", d.stats.Rows.Load())
	}
}
