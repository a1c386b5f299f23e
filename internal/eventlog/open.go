package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/evtctl/evtctl/internal/atomicfile"
)

// open loads the log in l.opts.Dir (or starts one in memory): every segment file in order,
// the intact records of each, the damage between them, and the high-water mark.
func (l *Log) open() error {
	if l.opts.Dir == "" {
		l.segs = []*segment{newMemSegment(1, 0)}
		l.wnext, l.low, l.wsize = 1, 1, segHeaderSize
		return nil
	}
	if err := os.MkdirAll(l.opts.Dir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	lock, err := atomicfile.TryLock(filepath.Join(l.opts.Dir, "LOCK"))
	if errors.Is(err, atomicfile.ErrLocked) {
		return fmt.Errorf("data directory %s is in use by another process", l.opts.Dir)
	}
	if err != nil {
		return fmt.Errorf("lock data directory: %w", err)
	}
	l.lock = lock
	if _, err := atomicfile.RemoveTemps(l.opts.Dir); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	mk, err := readMarks(l.opts.Dir, l.log)
	if err != nil {
		return err
	}
	ld, err := loadDir(l.opts.Dir, mk, l.log, false)
	if err != nil {
		ld.release()
		return err
	}
	l.dropped = ld.dropped
	l.damage = ld.damage
	l.segs = ld.segs
	// Sequences continue above every record ever committed, intact or lost; timestamps
	// never go back.
	l.wnext = max(ld.lastSeq, mk.high.seq) + 1
	l.wlastTS = max(ld.lastTS, mk.high.ts)
	if ld.active == nil {
		s, err := createSegment(l.opts.Dir, l.wnext, l.wlastTS)
		if err != nil {
			ld.release()
			return err
		}
		ld.active = s
		l.segs = append(l.segs, s)
	}
	act := ld.active
	l.committed = l.wnext - 1
	l.headTS = l.wlastTS
	l.wsize, l.wcount = act.size, act.count
	l.low = l.wnext
	if len(l.segs) > 0 && l.segs[0].count > 0 {
		l.low = l.segs[0].base
	}
	if len(l.damage) > 0 && l.damage[0].First < l.low {
		l.low = l.damage[0].First // a damaged start is part of the log, not of what retention dropped
	}
	if mk.low.known {
		l.low = min(mk.low.seq, l.wnext) // records below it were dropped by retention
	}
	if l.hwm, err = openMark(l.opts.Dir, highMark, l.committed, l.headTS); err != nil {
		return fmt.Errorf("high-water mark: %w", err)
	}
	if l.lwm, err = openMark(l.opts.Dir, lowMark, l.low, 0); err != nil {
		return fmt.Errorf("low-water mark: %w", err)
	}
	for _, d := range l.damage {
		l.log.Error("eventlog: events lost to damage; readers are told of the loss, and the intact events around it stay readable",
			"first_seq", d.First, "last_seq", d.Last, "events", d.Count(), "after", d.After.String(), "next", d.Next.String(),
			"file", d.File, "offset", d.Offset, "end", d.End, "reason", d.Reason)
	}
	l.applyCaps()
	if err := l.applyWindow(); err != nil {
		return err
	}
	return l.rebuildDedupe()
}

// loaded is what loadDir found in a data directory.
type loaded struct {
	segs    []*segment // every intact run of records, oldest first; pieces of damaged files among them
	active  *segment   // the last file, when it may take appends (intact, nothing lost after it)
	damage  []Damage
	dropped int64  // bytes of torn tails cut off
	lastSeq uint64 // the highest sequence number known to be used, intact or lost
	lastTS  int64  // the latest timestamp of any record
}

func (ld *loaded) release() {
	for _, s := range ld.segs {
		s.release()
	}
}

// marks is what the mark files said when the log was opened.
type marks struct {
	high, low markState
}

// readMarks reads the marks in dir; an empty file (see markState) is logged and taken as none.
func readMarks(dir string, log logger) (marks, error) {
	var mk marks
	var err error
	if mk.high, err = readMark(dir, highMark); err != nil {
		return mk, err
	}
	if mk.low, err = readMark(dir, lowMark); err != nil {
		return mk, err
	}
	for _, m := range []struct {
		st markState
		k  markKind
	}{{mk.high, highMark}, {mk.low, lowMark}} {
		if m.st.empty {
			log.Warn("eventlog: a mark file is empty (an earlier version was stopped while creating it on the log's first start): the log is read without it, and the file is written anew", "file", filepath.Join(dir, m.k.file))
		}
	}
	return mk, nil
}

// loadDir opens every segment file of dir. The high-water mark (when known) is the highest
// sequence number the log ever committed: records up to it were acknowledged, those beyond
// it never. The low-water mark (when known) is where the log starts: records from it on that
// no file holds are lost; records below it, dropped by retention, are set aside.
// Only a torn tail of the last file (records beyond every acknowledged one) is cut off; all
// other damage is kept in place and described. With verify, nothing is changed (what would
// be is told to log), and every file is read whole, whatever its index file says.
func loadDir(dir string, mk marks, log logger, verify bool) (*loaded, error) {
	hwmSeq, hwmKnown := mk.high.seq, mk.high.known
	names, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		return &loaded{}, err
	}
	sort.Strings(names) // zero-padded base sequences sort numerically
	ld := &loaded{}
	var (
		prev   *segment // the last intact run so far
		next   uint64   // the sequence number after the last file's records; 0: no file yet
		start  uint64   // where the log starts (the low-water mark); 0: where its files start
		broken *openedFile
	)
	if mk.low.known && mk.low.seq > 0 {
		start = mk.low.seq
		ld.lastSeq = start - 1
	}
	lost := func(first, last uint64, next *segment, reason string) {
		d := gapDamage(prev, first, last, next)
		d.Reason = reason
		if broken != nil {
			d.File, d.Offset, d.End, d.Reason = broken.path, broken.stop, broken.size, "the end of the file does not read back"
		}
		ld.damage = mergeDamage(ld.damage, d)
	}
	for i, name := range names {
		last := i == len(names)-1
		of, err := openFile(name, last, hwmSeq, hwmKnown, log, verify)
		if err != nil {
			return ld, err
		}
		ld.dropped += of.dropped
		if of.remove {
			continue
		}
		ld.lastTS = max(ld.lastTS, of.floorTS)
		if next != 0 && of.base < next {
			of.release()
			return ld, fmt.Errorf("segment file %s starts at sequence number %d, which an earlier file holds: the data directory holds files of another log, or a file was copied in; move the one that does not belong out of %s", name, of.base, dir)
		}
		switch expect := max(next, start); {
		case expect == 0 || of.base <= expect:
		case next == 0:
			lost(expect, of.base-1, of.first(), fmt.Sprintf("the log starts at sequence number %d (its low-water mark), and no segment file holds these records: the oldest files are missing", start))
		default:
			lost(expect, of.base-1, of.first(), "no segment file holds these records: a file is missing")
		}
		if p := of.first(); p != nil && p.count > 0 && p.base > of.base {
			d := gapDamage(prev, of.base, p.base-1, p)
			d.File, d.Offset, d.Reason = name, segHeaderSize, "the start of the file does not read back"
			ld.damage = mergeDamage(ld.damage, d)
		}
		ld.segs = append(ld.segs, of.pieces...)
		for _, d := range of.damage {
			ld.damage = mergeDamage(ld.damage, ld.around(d)) // between two of the file's pieces
		}
		broken = nil
		if p := of.lastRecords(); p != nil {
			prev = p
			next = p.lastSeq() + 1
			ld.lastTS = max(ld.lastTS, p.lastTS)
		} else {
			next = max(next, of.base) // no intact record: the file's records are lost
		}
		if of.stop < of.size {
			broken = of
		}
		ld.lastSeq = max(ld.lastSeq, next-1)
		if last && of.active {
			ld.active = of.pieces[0]
		}
	}
	if hwmKnown && hwmSeq > ld.lastSeq {
		// Records acknowledged and then lost with the end of the log.
		lost(ld.lastSeq+1, hwmSeq, nil, "records acknowledged up to this one are missing: the last segment file was removed or cut short")
		ld.lastSeq = hwmSeq
		ld.active = nil
	}
	if start > 0 {
		ld.damage = damageFrom(ld.damage, start)
	}
	return ld, nil
}

