package eventlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// snapshot is a consistent view of the committed log for one read. It holds a reference on
// each segment so that pruning cannot close a file under it; readers keep nothing else.
type snapshot struct {
	segs      []segView
	low       uint64
	committed uint64
	newest    cursor.Cursor
	damage    []Damage // lost ranges at or above low, in order
}

type segView struct {
	s      *segment
	size   int64
	count  uint64
	lastTS int64
	index  []indexEntry
}

// pos addresses a record: segment si of the snapshot, record ri within it.
type pos struct {
	si int
	ri uint64
}

func (a pos) less(b pos) bool { return a.si < b.si || (a.si == b.si && a.ri < b.ri) }

func (l *Log) snapshot() (*snapshot, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.segs == nil {
		return nil, ErrClosed
	}
	sn := &snapshot{low: l.low, committed: l.committed, newest: l.newestLocked(), damage: l.damage}
	for _, s := range l.segs {
		if s.count == 0 || s.lastSeq() < l.low {
			continue
		}
		s.acquire()
		sn.segs = append(sn.segs, segView{s: s, size: s.size, count: s.count, lastTS: s.lastTS, index: s.index})
	}
	return sn, nil
}

func (sn *snapshot) release() {
	for _, v := range sn.segs {
		v.s.release()
	}
}

func (v *segView) cursorAt(ri uint64, ts int64) cursor.Cursor {
	return cursor.New(ts, v.s.base+ri, cursor.NodeWidth)
}

func (v *segView) lastCursor() cursor.Cursor { return v.cursorAt(v.count-1, v.lastTS) }

func (v *segView) firstCursor() cursor.Cursor { return v.cursorAt(0, v.index[0].ts) }

func (v *segView) blockEnd(b int) int64 {
	if b+1 < len(v.index) {
		return int64(v.index[b+1].off)
	}
	return v.size
}

// blockReader reads and decodes blocks into buffers it reuses; records it returns alias its
// buffer until the next read or until it goes back to the pool.
type blockReader struct {
	buf  []byte
	recs []rec
}

var readers = sync.Pool{New: func() any { return new(blockReader) }}

func getReader() *blockReader { return readers.Get().(*blockReader) }

func putReader(br *blockReader) {
	if cap(br.buf) <= 2*readChunk {
		br.recs = br.recs[:0]
		readers.Put(br)
	}
}

// read reads and decodes blocks [b0, b1] of the segment.
func (br *blockReader) read(v *segView, b0, b1 int) ([]rec, error) {
	start, end := int64(v.index[b0].off), v.blockEnd(b1)
	if n := int(end - start); cap(br.buf) < n {
		br.buf = make([]byte, n)
	} else {
		br.buf = br.buf[:n]
	}
	if _, err := v.s.f.ReadAt(br.buf, start); err != nil {
		return nil, fmt.Errorf("read %s: %w", v.s.path, err)
	}
	recs := br.recs[:0]
	for buf := br.buf; len(buf) > 0; {
		r, err := decodeFrame(buf)
		if err == nil && r.seq != v.s.base+uint64(b0*blockRecords+len(recs)) {
			err = errCorrupt // an intact frame, but not the record the index says is there
		}
		if err != nil {
			return nil, &frameError{seg: v.s, off: end - int64(len(buf)), err: err}
		}
		recs = append(recs, r)
		buf = buf[r.size:]
	}
	br.recs = recs
	return recs, nil
}

// frameError is a record that did not read back intact: its segment has damage that was
// not known when the segment was opened.
type frameError struct {
	seg *segment
	off int64
	err error
}

func (e *frameError) Error() string {
	return fmt.Sprintf("read %s at offset %d: %v", e.seg.path, e.off, e.err)
}

func (e *frameError) Unwrap() error { return e.err }

// start is the position of the first retained record.
func (sn *snapshot) start() pos {
	if len(sn.segs) == 0 {
		return pos{}
	}
	v := &sn.segs[0]
	if sn.low > v.s.base {
		return pos{0, sn.low - v.s.base}
	}
	return pos{}
}

// end is the position just past the last committed record.
func (sn *snapshot) end() pos { return pos{len(sn.segs), 0} }

// norm moves a position at the end of a segment to the start of the next.
func (sn *snapshot) norm(p pos) pos {
	if p.si < len(sn.segs) && p.ri >= sn.segs[p.si].count {
		return pos{p.si + 1, 0}
	}
	return p
}

