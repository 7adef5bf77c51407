package snapshot

import (
	"errors"
	"io"
	"sync"
)

// chunkPipe carries COPY data from the source stream to the target stream
// in fixed-size chunks through a small ring, so that reading from the
// source and writing to the target overlap; io.Pipe would hand each write
// over synchronously and leave one side idle while the other works. Memory
// is chunks x size whatever the table's size.
//
// When one side fails, the other fails in consequence: the writer with
// errPipeAborted once the reader stops, the reader (the target's COPY) with
// the writer's error it was handed. Each side closes its end with its own
// error, and Err reports the first, which is the cause: the consequence can
// only come after it (issue 15).
type chunkPipe struct {
	full  chan []byte // filled chunks, in order
	free  chan []byte // empty chunks
	done  chan struct{}
	abort sync.Once
	err   error // the writer's error, read after full is closed

	mu      sync.Mutex
	failure error // the first error either side closed its end with

	cur   []byte // writer: the chunk being filled
	rd    []byte // reader: what is left of the chunk being read
	rdBuf []byte // reader: that chunk, to give back
}

// errPipeAborted is what the writer gets once the reader has stopped: the
// consequence of the reader's failure, never a cause of its own.
var errPipeAborted = errors.New("copy reader stopped")

func newChunkPipe(size, chunks int) *chunkPipe {
	p := &chunkPipe{
		full: make(chan []byte, chunks),
		free: make(chan []byte, chunks),
		done: make(chan struct{}),
	}
	for i := 0; i < chunks; i++ {
		p.free <- make([]byte, 0, size)
	}
	return p
}

// Write copies b into chunks, handing each full chunk to the reader.
func (p *chunkPipe) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		if p.cur == nil {
			select {
			case c := <-p.free:
				p.cur = c[:0]
			case <-p.done:
				return written, errPipeAborted
			}
		}
		n := copy(p.cur[len(p.cur):cap(p.cur)], b)
		p.cur = p.cur[:len(p.cur)+n]
		b = b[n:]
		written += n
		if len(p.cur) == cap(p.cur) {
			if err := p.send(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

func (p *chunkPipe) send() error {
	select {
	case p.full <- p.cur:
		p.cur = nil
		return nil
	case <-p.done:
		return errPipeAborted
	}
}

// CloseWrite hands over the last chunk and ends the stream with err (nil
// for a clean end), which the reader gets after the chunks before it.
func (p *chunkPipe) CloseWrite(err error) {
	if err == nil && len(p.cur) > 0 {
		err = p.send()
	}
	p.fail(err)
	p.err = err
	close(p.full)
}

// Read returns the next bytes; io.EOF after a clean CloseWrite.
func (p *chunkPipe) Read(b []byte) (int, error) {
	for len(p.rd) == 0 {
		if p.rdBuf != nil {
			p.free <- p.rdBuf
			p.rdBuf = nil
		}
		c, ok := <-p.full
		if !ok {
			if p.err != nil {
				return 0, p.err
			}
			return 0, io.EOF
		}
		p.rd, p.rdBuf = c, c
	}
	n := copy(b, p.rd)
	p.rd = p.rd[n:]
	return n, nil
}

// CloseRead stops the writer, whose pending and future writes fail with
// errPipeAborted. err is why the reader stopped (nil when it read to the
// end); it is recorded before the writer is stopped, so that the writer's
// errPipeAborted cannot pass for the cause.
func (p *chunkPipe) CloseRead(err error) {
	p.fail(err)
	p.abort.Do(func() { close(p.done) })
}

// fail records err unless a side failed before.
func (p *chunkPipe) fail(err error) {
	if err == nil {
		return
	}
	p.mu.Lock()
	if p.failure == nil {
		p.failure = err
	}
	p.mu.Unlock()
}

// Err returns the first error a side closed its end with: the cause of the
// copy's failure, or nil when neither side failed. It is final once both
// ends are closed.
func (p *chunkPipe) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failure
}
