// Package pgoutputtest encodes pgoutput messages for tests and benchmarks,
// byte for byte as the server's pgoutput plugin writes them (protocol 1).
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
