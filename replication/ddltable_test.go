package replication

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgsync/pgsync/pgoutput"
	ot "github.com/pgsync/pgsync/pgoutput/pgoutputtest"
)

// ddlAtRecorder is a recordingApplier that takes captured DDL and traces
// it as "ddl <content> at <LSN>", and each truncate with its relations.
type ddlAtRecorder struct{ *recordingApplier }

func (a ddlAtRecorder) DDL(_ context.Context, m pgoutput.Message) error {
	if !a.inTxn {
		a.t.Fatal("DDL outside a transaction")
	}
	if !m.Transactional || m.Prefix != "pgsync_ddl" {
		a.t.Errorf("DDL handed over as %+v, want a transactional pgsync_ddl message", m)
	}
	a.trace = append(a.trace, "ddl "+string(m.Content)+" at "+m.LSN.String())
	return nil
}

// ddlTableMsgs is a source's stream of the table path: an insert into
// pgsync.ddl (relation 9) between two rows of t (relation 1), and what an
// operator may do to pgsync.ddl besides. walStart is each message's WAL
// position.
func ddlTableMsgs() (msgs [][]byte, walStart []pglogrepl.LSN) {
	rel := ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 23, Key: true}})
	ddlRel := ot.Relation(9, "pgsync", "ddl", 'd', []ot.Column{{Name: "seq", TypeOID: 20, Key: true}, {Name: "job", TypeOID: 25}, {Name: "record", TypeOID: 25}})
	row := []ot.Value{ot.T("1"), ot.T("j"), ot.T(`{"payload":"ALTER"}`)}
	msgs = [][]byte{
		rel, ddlRel,
		ot.Begin(0x300, 2), ot.Insert(1, []ot.Value{ot.T("1")}),
		ot.Insert(9, row),
		ot.Update(9, 0, nil, row), ot.Delete(9, 'K', []ot.Value{ot.T("1"), ot.Null, ot.Null}),
		ot.Insert(1, []ot.Value{ot.T("2")}), ot.Truncate(0, 9), ot.Truncate(0, 1, 9), ot.Commit(0x300, 0x330),
	}
	walStart = make([]pglogrepl.LSN, len(msgs))
	for i := range walStart {
		walStart[i] = pglogrepl.LSN(0x2E0 + 8*i)
	}
	return msgs, walStart
}

// TestDispatchDDLTable: with SessionOptions.DDLTable, an insert into the
// source's pgsync.ddl goes to the Applier as the pgsync_ddl message it
// stands for, at its place and at its WAL position; nothing of that table
// reaches the Applier as data (its Relation, an update, a delete, a
// truncate). Without it, the table is data like any other (a source of 14
// or later that carries messages never publishes it).
func TestDispatchDDLTable(t *testing.T) {
	d, app := newTestDispatcher(t, 0)
	d.app, d.ddlTable = ddlAtRecorder{app}, true
	msgs, walStart := ddlTableMsgs()
	for i, m := range msgs {
		d.walStart = walStart[i]
		if err := d.handle(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	want := `begin 0/300,I 1,ddl {"payload":"ALTER"} at 0/300,I 2,truncate,commit 0/330`
	if got := strings.Join(app.trace, ","); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
	if app.relations != 1 || app.changes != 2 {
		t.Errorf("relations %d, changes %d handed to the Applier; want 1 and 2 (none of pgsync.ddl)", app.relations, app.changes)
	}

	off, offApp := newTestDispatcher(t, 0)
	msgs, _ = ddlTableMsgs()
	for _, m := range msgs {
		if err := off.handle(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if offApp.relations != 2 || offApp.changes != 5 {
		t.Errorf("without DDLTable: relations %d, changes %d; want 2 and 5", offApp.relations, offApp.changes)
	}
}

// TestDispatchDDLTableStreamed: in a streamed transaction, an insert into
// pgsync.ddl is spooled as the message it stands for, at the insert's
// own WAL position (the replay at the commit knows only the commit's), and
// is applied at its place at the commit.
func TestDispatchDDLTableStreamed(t *testing.T) {
	d, app := newTestDispatcher(t, 0)
	d.app, d.ddlTable = ddlAtRecorder{app}, true
	rel := ot.Relation(1, "public", "t", 'd', []ot.Column{{Name: "id", TypeOID: 23, Key: true}})
	ddlRel := ot.Relation(9, "pgsync", "ddl", 'd', []ot.Column{{Name: "seq", TypeOID: 20, Key: true}, {Name: "job", TypeOID: 25}, {Name: "record", TypeOID: 25}})
	msgs := [][]byte{
		ot.StreamStart(500, true), ot.Streamed(500, rel), ot.Streamed(500, ot.Insert(1, []ot.Value{ot.T("1")})),
		ot.Streamed(500, ddlRel), ot.Streamed(500, ot.Insert(9, []ot.Value{ot.T("1"), ot.T("j"), ot.T("ALTER")})),
		ot.Streamed(500, ot.Insert(1, []ot.Value{ot.T("2")})), ot.StreamStop(),
		ot.StreamCommit(500, 0x400, 0x430, 0),
	}
	for i, m := range msgs {
		d.walStart = pglogrepl.LSN(0x100 + 0x10*i)
		if err := d.handle(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	want := "begin 0/400,I 1,ddl ALTER at 0/140,I 2,commit 0/430"
	if got := strings.Join(app.trace, ","); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
	if app.relations != 1 {
		t.Errorf("%d relations handed to the Applier, want 1 (not pgsync.ddl)", app.relations)
	}
}