// damageFrom is the part of the lost ranges at or above seq: what lies below was dropped by
// retention.
func damageFrom(ds []Damage, seq uint64) []Damage {
	i := 0
	for i < len(ds) && ds[i].Last < seq {
		i++
	}
	ds = ds[i:]
	if len(ds) > 0 && ds[0].First < seq {
		ds[0].First = seq
	}
	return ds
}

// around fills in the intact cursors around a damaged range inside a file.
func (ld *loaded) around(d Damage) Damage {
	for i, s := range ld.segs {
		if s.count > 0 && s.lastSeq() == d.First-1 {
			d.After = s.lastCursor()
			if i+1 < len(ld.segs) && ld.segs[i+1].count > 0 {
				d.Next = ld.segs[i+1].firstCursor()
			}
		}
	}
	return d
}

// openedFile is one segment file as found.
type openedFile struct {
	path       string
	base       uint64
	floorTS    int64
	pieces     []*segment
	damage     []Damage // inside the file
	size, stop int64
	dropped    int64
	active     bool // the last file, intact: it takes appends
	remove     bool // a leftover with nothing in it, removed
}

// first is the file's first intact run of records; nil when it has none.
func (of *openedFile) first() *segment {
	for _, p := range of.pieces {
		if p.count > 0 {
			return p
		}
	}
	return nil
}

