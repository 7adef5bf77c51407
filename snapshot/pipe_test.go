package snapshot

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"testing"
)

func TestChunkPipeCarriesEveryByteInOrder(t *testing.T) {
	want := make([]byte, 1<<20+12345)
	rand.New(rand.NewSource(1)).Read(want)
	p := newChunkPipe(4096, 3)
	go func() {
		rnd := rand.New(rand.NewSource(2))
		for rest := want; len(rest) > 0; {
			n := min(len(rest), 1+rnd.Intn(9000)) // smaller and larger than a chunk
			if _, err := p.Write(rest[:n]); err != nil {
				t.Error(err)
				return
			}
			rest = rest[n:]
		}
		p.CloseWrite(nil)
	}()
	got, err := io.ReadAll(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d, equal=%v", len(got), len(want), bytes.Equal(got, want))
	}
}

func TestChunkPipeErrors(t *testing.T) {
	boom := errors.New("source failed")
	p := newChunkPipe(16, 2)
	go func() {
		p.Write([]byte("partial"))
		p.CloseWrite(boom)
	}()
	if _, err := io.ReadAll(p); !errors.Is(err, boom) {
		t.Errorf("reader got %v, want the writer's error", err)
	}

	// A reader that stops unblocks a writer waiting for space.
	p = newChunkPipe(16, 1)
	p.CloseRead()
	if _, err := p.Write(make([]byte, 100)); !errors.Is(err, errPipeAborted) {
		t.Errorf("writer got %v after the reader stopped", err)
	}
}
