package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/evtctl/evtctl/internal/atomicfile"
)

// The high-water mark is the highest sequence number the log ever committed, with its
// timestamp, kept durably in a file of its own beside the segments. It is written after each
// group's records are durable and before they are acknowledged, so it is never below an
// acknowledged record and never above a durable one. On open it tells two things the
// segments cannot: records acknowledged and then lost with the end of the log (a deleted
// last segment, a file cut short or zeroed) are reported as lost rather than forgotten, and
// their sequence numbers are never handed out again.
//
// A mark file holds two slots written in turn, each with a counter and a checksum, so that a
// write torn by a crash leaves the other slot intact. A new file, or one brought up to date
// on open, is written whole beside the old and renamed over it (atomicfile.Write): a crash
// leaves the old file or the new one, never an empty or partial one.

// The low-water mark is the sequence number where the log starts: every record from it on
// was kept, and is there or reported lost; records below it were dropped by retention. It is
// moved, and made durable, before retention deletes a segment file, so that it is never
// above a record the log still serves and never below one deleted: on open, records missing
// from it on (a deleted oldest segment, every segment deleted) are reported as lost, for
// ever, rather than taken for the start of the log. A log written before the mark existed
// is taken to start at its oldest segment file, and gets the mark from then on.

// markKind is one of the log's marks: its file, magic, name, and what a log without it
// cannot tell.
type markKind struct {
	file, magic, what string
	unknown           string // what a damaged file no longer says
	without           string // what cannot be told without the mark
}

var (
	highMark = markKind{"HIGHWATER", "EVHW", "high-water mark",
		"the highest sequence number this log handed out",
		"records acknowledged and lost at the end of the log cannot be told from a torn tail"}
	lowMark = markKind{"LOWWATER", "EVLW", "low-water mark",
		"where the log starts",
		"the log is taken to start at its oldest segment file, and records lost at its start cannot be told from records dropped by retention"}
)

const (
	markSlotSize = 32 // counter u64, seq u64, ts i64, reserved u32, crc32c u32
	markFileSize = 8 + 2*markSlotSize
)

// mark is an open mark file. Only one goroutine writes it.
type mark struct {
	kind    markKind
	f       *os.File
	counter uint64
	seq     uint64
	ts      int64
	sync    func(*os.File) error // dataSync; tests make it fail
}

// markState is what a mark file says when the log is opened.
type markState struct {
	seq   uint64
	ts    int64
	known bool // the file holds an intact mark
	// empty: the file is there but holds nothing — an earlier version created it and was
	// stopped before it wrote it, on the log's first start. It is treated as no file.
	empty bool
}

// readMark reads a mark in dir; known is false when there is no file (a log written before
// the mark existed, or a new one) or an empty one.
func readMark(dir string, k markKind) (markState, error) {
	path := filepath.Join(dir, k.file)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return markState{}, nil
	}
	if err != nil {
		return markState{}, err
	}
	if len(b) == 0 {
		return markState{empty: true}, nil
	}
	_, seq, ts, ok := decodeMark(b, k.magic)
	if !ok {
		return markState{}, &markError{kind: k, path: path, dir: dir}
	}
	return markState{seq: seq, ts: ts, known: true}, nil
}

// markError is a mark file neither of whose slots is intact.
type markError struct {
	kind      markKind
	path, dir string
}

func (e *markError) Error() string {
	return fmt.Sprintf("the %s file %s is damaged: neither of its two copies is intact, so %s is unknown; run evtctl serve --verify --data-dir %s to see the state of the log, and remove the file only if losing that knowledge is acceptable", e.kind.what, e.path, e.kind.unknown, e.dir)
}

// decodeMark returns the newer intact slot of a mark file.
func decodeMark(b []byte, magic string) (counter, seq uint64, ts int64, ok bool) {
	if len(b) != markFileSize || string(b[:4]) != magic {
		return 0, 0, 0, false
	}
	le := binary.LittleEndian
	for i := range 2 {
		s := b[8+i*markSlotSize : 8+(i+1)*markSlotSize]
		if atomicfile.CRC32C(s[:markSlotSize-4]) != le.Uint32(s[markSlotSize-4:]) {
			continue
		}
		if c := le.Uint64(s); !ok || c > counter {
			counter, seq, ts, ok = c, le.Uint64(s[8:]), int64(le.Uint64(s[16:])), true
		}
	}
	return counter, seq, ts, ok
}

// openMark opens the mark file of kind k in dir holding seq and ts: as it is when it holds
// them, else written anew (a new file, an empty one, or one behind the segments).
func openMark(dir string, k markKind, seq uint64, ts int64) (*mark, error) {
	path := filepath.Join(dir, k.file)
	m := &mark{kind: k, sync: dataSync}
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if c, s, t, ok := decodeMark(b, k.magic); ok {
		m.counter, m.seq, m.ts = c, s, t
	}
	if m.counter == 0 || m.seq != seq || m.ts != ts {
		// Both slots hold the mark, so that the file is whole from the start.
		m.seq, m.ts = seq, ts
		b = make([]byte, markFileSize)
		copy(b, k.magic)
		for i := range 2 {
			m.counter++
			m.fill(b[8+i*markSlotSize:])
		}
		if err := atomicfile.Write(path, b); err != nil {
			return nil, err
		}
	}
	if m.f, err = os.OpenFile(path, os.O_RDWR, 0o600); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *mark) fill(s []byte) {
	le := binary.LittleEndian
	le.PutUint64(s, m.counter)
	le.PutUint64(s[8:], m.seq)
	le.PutUint64(s[16:], uint64(m.ts))
	le.PutUint32(s[24:], 0)
	le.PutUint32(s[28:], atomicfile.CRC32C(s[:markSlotSize-4]))
}

// set records a new mark in the older slot; with sync it is made durable before set returns.
// When it fails, the slot is written back with the mark as it was (under the new counter, so
// that it is the newer slot) and synced again: the records the new mark would cover are not
// kept, and a mark left in the file, flushed later, would claim them — a loss, on the next
// open, of events that were never acknowledged.
func (m *mark) set(seq uint64, ts int64, sync bool) error {
	if seq <= m.seq {
		return nil
	}
	prevSeq, prevTS := m.seq, m.ts
	m.counter++
	var s [markSlotSize]byte
	m.seq, m.ts = seq, ts
	m.fill(s[:])
	slot := int64(8 + (m.counter%2)*markSlotSize)
	_, err := m.f.WriteAt(s[:], slot)
	if err == nil && sync {
		err = m.sync(m.f)
	}
	if err == nil {
		return nil
	}
	m.seq, m.ts = prevSeq, prevTS
	m.fill(s[:])
	_, rerr := m.f.WriteAt(s[:], slot)
	if rerr == nil && sync {
		rerr = m.sync(m.f)
	}
	if rerr != nil {
		return fmt.Errorf("%w; putting the %s back: %v", err, m.kind.what, rerr)
	}
	return err
}

func (m *mark) close() error {
	if m == nil {
		return nil
	}
	return m.f.Close()
}
