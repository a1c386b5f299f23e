package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/evtctl/evtctl/internal/atomicfile"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// On-disk layout. A log is a directory of segment files named by the sequence number of
// their first record (%020d.seg). A segment starts with a header, then holds frames:
//
//	frame   := length:u32le crc32c(payload):u32le payload
//	payload := ts:i64le seq:u64le key:[16]byte flags:u8 typeLen:u16le type json
//
// flags bit 0 marks the last record of an append: on open, a tail that does not end on
// such a record (a torn append) is cut off, so an append is all-or-nothing. A sealed
// segment gets a sidecar index file (%020d.idx) so that opening does not rescan it.

const (
	segMagic      = "EVLG"
	segVersion    = 1
	segHeaderSize = 24 // magic, version u32, base u64, floorTS i64
	frameHeader   = 8
	recHeader     = 35 // the payload's fixed part, at these offsets:
	atTS          = 0
	atSeq         = 8
	atKey         = 16
	atFlags       = 32
	atTypeLen     = 33
	flagCommit    = 1
	maxPayload    = 16 << 20 // a sanity bound for recovery; the server limits events far lower
	blockRecords  = 16       // one sparse index entry per this many records
	idxMagic      = "EVIX"
)

// key identifies (source, id) for duplicate suppression.
type key [16]byte

// indexEntry locates record base+i*blockRecords of a segment.
type indexEntry struct {
	ts  int64
	off uint32
}

// file is what a segment needs of its storage: an *os.File, or memory.
type file interface {
	io.ReaderAt
	WriteAt(p []byte, off int64) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
}

// segment is one file of the log. Fields below mu-guarded are read under Log.mu and
// written by the writer goroutine holding Log.mu.
type segment struct {
	base    uint64
	floorTS int64 // no record of this segment has a smaller timestamp
	path    string
	f       file
	start   int64 // offset of the first record: the header's end, or later in a piece

	size   int64 // end of the committed records (a whole file's committed bytes)
	count  uint64
	lastTS int64
	index  []indexEntry
	// trusted: opened from its index file without reading its records, which the log
	// checks in the background after opening.
	trusted bool
	// piece: one of several runs of intact records of a damaged file; never appended to.
	piece bool

	refs      atomic.Int32 // readers in flight + 1 while the segment belongs to the log
	closeOnce sync.Once
}

func (s *segment) acquire() { s.refs.Add(1) }

func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		s.closeOnce.Do(func() { _ = s.f.Close() })
	}
}

// lastSeq is the sequence of the last committed record; only valid when count > 0.
func (s *segment) lastSeq() uint64 { return s.base + s.count - 1 }

// lastCursor is the cursor of the last committed record; only valid when count > 0.
func (s *segment) lastCursor() cursor.Cursor {
	return cursor.New(s.lastTS, s.lastSeq(), cursor.NodeWidth)
}

// firstTS is the timestamp of the first record; only valid when count > 0.
func (s *segment) firstTS() int64 { return s.index[0].ts }

// firstCursor is the cursor of the first record; only valid when count > 0.
func (s *segment) firstCursor() cursor.Cursor {
	return cursor.New(s.firstTS(), s.base, cursor.NodeWidth)
}

func segHeader(base uint64, floorTS int64) []byte {
	b := make([]byte, segHeaderSize)
	copy(b, segMagic)
	binary.LittleEndian.PutUint32(b[4:], segVersion)
	binary.LittleEndian.PutUint64(b[8:], base)
	binary.LittleEndian.PutUint64(b[16:], uint64(floorTS))
	return b
}

