package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// countingStore counts reads, and with a gate set holds each read until the gate opens or
// the read's request ends, telling gated of every read it holds.
type countingStore struct {
	eventlog.Store
	reads atomic.Int64
	mu    sync.Mutex
	gate  chan struct{}
	gated chan context.Context
}

func (c *countingStore) Read(ctx context.Context, q eventlog.Query) (eventlog.Page, error) {
	c.reads.Add(1)
	c.mu.Lock()
	gate, gated := c.gate, c.gated
	c.mu.Unlock()
	if gate != nil {
		gated <- ctx
		select {
		case <-gate:
		case <-ctx.Done():
			return eventlog.Page{}, ctx.Err()
		}
	}
	return c.Store.Read(ctx, q)
}

func newShareServer(t *testing.T) (*Server, *eventlog.Log, *countingStore) {
	t.Helper()
	l, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cs := &countingStore{Store: l}
	s := New(Config{Store: cs, MaxWait: time.Hour}) // only a wake answers a waiter within a test
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s, l, cs
}

// appendTypes appends one event per type, all in one append, and returns their cursors.
func appendTypes(t *testing.T, l *eventlog.Log, types ...string) []string {
	t.Helper()
	entries := make([]eventlog.Entry, len(types))
	for i, typ := range types {
		id := fmt.Sprintf("%s-%d-%d", typ, i, time.Now().UnixNano())
		entries[i] = eventlog.Entry{Type: typ, Source: "/share", ID: id,
			JSON: []byte(`{"specversion":"1.0","id":"` + id + `","source":"/share","type":"` + typ + `","data":{"i":` + fmt.Sprint(i) + `}}`)}
	}
	res, err := l.Append(context.Background(), entries)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = r.Cursor.String()
	}
	return out
}

type outcome struct {
	res  result
	rerr *rpcError
}

// pollGo runs a call of the events method in a goroutine. The caller releases the result.
func pollGo(ctx context.Context, s *Server, p eventsParams) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, rerr := s.events(ctx, &p)
		ch <- outcome{res, rerr}
	}()
	return ch
}

func waitersReach(t *testing.T, s *Server, n int64) {
	t.Helper()
	testwait.Until(t, fmt.Sprintf("%d long-polls waiting", n), func() bool { return s.Waiters() == n })
}

func take(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		if o.rerr != nil {
			t.Fatalf("events: %+v", o.rerr)
		}
		return o
	case <-testwait.Expired(t):
		t.Fatal("a long-poll did not answer")
	}
	panic("unreachable")
}

// Waiters with different questions, woken by one append, each get exactly the page a call
// of their own would get; those asking the same share one read and one encoded page.
func TestSharedWakeGivesEachItsOwnPage(t *testing.T) {
	s, l, cs := newShareServer(t)
	head := appendTypes(t, l, "a")[0]
	questions := []eventsParams{
		{After: head, MaxItems: 1},
		{After: head, MaxItems: 2},
		{After: head, MaxItems: 2, Ascending: true},
		{After: head, MaxItems: 10, Query: "type = 'b'"},
		{After: head, MaxItems: 10, Query: "type = 'a'", Ascending: true},
		{After: head, MaxItems: 10, Query: "type = 'never'"}, // stays waiting
	}
	const each = 25
	chans := make([][]<-chan outcome, len(questions))
	for i, q := range questions {
		q.Wait = time.Hour
		for range each {
			chans[i] = append(chans[i], pollGo(t.Context(), s, q))
		}
	}
	waitersReach(t, s, int64(len(questions)*each))
	reads := cs.reads.Load()
	appendTypes(t, l, "a", "b", "a")
	waitersReach(t, s, each) // the question nobody's events answer waits on
	if got := cs.reads.Load() - reads; got != int64(len(questions)) {
		t.Errorf("%d reads after the append, want one per question (%d)", got, len(questions))
	}
	for i, q := range questions[:len(questions)-1] {
		want, rerr := s.events(t.Context(), &eventsParams{After: q.After, MaxItems: q.MaxItems, Ascending: q.Ascending, Query: q.Query})
		if rerr != nil {
			t.Fatal(rerr)
		}
		var first []byte
		for _, ch := range chans[i] {
			o := take(t, ch)
			if !bytes.Equal(o.res.b, want.b) {
				t.Fatalf("question %d (%+v) was answered\n%s\nwant\n%s", i, q, o.res.b, want.b)
			}
			if o.res.pooled {
				t.Fatalf("question %d: a woken waiter's page is pooled; it should be the shared one", i)
			}
			if first == nil {
				first = o.res.b
			} else if &first[0] != &o.res.b[0] {
				t.Fatalf("question %d: waiters woken together hold different copies of one page", i)
			}
			o.res.release()
		}
		want.release()
	}
	// The last question is answered by the next event that matches it.
	added := appendTypes(t, l, "never")[0]
	for _, ch := range chans[len(chans)-1] {
		o := take(t, ch)
		var r struct {
			Items []struct{ Cursor string }
		}
		if err := json.Unmarshal(o.res.b, &r); err != nil || len(r.Items) != 1 || r.Items[0].Cursor != added {
			t.Fatalf("a filtered waiter got %s, want the event %s (%v)", o.res.b, added, err)
		}
		o.res.release()
	}
}

