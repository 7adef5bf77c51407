package replication

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/pgsync/pgsync/ddl"
	"github.com/pgsync/pgsync/pgoutput"
)

// The table path of job.ddl = "capture" (issue 31): a source older than
// PostgreSQL 14 decodes no logical decoding message into pgoutput, so its
// capture inserts each signed record as a row of pgsync.ddl, which is in
// the job's publication (ddl.Install). The insert is made in the DDL's
// transaction, after the command: it is decoded at the statement's place,
// where the message would be. The dispatcher turns such an insert back
// into that message (SessionOptions.DDLTable) and hands it to the
// Applier's DDL method, which checks its signature as for any message;
// nothing of pgsync.ddl reaches the Applier as data (the target has no
// such table): not its Relation, not an update or delete an operator ran
// there, not a truncate.

// noteDDLRelation notes r when it is the source's pgsync.ddl and the
// session takes its rows, and says so: such a relation is not handed to an
// Applier.
func (d *dispatcher) noteDDLRelation(r *pgoutput.Relation) bool {
	if !d.ddlTable || r.Schema != ddl.TableSchema || r.Name != ddl.TableName {
		return false
	}
	col := -1
	for i, c := range r.Columns {
		if c.Name == ddl.TableRecordColumn {
			col = i
		}
	}
	if d.ddlRelations == nil {
		d.ddlRelations = map[uint32]int{}
	}
	d.ddlRelations[r.ID] = col
	return true
}

// isDDLTable says whether the relation id is the source's pgsync.ddl.
func (d *dispatcher) isDDLTable(id uint32) bool {
	_, ok := d.ddlRelations[id]
	return ok
}

// ddlRow hands an insert into pgsync.ddl to the Applier as the message it
// stands for; an update or a delete there is no record and is ignored.
func (d *dispatcher) ddlRow(ctx context.Context, c *pgoutput.Change) error {
	if c.Op != pgoutput.MsgInsert {
		return nil
	}
	m, err := d.ddlRowMessage(c)
	if err != nil {
		return err
	}
	return d.ddl(ctx, m)
}

// ddlRowMessage is the message the insert c into pgsync.ddl stands for: a
// transactional message of ddl.Prefix whose content is the row's record,
// at the insert's WAL position (the source sends each change with its own
// record's, as a message carries its own). Content points into c's
// message, like c's values.
func (d *dispatcher) ddlRowMessage(c *pgoutput.Change) (pgoutput.Message, error) {
	col := d.ddlRelations[c.RelationID]
	if col < 0 || col >= len(c.New.Values) || (c.New.Kinds[col] != 't' && c.New.Kinds[col] != 'b') {
		return pgoutput.Message{}, fmt.Errorf("insert into %s.%s at %s: no value of column %s",
			ddl.TableSchema, ddl.TableName, d.walStart, ddl.TableRecordColumn)
	}
	return pgoutput.Message{Transactional: true, LSN: d.walStart, Prefix: ddl.Prefix, Content: c.New.Values[col]}, nil
}

// withoutDDLTable is t without pgsync.ddl: a truncate of it (by an
// operator) is none of the target's.
func (d *dispatcher) withoutDDLTable(t pgoutput.Truncate) pgoutput.Truncate {
	if len(d.ddlRelations) == 0 {
		return t
	}
	kept := t.RelationIDs[:0]
	for _, id := range t.RelationIDs {
		if !d.isDDLTable(id) {
			kept = append(kept, id)
		}
	}
	t.RelationIDs = kept
	return t
}

// spoolDDLTable handles v1, a message of the streamed transaction xid in
// protocol version 1's form, when it concerns pgsync.ddl, and says
// whether it did. Its Relation is noted, and neither spooled nor applied
// early; an insert is spooled as the message it stands for, at the
// insert's WAL position, which a replay from the spool would not know
// otherwise, and ends the early apply as a message of captured DDL does;
// an update or a delete is dropped.
func (d *dispatcher) spoolDDLTable(ctx context.Context, xid uint32, v1 []byte) (bool, error) {
	switch v1[0] {
	case pgoutput.MsgRelation:
		r, err := pgoutput.DecodeRelation(v1)
		if err != nil {
			return false, fmt.Errorf("decode the Relation message in the stream of xid %d: %w", xid, err)
		}
		return d.noteDDLRelation(r), nil
	case pgoutput.MsgInsert, pgoutput.MsgUpdate, pgoutput.MsgDelete:
		// The relation's ID follows the type byte in all three.
		if len(v1) < 5 || !d.isDDLTable(binary.BigEndian.Uint32(v1[1:5])) {
			return false, nil
		}
	default:
		return false, nil
	}
	if v1[0] != pgoutput.MsgInsert {
		return true, nil
	}
	if err := pgoutput.DecodeChange(v1, &d.change); err != nil {
		return true, fmt.Errorf("decode a change in the stream of xid %d: %w", xid, err)
	}
	m, err := d.ddlRowMessage(&d.change)
	if err != nil {
		return true, err
	}
	if e := d.early; e != nil && e.xid == d.spools.cur.xid {
		d.giveUpEarly(ctx, fmt.Errorf("it holds DDL at %s", m.LSN))
	}
	msg := pgoutput.AppendMessage(nil, m)
	return true, d.spools.append(xid, msg[0], msg[1:])
}