// lastRecords is the file's last intact run of records; nil when it has none.
func (of *openedFile) lastRecords() *segment {
	for i := len(of.pieces) - 1; i >= 0; i-- {
		if of.pieces[i].count > 0 {
			return of.pieces[i]
		}
	}
	return nil
}

func (of *openedFile) release() {
	for _, p := range of.pieces {
		p.release()
	}
}

// logger is what opening needs of a *slog.Logger.
type logger interface {
	Warn(msg string, args ...any)
	Error(msg string, args ...any)
}

// openFile opens one segment file: from its index file when it is sealed and the index is
// intact (its records are checked later, in the background), else by reading every frame.
func openFile(path string, last bool, hwmSeq uint64, hwmKnown bool, log logger, verify bool) (*openedFile, error) {
	of := &openedFile{path: path}
	nameBase, nameErr := baseFromName(path)
	flag := os.O_RDWR
	if verify {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return of, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return of, err
	}
	of.size = st.Size()
	hdr := make([]byte, segHeaderSize)
	n, _ := f.ReadAt(hdr, 0)
	base, floorTS, herr := parseSegHeader(hdr[:n])
	switch {
	case herr == nil:
	case n < segHeaderSize && last && nameErr == nil && unwritten(hdr[:n], nameBase):
		// Created but never written: a crash while rolling. Start it again.
		f.Close()
		log.Warn("eventlog: removing an incomplete segment", "file", path, "bytes", of.size)
		of.dropped, of.remove = of.size, true
		if verify {
			return of, nil
		}
		return of, os.Remove(path)
	case nameErr == nil:
		// The header is damaged; the records may not be. The name says where they start.
		// A file with no record of the log in it and not only zeros (what a file system
		// leaves of a file whose content it lost) is not one of the log's: it is refused,
		// not cut back or counted as lost events.
		if ours, err := holdsRecords(f, path, of.size, nameBase); err != nil || !ours {
			f.Close()
			if err == nil {
				err = fmt.Errorf("segment file %s is not an evtctl segment: its header does not read, and no record in it does (it was not changed); move it out of %s — if it was a file of this log, the node then reports its events as lost", path, filepath.Dir(path))
			}
			return of, err
		}
		log.Error("eventlog: a segment file's header is damaged; reading its records by the base in its name", "file", path, "err", herr)
		base, floorTS = nameBase, 0
	default:
		f.Close()
		return of, fmt.Errorf("segment %s: %w", path, herr)
	}
	of.base, of.floorTS = base, floorTS
	h := share(f)
	var indexed *segment // the segment as its index file describes it
	if !last {
		s := &segment{base: base, floorTS: floorTS, path: path, f: h, lastTS: floorTS}
		s.refs.Store(1)
		if readIndexFile(s, of.size) {
			if !verify {
				s.trusted = true
				of.pieces, of.stop = []*segment{s}, of.size
				return of, nil
			}
			indexed = s
		}
		if of.size == segHeaderSize {
			// An empty sealed segment holds nothing; keep the layout simple.
			h.Close()
			of.remove = true
			if !verify {
				_ = os.Remove(path)
				_ = os.Remove(idxPath(path))
			}
			return of, nil
		}
	}
	fs, err := scanFile(f, path, of.size, base, floorTS)
	if err != nil {
		h.Close()
		return of, err
	}
	if ls, _ := fs.last(); indexed != nil && (len(fs.pieces) != 1 || ls != indexed.lastSeq() || fs.stop != indexed.size) {
		log.Warn("eventlog: the index file does not match its segment; it is not used once the damage is found", "file", idxPath(path))
	}
	of.damage, of.stop = fs.damage, fs.stop
	if last {
		// The torn tail: records after the last acknowledged one (the last that ends an
		// append, or, when the high-water mark is known, any up to it), and the bytes after
		// them, were never acknowledged: they are cut off. Nothing before is.
		keep, keepEnd := fs.commitSeq, fs.commitEnd
		if hwmKnown {
			if ls, ok := fs.last(); ok && min(hwmSeq, ls) > keep {
				keep = min(hwmSeq, ls)
				keepEnd = fs.endOf(keep)
			}
		}
		ls, ok := fs.last()
		if !ok {
			ls = base - 1
		}
		lostAfter := hwmKnown && hwmSeq > ls // acknowledged records are missing
		switch {
		case ok && ls > keep:
			fs.cut(keep)
		case !ok && keep == 0:
			keepEnd = segHeaderSize
		}
		if keepEnd == 0 {
			keepEnd = segHeaderSize
		}
		if !lostAfter && keepEnd < of.size {
			dropped := of.size - keepEnd
			if verify {
				log.Warn("eventlog: a torn tail, never acknowledged, would be cut off on open", "file", path, "dropped_bytes", dropped, "kept_records", keep)
				of.stop, of.size = keepEnd, keepEnd
			} else {
				log.Warn("eventlog: truncated a torn or corrupt tail", "file", path, "dropped_bytes", dropped, "kept_records", keep)
			}
		}
		if !verify && !lostAfter && keepEnd < of.size {
			dropped := of.size - keepEnd
			if err := f.Truncate(keepEnd); err != nil {
				h.Close()
				return of, err
			}
			if err := f.Sync(); err != nil {
				h.Close()
				return of, err
			}
			of.dropped, of.size, of.stop = dropped, keepEnd, keepEnd
		}
		of.active = !lostAfter && len(fs.damage) == 0 && len(fs.pieces) <= 1 && of.stop == of.size &&
			(len(fs.pieces) == 0 || fs.pieces[0].base == base)
	}
	if len(fs.pieces) == 0 {
		if of.active {
			// An intact, empty last file: it takes appends from its base.
			s := &segment{base: base, floorTS: floorTS, path: path, f: h, start: segHeaderSize, size: segHeaderSize, lastTS: floorTS}
			s.refs.Store(1)
			of.pieces = []*segment{s}
			return of, nil
		}
		h.Close()
		return of, nil
	}
	for i, p := range fs.pieces {
		p.f = h
		if i > 0 {
			p.f = h.another()
		}
		p.refs.Store(1)
		p.piece = len(fs.pieces) > 1 || len(fs.damage) > 0 || !of.active && last
	}
	of.pieces = fs.pieces
	return of, nil
}

