package tui

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/filter"
	"github.com/evtctl/evtctl/pkg/wire"
)

// fakeLog is an in-memory node for the UI's tests: a log of CloudEvents with fixed cursors
// and times, served through the Source interface as a node would serve it (queries,
// bounds, paging, following with gaps), plus switches to make it fail, hold back the
// head, or hold page requests.
type fakeLog struct {
	mu      sync.Mutex
	items   []client.Item // oldest first
	seq     int
	changed chan struct{} // closed and replaced on every change
	down    error         // while set, requests fail with it
	hold    bool          // while set, Follow delivers nothing
	gate    chan struct{} // while set, Page waits for it to close
	pages   []PageRequest
	follows []FollowRequest
	delay   time.Duration // the retry delay Follow reports while down
	refuse  func(query string) error
}

// fakeBase is the time of the fake's first event, less a millisecond.
var fakeBase = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newFakeLog() *fakeLog {
	return &fakeLog{changed: make(chan struct{}), delay: 3 * time.Second}
}

// changedLocked wakes followers; f.mu is held.
func (f *fakeLog) changedLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func fakeCursor(seq int) string {
	return cursor.New(fakeBase.Add(time.Duration(seq)*time.Millisecond).UnixNano(), uint64(seq), cursor.NodeWidth).String()
}

// add appends n events of a type ("" for a default one).
func (f *fakeLog) add(n int, typ string) {
	if typ == "" {
		typ = "org.example.shop.order.placed.v1"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.seq++
		s := f.seq
		cur := fakeCursor(s)
		data := fmt.Sprintf(`{"specversion":"1.0","id":"%08x-aaaa-4aaa-8aaa-aaaaaaaaaaaa","source":"/shop/web","type":%q,"subject":"order-%d","time":%q,"datacontenttype":"application/json","data":{"n":%d,"total":%d.5,"items":[{"sku":"A-%d","qty":1}],"gift":false,"note":null}}`,
			s, typ, s, fakeBase.Add(time.Duration(s)*time.Millisecond).Format(time.RFC3339Nano), s, s, s)
		raw := fmt.Sprintf(`{"cursor":%q,"event":%q,"data":%s}`, cur, typ, data)
		f.items = append(f.items, client.Item{Item: wire.Item{Cursor: cur, Event: typ, Data: []byte(data)}, Raw: []byte(raw)})
	}
	f.changedLocked()
}

// prune drops the k oldest events, as retention would.
func (f *fakeLog) prune(k int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items = append([]client.Item(nil), f.items[min(k, len(f.items)):]...)
	f.changedLocked()
}

func (f *fakeLog) setDown(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = err
	f.changedLocked()
}

func (f *fakeLog) setHold(h bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold = h
	f.changedLocked()
}

// holdPages makes Page wait until the returned function is called.
func (f *fakeLog) holdPages() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := make(chan struct{})
	f.gate = g
	return func() {
		f.mu.Lock()
		if f.gate == g {
			f.gate = nil
		}
		f.mu.Unlock()
		close(g)
	}
}

func (f *fakeLog) requests() []PageRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]PageRequest(nil), f.pages...)
}

func (f *fakeLog) Node() string { return "http://127.0.0.1:7480" }

// later reports whether cursor a comes after b.
func later(a, b string) bool { return cursor.CompareText(a, b) > 0 }

func (f *fakeLog) Compare(a, b string) int { return cursor.CompareText(a, b) }

func (f *fakeLog) PosBefore(it client.Item) string { return it.Cursor }

func (f *fakeLog) At(ctx context.Context, t time.Time) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, newest := f.bounds()
	if newest == "" {
		return "", nil
	}
	return cursor.FromTime(t, cursor.WidthOf(newest)).String(), nil
}

func (f *fakeLog) bounds() (oldest, newest string) {
	if len(f.items) == 0 {
		return "", ""
	}
	return f.items[0].Cursor, f.items[len(f.items)-1].Cursor
}

