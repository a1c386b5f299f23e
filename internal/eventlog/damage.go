package eventlog

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// Damage to a log is never repaired by deleting what is intact. Only a torn tail — the last
// append cut short by a crash, never acknowledged — is cut back. Anything else (a bad
// record in the middle of a file, a missing or shortened file, a gap between files, records
// acknowledged and then lost at the end) is fenced: the intact records on either side stay
// readable, the lost range is recorded as a Damage, logged as an error, shown by Stats and
// served to readers as a loss (see Read), and its sequence numbers are never used again.
//
// A file with damage inside is read as several pieces — segments that share the file, each
// an unbroken run of records — with the damaged ranges between them.

// Damage is a range of the log's sequence numbers whose records were lost.
type Damage struct {
	First, Last uint64        // the lost sequence numbers, inclusive
	After       cursor.Cursor // the intact item just before the range; zero when none
	Next        cursor.Cursor // the intact item just after it; zero while there is none
	File        string        // the file the damage was found in, when it was in one
	Offset, End int64         // the damaged bytes [Offset, End) of File; End 0 when unknown
	Reason      string
}

// Count is the number of sequence numbers lost.
func (d Damage) Count() uint64 { return d.Last - d.First + 1 }

func (d Damage) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sequence numbers %d to %d (%d events) lost", d.First, d.Last, d.Count())
	if !d.After.IsZero() {
		fmt.Fprintf(&b, " after cursor %s", d.After)
	}
	if !d.Next.IsZero() {
		fmt.Fprintf(&b, ", before cursor %s", d.Next)
	}
	if d.File != "" {
		fmt.Fprintf(&b, "; %s", d.File)
		if d.End > 0 {
			fmt.Fprintf(&b, " bytes %d to %d", d.Offset, d.End)
		} else if d.Offset > 0 {
			fmt.Fprintf(&b, " from byte %d", d.Offset)
		}
	}
	if d.Reason != "" {
		fmt.Fprintf(&b, ": %s", d.Reason)
	}
	return b.String()
}

// sharedFile is a file that several segments (the pieces of a damaged file) read through;
// it is closed when the last of them lets go.
type sharedFile struct {
	f    file
	refs atomic.Int32
}

// fileHandle is one segment's hold on a sharedFile: Close lets go of it once.
type fileHandle struct {
	sf   *sharedFile
	once sync.Once
}

func share(f file) *fileHandle {
	sf := &sharedFile{f: f}
	sf.refs.Store(1)
	return &fileHandle{sf: sf}
}

// another returns a second handle on the same file.
func (h *fileHandle) another() *fileHandle {
	h.sf.refs.Add(1)
	return &fileHandle{sf: h.sf}
}

func (h *fileHandle) ReadAt(p []byte, off int64) (int, error)  { return h.sf.f.ReadAt(p, off) }
func (h *fileHandle) WriteAt(p []byte, off int64) (int, error) { return h.sf.f.WriteAt(p, off) }
func (h *fileHandle) Sync() error                              { return h.sf.f.Sync() }
func (h *fileHandle) Truncate(size int64) error                { return h.sf.f.Truncate(size) }
func (h *fileHandle) Close() error {
	var err error
	h.once.Do(func() {
		if h.sf.refs.Add(-1) == 0 {
			err = h.sf.f.Close()
		}
	})
	return err
}

// fileScan is the result of reading every frame of a segment file.
type fileScan struct {
	f      io.ReaderAt
	pieces []*segment // the unbroken runs of records, in order; their f is unset
	damage []Damage   // ranges lost inside the file, between pieces (File and offsets set)
	// stop is where reading stopped: the file's size, or the start of damage that no intact
	// record follows.
	stop int64
	// commitSeq and commitEnd locate the last record that ends an append (0: none).
	commitSeq uint64
	commitEnd int64
}

// last returns the sequence number of the last intact record, and whether there is one.
func (fs *fileScan) last() (uint64, bool) {
	if len(fs.pieces) == 0 {
		return 0, false
	}
	p := fs.pieces[len(fs.pieces)-1]
	return p.lastSeq(), true
}

// scanFile reads every frame of a segment file of size bytes whose records start at base,
// stamped no earlier than floorTS. A record that does not decode, or is not the next one,
// starts damage; reading resumes at the next intact record after it (found by its length,
// checksum, sequence number and time), or stops at the damage when there is none.
func scanFile(f io.ReaderAt, path string, size int64, base uint64, floorTS int64) (*fileScan, error) {
	return scanRange(f, path, segHeaderSize, size, base, floorTS)
}

