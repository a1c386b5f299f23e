package redisstream

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/filter"
	"github.com/evtctl/evtctl/pkg/wire"
)

// The source of a Redis stream behind the client's page interface: redis:// and rediss://
// addresses. A position is an entry id (or one made up between ids, from a time); pages
// read forward with XRANGE and back with XREVRANGE, each with XINFO STREAM in the same
// transaction, and a page open at the head waits with XREAD BLOCK.
func init() {
	client.Register(client.Driver{Schemes: []string{"redis", "rediss"}, Open: open, IsCursor: IsID})
}

func open(node string, opts client.Options) (client.Source, error) {
	a, err := ParseAddress(node)
	if err != nil {
		return nil, err
	}
	return newSource(a, opts)
}

// Limits of a page.
const (
	// maxRead is the most entries one read asks for.
	maxRead = 10_000
	// maxExamined is the most entries a filtered page examines before it returns what it
	// found (perhaps nothing) with More, so that a filter that matches little does not make
	// a page read without bound.
	maxExamined = 10_000
)

// source is a stream read through a conn.
type source struct {
	*conn
	marks marks

	mu      sync.Mutex
	queries map[string]*filter.Query
	pool    sync.Pool // *pageMem, for pages asked for with Reuse
}

func newSource(a Address, opts client.Options) (*source, error) {
	c, err := dial(a, opts)
	if err != nil {
		return nil, err
	}
	return &source{conn: c}, nil
}

// Node is the stream's address, without its password.
func (s *source) Node() string { return s.node }

// Compare orders two positions of the stream: entry ids, numerically.
func (s *source) Compare(a, b string) int { return compareText(a, b) }

// CheckPosition refuses text that is no entry id.
func (s *source) CheckPosition(pos string) error {
	_, err := ParseID(pos)
	return err
}

