package replication

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// Spools hold the streamed transactions of a session until they commit
// (issue 18). With protocol version 2 the source sends a transaction larger
// than its logical_decoding_work_mem while it runs, in segments, and says at
// the end whether it committed; like PostgreSQL 15's apply worker, pgsync
// appends each segment's messages to a file per transaction and applies the
// file, in the order the commits arrive, at Stream Commit. Memory stays
// bounded whatever the size of the transaction; the disk holds it once.
//
// The files need no fsync: a streamed transaction is sent again from its
// start by the next session (the slot's confirmed position is before it),
// so each session starts with an empty directory.

// spoolSet is the spool files of one session, owned by the dispatcher.
type spoolSet struct {
	dir   string
	stats *Stats
	open  map[uint32]*spool // by top-level xid
	cur   *spool            // the spool of the open segment, nil between segments
	w     *bufio.Writer     // buffers cur's appends
	made  bool              // dir exists
}

// spool is one streamed transaction's file: each message as a 4-byte
// big-endian length, the 4-byte xid of its (sub)transaction and the message
// in protocol version 1's form (the xid taken off).
type spool struct {
	xid  uint32
	f    *os.File
	size int64 // bytes appended, buffered ones included
	// subxacts are the subtransactions seen, in the order of their first
	// message, with the offset of that message: a subtransaction's abort
	// truncates the file there. Later ones were nested in it or began after
	// it, so they go too, as in PostgreSQL's worker.c. seen indexes them
	// (a loop with an exception block makes a subtransaction per row), and
	// last is the one of the latest message.
	subxacts []subxact
	seen     map[uint32]int
	last     uint32
}

type subxact struct {
	xid    uint32
	offset int64
}

// spoolHeader is the length and xid before each spooled message.
const spoolHeader = 8

// spoolSuffix names the files of a spool directory, the only ones pgsync
// removes there.
const spoolSuffix = ".spool"

// defaultSpoolDir is the job's spool directory under os.TempDir() ($TMPDIR).
func defaultSpoolDir(job string) string {
	return filepath.Join(os.TempDir(), "pgsync-"+job+"-spool")
}

// newSpoolSet returns the session's spools in dir, removing the files an
// earlier session left there (a killed one leaves them).
func newSpoolSet(dir string, stats *Stats) (*spoolSet, error) {
	s := &spoolSet{dir: dir, stats: stats, open: map[uint32]*spool{}}
	if err := s.clear(); err != nil {
		return nil, err
	}
	return s, nil
}

// clear removes every spool file of the directory.
func (s *spoolSet) clear() error {
	names, err := filepath.Glob(filepath.Join(s.dir, "*"+spoolSuffix))
	if err != nil {
		return fmt.Errorf("spool directory %s: %w", s.dir, err)
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("clear spool directory: %w", err)
		}
	}
	return nil
}

func (s *spoolSet) path(xid uint32) string {
	return filepath.Join(s.dir, strconv.FormatUint(uint64(xid), 10)+spoolSuffix)
}

// start opens a segment of transaction xid: its first one creates the
// spool, a later one appends to it.
func (s *spoolSet) start(xid uint32, first bool) error {
	if s.cur != nil {
		return fmt.Errorf("stream start of xid %d inside the segment of xid %d", xid, s.cur.xid)
	}
	sp := s.open[xid]
	switch {
	case !first && sp == nil:
		return fmt.Errorf("stream of xid %d continues a transaction whose first segment was not received", xid)
	case first && sp != nil:
		return fmt.Errorf("stream of xid %d starts again without a commit or an abort", xid)
	case first:
		if !s.made {
			if err := os.MkdirAll(s.dir, 0o700); err != nil {
				return fmt.Errorf("spool directory: %w", err)
			}
			s.made = true
		}
		f, err := os.OpenFile(s.path(xid), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("spool of xid %d: %w", xid, err)
		}
		sp = &spool{xid: xid, f: f}
		s.open[xid] = sp
	}
	if s.w == nil {
		s.w = bufio.NewWriterSize(sp.f, arenaChunk)
	} else {
		s.w.Reset(sp.f)
	}
	s.cur = sp
	return nil
}

// inSegment reports whether a segment is open: the messages up to Stream
// Stop belong to it.
func (s *spoolSet) inSegment() bool { return s.cur != nil }

// append adds a message of the open segment: its type byte and the body
// that follows the xid. xid is the (sub)transaction the message belongs to.
func (s *spoolSet) append(xid uint32, typ byte, body []byte) error {
	sp := s.cur
	if sp == nil {
		return fmt.Errorf("streamed %q message outside a stream segment", typ)
	}
	if xid != sp.xid && xid != sp.last {
		sp.addSubxact(xid)
	}
	if len(body) >= 1<<32-1 {
		return fmt.Errorf("spool of xid %d: message of %d bytes", sp.xid, len(body))
	}
	var head [spoolHeader + 1]byte
	binary.BigEndian.PutUint32(head[:4], uint32(1+len(body)))
	binary.BigEndian.PutUint32(head[4:8], xid)
	head[8] = typ
	if _, err := s.w.Write(head[:]); err != nil {
		return fmt.Errorf("spool of xid %d: %w", sp.xid, err)
	}
	if _, err := s.w.Write(body); err != nil {
		return fmt.Errorf("spool of xid %d: %w", sp.xid, err)
	}
	n := int64(len(head) + len(body))
	sp.size += n
	s.stats.SpoolBytes.Add(n)
	return nil
}

// addSubxact records the offset of the first message of subtransaction
// xid, which the next message will be.
func (sp *spool) addSubxact(xid uint32) {
	sp.last = xid
	if sp.seen == nil {
		sp.seen = map[uint32]int{}
	}
	if _, ok := sp.seen[xid]; ok {
		return
	}
	sp.seen[xid] = len(sp.subxacts)
	sp.subxacts = append(sp.subxacts, subxact{xid: xid, offset: sp.size})
}