// scanRange is scanFile over the bytes [from, size) of a file.
func scanRange(f io.ReaderAt, path string, from, size int64, base uint64, floorTS int64) (*fileScan, error) {
	w := &window{f: f, size: size}
	fs := &fileScan{f: f}
	var cur *segment
	expect, lastTS := base, floorTS
	off := from
	for off < size {
		b, err := w.at(off, frameHeader+recHeader)
		if err != nil {
			return nil, fmt.Errorf("read segment %s: %w", path, err)
		}
		var r rec
		derr := errShort
		if n := frameLen(b); n >= recHeader && off+frameHeader+int64(n) <= size {
			fb, err := w.at(off, frameHeader+n)
			if err != nil {
				return nil, fmt.Errorf("read segment %s: %w", path, err)
			}
			r, derr = decodeFrame(fb)
		}
		if derr == nil && r.seq == expect && r.ts >= lastTS {
			if cur == nil {
				cur = &segment{base: r.seq, floorTS: lastTS, path: path, start: off}
			}
			if cur.count%blockRecords == 0 {
				cur.index = append(cur.index, indexEntry{ts: r.ts, off: uint32(off)})
			}
			cur.count++
			cur.lastTS = r.ts
			off += int64(r.size)
			cur.size = off
			expect, lastTS = r.seq+1, r.ts
			if r.flags&flagCommit != 0 {
				fs.commitSeq, fs.commitEnd = r.seq, off
			}
			continue
		}
		next, nr, ok, err := w.resync(off+1, expect, lastTS)
		if err != nil {
			return nil, fmt.Errorf("read segment %s: %w", path, err)
		}
		if !ok {
			break
		}
		// A piece ends at the damage: its records must lie back to back in the file.
		if cur != nil {
			fs.pieces = append(fs.pieces, cur)
			cur = nil
		}
		if nr.seq > expect { // else only bytes between two records are bad: nothing lost
			fs.damage = append(fs.damage, Damage{First: expect, Last: nr.seq - 1, File: path, Offset: off, End: next, Reason: "records that do not read back intact"})
		}
		off, expect = next, nr.seq
	}
	if cur != nil {
		fs.pieces = append(fs.pieces, cur)
	}
	fs.stop = min(off, size) // a file shorter than its header holds nothing after it
	return fs, nil
}

func frameLen(b []byte) int {
	if len(b) < 4 {
		return -1
	}
	n := binary.LittleEndian.Uint32(b)
	if n > maxPayload {
		return -1
	}
	return int(n)
}

// window reads a file through a buffer.
type window struct {
	f    io.ReaderAt
	size int64
	buf  []byte
	off  int64
}

// at returns up to n bytes of the file from off (fewer at its end).
func (w *window) at(off int64, n int) ([]byte, error) {
	end := min(off+int64(n), w.size)
	if off >= w.off && end <= w.off+int64(len(w.buf)) {
		return w.buf[off-w.off : end-w.off], nil
	}
	want := max(int64(readChunk), end-off)
	want = min(want, w.size-off)
	if int64(cap(w.buf)) < want {
		w.buf = make([]byte, want)
	}
	w.buf = w.buf[:want]
	m, err := w.f.ReadAt(w.buf, off)
	if int64(m) < want && err != nil && err != io.EOF {
		return nil, err
	}
	w.buf, w.off = w.buf[:m], off
	return w.buf[:min(int64(m), end-off)], nil
}

// resync finds the first intact frame at or after from whose record could follow: a
// sequence number of at least expect (no more than the bytes left could hold) and a time
// of at least lastTS. Cheap checks of the header come first; the checksum last.
func (w *window) resync(from int64, expect uint64, lastTS int64) (int64, rec, bool, error) {
	const minFrame = frameHeader + recHeader
	le := binary.LittleEndian
	for p := from; p+minFrame <= w.size; p++ {
		b, err := w.at(p, minFrame)
		if err != nil {
			return 0, rec{}, false, err
		}
		if len(b) < minFrame {
			break
		}
		n := int(le.Uint32(b))
		if n < recHeader || n > maxPayload || p+int64(frameHeader+n) > w.size {
			continue
		}
		pl := b[frameHeader:]
		seq, ts := le.Uint64(pl[atSeq:]), int64(le.Uint64(pl[atTS:]))
		if seq < expect || seq-expect > uint64(w.size-from)/minFrame+1 || ts < lastTS {
			continue
		}
		if recHeader+int(le.Uint16(pl[atTypeLen:])) > n {
			continue
		}
		fb, err := w.at(p, frameHeader+n)
		if err != nil {
			return 0, rec{}, false, err
		}
		if r, err := decodeFrame(fb); err == nil {
			return p, r, true, nil
		}
	}
	return 0, rec{}, false, nil
}

// gapDamage returns the damage in the seq gap between two pieces (or after the last one):
// the range [first, last], with the intact cursors around it.
func gapDamage(before *segment, first, last uint64, next *segment) Damage {
	d := Damage{First: first, Last: last}
	if before != nil && before.count > 0 {
		d.After = before.lastCursor()
	}
	if next != nil && next.count > 0 {
		d.Next = cursor.New(next.firstTS(), next.base, cursor.NodeWidth)
	}
	return d
}