// endOf is the end offset of the record seq in the scanned file; 0 when it is not there.
func (fs *fileScan) endOf(seq uint64) int64 {
	for _, p := range fs.pieces {
		if p.count > 0 && seq >= p.base && seq <= p.lastSeq() {
			if seq == p.lastSeq() {
				return p.size
			}
			return p.offsetOf(fs.f, seq+1)
		}
	}
	return 0
}

// cut drops the records after seq from the scan's last piece.
func (fs *fileScan) cut(seq uint64) {
	p := fs.pieces[len(fs.pieces)-1]
	if seq < p.base {
		fs.pieces = fs.pieces[:len(fs.pieces)-1]
		if len(fs.pieces) > 0 {
			fs.cut(seq)
		}
		return
	}
	ts := p.tsOf(fs.f, seq)
	end := fs.endOf(seq)
	p.count = seq - p.base + 1
	p.size = end
	p.lastTS = ts
	p.index = p.index[:(p.count+blockRecords-1)/blockRecords]
	fs.stop = end
}

// tsOf reads the timestamp of record seq of s from f.
func (s *segment) tsOf(f io.ReaderAt, seq uint64) int64 {
	var b [frameHeader + atSeq]byte
	off := s.offsetOf(f, seq)
	if off < segHeaderSize {
		return s.lastTS // not read back: offsetOf says 0
	}
	if _, err := f.ReadAt(b[:], off); err != nil {
		return s.lastTS
	}
	return int64(binary.LittleEndian.Uint64(b[frameHeader+atTS:]))
}

