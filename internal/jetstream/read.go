package jetstream

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// Read implements eventlog.Store. A read is a snapshot up to the newest message this node
// has seen: Newest is that message and no item is newer, so a reader that resumes from
// Newest misses nothing. A filter is applied as messages arrive, so memory stays bounded,
// however far a rare filter scans; Query.Budget bounds the messages it examines.
//
// Messages removed from the middle of the stream (a message deleted by an operator, or by
// a per-subject limit of a stream that has none) leave a hole in the sequences, which a
// reader would not notice: they are treated as the embedded log treats a range lost to
// damage, so that a reader that crosses one is told, once, through Oldest. A read whose
// After is the message just before a hole is served from the first message after it, with
// Oldest set to that message; an ascending read stops short of a hole (More, Resume at the
// message before it, AtLoss); a newest-first read stops at one, with Oldest at the message
// above it. On a stream with a per-subject limit (max_msgs_per_subject), holes are how the
// stream keeps only the newest messages of each subject: they are stepped over silently. When
// that limit is the only one that removes messages (no max_age, and no max_msgs or max_bytes
// with discard old), so are the messages gone from the front: a reader whose After is behind
// the stream's first message is told Oldest is After itself, for it has lost nothing.
func (s *Store) Read(ctx context.Context, q eventlog.Query) (eventlog.Page, error) {
	if !s.enter() {
		return eventlog.Page{}, eventlog.ErrClosed
	}
	defer s.leave()
	if err := s.refusal(); err != nil {
		return eventlog.Page{}, err
	}
	s.freshHead(ctx)
	if a := q.After; a.Width == cursor.NodeWidth {
		if last, _ := s.tr.head(); a.Seq > last {
			// After is past the head this node has seen: another node of the stream may
			// have handed it out a moment ago. Look at the stream before the reply says
			// the cursor is past its newest message.
			if info, err := s.info(ctx); err == nil {
				s.takeHead(ctx, info.State.LastSeq)
			}
		}
	}
	page, err := s.read(ctx, q)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, eventlog.ErrUnavailable) {
		// A step of the read ran out of its own time (the stream between leaders, a
		// consumer gone with its server): worth a retry, never an internal error.
		err = unavailable("no message from NATS within %s: %v", s.opts.Timeout, err)
	}
	if a := q.After; err == nil && s.keyed.Load() && a.Width == cursor.NodeWidth && !page.Oldest.IsZero() && a.Before(page.Oldest) && a.Seq < page.Oldest.Seq {
		page.Oldest = a // superseded messages before the first: retention, not a loss
	}
	s.noteRead(ctx, err)
	return page, err
}

func (s *Store) read(ctx context.Context, q eventlog.Query) (eventlog.Page, error) {
	var page eventlog.Page
	last, lastTS := s.tr.head()
	if last == 0 {
		return page, nil // never written
	}
	page.Newest = cursor.New(lastTS, last, cursor.NodeWidth)
	first, oldest, err := s.oldestFor(ctx, last)
	if err != nil {
		return eventlog.Page{}, err
	}
	if first > last || oldest.IsZero() {
		return page, nil // retention has removed everything
	}
	page.Oldest = oldest
	lk := s.newLookup(ctx, last)
	lk.m[first], lk.m[last] = oldest, page.Newest
	lo, hi := first, last+1 // the sequences [lo, hi) are eligible
	if !q.After.IsZero() {
		b, err := s.locate(lk, q.After, true, first, last)
		if err != nil {
			return eventlog.Page{}, err
		}
		lo = max(lo, b)
	}
	sc := scan{s: s, ctx: ctx, limit: max(q.Max, 1), match: q.Match, budget: q.Budget, holes: s.holesLost()}
	if !q.Before.IsZero() {
		b, err := s.locate(lk, q.Before, false, first, last)
		if err != nil {
			return eventlog.Page{}, err
		}
		hi = min(hi, b)
		if hi <= last && sc.holes {
			top, err := lk.at(hi)
			if err != nil {
				return eventlog.Page{}, err
			}
			if top.Seq <= last {
				sc.top = top // a message the stream holds
			}
		}
	}
	// The reader's next message, when After is a cursor of this stream (lo lies just after
	// it): a hole there is events it lost.
	if a := q.After; !a.IsZero() && a.Width == cursor.NodeWidth && sc.holes && a.Seq < last && a.Seq+1 >= first && lo <= a.Seq+1 {
		sc.expect = a.Seq + 1
	}
	if lo >= hi {
		return page, nil
	}
	if q.Ascending {
		err = sc.up(lo, hi)
	} else {
		err = sc.down(lo, hi)
	}
	if err != nil {
		return eventlog.Page{}, err
	}
	if sc.jumped {
		// The scan found its first message past where it started: retention has moved the
		// oldest meanwhile, which the page must say (a reader behind it lost events).
		if _, o, err := s.refreshOldest(ctx); err == nil && o.After(page.Oldest) {
			page.Oldest = o
		}
	}
	if !sc.oldest.IsZero() && sc.oldest.After(page.Oldest) {
		page.Oldest = sc.oldest
	}
	page.Items, page.More, page.Resume, page.AtLoss = sc.items, sc.more, sc.resume, sc.atLoss
	return page, nil
}