// mergeDamage adds found to known, keeping one entry per range: a range found with file
// and offsets replaces a bare one for the same sequence numbers.
func mergeDamage(known []Damage, found ...Damage) []Damage {
	for _, d := range found {
		i := sort.Search(len(known), func(i int) bool { return known[i].Last >= d.First })
		if i < len(known) && known[i].First <= d.Last {
			if known[i].File == "" && d.File != "" {
				after, next := known[i].After, known[i].Next
				known[i] = d
				if d.After.IsZero() {
					known[i].After = after
				}
				if d.Next.IsZero() {
					known[i].Next = next
				}
			}
			continue
		}
		known = append(known, Damage{})
		copy(known[i+1:], known[i:])
		known[i] = d
	}
	return known
}

// fence re-reads a segment in which a record did not read back after it was opened, puts
// its intact runs of records in its place, and records the ranges lost. It reports whether
// the log changed, so that a read may be tried again. The segment taking appends, and a log
// in memory, are not fenced: their records were all read when the log was opened or written.
func (l *Log) fence(seg *segment) bool {
	l.fenceMu.Lock()
	defer l.fenceMu.Unlock()
	l.mu.RLock()
	i := slices.Index(l.segs, seg)
	writing := seg == l.wactLocked()
	l.mu.RUnlock()
	if i < 0 {
		return true // already fenced, or pruned: read again
	}
	h, ok := seg.f.(*fileHandle)
	if writing || !ok || seg.count == 0 {
		return false
	}
	fs, err := scanRange(h, seg.path, seg.start, seg.size, seg.base, seg.floorTS)
	if err != nil {
		l.log.Error("eventlog: re-reading a damaged segment", "file", seg.path, "err", err)
		return false
	}
	var found []Damage
	lost := func(first, last uint64, off, end int64, reason string) {
		found = append(found, Damage{First: first, Last: last, File: seg.path, Offset: off, End: end, Reason: reason})
	}
	switch {
	case len(fs.pieces) == 0:
		lost(seg.base, seg.lastSeq(), seg.start, seg.size, "no record of the file reads back")
	default:
		if p := fs.pieces[0]; p.base > seg.base {
			lost(seg.base, p.base-1, seg.start, p.start, "the start of the file does not read back")
		}
		found = append(found, fs.damage...)
		if ls, _ := fs.last(); ls < seg.lastSeq() {
			lost(ls+1, seg.lastSeq(), fs.stop, seg.size, "the end of the file does not read back")
		}
	}
	if len(found) == 0 {
		return false
	}
	found = mergeDamage(nil, found...) // a bad first record is also the start of the file
	for j, p := range fs.pieces {
		p.f = h.another()
		p.refs.Store(1)
		p.piece = true
		_ = j
	}
	l.mu.Lock()
	if i >= len(l.segs) || l.segs[i] != seg {
		l.mu.Unlock()
		for _, p := range fs.pieces {
			p.release()
		}
		return true
	}
	l.segs = slices.Replace(l.segs, i, i+1, fs.pieces...)
	for k := range found {
		d := &found[k]
		for j, s := range l.segs {
			if s.count > 0 && s.lastSeq() < d.First && (j+1 == len(l.segs) || l.segs[j+1].base > d.Last) {
				d.After = s.lastCursor()
				if j+1 < len(l.segs) && l.segs[j+1].count > 0 {
					d.Next = l.segs[j+1].firstCursor()
				}
			}
		}
		l.damage = mergeDamage(l.damage, *d)
	}
	l.oldestAt = 0
	l.mu.Unlock()
	seg.release()
	if seg.path != "" {
		// The index file no longer describes the file: the next open reads the file whole.
		_ = os.Remove(idxPath(seg.path))
	}
	for _, d := range found {
		l.log.Error("eventlog: events lost to damage found in a segment; readers are told of the loss, and the intact events around it stay readable",
			"first_seq", d.First, "last_seq", d.Last, "events", d.Count(), "after", d.After.String(), "next", d.Next.String(),
			"file", d.File, "offset", d.Offset, "end", d.End, "reason", d.Reason)
	}
	return true
}

// check reads every record of the segments that were opened from their index files, once,
// in the background after opening, and fences those with damage.
func (l *Log) check() {
	defer l.checked.Store(true)
	l.mu.RLock()
	var todo []*segment
	for _, s := range l.segs {
		if s.trusted {
			s.acquire()
			todo = append(todo, s)
		}
	}
	l.mu.RUnlock()
	for _, s := range todo {
		select {
		case <-l.quit:
			s.release()
			continue
		default:
		}
		fs, err := scanRange(s.f, s.path, s.start, s.size, s.base, s.floorTS)
		intact := err == nil && len(fs.damage) == 0 && len(fs.pieces) == 1 &&
			fs.pieces[0].count == s.count && fs.pieces[0].size == s.size
		s.release()
		if err != nil {
			l.log.Warn("eventlog: checking a segment", "file", s.path, "err", err)
			continue
		}
		if !intact {
			l.fence(s)
		}
	}
}