func queryError(err error) error {
	return &client.RPCError{Code: -32603, Message: "Internal error", Data: "invalid filter query: " + err.Error()}
}

func (f *fakeLog) Page(ctx context.Context, r PageRequest) (Page, error) {
	f.mu.Lock()
	f.pages = append(f.pages, r)
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return Page{}, ctx.Err()
		}
	}
	q, err := filter.Compile(r.Query)
	if err != nil {
		return Page{}, queryError(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		if err := f.refuse(r.Query); err != nil {
			return Page{}, err
		}
	}
	if f.down != nil {
		return Page{}, f.down
	}
	var match []client.Item
	for _, it := range f.items {
		if (r.After == "" || later(it.Cursor, r.After)) && (r.Before == "" || later(r.Before, it.Cursor)) &&
			(r.Before != "" || r.Through == "" || !later(it.Cursor, r.Through)) && q.MatchJSON(it.Data) {
			match = append(match, it)
		}
	}
	p := Page{}
	p.Oldest, p.Newest = f.bounds()
	limit := max(r.Limit, 1)
	if len(match) > limit {
		p.More = true
		if r.Backward {
			match = match[len(match)-limit:]
		} else {
			match = match[:limit]
		}
	}
	p.Items = match
	switch {
	case r.Backward && len(match) > 0:
		p.Next = match[0].Cursor
	case len(match) > 0:
		p.Next = match[len(match)-1].Cursor
	case r.Backward:
		p.Next = r.Before
	default:
		p.Next = r.After
	}
	if !r.Backward && !p.More {
		// Caught up: examined up to the newest, or the range's end.
		end := p.Newest
		if r.Through != "" && later(end, r.Through) {
			end = r.Through
		}
		if later(end, p.Next) {
			p.Next = end
		}
	}
	if !r.Backward && !r.NoGap {
		p.Gap = client.GapAfter(r.After, p.Oldest, p.Newest, len(match) == 0)
	}
	return p, nil
}

func (f *fakeLog) Follow(ctx context.Context, r FollowRequest, fn func(client.Batch) error) error {
	q, err := filter.Compile(r.Query)
	if err != nil {
		return queryError(err)
	}
	f.mu.Lock()
	f.follows = append(f.follows, r)
	after := r.After
	if after == "" && !r.FromStart {
		_, after = f.bounds()
	}
	f.mu.Unlock()
	attempt := 0
	for {
		f.mu.Lock()
		ch := f.changed
		switch {
		case f.down != nil:
			err := f.down
			f.mu.Unlock()
			attempt++
			if r.OnRetry != nil {
				r.OnRetry(err, attempt, f.delay)
			}
		case f.hold:
			f.mu.Unlock()
		default:
			var b client.Batch
			if len(f.items) > 0 {
				oldest, newest := f.bounds()
				b.Gap = client.GapAfter(after, oldest, newest, false)
			}
			for _, it := range f.items {
				if (after == "" || later(it.Cursor, after)) && q.MatchJSON(it.Data) {
					b.Items = append(b.Items, it)
				}
			}
			f.mu.Unlock()
			b.CaughtUp = true
			switch {
			case len(b.Items) > 0:
				b.Cursor = b.Items[len(b.Items)-1].Cursor
			case b.Gap != nil:
				c, _ := cursor.MustParse(b.Gap.Oldest).Prev()
				b.Cursor = c.String()
			default:
				b.Cursor = after
			}
			if len(b.Items) > 0 || b.Gap != nil || attempt > 0 {
				// A reply after failed attempts is delivered even when empty, as a
				// long-poll ends with one.
				attempt = 0
				if err := fn(b); err != nil {
					return err
				}
				after = b.Cursor
				continue
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func clientItem(cur, name, data string) client.Item {
	return client.Item{Item: wire.Item{Cursor: cur, Event: name, Data: []byte(data)}}
}