// query compiles a query of evtctl's language, which entries' CloudEvents are matched with
// here, on the client.
func (s *source) query(q string) (*filter.Query, error) {
	if strings.TrimSpace(q) == "" {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.queries[q]; ok {
		return c, nil
	}
	c, err := filter.Compile(q)
	if err != nil {
		return nil, &client.QueryError{Query: q, Language: "evtctl's query language", Err: err}
	}
	if s.queries == nil || len(s.queries) > 64 {
		s.queries = map[string]*filter.Query{}
	}
	s.queries[q] = c
	return c, nil
}

// position reads a position; "" is the stream's start.
func position(s string) (ID, error) {
	if s == "" {
		return ID{}, nil
	}
	return ParseID(s)
}

// Bounds reports the stream's oldest entry and its newest position (the newest id it
// gave, though that entry may be gone).
func (s *source) Bounds(ctx context.Context) (string, string, error) {
	snap, err := s.info(ctx)
	if err != nil {
		return "", "", err
	}
	s.marks.put(snap.head(), mark{added: snap.added})
	return snap.oldest(), snap.head(), nil
}

// At is the position before every entry added at or after t, by the time in the entries'
// ids.
func (s *source) At(_ context.Context, t time.Time) (string, error) {
	id, ok := BeforeTime(t)
	if !ok {
		return "", nil
	}
	return id.String(), nil
}

// pageMem is the memory of one page: the replies read, the entries and fields found in
// them, the events made of them and the items.
type pageMem struct {
	raw     appendWriter
	entries []rawEntry
	fields  []field
	data    []byte
	items   []client.Item
	conv    *converter
}

func (s *source) mem(reuse bool) *pageMem {
	if reuse {
		if m, ok := s.pool.Get().(*pageMem); ok {
			return m
		}
	}
	return &pageMem{conv: newConverter(s.addr.Stream)}
}

func (s *source) release(m *pageMem) func() {
	return func() {
		m.raw.b = m.raw.b[:0]
		clear(m.entries)
		m.entries = m.entries[:0]
		clear(m.fields)
		m.fields = m.fields[:0]
		m.data = m.data[:0]
		clear(m.items)
		m.items = m.items[:0]
		s.pool.Put(m)
	}
}

// add makes the items of entries, and keeps those q matches. An item's Raw is its line of
// JSON, followed in memory by a newline and by the next item's line: the renderer writes
// such lines as they lie.
func (m *pageMem) add(entries []rawEntry, replySize int, q *filter.Query) {
	// Room for the items: about the size of the reply they came in.
	if need := replySize + replySize/2; cap(m.data)-len(m.data) < need {
		m.data = slices.Grow(m.data, need)
	}
	for _, e := range entries {
		start := len(m.data)
		var typ string
		var ds, de int
		m.data, typ, ds, de = m.conv.appendItem(m.data, e)
		ev := m.data[ds:de:de]
		if q != nil && !q.MatchJSON(ev) {
			m.data = m.data[:start]
			continue
		}
		m.items = append(m.items, client.Item{Item: wire.Item{Cursor: e.id, Event: typ, Data: ev}, Raw: m.data[start : len(m.data)-1]})
	}
}

// Page reads one page of the stream.
func (s *source) Page(ctx context.Context, r client.PageRequest) (*client.Page, error) {
	q, err := s.query(r.Query)
	if err != nil {
		return nil, err
	}
	after, err := position(r.After)
	if err != nil {
		return nil, err
	}
	a := rangeArgs{after: after, hasAfter: r.After != "", count: min(max(r.Max, r.Size, 1), maxRead), backward: r.Backward}
	switch {
	case r.Before != "":
		if a.end, err = ParseID(r.Before); err != nil {
			return nil, err
		}
		a.hasEnd = true
	case r.Through != "":
		if a.end, err = ParseID(r.Through); err != nil {
			return nil, err
		}
		a.hasEnd, a.endIncl = true, true
	}
	if q == nil {
		a.count = min(max(r.Max, 1), maxRead)
	}
	m := s.mem(r.Reuse)
	var p *client.Page
	if r.Backward {
		p, err = s.backward(ctx, r, q, a, m)
	} else {
		p, err = s.forward(ctx, r, q, a, m)
	}
	if err != nil {
		if r.Reuse {
			s.release(m)()
		}
		return nil, err
	}
	if r.Reuse {
		p.OnRelease(s.release(m))
	}
	return p, nil
}

// forward reads the oldest entries after r.After, long-polling at the head.
func (s *source) forward(ctx context.Context, r client.PageRequest, q *filter.Query, a rangeArgs, m *pageMem) (*client.Page, error) {
	cur, curText := a.after, r.After // examined up to here
	mk := s.marks.get(curText)
	if curText == "" {
		mk.added = 0
	}
	madeUp := r.NoGap
	out := &client.Page{}
	examined := 0
	var deadline time.Time
	waits := r.Wait > 0 && !a.hasEnd
	if waits {
		deadline = time.Now().Add(r.Wait)
	}
	for {
		a.after, a.hasAfter = cur, curText != ""
		a.count = min(a.count, max(maxExamined-examined, 1))
		start := len(m.entries)
		snap, all, fields, err := s.read(ctx, a, &m.raw, m.entries, m.fields)
		m.entries, m.fields = all, fields
		if err != nil {
			return nil, err
		}
		entries := all[start:]
		out.Oldest, out.Newest = snap.oldest(), snap.head()
		n := len(entries)
		toEnd := snap.length == 0 || n > 0 && entries[n-1].id == snap.last.String() || n == 0 && !cur.Less(snap.last)
		v := judge(judgeIn{pos: curText, p: cur, madeUp: madeUp, mk: mk, snap: snap, n: n, toEnd: toEnd, key: s.addr.Stream})
		if v.gap != nil {
			if len(out.Items) > 0 || out.Gap != nil {
				// Items before it went out on this page: the next one reports it.
				out.More = true
				break
			}
			s.bound(ctx, v.gap, snap, entries)
			out.Gap = v.gap
		}
		m.add(entries, len(m.raw.b), q)
		out.Items = m.items
		examined += n

		// Where the stream has been examined up to, and what is known there.
		next, nextText := cur, curText
		if n > 0 {
			next, nextText = mustID(entries[n-1].id), entries[n-1].id
		}
		reached := n < a.count // the read reached the head, or the end of the range
		if reached && !a.hasEnd && cur.Less(snap.lastGen) {
			next, nextText = snap.lastGen, snap.lastGen.String() // past entries deleted at the head
		}
		if reached && a.hasEnd && a.endIncl && next.Less(a.end) {
			next, nextText = a.end, a.end.String()
		}
		nmk := mark{added: -1, acked: mk.acked}
		if nmk.acked.Less(snap.maxDel) && (v.gap != nil || !cur.Less(snap.maxDel)) {
			nmk.acked = snap.maxDel
		}
		switch {
		case next == snap.lastGen:
			nmk.added = snap.added
		case mk.added >= 0 && v.certain && !madeUp && !next.Less(snap.maxDel) && (v.lost <= 0 || n > 0):
			nmk.added = mk.added + max(v.lost, 0) + int64(n)
		case n > 0 && cur.Less(snap.first) && snap.maxDel.Less(snap.first):
			// The stream is whole from its first entry on: its first entry is number
			// removed()+1.
			nmk.added = snap.removed() + int64(n)
		}
		s.marks.put(nextText, nmk)
		cur, curText, mk, madeUp = next, nextText, nmk, false
		out.Next = curText

		if reached && len(out.Items) == 0 && out.Gap == nil && waits {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			woke, err := s.wait(ctx, cur, left)
			if err != nil {
				return nil, err
			}
			if woke {
				continue
			}
			break
		}
		if reached {
			break
		}
		if len(out.Items) >= r.Max || examined >= maxExamined {
			out.More = true
			break
		}
	}
	if r.Max > 0 && len(out.Items) > r.Max {
		// A read gave more matches than asked for: the page ends at the last one kept.
		out.Items = out.Items[:r.Max]
		out.Next, out.More = out.Items[r.Max-1].Cursor, true
	}
	return out, nil
}

// bound names the entries around the newest deletion in a gap's words, and makes the
// entry after it the gap's oldest when the stream was not trimmed after the cursor.
func (s *source) bound(ctx context.Context, g *client.Gap, snap snapshot, read []rawEntry) {
	if g.Kind != client.GapLost || snap.maxDel.IsZero() || snap.length == 0 || snap.maxDel.Less(snap.first) || !strings.Contains(g.Detail, "the newest of them") {
		return
	}
	before, after := "", ""
	for i, e := range read {
		id := mustID(e.id)
		if snap.maxDel.Less(id) {
			after = e.id
			if i > 0 {
				before = read[i-1].id
			}
			break
		}
	}
	if after == "" || before == "" {
		// Ask the stream: the entries on either side of the deleted one.
		d := snap.maxDel.String()
		if v, err := s.rdb.XRevRangeN(ctx, s.addr.Stream, "("+d, "-", 1).Result(); err == nil && len(v) == 1 {
			before = v[0].ID
		}
		if v, err := s.rdb.XRangeN(ctx, s.addr.Stream, "("+d, "+", 1).Result(); err == nil && len(v) == 1 {
			after = v[0].ID
		}
	}
	switch {
	case before != "" && after != "":
		g.Detail += fmt.Sprintf(", which lay between %s and %s", before, after)
	case after != "":
		g.Detail += fmt.Sprintf(", which lay before %s", after)
	case before != "":
		g.Detail += fmt.Sprintf(", which lay after %s, the newest entry now", before)
	}
	if g.Oldest == "" && after != "" && g.Newest == "" {
		g.Oldest = after
	}
}

// backward reads the newest entries before r.Before (or up to r.Through), newest first.
func (s *source) backward(ctx context.Context, r client.PageRequest, q *filter.Query, a rangeArgs, m *pageMem) (*client.Page, error) {
	out := &client.Page{}
	examined := 0
	for {
		a.count = min(a.count, max(maxExamined-examined, 1))
		start := len(m.entries)
		snap, all, fields, err := s.read(ctx, a, &m.raw, m.entries, m.fields)
		m.entries, m.fields = all, fields
		if err != nil {
			return nil, err
		}
		entries := all[start:]
		out.Oldest, out.Newest = snap.oldest(), snap.head()
		m.add(entries, len(m.raw.b), q)
		out.Items = m.items
		n := len(entries)
		examined += n
		if n > 0 {
			a.end, a.hasEnd, a.endIncl = mustID(entries[n-1].id), true, false
			out.Next = entries[n-1].id
		}
		if n < a.count {
			// Back at r.After (or the stream's start): whether the stream goes on from it.
			if r.After != "" {
				mk := s.marks.get(r.After)
				v := judge(judgeIn{pos: r.After, p: a.after, madeUp: r.NoGap, mk: mk, snap: snap, key: s.addr.Stream})
				if v.gap != nil {
					s.bound(ctx, v.gap, snap, nil)
				}
				out.Gap = v.gap
			}
			break
		}
		if len(out.Items) >= r.Max || examined >= maxExamined {
			out.More = true
			break
		}
	}
	if r.Max > 0 && len(out.Items) > r.Max {
		out.Items = out.Items[:r.Max]
		out.Next, out.More = out.Items[r.Max-1].Cursor, true
	}
	return out, nil
}

// mustID is the id of an entry the server sent; one that is no id (never from Redis) is 0-0.
func mustID(s string) ID {
	id, _ := ParseID(s)
	return id
}

// identity is what a checkpoint keeps of the stream at its position: the stream's key, and
// how many entries had been added to it up to the position, when known, which tells on
// resuming how many were lost after it.
type identity struct {
	Stream string `json:"stream"`
	At     string `json:"at,omitempty"`
	Added  *int64 `json:"added,omitempty"`
}

// Identity is the stream's key and the count of entries added up to pos, when the source
// knows it or can learn it at once.
func (s *source) Identity(ctx context.Context, pos string) (json.RawMessage, error) {
	id := identity{Stream: s.addr.Stream}
	mk := s.marks.get(pos)
	if mk.added < 0 {
		p, err := ParseID(pos)
		if err != nil {
			return nil, err
		}
		// Counted from the entries after pos, when nothing after it was removed and they
		// are few.
		var w appendWriter
		snap, entries, _, err := s.read(ctx, rangeArgs{after: p, hasAfter: true, count: 1000}, &w, nil, nil)
		if err != nil {
			return nil, err
		}
		switch {
		case !snap.exists:
		case !p.Less(snap.lastGen):
			mk.added = snap.added
		case len(entries) < 1000 && !p.Less(snap.maxDel) && (snap.length > 0 && !p.Less(snap.first) || snap.removed() == 0):
			mk.added = snap.added - int64(len(entries))
		}
		s.marks.put(pos, mk)
	}
	if mk.added >= 0 {
		id.At, id.Added = pos, &mk.added
	}
	return json.Marshal(id)
}

// CheckIdentity refuses a checkpoint of another stream, or of this one before it was
// deleted and created again; what it counted at its position is kept for the pages that
// follow.
func (s *source) CheckIdentity(ctx context.Context, saved json.RawMessage) error {
	var id identity
	if err := json.Unmarshal(saved, &id); err != nil || id.Stream == "" {
		return fmt.Errorf("the saved position's stream is unreadable (%s)", strings.TrimSpace(string(saved)))
	}
	if id.Stream != s.addr.Stream {
		return fmt.Errorf("it was written reading stream %q, not %q", id.Stream, s.addr.Stream)
	}
	if id.Added == nil || id.At == "" {
		return nil
	}
	if _, err := ParseID(id.At); err != nil || *id.Added < 0 {
		return fmt.Errorf("the saved position's count is unreadable (%s)", strings.TrimSpace(string(saved)))
	}
	snap, err := s.info(ctx)
	if err != nil {
		return err
	}
	if snap.exists && snap.added < *id.Added {
		return fmt.Errorf("stream %q was deleted and created again since: it has had %s added, fewer than the %d counted up to %s", s.addr.Stream, formatCount(snap.added), *id.Added, id.At)
	}
	s.marks.put(id.At, mark{added: *id.Added})
	return nil
}
