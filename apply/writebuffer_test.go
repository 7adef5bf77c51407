package apply

import (
	"bytes"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

func TestWriteBufferKeepsContentAndBuffer(t *testing.T) {
	var kept []byte
	w := writeBuffer{&kept}

	// pgx's fresh buffer, with bytes in it, moves into the kept one.
	kept = make([]byte, 0, 4096)
	got, err := w.Encode(append(make([]byte, 0, 1024), "abc"...))
	if err != nil || string(got) != "abc" || cap(got) != 4096 {
		t.Fatalf("Encode into the kept buffer: %q cap %d, %v; want \"abc\" cap 4096", got, cap(got), err)
	}
	// A larger buffer pgx grew is kept from now on, its bytes unchanged.
	grown := append(make([]byte, 0, 8192), "defg"...)
	if got, _ := w.Encode(grown); string(got) != "defg" || cap(kept) != 8192 {
		t.Fatalf("a grown buffer: got %q, kept cap %d; want \"defg\", 8192", got, cap(kept))
	}
	// One over maxWriteBuffer passes through and is not kept.
	huge := append(make([]byte, 0, 2*maxWriteBuffer), "h"...)
	if got, _ := w.Encode(huge); string(got) != "h" || cap(kept) != 8192 {
		t.Fatalf("a buffer over the bound: got %q, kept cap %d; want \"h\", 8192", got, cap(kept))
	}
	// The kept buffer handed back while pgx still holds it (a write of
	// 1 KiB or less): same bytes.
	own := append(kept[:0], "xyz"...)
	if got, _ := w.Encode(own); string(got) != "xyz" {
		t.Fatalf("the kept buffer itself: got %q", got)
	}
}

// TestWriteBufferStopsRegrowth is why writeBuffer exists: pgx's Frontend
// allocates a new buffer after every write over 1 KiB, then grows it
// while the next statements are encoded; with writeBuffer sent around each
// write, a cycle of 64 Bind messages and a write allocates nothing.
func TestWriteBufferStopsRegrowth(t *testing.T) {
	value := bytes.Repeat([]byte("v"), 100)
	bind := &pgproto3.Bind{PreparedStatement: "s1", Parameters: [][]byte{value, value}}
	cycle := func(f *pgproto3.Frontend, kept *[]byte) {
		if kept != nil {
			f.Send(writeBuffer{kept})
		}
		for range 64 {
			f.SendBind(bind)
		}
		if kept != nil {
			f.Send(writeBuffer{kept})
		}
		if err := f.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	plain := pgproto3.NewFrontend(bytes.NewReader(nil), io.Discard)
	without := testing.AllocsPerRun(50, func() { cycle(plain, nil) })
	var kept []byte
	withBuf := pgproto3.NewFrontend(bytes.NewReader(nil), io.Discard)
	with := testing.AllocsPerRun(50, func() { cycle(withBuf, &kept) })
	t.Logf("allocations per write cycle: %.0f without writeBuffer, %.0f with", without, with)
	if without < 2 {
		t.Fatalf("pgx's Frontend allocated %.0f times per write cycle: it keeps its buffer now, and writeBuffer may go", without)
	}
	if with > 1 {
		t.Fatalf("with writeBuffer a write cycle allocates %.0f times, without %.0f; want at most the 1 KiB pgx makes", with, without)
	}
}