// A shared page never goes to the pool: released by every reply that held it, it keeps its
// bytes while other pages are built in pooled buffers.
func TestSharedPageIsNotPooled(t *testing.T) {
	s, l, _ := newShareServer(t)
	head := appendTypes(t, l, "a")[0]
	var chans []<-chan outcome
	for range 8 {
		chans = append(chans, pollGo(t.Context(), s, eventsParams{After: head, MaxItems: 5, Wait: time.Hour}))
	}
	waitersReach(t, s, 8)
	appendTypes(t, l, "a", "b")
	var held []result
	for _, ch := range chans {
		held = append(held, take(t, ch).res)
	}
	page := bytes.Clone(held[0].b)
	for _, r := range held {
		r.release()
	}
	var big eventlog.Page
	for i := range 200 {
		big.Items = append(big.Items, eventlog.Item{Cursor: cursor.New(int64(1e18)+int64(i), uint64(i), 0), Type: "x",
			JSON: bytes.Repeat([]byte("z"), 20+i)})
	}
	for range 50 {
		b := encodePage(big, false)
		for i := range b {
			b[i] = '#'
		}
		putPageBuf(b)
		if !bytes.Equal(held[0].b, page) {
			t.Fatal("a shared page was overwritten after its replies released it: it went to the pool")
		}
	}
}

// Shared pages stay intact while other calls build and recycle pooled pages and appends
// land: every waiter gets a well-formed page of events after its cursor.
func TestSharedPagesUnderConcurrentWriters(t *testing.T) {
	s, l, _ := newShareServer(t)
	head := appendTypes(t, l, "a")[0]
	headC, _ := cursor.Parse(head)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { // replays: pooled pages, built and released over and over
			defer wg.Done()
			for ctx.Err() == nil {
				res, rerr := s.events(ctx, &eventsParams{Before: "7fffffffffffffff-ffffffffffffffff", MaxItems: 100})
				if rerr == nil {
					for i := range res.b {
						_ = res.b[i]
					}
					res.release()
				}
			}
		}()
	}
	for round := range 5 {
		var chans []<-chan outcome
		for i := range 60 {
			chans = append(chans, pollGo(t.Context(), s, eventsParams{After: head, MaxItems: 1 + i%3, Ascending: i%2 == 0, Wait: time.Hour}))
		}
		waitersReach(t, s, 60)
		var appends sync.WaitGroup
		for _, typ := range []string{"b", "c"} {
			appends.Add(1)
			go func() {
				defer appends.Done()
				id := fmt.Sprintf("%s-%d", typ, round)
				if _, err := l.Append(ctx, []eventlog.Entry{{Type: typ, Source: "/share", ID: id,
					JSON: []byte(`{"specversion":"1.0","id":"` + id + `","source":"/share","type":"` + typ + `"}`)}}); err != nil {
					t.Error(err)
				}
			}()
		}
		for _, ch := range chans {
			o := take(t, ch)
			var r struct {
				Items []struct {
					Cursor string
					Data   json.RawMessage
				}
			}
			if err := json.Unmarshal(o.res.b, &r); err != nil || len(r.Items) == 0 {
				t.Fatalf("round %d: a waiter got %q (%v)", round, o.res.b, err)
			}
			for _, it := range r.Items {
				c, err := cursor.Parse(it.Cursor)
				if err != nil || !c.After(headC) || !json.Valid(it.Data) {
					t.Fatalf("round %d: item %s is not an event after %s", round, it.Cursor, head)
				}
			}
			o.res.release()
		}
		waitersReach(t, s, 0)
		// Both appends must have landed before the next round's cursor is taken, or that
		// round's long-polls would find the later one at once and never wait.
		appends.Wait()
		st := l.Stats()
		head = st.Newest.String()
		headC = st.Newest
	}
	stop()
	wg.Wait()
}

