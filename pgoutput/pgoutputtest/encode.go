// Package pgoutputtest encodes pgoutput messages for tests and benchmarks,
// byte for byte as the server's pgoutput plugin writes them (protocol 1, and
// the streamed transactions of protocol 2).
package pgoutputtest

import "encoding/binary"

// Value is one column of a tuple: Kind 'n', 'u' or 't' with Text.
type Value struct {
	Kind byte
	Text string
}

// T is a text value.
func T(s string) Value { return Value{Kind: 't', Text: s} }

// Null is a NULL value.
var Null = Value{Kind: 'n'}

// Unchanged is an unchanged TOAST value.
var Unchanged = Value{Kind: 'u'}

func tuple(b []byte, vals []Value) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(vals)))
	for _, v := range vals {
		b = append(b, v.Kind)
		if v.Kind == 't' || v.Kind == 'b' {
			b = binary.BigEndian.AppendUint32(b, uint32(len(v.Text)))
			b = append(b, v.Text...)
		}
	}
	return b
}

// Begin encodes a Begin message.
func Begin(finalLSN uint64, xid uint32) []byte {
	b := []byte{'B'}
	b = binary.BigEndian.AppendUint64(b, finalLSN)
	b = binary.BigEndian.AppendUint64(b, 0)
	return binary.BigEndian.AppendUint32(b, xid)
}

// Commit encodes a Commit message.
func Commit(commitLSN, endLSN uint64) []byte {
	b := []byte{'C', 0}
	b = binary.BigEndian.AppendUint64(b, commitLSN)
	b = binary.BigEndian.AppendUint64(b, endLSN)
	return binary.BigEndian.AppendUint64(b, 0)
}

// Column describes a Relation column.
type Column struct {
	Name    string
	TypeOID uint32
	Key     bool
}

// Relation encodes a Relation message.
func Relation(id uint32, schema, name string, ident byte, cols []Column) []byte {
	b := []byte{'R'}
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(append(b, schema...), 0)
	b = append(append(b, name...), 0)
	b = append(b, ident)
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for _, c := range cols {
		flags := byte(0)
		if c.Key {
			flags = 1
		}
		b = append(b, flags)
		b = append(append(b, c.Name...), 0)
		b = binary.BigEndian.AppendUint32(b, c.TypeOID)
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	return b
}

// Insert encodes an Insert message.
func Insert(rel uint32, vals []Value) []byte {
	b := []byte{'I'}
	b = binary.BigEndian.AppendUint32(b, rel)
	return tuple(append(b, 'N'), vals)
}

// Update encodes an Update message; oldKind is 0, 'K' or 'O'.
func Update(rel uint32, oldKind byte, old, new []Value) []byte {
	b := []byte{'U'}
	b = binary.BigEndian.AppendUint32(b, rel)
	if oldKind != 0 {
		b = tuple(append(b, oldKind), old)
	}
	return tuple(append(b, 'N'), new)
}

// Delete encodes a Delete message; oldKind is 'K' or 'O'.
func Delete(rel uint32, oldKind byte, old []Value) []byte {
	b := []byte{'D'}
	b = binary.BigEndian.AppendUint32(b, rel)
	return tuple(append(b, oldKind), old)
}

// Truncate encodes a Truncate message.
func Truncate(options byte, rels ...uint32) []byte {
	b := []byte{'T'}
	b = binary.BigEndian.AppendUint32(b, uint32(len(rels)))
	b = append(b, options)
	for _, r := range rels {
		b = binary.BigEndian.AppendUint32(b, r)
	}
	return b
}

// Type encodes a Type message.
func Type(oid uint32, schema, name string) []byte {
	b := []byte{'Y'}
	b = binary.BigEndian.AppendUint32(b, oid)
	b = append(append(b, schema...), 0)
	return append(append(b, name...), 0)
}

// Origin encodes an Origin message.
func Origin(lsn uint64, name string) []byte {
	b := []byte{'O'}
	b = binary.BigEndian.AppendUint64(b, lsn)
	return append(append(b, name...), 0)
}

// Message encodes a logical decoding message (pg_logical_emit_message).
func Message(transactional bool, lsn uint64, prefix string, content []byte) []byte {
	b := []byte{'M', 0}
	if transactional {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint64(b, lsn)
	b = append(append(b, prefix...), 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	return append(b, content...)
}

// Streamed turns a protocol 1 message (Relation, Type, Insert, Update,
// Delete, Truncate or Message) into the one protocol 2 sends inside a
// stream segment: the xid of its (sub)transaction follows the type byte.
func Streamed(xid uint32, msg []byte) []byte {
	b := []byte{msg[0]}
	b = binary.BigEndian.AppendUint32(b, xid)
	return append(b, msg[1:]...)
}

// StreamStart encodes a Stream Start message.
func StreamStart(xid uint32, first bool) []byte {
	b := []byte{'S'}
	b = binary.BigEndian.AppendUint32(b, xid)
	if first {
		return append(b, 1)
	}
	return append(b, 0)
}

// StreamStop encodes a Stream Stop message.
func StreamStop() []byte { return []byte{'E'} }

// StreamCommit encodes a Stream Commit message; commitTime counts
// microseconds from 2000-01-01.
func StreamCommit(xid uint32, commitLSN, endLSN uint64, commitTime int64) []byte {
	b := []byte{'c'}
	b = binary.BigEndian.AppendUint32(b, xid)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, commitLSN)
	b = binary.BigEndian.AppendUint64(b, endLSN)
	return binary.BigEndian.AppendUint64(b, uint64(commitTime))
}

// StreamAbort encodes a Stream Abort message (protocol 2: no abort LSN).
func StreamAbort(xid, subxid uint32) []byte {
	b := []byte{'A'}
	b = binary.BigEndian.AppendUint32(b, xid)
	return binary.BigEndian.AppendUint32(b, subxid)
}