// locate returns the first position whose cursor is after c (strict) or not before c.
// It costs two binary searches and one block read: O(log n).
func (sn *snapshot) locate(c cursor.Cursor, strict bool) (pos, error) {
	past := func(x cursor.Cursor) bool { // x is at or beyond the wanted position
		if strict {
			return x.After(c)
		}
		return !x.Before(c)
	}
	si := sort.Search(len(sn.segs), func(i int) bool { return past(sn.segs[i].lastCursor()) })
	if si == len(sn.segs) {
		return sn.end(), nil
	}
	v := &sn.segs[si]
	// Last block whose first record is not yet past c; blocks before it are wholly before.
	b := sort.Search(len(v.index), func(i int) bool {
		return past(v.cursorAt(uint64(i)*blockRecords, v.index[i].ts))
	}) - 1
	if b < 0 {
		return pos{si, 0}, nil
	}
	br := getReader()
	defer putReader(br)
	recs, err := br.read(v, b, b)
	if err != nil {
		return pos{}, err
	}
	for i, r := range recs {
		if past(cursor.New(r.ts, r.seq, cursor.NodeWidth)) {
			return pos{si, uint64(b*blockRecords + i)}, nil
		}
	}
	return sn.norm(pos{si, uint64((b + 1) * blockRecords)}), nil
}

// visit is called for each record in a scan; it returns false to stop. The record's
// bytes are valid only during the call.
type visit func(r *rec) bool

// chunkBlocks returns how many blocks from b (going up, or down when back) fit in a read of
// about budget bytes (at least one block).
func (v *segView) chunkBlocks(b, limit int, back bool, budget int64) int {
	n, bytes := 0, int64(0)
	for {
		i := b + n
		if back {
			i = b - n
		}
		if (back && i < limit) || (!back && i > limit) {
			return n
		}
		bytes += v.blockEnd(i) - int64(v.index[i].off)
		if n > 0 && bytes > budget {
			return n
		}
		n++
	}
}

// firstRead is the size of a scan's first read; each further read doubles, up to
// readChunk, so a short page reads little and a long scan reads in large chunks.
const firstRead = 8 << 10

// span is the range of records [lo, hi) of segment si that lies within [from, to).
func (sn *snapshot) span(si int, from, to pos) (lo, hi uint64) {
	hi = sn.segs[si].count
	if si == from.si {
		lo = from.ri
	}
	if si == to.si {
		hi = min(hi, to.ri)
	}
	return lo, hi
}

// scanForward visits records in [from, to) oldest first.
func (sn *snapshot) scanForward(ctx context.Context, from, to pos, fn visit) error {
	budget := int64(firstRead)
	br := getReader()
	defer putReader(br)
	for si := from.si; si < len(sn.segs) && si <= to.si; si++ {
		v := &sn.segs[si]
		lo, hi := sn.span(si, from, to)
		if lo >= hi {
			continue
		}
		lastBlock := int((hi - 1) / blockRecords)
		for b := int(lo / blockRecords); b <= lastBlock; {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := v.chunkBlocks(b, lastBlock, false, budget)
			budget = min(2*budget, readChunk)
			recs, err := br.read(v, b, b+n-1)
			if err != nil {
				return err
			}
			base := uint64(b * blockRecords)
			for i := range recs {
				ri := base + uint64(i)
				if ri < lo {
					continue
				}
				if ri >= hi {
					break
				}
				if !fn(&recs[i]) {
					return nil
				}
			}
			b += n
		}
	}
	return nil
}

// scanBackward visits records in [from, to) newest first.
func (sn *snapshot) scanBackward(ctx context.Context, from, to pos, fn visit) error {
	budget := int64(firstRead)
	br := getReader()
	defer putReader(br)
	for si := min(to.si, len(sn.segs)-1); si >= from.si; si-- {
		v := &sn.segs[si]
		lo, hi := sn.span(si, from, to)
		if lo >= hi {
			continue
		}
		firstBlock := int(lo / blockRecords)
		for b := int((hi - 1) / blockRecords); b >= firstBlock; {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := v.chunkBlocks(b, firstBlock, true, budget)
			budget = min(2*budget, readChunk)
			b0 := b - n + 1
			recs, err := br.read(v, b0, b)
			if err != nil {
				return err
			}
			base := uint64(b0 * blockRecords)
			for i := len(recs) - 1; i >= 0; i-- {
				ri := base + uint64(i)
				if ri >= hi {
					continue
				}
				if ri < lo {
					break
				}
				if !fn(&recs[i]) {
					return nil
				}
			}
			b = b0 - 1
		}
	}
	return nil
}

// Read implements Store.
//
// Damage shapes a read as if the log began after each lost range, for the readers that run
// into one: a reader whose next record is lost (After is the record before the range, or in
// it) is served from the first intact record after the range, with Oldest saying so — the
// lost-events signal of ADR-075. A forward read stops before a lost range (More, and Resume
// at the last record before it), so that the next read meets it; a newest-first read stops
// after one, with Oldest at the first record above it (see lossBelow for the newest records).
func (l *Log) Read(ctx context.Context, q Query) (Page, error) {
	for attempt := 0; ; attempt++ {
		page, err := l.read(ctx, q)
		var fe *frameError
		if attempt < 2 && errors.As(err, &fe) && l.fence(fe.seg) {
			continue // the damage is fenced now: read again around it
		}
		return page, err
	}
}

