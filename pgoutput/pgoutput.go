// Package pgoutput decodes the messages of PostgreSQL's pgoutput logical
// decoding plugin (protocol versions 1 and 2) and holds the change model that
// the replication and apply packages share.
//
// Protocol version 2 adds streamed transactions (issue 18): a transaction
// larger than the source's logical_decoding_work_mem is sent while it runs,
// in segments between Stream Start and Stream Stop, and ends with Stream
// Commit or Stream Abort. Inside a segment, Relation, Type, Insert, Update,
// Delete, Truncate and Message carry the xid of their (sub)transaction
// after the type byte; SplitStreamed takes it off, and the rest is the
// message as protocol version 1 sends it.
//
// Decoding is allocation-free on the per-row path: tuple values are slices
// of the message buffer, and Tuple's slices are reused from one row to the
// next. A decoded value is therefore valid only as long as the message buffer
// and only until the next Decode into the same Tuple.
package pgoutput

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// Message type bytes of pgoutput.
const (
	MsgBegin    = 'B'
	MsgCommit   = 'C'
	MsgOrigin   = 'O'
	MsgRelation = 'R'
	MsgType     = 'Y'
	MsgInsert   = 'I'
	MsgUpdate   = 'U'
	MsgDelete   = 'D'
	MsgTruncate = 'T'
	MsgMessage  = 'M'

	// Protocol version 2, streamed transactions.
	MsgStreamStart  = 'S'
	MsgStreamStop   = 'E'
	MsgStreamCommit = 'c'
	MsgStreamAbort  = 'A'
)

// Kinds of a tuple value.
const (
	ValueNull      = 'n'
	ValueUnchanged = 'u' // unchanged TOASTed value: not sent, keep the target's
	ValueText      = 't'
	ValueBinary    = 'b'
)

// Truncate option bits.
const (
	TruncateCascade         = 1
	TruncateRestartIdentity = 2
)

// Begin starts a source transaction.
type Begin struct {
	FinalLSN pglogrepl.LSN // LSN of the commit record
	Xid      uint32
}

// Commit ends a source transaction.
type Commit struct {
	CommitLSN pglogrepl.LSN // LSN of the commit record
	EndLSN    pglogrepl.LSN // end of the commit record: the resume position
	Time      time.Time     // commit time on the source
}

// StreamStart opens a segment of a streamed transaction: the messages up to
// the next Stream Stop belong to it (or to its subtransactions).
type StreamStart struct {
	Xid   uint32
	First bool // the transaction's first segment
}

// StreamCommit ends a streamed transaction: it committed on the source.
type StreamCommit struct {
	Xid uint32
	Commit
}

// StreamAbort discards a streamed transaction (SubXid == Xid) or one of its
// subtransactions (ROLLBACK TO SAVEPOINT) with what was nested in it.
type StreamAbort struct {
	Xid    uint32
	SubXid uint32
}

// Column is a column of a Relation message.
type Column struct {
	Name    string
	TypeOID uint32
	TypMod  int32
	Key     bool // part of the replica identity
}

// Relation describes a published table as the source sees it now.
type Relation struct {
	ID              uint32
	Schema          string
	Name            string
	ReplicaIdentity byte // 'd', 'n', 'f' or 'i'
	Columns         []Column
}

// String returns schema.name for messages.
func (r *Relation) String() string { return r.Schema + "." + r.Name }

// Tuple is a row image: one kind and one value per column.
type Tuple struct {
	Kinds  []byte
	Values [][]byte // nil for null and unchanged values
}

// Change is an Insert, Update or Delete decoded from a message.
type Change struct {
	Op         byte // MsgInsert, MsgUpdate or MsgDelete
	RelationID uint32
	// OldKind is 'K' (key columns only), 'O' (whole old row) or 0 (none sent).
	OldKind byte
	Old     Tuple
	New     Tuple
	// Size is the length of the message the change was decoded from.
	Size int
}

// Release drops the change's references into its message, so that a large
// message buffer can be freed before the next change is decoded.
func (c *Change) Release() {
	clear(c.Old.Values[:cap(c.Old.Values)])
	clear(c.New.Values[:cap(c.New.Values)])
}

// Truncate lists the relations truncated by one statement.
type Truncate struct {
	Options     byte
	RelationIDs []uint32
}

var errShort = errors.New("message too short")

type reader struct {
	b   []byte
	err error
}