// locate returns the first sequence in [first, last+1] whose cursor is after c (strict)
// or not before c. A cursor this store handed out is checked at its own sequence and the
// next, normally from the tracker's memory; any other position (a time, a cursor of
// another log, of the stream before it was recreated) is found by binary search over the
// sequences, as cursor times do not decrease along the stream.
func (s *Store) locate(lk *lookup, c cursor.Cursor, strict bool, first, last uint64) (uint64, error) {
	pred := func(x cursor.Cursor) bool {
		if strict {
			return x.After(c)
		}
		return !x.Before(c)
	}
	at := func(seq uint64) (bool, error) {
		if seq > last {
			return true, nil
		}
		x, err := lk.at(seq)
		return pred(x), err
	}
	if p, err := at(first); err != nil || p {
		return first, err
	}
	if p, err := at(last); err != nil || !p {
		return last + 1, err
	}
	// The answer is in [lo, hi]: pred(lo-1) is false, pred(hi) true.
	lo, hi := first+1, last
	if g := c.Seq; c.Width == cursor.NodeWidth && g >= lo && g <= hi {
		p, err := at(g)
		if err != nil {
			return 0, err
		}
		if p {
			hi = g
			if g == lo {
				return g, nil
			}
			if q, err := at(g - 1); err != nil || !q {
				return g, err
			}
			hi = g - 1
		} else {
			lo = g + 1
			if lo == hi {
				return lo, nil
			}
			if q, err := at(g + 1); err != nil || q {
				return g + 1, err
			}
			lo = g + 2
		}
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		p, err := at(mid)
		if err != nil {
			return 0, err
		}
		if p {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// lookup finds cursors by sequence for one read: from the tracker's memory, else from
// the stream, a few messages around the one asked for at a time.
type lookup struct {
	s    *Store
	ctx  context.Context
	last uint64
	m    map[uint64]cursor.Cursor // sequence → cursor of the first message at or after it

	untracked bool // do not trust the tracker's memory (the stream was recreated)
}

func (s *Store) newLookup(ctx context.Context, last uint64) *lookup {
	return &lookup{s: s, ctx: ctx, last: last, m: map[uint64]cursor.Cursor{}}
}

// endCursor stands for "after every message".
var endCursor = cursor.New(math.MaxInt64, math.MaxUint64, cursor.NodeWidth)

// at returns the cursor of the message at seq, or, when seq was removed, of the first
// message after it (so that cursors still do not decrease along the sequences).
func (l *lookup) at(seq uint64) (cursor.Cursor, error) {
	if c, ok := l.m[seq]; ok {
		return c, nil
	}
	if ts, ok := l.s.tr.lookup(seq); ok && !l.untracked {
		c := cursor.New(ts, seq, cursor.NodeWidth)
		l.m[seq] = c
		return c, nil
	}
	var msgs []smsg
	if l.s.direct() {
		from := max(seq, 2) - 1
		to := max(min(from+2, l.last), seq)
		var err error
		if msgs, err = l.s.fetchRange(l.ctx, from, to, int(to-from+1)); err != nil {
			return cursor.Cursor{}, err
		}
	} else {
		m, ok, err := l.s.first(l.ctx, seq)
		if err != nil {
			return cursor.Cursor{}, err
		}
		if ok {
			msgs = append(msgs, m)
		}
	}
	for _, m := range msgs {
		l.m[m.seq] = cursor.New(m.ts, m.seq, cursor.NodeWidth)
	}
	if c, ok := l.m[seq]; ok {
		return c, nil
	}
	for _, m := range msgs {
		if m.seq > seq {
			c := cursor.New(m.ts, m.seq, cursor.NodeWidth)
			l.m[seq] = c
			return c, nil
		}
	}
	return endCursor, nil
}

// scan collects the items of one page.
type scan struct {
	s      *Store
	ctx    context.Context
	limit  int
	match  func([]byte) bool
	budget int // most messages to examine; 0: no limit
	holes  bool

	// expect is the sequence of the reader's next message (After's sequence plus one), when
	// After is a cursor of this stream; top is the cursor of the first message at or after
	// the end of a newest-first range that ends below the head.
	expect uint64
	top    cursor.Cursor

	items    []eventlog.Item
	more     bool
	resume   cursor.Cursor
	atLoss   bool
	oldest   cursor.Cursor // the first message after a hole the read was shaped by
	jumped   bool          // the first message found was past the start: retention moved the oldest
	examined int
	prev     smsg // the last message examined
	start    uint64
	since    []smsg // ascending, from a reader: messages examined since the last item
	tracking bool
}

// visit offers one message to the page, in the scan's order; false stops the scan.
func (sc *scan) visit(m *smsg, ascending bool) bool {
	c := cursor.New(m.ts, m.seq, cursor.NodeWidth)
	if sc.examined == 0 {
		switch {
		case ascending && sc.expect != 0 && m.seq > sc.expect:
			sc.oldest = c // the reader's next message is gone: it is told, and goes on
		case ascending && m.seq > sc.start && sc.expect == 0:
			sc.jumped = true
		case !ascending && !sc.top.IsZero() && sc.top.Seq > m.seq+1:
			// A hole just below the end of the range: the log begins above it.
			sc.oldest = sc.top
			return false
		}
	} else if sc.holes {
		prev := cursor.New(sc.prev.ts, sc.prev.seq, cursor.NodeWidth)
		switch {
		case ascending && m.seq > sc.prev.seq+1:
			// Stop short of the hole; the next read, after the message before it, is told.
			sc.more, sc.resume, sc.atLoss = true, prev, true
			return false
		case !ascending && m.seq+1 < sc.prev.seq:
			sc.oldest = prev // the log begins above the hole
			return false
		}
	}
	if sc.budget > 0 && sc.examined == sc.budget {
		sc.more, sc.resume = true, cursor.New(sc.prev.ts, sc.prev.seq, cursor.NodeWidth)
		return false
	}
	if sc.match != nil && !sc.match(m.data) {
		sc.examined++
		sc.prev = *m
		return true
	}
	if len(sc.items) == sc.limit {
		sc.more, sc.resume = true, cursor.Cursor{}
		return false
	}
	sc.examined++
	sc.prev = *m
	sc.items = append(sc.items, eventlog.Item{Cursor: c, Type: m.typ, JSON: m.data})
	return true
}

// endDown ends a newest-first scan that reached the bottom of its range: when the reader's
// next message is gone, it is told.
func (sc *scan) endDown() {
	if sc.expect != 0 && sc.examined > 0 && sc.prev.seq > sc.expect && sc.oldest.IsZero() {
		sc.oldest = cursor.New(sc.prev.ts, sc.prev.seq, cursor.NodeWidth)
	}
}

// Chunks of a filtered scan start at the page size and double up to maxChunk messages.
const maxChunk = 1024

// chunk is how many messages to fetch next: exactly what the page still needs when every
// message is an item, else a growing chunk.
func (sc *scan) chunk(grow *int, room uint64) int {
	n := *grow
	if sc.match == nil {
		n = sc.limit + 1 - len(sc.items)
	} else {
		*grow = min(2**grow, maxChunk)
	}
	if sc.budget > 0 {
		n = min(n, sc.budget+1-sc.examined)
	}
	return int(min(uint64(max(n, 1)), room, maxChunk))
}

// want is about how many messages an ascending scan of [lo, hi) will examine.
func (sc *scan) want(lo, hi uint64) uint64 {
	n := hi - lo
	if sc.match == nil {
		n = min(n, uint64(sc.limit)+1)
	}
	if sc.budget > 0 {
		n = min(n, uint64(sc.budget)+1)
	}
	return n
}

// up visits [lo, hi) oldest first: from a reader (a consumer of its own) when the scan is
// long or a parked reader stands where it starts, else with direct gets.
func (sc *scan) up(lo, hi uint64) error {
	sc.items = make([]eventlog.Item, 0, min(sc.limit, 1024))
	sc.start = lo
	r := sc.s.takeReader(lo)
	if r == nil && sc.want(lo, hi) >= sc.s.readerMin() {
		var err error
		if r, err = sc.s.newReader(sc.ctx, lo); err != nil {
			return err
		}
	}
	if r != nil {
		return sc.upReader(r, lo, hi)
	}
	grow := min(sc.limit+1, maxChunk)
	for pos := lo; pos < hi; {
		msgs, err := sc.s.fetchRange(sc.ctx, pos, hi-1, sc.chunk(&grow, hi-pos))
		if err != nil || len(msgs) == 0 {
			return err
		}
		for i := range msgs {
			if msgs[i].seq >= hi || !sc.visit(&msgs[i], true) {
				return nil
			}
		}
		pos = msgs[len(msgs)-1].seq + 1
	}
	return nil
}

// scanTime bounds how long one read streams from a reader; a read that takes longer
// answers what it has, with where to resume.
func (s *Store) scanTime() time.Duration { return s.opts.Timeout }

func (sc *scan) upReader(r *reader, lo, hi uint64) error {
	ctx, cancel := context.WithTimeout(sc.ctx, sc.s.scanTime())
	defer cancel()
	r.seek(lo)
	sc.tracking = true
	for {
		m, err := sc.s.peek(ctx, r, hi)
		if err != nil {
			sc.s.closeReader(r)
			if errors.Is(err, context.DeadlineExceeded) && sc.ctx.Err() == nil && sc.examined > 0 {
				// Out of time: answer what was found, and where to go on from.
				sc.more, sc.resume = true, cursor.New(sc.prev.ts, sc.prev.seq, cursor.NodeWidth)
				return nil
			}
			return err
		}
		if m == nil || m.seq >= hi {
			break
		}
		n := len(sc.items)
		if !sc.visit(m, true) {
			if sc.more && sc.resume.IsZero() && !sc.atLoss {
				// The page is full: the next page starts after its last item, so give back
				// what was examined since.
				r.unread(sc.since)
			}
			break
		}
		if len(sc.items) > n {
			sc.since, sc.tracking = sc.since[:0], true
		} else if sc.tracking {
			if len(sc.since) == maxUnread {
				sc.tracking, sc.since = false, nil
			} else {
				sc.since = append(sc.since, *m)
			}
		}
		r.take()
	}
	if !sc.tracking && sc.more && sc.resume.IsZero() {
		sc.s.closeReader(r) // it stands past where the next page starts
		return nil
	}
	sc.s.park(r)
	return nil
}

// down visits [lo, hi) newest first, a window at a time.
func (sc *scan) down(lo, hi uint64) error {
	sc.items = make([]eventlog.Item, 0, min(sc.limit, 1024))
	grow := min(sc.limit+1, maxChunk)
	for end := hi; end > lo; {
		start := end - uint64(sc.chunk(&grow, end-lo))
		var window []smsg
		for pos := start; pos < end; {
			msgs, err := sc.s.fetchRange(sc.ctx, pos, end-1, int(end-pos))
			if err != nil {
				return err
			}
			if len(msgs) == 0 {
				break // the rest of the window was removed
			}
			for _, m := range msgs {
				if m.seq < end {
					window = append(window, m)
				}
			}
			pos = msgs[len(msgs)-1].seq + 1
		}
		for i := len(window) - 1; i >= 0; i-- {
			if !sc.visit(&window[i], false) {
				return nil
			}
		}
		end = start
	}
	sc.endDown()
	return nil
}