// offsetOf finds where record seq of s starts by reading its block from f.
func (s *segment) offsetOf(f io.ReaderAt, seq uint64) int64 {
	ri := seq - s.base
	b := int(ri / blockRecords)
	off := int64(s.index[b].off)
	end := s.size
	if b+1 < len(s.index) {
		end = int64(s.index[b+1].off)
	}
	buf := make([]byte, end-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return 0
	}
	for k := uint64(0); k < ri%blockRecords; k++ {
		r, err := decodeFrame(buf)
		if err != nil {
			return 0
		}
		buf = buf[r.size:]
		off += int64(r.size)
	}
	return off
}

// unwritten reports whether the first bytes of a file are what creating a segment at base
// writes, or zeros: a segment created and not yet written when a crash came.
func unwritten(b []byte, base uint64) bool {
	want := segHeader(base, 0)[:16] // the magic, version and base; the time may be any
	zero, match := true, true
	for i, c := range b {
		zero = zero && c == 0
		match = match && (i >= len(want) || c == want[i])
	}
	return zero || match
}

// holdsRecords reports whether a file whose header does not read holds a record of a log
// whose records start at base, or is all zeros.
func holdsRecords(f io.ReaderAt, path string, size int64, base uint64) (bool, error) {
	fs, err := scanFile(f, path, size, base, 0)
	if err != nil || len(fs.pieces) > 0 {
		return err == nil, err
	}
	buf := make([]byte, readChunk)
	for off := int64(0); off < size; off += int64(len(buf)) {
		n, err := f.ReadAt(buf, off)
		if n == 0 && err != nil {
			return false, fmt.Errorf("read segment %s: %w", path, err)
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
	}
	return true, nil
}

func baseFromName(path string) (uint64, error) {
	var base uint64
	name := strings.TrimSuffix(filepath.Base(path), ".seg")
	if len(name) != 20 {
		return 0, fmt.Errorf("segment file name %s is not a 20-digit sequence number", filepath.Base(path))
	}
	_, err := fmt.Sscanf(name, "%d", &base)
	return base, err
}