func (r *reader) u8() byte {
	if r.err != nil || len(r.b) < 1 {
		r.err = errShort
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() uint16 {
	if r.err != nil || len(r.b) < 2 {
		r.err = errShort
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) u32() uint32 {
	if r.err != nil || len(r.b) < 4 {
		r.err = errShort
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.err = errShort
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.err = errShort
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string {
	if r.err != nil {
		return ""
	}
	for i, c := range r.b {
		if c == 0 {
			s := string(r.b[:i])
			r.b = r.b[i+1:]
			return s
		}
	}
	r.err = errors.New("unterminated string")
	return ""
}

func (r *reader) tuple(t *Tuple) {
	n := int(r.u16())
	if r.err != nil {
		return
	}
	if cap(t.Kinds) < n {
		t.Kinds = make([]byte, n)
		t.Values = make([][]byte, n)
	}
	t.Kinds, t.Values = t.Kinds[:n], t.Values[:n]
	for i := 0; i < n; i++ {
		k := r.u8()
		t.Kinds[i] = k
		t.Values[i] = nil
		switch k {
		case ValueNull, ValueUnchanged:
		case ValueText, ValueBinary:
			t.Values[i] = r.bytes(int(r.u32()))
		default:
			if r.err == nil {
				r.err = fmt.Errorf("unknown tuple value kind %q in column %d", k, i+1)
			}
		}
		if r.err != nil {
			return
		}
	}
}

func (r *reader) done(what string) error {
	if r.err != nil {
		return fmt.Errorf("decode %s: %w", what, r.err)
	}
	return nil
}

// DecodeBegin decodes a Begin message (msg[0] == 'B').
func DecodeBegin(msg []byte) (Begin, error) {
	r := reader{b: msg[1:]}
	b := Begin{FinalLSN: pglogrepl.LSN(r.u64())}
	r.u64() // commit timestamp
	b.Xid = r.u32()
	return b, r.done("begin")
}

// DecodeCommit decodes a Commit message (msg[0] == 'C').
func DecodeCommit(msg []byte) (Commit, error) {
	r := reader{b: msg[1:]}
	c := r.commit()
	return c, r.done("commit")
}

// commit reads the fields a Commit and a Stream Commit share: flags (unused),
// commit LSN, end LSN and commit time.
func (r *reader) commit() Commit {
	r.u8() // flags, unused
	c := Commit{CommitLSN: pglogrepl.LSN(r.u64()), EndLSN: pglogrepl.LSN(r.u64())}
	c.Time = postgresEpoch.Add(time.Duration(int64(r.u64())) * time.Microsecond)
	return c
}

// DecodeStreamStart decodes a Stream Start message (msg[0] == 'S').
func DecodeStreamStart(msg []byte) (StreamStart, error) {
	r := reader{b: msg[1:]}
	s := StreamStart{Xid: r.u32(), First: r.u8() == 1}
	return s, r.done("stream start")
}

// DecodeStreamCommit decodes a Stream Commit message (msg[0] == 'c').
func DecodeStreamCommit(msg []byte) (StreamCommit, error) {
	r := reader{b: msg[1:]}
	c := StreamCommit{Xid: r.u32()}
	c.Commit = r.commit()
	return c, r.done("stream commit")
}

// DecodeStreamAbort decodes a Stream Abort message (msg[0] == 'A') of
// protocol version 2; the abort LSN and time that version 4 adds are not
// asked for.
func DecodeStreamAbort(msg []byte) (StreamAbort, error) {
	r := reader{b: msg[1:]}
	a := StreamAbort{Xid: r.u32(), SubXid: r.u32()}
	return a, r.done("stream abort")
}

// SplitStreamed splits a message received inside a stream segment into the
// xid of its (sub)transaction and the body that follows it: msg[0]
// followed by body is the message as protocol version 1 sends it, for the
// decoders above. Only the messages that carry the xid in a stream are
// accepted; Origin, which can come inside a stream too, carries none.
func SplitStreamed(msg []byte) (xid uint32, body []byte, err error) {
	if len(msg) == 0 {
		return 0, nil, errors.New("decode streamed message: empty")
	}
	switch msg[0] {
	case MsgRelation, MsgType, MsgInsert, MsgUpdate, MsgDelete, MsgTruncate, MsgMessage:
	default:
		return 0, nil, fmt.Errorf("decode streamed message: type %q carries no xid", msg[0])
	}
	r := reader{b: msg[1:]}
	xid = r.u32()
	if err := r.done("streamed message"); err != nil {
		return 0, nil, err
	}
	return xid, r.b, nil
}

// postgresEpoch is where PostgreSQL's timestamps count microseconds from.
var postgresEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// DecodeRelation decodes a Relation message (msg[0] == 'R').
func DecodeRelation(msg []byte) (*Relation, error) {
	r := reader{b: msg[1:]}
	rel := &Relation{ID: r.u32(), Schema: r.str(), Name: r.str(), ReplicaIdentity: r.u8()}
	n := int(r.u16())
	if r.err == nil {
		rel.Columns = make([]Column, 0, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		flags := r.u8()
		c := Column{Name: r.str(), TypeOID: r.u32(), TypMod: int32(r.u32()), Key: flags&1 != 0}
		rel.Columns = append(rel.Columns, c)
	}
	return rel, r.done("relation")
}

// DecodeChange decodes an Insert, Update or Delete message into c, reusing
// c's tuples. Values point into msg.
func DecodeChange(msg []byte, c *Change) error {
	c.Op = msg[0]
	c.Size = len(msg)
	c.OldKind = 0
	c.Old.Kinds, c.Old.Values = c.Old.Kinds[:0], c.Old.Values[:0]
	r := reader{b: msg[1:]}
	c.RelationID = r.u32()
	switch c.Op {
	case MsgInsert:
		if k := r.u8(); k != 'N' && r.err == nil {
			return fmt.Errorf("decode insert: unexpected tuple marker %q", k)
		}
		r.tuple(&c.New)
		return r.done("insert")
	case MsgUpdate:
		k := r.u8()
		if k == 'K' || k == 'O' {
			c.OldKind = k
			r.tuple(&c.Old)
			k = r.u8()
		}
		if k != 'N' && r.err == nil {
			return fmt.Errorf("decode update: unexpected tuple marker %q", k)
		}
		r.tuple(&c.New)
		return r.done("update")
	case MsgDelete:
		k := r.u8()
		if k != 'K' && k != 'O' && r.err == nil {
			return fmt.Errorf("decode delete: unexpected tuple marker %q", k)
		}
		c.OldKind = k
		r.tuple(&c.Old)
		c.New.Kinds, c.New.Values = c.New.Kinds[:0], c.New.Values[:0]
		return r.done("delete")
	}
	return fmt.Errorf("decode change: message type %q is not a row change", c.Op)
}

// DecodeTruncate decodes a Truncate message (msg[0] == 'T').
func DecodeTruncate(msg []byte) (Truncate, error) {
	r := reader{b: msg[1:]}
	n := r.u32()
	t := Truncate{Options: r.u8()}
	if r.err == nil && int(n) > len(r.b)/4 {
		return t, fmt.Errorf("decode truncate: %d relations announced, %d bytes left", n, len(r.b))
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		t.RelationIDs = append(t.RelationIDs, r.u32())
	}
	return t, r.done("truncate")
}

// Message is a logical decoding message (pg_logical_emit_message), sent
// only when the plugin options ask for messages (PostgreSQL 14+). A
// transactional one arrives inside the transaction that emitted it, at its
// place among the transaction's changes.
type Message struct {
	Transactional bool
	LSN           pglogrepl.LSN // of the message's own WAL record
	Prefix        string
	// Content points into the message buffer, like a tuple's values.
	Content []byte
}

// DecodeMessage decodes a Message message (msg[0] == 'M'): flags (1:
// transactional), LSN, prefix, content length and content.
func DecodeMessage(msg []byte) (Message, error) {
	r := reader{b: msg[1:]}
	m := Message{Transactional: r.u8()&1 != 0, LSN: pglogrepl.LSN(r.u64()), Prefix: r.str()}
	m.Content = r.bytes(int(r.u32()))
	return m, r.done("message")
}

// AppendMessage appends m to dst as a Message message of protocol version
// 1's form, the inverse of DecodeMessage: the dispatcher turns a row of the
// DDL capture's table path into the message it stands for, so that a
// spool holds it as such.
func AppendMessage(dst []byte, m Message) []byte {
	var flags byte
	if m.Transactional {
		flags = 1
	}
	dst = append(dst, MsgMessage, flags)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.LSN))
	dst = append(append(dst, m.Prefix...), 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.Content)))
	return append(dst, m.Content...)
}