// stop ends the open segment; the spool waits for the next one, or for its
// commit or abort.
func (s *spoolSet) stop() error {
	if s.cur == nil {
		return errors.New("stream stop outside a stream segment")
	}
	err := s.w.Flush()
	xid := s.cur.xid
	s.cur = nil
	if err != nil {
		return fmt.Errorf("spool of xid %d: %w", xid, err)
	}
	return nil
}

// abort discards transaction xid when subxid is xid, or else its
// subtransaction subxid and every subtransaction that began after it. A
// transaction or subtransaction with nothing spooled has nothing to discard.
func (s *spoolSet) abort(xid, subxid uint32) error {
	if s.cur != nil {
		return fmt.Errorf("stream abort of xid %d inside the segment of xid %d", xid, s.cur.xid)
	}
	sp := s.open[xid]
	if sp == nil {
		return nil
	}
	if subxid == xid {
		delete(s.open, xid)
		return sp.remove()
	}
	i, ok := sp.seen[subxid]
	if !ok {
		return nil
	}
	at := sp.subxacts[i].offset
	if err := sp.f.Truncate(at); err != nil {
		return fmt.Errorf("spool of xid %d: abort of subtransaction %d: %w", xid, subxid, err)
	}
	if _, err := sp.f.Seek(at, io.SeekStart); err != nil {
		return fmt.Errorf("spool of xid %d: abort of subtransaction %d: %w", xid, subxid, err)
	}
	for _, x := range sp.subxacts[i:] {
		delete(sp.seen, x.xid)
	}
	sp.size, sp.subxacts, sp.last = at, sp.subxacts[:i], 0
	return nil
}

// take hands over the spool of a transaction that committed, positioned at
// its start; nil when no segment of it was received. The caller removes it.
func (s *spoolSet) take(xid uint32) (*spool, error) {
	if s.cur != nil {
		return nil, fmt.Errorf("stream commit of xid %d inside the segment of xid %d", xid, s.cur.xid)
	}
	sp := s.open[xid]
	if sp == nil {
		return nil, nil
	}
	delete(s.open, xid)
	if _, err := sp.f.Seek(0, io.SeekStart); err != nil {
		_ = sp.remove()
		return nil, fmt.Errorf("spool of xid %d: %w", xid, err)
	}
	return sp, nil
}

// remove closes and deletes the spool's file.
func (sp *spool) remove() error {
	cerr := sp.f.Close()
	if err := os.Remove(sp.f.Name()); err != nil {
		return fmt.Errorf("spool of xid %d: %w", sp.xid, err)
	}
	if cerr != nil {
		return fmt.Errorf("spool of xid %d: %w", sp.xid, cerr)
	}
	return nil
}

// close removes the session's spools: the transactions they held are sent
// again, whole, to the next session.
func (s *spoolSet) close() error {
	var errs []error
	for xid, sp := range s.open {
		delete(s.open, xid)
		errs = append(errs, sp.remove())
	}
	s.cur = nil
	if s.made {
		_ = os.Remove(s.dir) // only when empty: the directory may be shared
	}
	return errors.Join(errs...)
}

// spoolReader reads a spool's messages back. Messages are read in bulk into
// chunks of arenaChunk bytes, as the reader's arena holds received ones: a
// message handed out stays valid (the applier keeps a run's values until it
// sends the statement), since a chunk is never written over; a chunk is
// garbage once nothing refers to it. A message larger than a chunk gets a
// chunk of its own, dropped at the next read.
type spoolReader struct {
	f          io.Reader
	chunk      []byte
	start, end int // unread bytes: chunk[start:end]
}

// errSpoolCorrupt reports a spool that does not read back as it was written.
var errSpoolCorrupt = errors.New("spool file is corrupt")

// next returns the next message and the xid of its (sub)transaction, or
// io.EOF after the last one.
func (r *spoolReader) next() (xid uint32, msg []byte, err error) {
	if err := r.fill(spoolHeader); err != nil {
		if errors.Is(err, io.EOF) && r.start == r.end {
			return 0, nil, io.EOF
		}
		return 0, nil, fmt.Errorf("%w: %w", errSpoolCorrupt, err)
	}
	n := int(binary.BigEndian.Uint32(r.chunk[r.start:]))
	xid = binary.BigEndian.Uint32(r.chunk[r.start+4:])
	if n == 0 {
		return 0, nil, fmt.Errorf("%w: empty message", errSpoolCorrupt)
	}
	if err := r.fill(spoolHeader + n); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", errSpoolCorrupt, err)
	}
	at := r.start + spoolHeader
	r.start = at + n
	return xid, r.chunk[at : at+n : at+n], nil
}

// drop lets go of the chunk once every byte of it is read, so that the
// chunk of a large message can be freed at once.
func (r *spoolReader) drop() {
	if r.start == r.end {
		r.chunk, r.start, r.end = nil, 0, 0
	}
}

// fill makes at least need unread bytes available, reading into the rest of
// the chunk, or into a new one (the unread bytes moved there) when the rest
// is too small. A chunk made for a large message is exactly its size, so
// the next read moves on and the message's chunk can be freed.
func (r *spoolReader) fill(need int) error {
	if r.end-r.start >= need {
		return nil
	}
	if len(r.chunk)-r.start < need {
		chunk := make([]byte, max(arenaChunk, need))
		r.end = copy(chunk, r.chunk[r.start:r.end])
		r.chunk, r.start = chunk, 0
	}
	n, err := io.ReadAtLeast(r.f, r.chunk[r.end:], need-(r.end-r.start))
	r.end += n
	return err
}