// When the call that reads for the others goes away mid-read, the others read for
// themselves and get their page.
func TestSharedReadOfACancelledCall(t *testing.T) {
	s, l, cs := newShareServer(t)
	head := appendTypes(t, l, "a")[0]
	p := eventsParams{After: head, MaxItems: 3, Wait: time.Hour}
	ctxs := make([]context.Context, 2)
	cancels := make([]context.CancelFunc, 2)
	chans := make([]<-chan outcome, 2)
	for i := range ctxs {
		ctxs[i], cancels[i] = context.WithCancel(t.Context())
		defer cancels[i]()
		chans[i] = pollGo(ctxs[i], s, p)
	}
	waitersReach(t, s, 2)
	gate := make(chan struct{})
	cs.mu.Lock()
	cs.gate, cs.gated = gate, make(chan context.Context, 4)
	cs.mu.Unlock()
	added := appendTypes(t, l, "a")[0]
	var reading context.Context
	select {
	case reading = <-cs.gated:
	case <-testwait.Expired(t):
		t.Fatal("no read after the append")
	}
	leader := 0
	if reading == ctxs[1] {
		leader = 1
	}
	cancels[leader]() // the leader's request ends while it reads for both
	select {
	case o := <-chans[leader]:
		if o.rerr == nil || o.rerr.Data != "request cancelled" {
			t.Fatalf("the cancelled call answered %+v %s", o.rerr, o.res.b)
		}
	case <-testwait.Expired(t):
		t.Fatal("the cancelled call did not return")
	}
	close(gate)
	o := take(t, chans[1-leader])
	if !bytes.Contains(o.res.b, []byte(`"cursor":"`+added+`"`)) {
		t.Fatalf("the other call got %s, want the event %s", o.res.b, added)
	}
	o.res.release()
}

// Calls that arrive once another has found nothing wait with its finding, and miss no
// append that lands after it.
func TestSharedFindingMissesNoAppend(t *testing.T) {
	s, l, cs := newShareServer(t)
	head := appendTypes(t, l, "a")[0]
	p := eventsParams{After: head, MaxItems: 1, Query: "type = 'b'", Wait: time.Hour}
	first := pollGo(t.Context(), s, p)
	waitersReach(t, s, 1)
	reads := cs.reads.Load()
	var later []<-chan outcome
	for range 10 {
		later = append(later, pollGo(t.Context(), s, p))
	}
	waitersReach(t, s, 11)
	if got := cs.reads.Load() - reads; got != 0 {
		t.Errorf("%d reads for calls asking what another found nothing for, want 0", got)
	}
	appendTypes(t, l, "a", "a") // wakes all; nothing for them
	waitersReach(t, s, 11)
	added := appendTypes(t, l, "b")[0]
	for _, ch := range append(later, first) {
		o := take(t, ch)
		if !bytes.Contains(o.res.b, []byte(`"cursor":"`+added+`"`)) {
			t.Fatalf("a waiter got %s, want %s", o.res.b, added)
		}
		o.res.release()
	}
}