func parseSegHeader(b []byte) (base uint64, floorTS int64, err error) {
	if len(b) < segHeaderSize || string(b[:4]) != segMagic {
		return 0, 0, errors.New("not an evtctl segment")
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != segVersion {
		return 0, 0, fmt.Errorf("segment version %d is not supported", v)
	}
	return binary.LittleEndian.Uint64(b[8:]), int64(binary.LittleEndian.Uint64(b[16:])), nil
}

// appendFrame encodes one record onto buf.
func appendFrame(buf []byte, ts int64, seq uint64, k key, flags byte, typ string, json []byte) []byte {
	n := recHeader + len(typ) + len(json)
	start := len(buf)
	buf = append(buf, make([]byte, frameHeader+recHeader)...)
	p := buf[start+frameHeader:]
	binary.LittleEndian.PutUint64(p[atTS:], uint64(ts))
	binary.LittleEndian.PutUint64(p[atSeq:], seq)
	copy(p[atKey:atFlags], k[:])
	p[atFlags] = flags
	binary.LittleEndian.PutUint16(p[atTypeLen:], uint16(len(typ)))
	buf = append(buf, typ...)
	buf = append(buf, json...)
	binary.LittleEndian.PutUint32(buf[start:], uint32(n))
	binary.LittleEndian.PutUint32(buf[start+4:], atomicfile.CRC32C(buf[start+frameHeader:]))
	return buf
}

// rec is a decoded record; Type and JSON alias the buffer it was decoded from.
type rec struct {
	ts    int64
	seq   uint64
	key   key
	flags byte
	typ   []byte
	json  []byte
	size  int // frame size
}

var (
	errShort   = errors.New("short frame")
	errCorrupt = errors.New("corrupt frame")
)

// decodeFrame decodes the frame at the start of b.
func decodeFrame(b []byte) (rec, error) {
	if len(b) < frameHeader {
		return rec{}, errShort
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n < recHeader || n > maxPayload {
		return rec{}, errCorrupt
	}
	if len(b) < frameHeader+n {
		return rec{}, errShort
	}
	p := b[frameHeader : frameHeader+n]
	if atomicfile.CRC32C(p) != binary.LittleEndian.Uint32(b[4:]) {
		return rec{}, errCorrupt
	}
	tl := int(binary.LittleEndian.Uint16(p[atTypeLen:]))
	if recHeader+tl > n {
		return rec{}, errCorrupt
	}
	r := rec{
		ts:    int64(binary.LittleEndian.Uint64(p[atTS:])),
		seq:   binary.LittleEndian.Uint64(p[atSeq:]),
		flags: p[atFlags],
		typ:   p[recHeader : recHeader+tl],
		json:  p[recHeader+tl:],
		size:  frameHeader + n,
	}
	copy(r.key[:], p[atKey:atFlags])
	return r, nil
}

// writeIndexFile records a sealed segment's index beside it, atomically.
func writeIndexFile(s *segment) error {
	b := make([]byte, 0, 44+12*len(s.index)+4)
	b = append(b, idxMagic...)
	b = binary.LittleEndian.AppendUint64(b, s.base)
	b = binary.LittleEndian.AppendUint64(b, s.count)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.lastTS))
	b = binary.LittleEndian.AppendUint64(b, uint64(s.size))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s.index)))
	for _, e := range s.index {
		b = binary.LittleEndian.AppendUint64(b, uint64(e.ts))
		b = binary.LittleEndian.AppendUint32(b, e.off)
	}
	b = binary.LittleEndian.AppendUint32(b, atomicfile.CRC32C(b))
	return atomicfile.Write(idxPath(s.path), b)
}

// readIndexFile loads a sealed segment's index if it is intact and matches size.
func readIndexFile(s *segment, size int64) bool {
	b, err := os.ReadFile(idxPath(s.path))
	if err != nil || len(b) < 44+4 || string(b[:4]) != idxMagic {
		return false
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if atomicfile.CRC32C(body) != sum {
		return false
	}
	le := binary.LittleEndian
	if le.Uint64(body[4:]) != s.base || int64(le.Uint64(body[28:])) != size {
		return false
	}
	n := le.Uint64(body[36:])
	if uint64(len(body)-44) != 12*n {
		return false
	}
	count := le.Uint64(body[12:])
	if n != (count+blockRecords-1)/blockRecords {
		return false
	}
	s.count = count
	s.lastTS = int64(le.Uint64(body[20:]))
	s.size = size
	s.start = segHeaderSize
	s.index = make([]indexEntry, n)
	for i := range s.index {
		o := 44 + 12*i
		s.index[i] = indexEntry{ts: int64(le.Uint64(body[o:])), off: le.Uint32(body[o+8:])}
	}
	return true
}

func idxPath(segPath string) string { return segPath[:len(segPath)-len(".seg")] + ".idx" }

// memFile is an in-memory file made of fixed-size chunks, so that growing never copies.
type memFile struct {
	mu     sync.RWMutex
	chunks [][]byte
	size   int64
}

const memChunk = 1 << 20

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off != m.size {
		return 0, errors.New("memFile: writes must append")
	}
	n := len(p)
	for len(p) > 0 {
		ci, co := int(m.size/memChunk), int(m.size%memChunk)
		if ci == len(m.chunks) {
			m.chunks = append(m.chunks, make([]byte, memChunk))
		}
		c := copy(m.chunks[ci][co:], p)
		p = p[c:]
		m.size += int64(c)
	}
	return n, nil
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for len(p) > 0 && off < m.size {
		ci, co := int(off/memChunk), int(off%memChunk)
		end := min(int64(memChunk), m.size-int64(ci)*memChunk)
		c := copy(p, m.chunks[ci][co:end])
		p, off, n = p[c:], off+int64(c), n+c
	}
	if len(p) > 0 {
		return n, io.EOF
	}
	return n, nil
}

func (m *memFile) Truncate(size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if size < m.size {
		m.size = size
		m.chunks = m.chunks[:(size+memChunk-1)/memChunk]
	}
	return nil
}

func (m *memFile) Sync() error  { return nil }
func (m *memFile) Close() error { return nil }
