package jetstream

import (
	"context"
	"math"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/eventlog"
)

// Read implements eventlog.Store. A read is a snapshot up to the newest message this node
// has seen: Newest is that message and no item is newer, so a reader that resumes from
// Newest misses nothing. Messages come from direct gets, in chunks; a filter is applied as
// they arrive, so memory stays bounded by the chunk, however far a rare filter scans.
func (s *Store) Read(ctx context.Context, q eventlog.Query) (eventlog.Page, error) {
	if !s.enter() {
		return eventlog.Page{}, eventlog.ErrClosed
	}
	defer s.leave()
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
	if !q.Before.IsZero() {
		b, err := s.locate(lk, q.Before, false, first, last)
		if err != nil {
			return eventlog.Page{}, err
		}
		hi = min(hi, b)
	}
	if lo >= hi {
		return page, nil
	}
	limit := max(q.Max, 1)
	sc := scan{s: s, ctx: ctx, limit: limit, match: q.Match}
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
	page.Items, page.More = sc.items, sc.more
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
	// The answer is in [lo, hi]: pred(lo-1) is false (or lo is first), pred(hi) true.
	lo, hi := first, last+1
	if p, err := at(first); err != nil || p {
		return first, err
	}
	lo = first + 1
	if p, err := at(last); err != nil || !p {
		return last + 1, err
	}
	hi = last
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
	from := max(seq, 2) - 1
	to := min(from+2, l.last)
	msgs, err := l.s.fetchRange(l.ctx, from, max(to, seq), int(max(to, seq)-from+1))
	if err != nil {
		return cursor.Cursor{}, err
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
	items  []eventlog.Item
	more   bool
	jumped bool // the first message found was past the start: retention moved the oldest
}

// Chunks of a filtered scan start at the page size and double up to maxChunk messages.
const maxChunk = 1024

// take offers one message to the page; false when the page is complete.
func (sc *scan) take(m *smsg) bool {
	if !m.ok || sc.match != nil && !sc.match(m.data) {
		return true
	}
	if len(sc.items) == sc.limit {
		sc.more = true
		return false
	}
	sc.items = append(sc.items, eventlog.Item{Cursor: cursor.New(m.ts, m.seq, cursor.NodeWidth), Type: m.typ, JSON: m.data})
	return true
}

// chunk is how many messages to fetch next: exactly what the page still needs when every
// message is an item, else a growing chunk.
func (sc *scan) chunk(grow *int, room uint64) int {
	n := *grow
	if sc.match == nil {
		n = sc.limit + 1 - len(sc.items)
	} else {
		*grow = min(2**grow, maxChunk)
	}
	return int(min(uint64(max(n, 1)), room, maxChunk))
}

// up visits [lo, hi) oldest first.
func (sc *scan) up(lo, hi uint64) error {
	sc.items = make([]eventlog.Item, 0, min(sc.limit, 1024))
	grow := min(sc.limit+1, maxChunk)
	for pos := lo; pos < hi; {
		msgs, err := sc.s.fetchRange(sc.ctx, pos, hi-1, sc.chunk(&grow, hi-pos))
		if err != nil {
			return err
		}
		if pos == lo && msgs[0].seq > lo {
			sc.jumped = true
		}
		for i := range msgs {
			if msgs[i].seq >= hi {
				return nil
			}
			if !sc.take(&msgs[i]) {
				return nil
			}
		}
		pos = msgs[len(msgs)-1].seq + 1
	}
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
			for _, m := range msgs {
				if m.seq < end {
					window = append(window, m)
				}
			}
			pos = msgs[len(msgs)-1].seq + 1
		}
		for i := len(window) - 1; i >= 0; i-- {
			if !sc.take(&window[i]) {
				return nil
			}
		}
		end = start
	}
	return nil
}

// lagWait bounds how long a read waits for the replica answering it to catch up with a
// message this node knows is stored (replication is normally a millisecond behind).
const lagWait = 500 * time.Millisecond

// fetchRange returns up to n messages from sequence from on; to (>= from) is a sequence
// this node knows is stored, so the result is never empty. A replica that does not hold
// to yet is asked again, for up to lagWait.
func (s *Store) fetchRange(ctx context.Context, from, to uint64, n int) ([]smsg, error) {
	wait := time.Millisecond
	deadline := time.Now().Add(lagWait)
	for {
		msgs, pending, err := s.directGet(ctx, from, max(n, 1))
		if err != nil {
			return nil, err
		}
		got := from - 1 // the answering replica holds everything up to got
		if len(msgs) > 0 {
			got = msgs[len(msgs)-1].seq
		}
		if len(msgs) > 0 && (len(msgs) >= n || pending > 0 || got >= to) {
			return msgs, nil
		}
		if time.Now().After(deadline) {
			return nil, unavailable("the replica of stream %q answering reads holds messages up to sequence %d, not yet %d", s.opts.Stream, got, to)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.quit:
			return nil, eventlog.ErrClosed
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}
