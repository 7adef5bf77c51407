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
	p.CloseRead(nil)
	if _, err := p.Write(make([]byte, 100)); !errors.Is(err, errPipeAborted) {
		t.Errorf("writer got %v after the reader stopped", err)
	}
}

// TestChunkPipeErrReportsTheCause: whichever side fails first, Err is its
// error, not the other side's consequence of it, whatever the order the
// two sides return in (issue 15).
func TestChunkPipeErrReportsTheCause(t *testing.T) {
	sourceErr := errors.New("source: connection reset")
	targetErr := errors.New("target: check constraint violated")
	consequence := errors.New("target: COPY from stdin failed")
	tests := []struct {
		name string
		// reader reads what the writer sends and returns why it stopped
		// (nil: it read to the end).
		reader func(p *chunkPipe) error
		// writerFails makes the writer end its stream with sourceErr after
		// a few chunks.
		writerFails bool
		want        error
	}{
		{
			name: "target fails while the source is still sending",
			reader: func(p *chunkPipe) error {
				p.Read(make([]byte, 10))
				return targetErr
			},
			want: targetErr,
		},
		{
			name: "source fails, the target's COPY fails with it",
			reader: func(p *chunkPipe) error {
				if _, err := io.Copy(io.Discard, p); err != nil {
					return consequence
				}
				return nil
			},
			writerFails: true,
			want:        sourceErr,
		},
		{
			name: "neither fails",
			reader: func(p *chunkPipe) error {
				_, err := io.Copy(io.Discard, p)
				return err
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newChunkPipe(16, 2)
			wrote := make(chan error, 1)
			go func() {
				var err error
				for i := 0; i < 50 && err == nil; i++ {
					_, err = p.Write(make([]byte, 7))
				}
				if err == nil && tt.writerFails {
					err = sourceErr
				}
				p.CloseWrite(err)
				wrote <- err
			}()
			p.CloseRead(tt.reader(p))
			writeErr := <-wrote
			if got := p.Err(); !errors.Is(got, tt.want) {
				t.Errorf("Err() = %v, want %v (the writer got %v)", got, tt.want, writeErr)
			}
			if tt.want == targetErr && !errors.Is(writeErr, errPipeAborted) {
				t.Errorf("the writer got %v, want errPipeAborted: the case did not test a consequence", writeErr)
			}
		})
	}
}