func (l *Log) read(ctx context.Context, q Query) (Page, error) {
	sn, err := l.snapshot()
	if err != nil {
		return Page{}, err
	}
	defer sn.release()
	page := Page{Newest: sn.newest}
	if page.Oldest, err = l.oldestIn(sn); err != nil {
		return Page{}, err
	}
	if q.Ascending && q.After.IsZero() {
		if c := sn.beforeLostStart(); !c.IsZero() {
			// The log's start is lost. A reader from the start has no position for Oldest to
			// be told against: it stops before the lost range, at a position of its own, and
			// its next read, after it, is told of the loss as any reader is.
			page.More, page.Resume, page.AtLoss = true, c, true
			return page, nil
		}
	}
	if len(sn.segs) == 0 {
		return page, nil
	}
	from, to := sn.start(), sn.end()
	if !q.After.IsZero() {
		p, err := sn.locate(q.After, true)
		if err != nil {
			return Page{}, err
		}
		if from.less(p) {
			from = p
		}
		if q.After.Width == cursor.NodeWidth {
			if d := sn.damageAt(q.After.Seq + 1); d != nil {
				// The reader's next record is lost: it starts after the damage.
				p, c := sn.after(d)
				page.Oldest = c
				if from.less(p) {
					from = p
				}
			}
		}
	}
	if !q.Before.IsZero() {
		p, err := sn.locate(q.Before, false)
		if err != nil {
			return Page{}, err
		}
		if p.less(to) {
			to = p
		}
	}
	if !from.less(to) {
		return page, nil
	}
	// The lost range the read would cross, if any.
	var stop pos // ascending: where the read must stop short; newest first: where it starts
	cut := false
	if q.Ascending {
		if d := sn.damageAfter(sn.seqAt(from)); d != nil && d.First < sn.seqAt(to) {
			stop, cut = sn.posOfSeq(d.First), true
			to = stop
		}
	} else if d := sn.lossBelow(to, q.Before.IsZero()); d != nil && sn.seqAt(from) < d.First {
		p, c := sn.after(d)
		if from.less(p) {
			from, page.Oldest = p, c
		}
	}
	limit := max(q.Max, 1)
	page.Items = make([]Item, 0, min(limit, 1024))
	examined := 0
	var lastSeen cursor.Cursor
	lastType := "" // runs of events share a type: their items share its string
	fn := func(r *rec) bool {
		if q.Budget > 0 && examined == q.Budget {
			page.More, page.Resume = true, lastSeen
			return false
		}
		examined++
		lastSeen = cursor.New(r.ts, r.seq, cursor.NodeWidth)
		if q.Match != nil && !q.Match(r.json) {
			return true
		}
		if len(page.Items) == limit {
			page.More, page.Resume = true, cursor.Cursor{}
			return false
		}
		if string(r.typ) != lastType {
			lastType = string(r.typ)
		}
		page.Items = append(page.Items, Item{
			Cursor: lastSeen,
			Type:   lastType,
			JSON:   page.arena.copy(r.json), // the read buffer is reused
		})
		return true
	}
	if q.Ascending {
		err = sn.scanForward(ctx, from, to, fn)
	} else {
		err = sn.scanBackward(ctx, from, to, fn)
	}
	if err != nil {
		return Page{}, err
	}
	if cut && !page.More {
		// Stopped short of a lost range: the next read, after the record before it, is told.
		page.More, page.Resume, page.AtLoss = true, sn.cursorBefore(stop), true
	}
	return page, nil
}

// lossBelow is the lost range a newest-first read ending at to would cross, if any. From the
// head (fromHead), lost ranges with no intact record above them — the newest records were
// lost — are not crossed but stepped over: the read starts at the newest intact record, and
// a reader that had seen past it is told by the next forward read, or by the first record
// written after the damage. Otherwise the read stops above the range.
func (sn *snapshot) lossBelow(to pos, fromHead bool) *Damage {
	d := sn.damageBefore(sn.seqAt(to))
	for fromHead && d != nil {
		if p, _ := sn.after(d); p.less(to) {
			break
		}
		d = sn.damageBefore(d.First)
	}
	return d
}

// beforeLostStart is, when the log's first record (at its low mark) is lost, the position
// just before it: the sequence number before the lost range's, and a time before the first
// intact record after it (or before the newest record, when none is left). Zero otherwise.
func (sn *snapshot) beforeLostStart() cursor.Cursor {
	d := sn.damageAt(sn.low)
	if d == nil {
		return cursor.Cursor{}
	}
	_, next := sn.after(d)
	if next.IsZero() {
		next = sn.newest
	}
	c := cursor.New(max(next.TS, 1)-1, sn.low-1, cursor.NodeWidth)
	if c.Compare(cursor.Cursor{}) <= 0 {
		return cursor.Cursor{} // a clock at zero: no position is before the log's
	}
	return c
}

// damageAt is the lost range holding seq, if any.
func (sn *snapshot) damageAt(seq uint64) *Damage {
	for i := range sn.damage {
		if d := &sn.damage[i]; d.First <= seq && seq <= d.Last {
			return d
		}
	}
	return nil
}

// damageAfter is the first lost range above seq.
func (sn *snapshot) damageAfter(seq uint64) *Damage {
	for i := range sn.damage {
		if d := &sn.damage[i]; d.First > seq {
			return d
		}
	}
	return nil
}

// damageBefore is the last lost range below seq.
func (sn *snapshot) damageBefore(seq uint64) *Damage {
	for i := len(sn.damage) - 1; i >= 0; i-- {
		if d := &sn.damage[i]; d.Last < seq {
			return d
		}
	}
	return nil
}

// after returns the position and cursor of the first intact record after d; at the end (and
// a zero cursor) when none has been appended since.
func (sn *snapshot) after(d *Damage) (pos, cursor.Cursor) {
	for i := range sn.segs {
		if v := &sn.segs[i]; v.s.base > d.Last {
			return pos{i, 0}, v.firstCursor()
		}
	}
	return sn.end(), cursor.Cursor{}
}

// seqAt is the sequence number at a position (one past the last at the end).
func (sn *snapshot) seqAt(p pos) uint64 {
	if p.si >= len(sn.segs) {
		return sn.committed + 1
	}
	return sn.segs[p.si].s.base + p.ri
}

// posOfSeq is the position of the first record at or above seq.
func (sn *snapshot) posOfSeq(seq uint64) pos {
	for i := range sn.segs {
		v := &sn.segs[i]
		if v.s.base+v.count > seq {
			if seq <= v.s.base {
				return pos{i, 0}
			}
			return pos{i, seq - v.s.base}
		}
	}
	return sn.end()
}

// cursorBefore is the cursor of the record just before position p (which is a segment
// boundary when a forward read stops at damage).
func (sn *snapshot) cursorBefore(p pos) cursor.Cursor {
	if p.ri == 0 && p.si > 0 {
		return sn.segs[p.si-1].lastCursor()
	}
	return cursor.Cursor{}
}

// oldest returns the cursor of the oldest retained item.
func (l *Log) oldest() cursor.Cursor {
	sn, err := l.snapshot()
	if err != nil {
		return cursor.Cursor{}
	}
	defer sn.release()
	c, _ := l.oldestIn(sn)
	return c
}

// oldestIn finds the cursor of the snapshot's first record, cached per low mark.
func (l *Log) oldestIn(sn *snapshot) (cursor.Cursor, error) {
	if len(sn.segs) == 0 {
		return cursor.Cursor{}, nil
	}
	l.mu.RLock()
	c, at := l.oldestC, l.oldestAt
	l.mu.RUnlock()
	if at == sn.low && !c.IsZero() {
		return c, nil
	}
	p := sn.start()
	v := &sn.segs[p.si]
	b := int(p.ri / blockRecords)
	br := getReader()
	defer putReader(br)
	recs, err := br.read(v, b, b)
	if err != nil {
		return cursor.Cursor{}, err
	}
	r := recs[p.ri%blockRecords]
	c = cursor.New(r.ts, r.seq, cursor.NodeWidth)
	l.mu.Lock()
	if l.low == sn.low {
		l.oldestC, l.oldestAt = c, sn.low
	}
	l.mu.Unlock()
	return c, nil
}

// arena copies the items of one page into a few large chunks rather than one allocation
// each; the chunks are reused once the page is released.
type arena struct {
	buf    []byte
	chunks []*[]byte
}

const arenaChunk = 256 << 10

var arenaChunks = sync.Pool{New: func() any { b := make([]byte, 0, arenaChunk); return &b }}

func (a *arena) copy(b []byte) []byte {
	if cap(a.buf)-len(a.buf) < len(b) {
		if len(b) > arenaChunk {
			return bytes.Clone(b) // a huge item: its own allocation, not pooled
		}
		c := arenaChunks.Get().(*[]byte)
		a.chunks = append(a.chunks, c)
		a.buf = (*c)[:0]
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// Release hands the page's memory back for reuse. The items' JSON must not be used after.
// Calling it is optional: an unreleased page is collected as usual.
func (p *Page) Release() {
	for _, c := range p.arena.chunks {
		*c = (*c)[:0]
		arenaChunks.Put(c)
	}
	p.arena = arena{}
	p.Items = nil
}
