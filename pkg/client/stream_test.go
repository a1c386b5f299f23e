package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// pauser blocks the consumer inside fn once, when a batch ends at a given cursor.
type pauser struct {
	at      string
	once    sync.Once
	paused  chan struct{}
	resumed chan struct{}
}

func newPauser(at string) *pauser {
	return &pauser{at: at, paused: make(chan struct{}), resumed: make(chan struct{})}
}

func (p *pauser) hook(b Batch) error {
	if b.Cursor == p.at {
		p.once.Do(func() {
			close(p.paused)
			<-p.resumed
		})
	}
	return nil
}

func (p *pauser) waitPaused(t testing.TB) {
	t.Helper()
	select {
	case <-p.paused:
	case <-testwait.Expired(t):
		t.Fatalf("the consumer never reached %s", p.at)
	}
}

// checkBatches checks what every Stream batch must satisfy: items oldest first, Cursor the
// last item's (or, with no items, not before the previous batch's Cursor).
func checkBatches(t testing.TB, bs []Batch) {
	t.Helper()
	prev := ""
	for i, b := range bs {
		strictlyAscending(t, fmt.Sprintf("batch %d", i), cursorsOf(b.Items))
		if len(b.Items) > 0 && b.Cursor != b.Items[len(b.Items)-1].Cursor {
			t.Fatalf("batch %d: Cursor %s, last item %s", i, b.Cursor, b.Items[len(b.Items)-1].Cursor)
		}
		if prev != "" && b.Cursor < prev {
			t.Fatalf("batch %d: Cursor %s went back before %s", i, b.Cursor, prev)
		}
		prev = b.Cursor
	}
}

func TestStreamFromStartBacklogThenFollow(t *testing.T) {
	forEachNode(t, func(t *testing.T, k nodeKind) {
		n := k.new(t, nodeOpts{})
		var want []string
		for range 20 {
			want = append(want, n.Append(t, events(50, "Tx")...)...)
		}
		var startFollow sync.Once
		follow := make(chan struct{})
		s := startStream(t, newTestClient(t, n.URL()), StreamOptions{FromStart: true, PageSize: 100, Wait: 2 * time.Second},
			func(Batch) error { startFollow.Do(func() { close(follow) }); return nil })
		<-follow
		var mu sync.Mutex
		var more []string
		appended := make(chan struct{})
		go func() { // appends while the stream runs, one to three events at a time
			defer close(appended)
			for i := range 150 {
				cs := n.Append(t, events(1+i%3, "Tx")...)
				mu.Lock()
				more = append(more, cs...)
				mu.Unlock()
			}
		}()
		<-appended
		want = append(want, more...)
		s.waitItems(t, len(want))
		if err := s.stop(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("Stream returned %v, want context.Canceled", err)
		}
		sameCursors(t, "delivered", cursorsOf(s.Items()), want)
		bs := s.Batches()
		checkBatches(t, bs)
		if gs := s.Gaps(); len(gs) != 0 {
			t.Fatalf("gaps reported: %+v", gs)
		}
		switch k.name {
		case "tendermint":
			// Without the ascending extension the whole backlog is gathered first, then
			// handed out a page at a time: caught up once all of it is out.
			n := 0
			for i, b := range bs {
				n += len(b.Items)
				if len(b.Items) > 100 || b.CaughtUp != (n >= 1000) {
					t.Fatalf("batch %d: %d items, caught up %v after %d; want pages of 100, caught up at 1000", i, len(b.Items), b.CaughtUp, n)
				}
				if n >= 1000 {
					break
				}
			}
		case "evtctl":
			if len(bs[0].Items) != 100 || bs[0].CaughtUp {
				t.Fatalf("first batch: %d items, caught up %v; want a page of 100 with more to come", len(bs[0].Items), bs[0].CaughtUp)
			}
			for _, c := range n.Rec().Calls() {
				if c.Params.Order != "asc" {
					t.Fatalf("a call without order asc on an evtctl node: %s", c.Raw)
				}
			}
		}
		for _, b := range bs {
			if len(b.Items) > 1000 {
				t.Fatalf("a batch of %d items", len(b.Items))
			}
		}
	})
}

func TestStreamFromHead(t *testing.T) {
	forEachNode(t, func(t *testing.T, k nodeKind) {
		n := k.new(t, nodeOpts{})
		n.Append(t, events(50, "Tx")...)
		s := startStream(t, newTestClient(t, n.URL()), StreamOptions{PageSize: 10, Wait: 2 * time.Second}, nil)
		// The probe for the head came first; now the stream waits after it.
		waitFor(t, func() bool { return n.Waiting() >= 1 && n.Rec().NumCalls() >= 2 },
			func() string { return "the stream never waited at the head" })
		want := n.Append(t, events(15, "Tx")...)
		want = append(want, n.Append(t, events(1, "Tx")...)...)
		s.waitItems(t, len(want))
		want = append(want, n.Append(t, events(4, "Tx")...)...)
		s.waitItems(t, len(want))
		s.stop(t)
		sameCursors(t, "delivered", cursorsOf(s.Items()), want)
		if gs := s.Gaps(); len(gs) != 0 {
			t.Fatalf("gaps reported: %+v", gs)
		}
		calls := n.Rec().Calls()
		if p := calls[0].Params; p.MaxItems != 1 || p.After != "" || p.Before != probeBefore {
			t.Errorf("the first call is no probe: %s", calls[0].Raw)
		}
	})
}

func TestStreamSince(t *testing.T) {
	forEachNode(t, func(t *testing.T, k nodeKind) {
		n := k.new(t, nodeOpts{})
		var blocks [][]string
		for range 5 {
			// One timestamp per block on an evtctl node; one per item, increasing, on a
			// Tendermint node.
			blocks = append(blocks, n.Append(t, events(10, "Tx")...))
		}
		tsOf := func(c string) int64 { return cursor.MustParse(c).TS }
		all := concat(blocks...)
		for _, tc := range []struct {
			name  string
			since time.Time
			want  []string
		}{
			{"at block 3", time.Unix(0, tsOf(blocks[2][0])), concat(blocks[2:]...)},
			{"just after block 3", time.Unix(0, tsOf(blocks[2][9])+1), concat(blocks[3:]...)},
			{"at the last block", time.Unix(0, tsOf(blocks[4][0])), blocks[4]},
			{"before everything", time.Unix(0, tsOf(all[0])-int64(time.Hour)), all},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := startStream(t, newTestClient(t, n.URL()), StreamOptions{Since: tc.since, PageSize: 7, Wait: 200 * time.Millisecond}, nil)
				s.waitItems(t, len(tc.want))
				// Nothing more comes: wait for one more long-poll to end empty.
				b0 := s.numBatches()
				waitFor(t, func() bool { return s.numBatches() > b0 }, func() string { return "no further batch" })
				s.stop(t)
				sameCursors(t, "delivered", cursorsOf(s.Items()), tc.want)
				// A start time older than the log is no loss (the log may just be younger):
				// no gap, whatever the start.
				if gs := s.Gaps(); len(gs) != 0 {
					t.Fatalf("gaps reported: %+v", gs)
				}
			})
		}
	})
}

func TestStreamRetries(t *testing.T) {
	forEachNode(t, func(t *testing.T, k nodeKind) {
		n := k.new(t, nodeOpts{})
		want := n.Append(t, events(300, "Tx")...)
		// The second call fails four ways: the 2nd page of the walk (evtctl) or the first
		// page back from the head (Tendermint).
		n.Rec().FailFrom(2, fault500, fault503, fault429, faultDrop)
		s := startStream(t, newTestClient(t, n.URL()), StreamOptions{FromStart: true, PageSize: 100, Wait: 2 * time.Second}, nil)
		s.waitItems(t, len(want))

		rs := s.Retries()
		if len(rs) != 4 {
			t.Fatalf("%d retries, want 4: %+v", len(rs), rs)
		}
		for i, r := range rs {
			if r.Attempt != i+1 {
				t.Errorf("retry %d: attempt %d, want %d", i, r.Attempt, i+1)
			}
			if !Retryable(r.Err) {
				t.Errorf("retry %d: %v is not retryable", i, r.Err)
			}
		}
		var he *HTTPError
		for i, status := range []int{500, 503, 429} {
			if !errors.As(rs[i].Err, &he) || he.Status != status {
				t.Errorf("retry %d: %v, want HTTP %d", i, rs[i].Err, status)
			}
		}
		if errors.As(rs[1].Err, &he) && he.RetryAfter != time.Second {
			t.Errorf("503: RetryAfter %v, want 1s", he.RetryAfter)
		}
		if rs[1].Delay < time.Second || rs[0].Delay > time.Second || rs[2].Delay > time.Second {
			t.Errorf("delays %v %v %v: only the 503 asked for 1s", rs[0].Delay, rs[1].Delay, rs[2].Delay)
		}
		if errors.As(rs[3].Err, &he) {
			t.Errorf("a dropped connection came back as %v", rs[3].Err)
		}
		// The node saw the retry after the 503 at least a second later: the Retry-After
		// honoured, not only reported. A lower bound alone, which no load can break (the
		// client's wait begins after the 503 was recorded, and its timer does not fire early).
		calls := n.Rec().Calls()
		for i, c := range calls {
			if c.Fault == fault503 {
				if gap := calls[i+1].At.Sub(c.At); gap < 950*time.Millisecond {
					t.Errorf("the client came back %v after a 503 with Retry-After: 1", gap)
				}
			}
		}

		// Failures while following the head: the long-poll after the next one fails.
		n.Rec().FailNext(faultDrop, fault500)
		more := n.Append(t, events(5, "Tx")...)
		s.waitItems(t, len(want)+5)
		more = append(more, n.Append(t, events(5, "Tx")...)...)
		want = append(want, more...)
		s.waitItems(t, len(want))
		s.stop(t)
		sameCursors(t, "delivered", cursorsOf(s.Items()), want)
		rs = s.Retries()
		if len(rs) != 6 || rs[4].Attempt != 1 || rs[5].Attempt != 2 {
			t.Fatalf("retries while following: %+v", rs[4:])
		}
		if gs := s.Gaps(); len(gs) != 0 {
			t.Fatalf("gaps reported: %+v", gs)
		}
	})
}

func TestStreamNonRetryable(t *testing.T) {
	forEachNode(t, func(t *testing.T, k nodeKind) {
		n := k.new(t, nodeOpts{})
		n.Append(t, events(3, "Tx")...)
		for _, tc := range []struct {
			name string
			opts StreamOptions
			data string
		}{
			{"bad query", StreamOptions{FromStart: true, Query: "tm.event = Tx"}, "invalid filter query: offset 11: got tag, wanted number, timestamp, datestamp or string"},
			{"bad cursor", StreamOptions{After: "zzz"}, `invalid cursor "zzz": invalid cursor format`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := n.Rec().NumCalls()
				called := false
				retried := false
				ctx, cancel := testwait.Context(t, context.Background())
				defer cancel()
				tc.opts.Backoff = fastBackoff
				tc.opts.OnRetry = func(error, int, time.Duration) { retried = true; cancel() } // a retry ends it, failed
				err := newTestClient(t, n.URL()).Stream(ctx, tc.opts, func(Batch) error { called = true; return nil })
				// A stream with a query first learns what the node takes (the probe).
				calls := 1
				if tc.opts.Query != "" {
					calls = 2
				}
				var re *RPCError
				var qe *QueryError
				switch {
				case k.name == "tendermint" && tc.opts.Query != "":
					// Not sent: the client knows the node's language after the probe.
					if !errors.As(err, &qe) || qe.Query != tc.opts.Query || !strings.Contains(err.Error(), tc.data[len("invalid filter query: "):]) {
						t.Fatalf("Stream returned %v, want a QueryError saying %q", err, tc.data)
					}
					calls = 1
				case !errors.As(err, &re) || re.Code != -32603 || re.Data != tc.data:
					t.Fatalf("Stream returned %v, want RPC error -32603 %q", err, tc.data)
				}
				if called || retried || n.Rec().NumCalls()-before != calls {
					t.Fatalf("fn called %v, retried %v, %d calls: want %d calls, no retry and no batch",
						called, retried, n.Rec().NumCalls()-before, calls)
				}
			})
		}
	})
}

func TestStreamFnErrorEndsIt(t *testing.T) {
	forEachNode(t, func(t *testing.T, k nodeKind) {
		n := k.new(t, nodeOpts{})
		n.Append(t, events(30, "Tx")...)
		stop := errors.New("consumer says stop")
		calls := 0
		err := newTestClient(t, n.URL()).Stream(context.Background(), StreamOptions{FromStart: true, PageSize: 10}, func(b Batch) error {
			calls++
			return stop
		})
		if !errors.Is(err, stop) || calls != 1 {
			t.Fatalf("Stream returned %v after %d calls, want the consumer's error after 1", err, calls)
		}
	})
}

func TestStreamGap(t *testing.T) {
	forEachNode(t, func(t *testing.T, k nodeKind) {
		n := k.new(t, nodeOpts{Retain: 50})
		a := n.Append(t, events(20, "Tx")...)
		p := newPauser(a[19])
		s := startStream(t, newTestClient(t, n.URL()), StreamOptions{FromStart: true, PageSize: 10, Wait: 2 * time.Second}, p.hook)
		p.waitPaused(t)
		b := n.Append(t, events(100, "Tx")...) // while the consumer sits in fn
		oldest := n.Oldest(t)
		idx := -1
		for i, c := range b {
			if c == oldest {
				idx = i
			}
		}
		if idx <= 0 {
			t.Fatalf("the node's oldest %s is not among the new events", oldest)
		}
		close(p.resumed)
		want := concat(a, b[idx:])
		s.waitItems(t, len(want))

		gs := s.Gaps()
		if len(gs) != 1 || gs[0] != (Gap{After: a[19], Oldest: oldest, Lost: uint64(idx)}) {
			t.Fatalf("gaps %+v, want one from %s to %s", gs, a[19], oldest)
		}
		for _, bt := range s.Batches() {
			if bt.Gap != nil && (len(bt.Items) == 0 || bt.Items[0].Cursor != oldest) {
				t.Fatalf("the gap's batch does not start at the oldest event: %+v", bt)
			}
		}
		// Delivery goes on from the oldest, without reporting the gap again.
		c := n.Append(t, events(30, "Tx")...)
		want = append(want, c...)
		s.waitItems(t, len(want))
		s.stop(t)
		sameCursors(t, "delivered", cursorsOf(s.Items()), want)
		if gs := s.Gaps(); len(gs) != 1 {
			t.Fatalf("gaps %+v, want the one", gs)
		}
		checkBatches(t, s.Batches())
	})
}

func TestStreamNoGapWhenOnlySeenEventsPruned(t *testing.T) {
	forEachNode(t, func(t *testing.T, k nodeKind) {
		// evtctl keeps exactly the last 10: after 10 more, the oldest is the very next event
		// after the last one delivered (contiguous sequence numbers). Tendermint cuts to 3/4
		// of its cap: the oldest is one the client has seen.
		retain := map[string]int{"evtctl": 10, "tendermint": 16}[k.name]
		n := k.new(t, nodeOpts{Retain: retain})
		a := n.Append(t, events(10, "Tx")...)
		p := newPauser(a[9])
		s := startStream(t, newTestClient(t, n.URL()), StreamOptions{FromStart: true, PageSize: 4, Wait: 2 * time.Second}, p.hook)
		p.waitPaused(t)
		b := n.Append(t, events(10, "Tx")...)
		oldest := n.Oldest(t)
		switch k.name {
		case "evtctl":
			if oldest != b[0] {
				t.Fatalf("oldest %s, want the first new event %s", oldest, b[0])
			}
		case "tendermint":
			if oldest != a[8] {
				t.Fatalf("oldest %s, want %s", oldest, a[8])
			}
		}
		close(p.resumed)
		s.waitItems(t, 20)
		s.stop(t)
		sameCursors(t, "delivered", cursorsOf(s.Items()), concat(a, b))
		if gs := s.Gaps(); len(gs) != 0 {
			t.Fatalf("gaps reported though nothing unseen was pruned: %+v", gs)
		}
	})
}

// TestStreamFilteredGapNotRepeated: a filtered stream whose last match has left the log
// reports the loss once; events the node examined while the client waited, and found not to
// match, are no loss when they are pruned later.
func TestStreamFilteredGapNotRepeated(t *testing.T) {
	n := newEvtNode(t, nodeOpts{Retain: 10})
	tx := n.Append(t, events(3, "Tx")...)
	s := startStream(t, newTestClient(t, n.URL()), StreamOptions{FromStart: true, Query: "tm.event = 'Tx'", Wait: 50 * time.Millisecond}, nil)
	s.waitItems(t, 3)
	// 20 others in one append: 4..13 go unseen — a gap, reported once.
	n.Append(t, events(20, "Other")...)
	waitFor(t, func() bool { return len(s.Gaps()) == 1 }, func() string { return "no gap" })
	g := s.Gaps()[0]
	if g.After != tx[2] {
		t.Fatalf("gap %+v does not start at the last match %s", g, tx[2])
	}
	// More others, a few at a time, each examined by a long-poll before the next arrive.
	for range 6 {
		b0 := s.numBatches()
		n.Append(t, events(5, "Other")...)
		waitFor(t, func() bool { return s.numBatches() >= b0+2 }, func() string { return "long-polls stopped" })
	}
	last := n.Append(t, events(1, "Tx")...)
	s.waitItems(t, 4)
	s.stop(t)
	sameCursors(t, "delivered", cursorsOf(s.Items()), append(tx, last...))
	if gs := s.Gaps(); len(gs) != 1 {
		t.Fatalf("%d gaps reported, want 1: %+v", len(gs), gs)
	}
	checkBatches(t, s.Batches())
}

// TestStreamTendermintPrunedWhilePaging: events pruned while the client pages back towards
// its resume cursor are lost, and reported.
func TestStreamTendermintPrunedWhilePaging(t *testing.T) {
	f := newFakeTendermint(t, nodeOpts{Retain: 40})
	a := f.Append(t, events(5, "Tx")...)
	s := startStream(t, newTestClient(t, f.URL()), StreamOptions{FromStart: true, PageSize: 10, Wait: 2 * time.Second}, nil)
	s.waitItems(t, 5)
	pruned := make(chan []string, 1)
	f.OnNextBefore(func() { pruned <- f.Append(t, events(20, "Tx")...) }) // 55 > 40: cut to 30
	b := f.Append(t, events(30, "Tx")...)                                 // 35 in the log
	want := concat(a, b[20:])
	s.waitItems(t, len(want))
	want = append(want, <-pruned...)
	s.waitItems(t, len(want))
	s.stop(t)
	sameCursors(t, "delivered", cursorsOf(s.Items()), want)
	gs := s.Gaps()
	if len(gs) != 1 || gs[0] != (Gap{After: a[4], Oldest: b[20], Lost: 20}) {
		t.Fatalf("gaps %+v, want one from %s to %s", gs, a[4], b[20])
	}
}

func TestStreamReconnect(t *testing.T) {
	opts := StreamOptions{FromStart: true, PageSize: 20, Wait: 2 * time.Second}
	// waitRetrying waits until the client has failed to reach the stopped node.
	waitRetrying := func(t *testing.T, s *streamRun) {
		waitFor(t, func() bool { return len(s.Retries()) > 0 }, func() string { return "the client never retried" })
	}
	t.Run("evtctl durable restart", func(t *testing.T) {
		t.Parallel()
		n := newEvtNode(t, nodeOpts{Durable: true})
		addr := n.URL()
		a := n.Append(t, events(50, "Tx")...)
		s := startStream(t, newTestClient(t, n.URL()), opts, nil)
		s.waitItems(t, 50)
		b := n.Append(t, events(10, "Tx")...) // delivered before the stop, or after the restart
		var c []string
		n.Restart(func() {
			waitRetrying(t, s)
			c = n.Append(t, events(10, "Tx")...) // while nothing serves the log
		})
		if n.URL() != addr {
			t.Fatalf("restarted on %s, not %s", n.URL(), addr)
		}
		d := postEvents(t, http.DefaultClient, n.URL(), events(10, "Tx")...) // through the restarted node
		want := concat(a, b, c, d)
		s.waitItems(t, len(want))
		s.stop(t)
		sameCursors(t, "delivered", cursorsOf(s.Items()), want)
		if gs := s.Gaps(); len(gs) != 0 {
			t.Fatalf("gaps reported: %+v", gs)
		}
		for _, r := range s.Retries() {
			if !Retryable(r.Err) {
				t.Fatalf("a retry for %v", r.Err)
			}
		}
	})
	t.Run("tendermint outage", func(t *testing.T) {
		t.Parallel()
		f := newFakeTendermint(t, nodeOpts{})
		a := f.Append(t, events(50, "Tx")...)
		s := startStream(t, newTestClient(t, f.URL()), opts, nil)
		s.waitItems(t, 50)
		b := f.Append(t, events(10, "Tx")...)
		var c []string
		f.Restart(true, func() {
			waitRetrying(t, s)
			c = f.Append(t, events(10, "Tx")...)
		})
		d := f.Append(t, events(10, "Tx")...)
		want := concat(a, b, c, d)
		s.waitItems(t, len(want))
		s.stop(t)
		sameCursors(t, "delivered", cursorsOf(s.Items()), want)
		if gs := s.Gaps(); len(gs) != 0 {
			t.Fatalf("gaps reported: %+v", gs)
		}
	})
	t.Run("tendermint restart loses its log", func(t *testing.T) {
		t.Parallel()
		f := newFakeTendermint(t, nodeOpts{})
		a := f.Append(t, events(50, "Tx")...)
		s := startStream(t, newTestClient(t, f.URL()), opts, nil)
		s.waitItems(t, 50)
		var c []string
		f.Restart(false, func() {
			waitRetrying(t, s)
			c = f.Append(t, events(10, "Tx")...)
		})
		if c[0][17:] != "0001" {
			t.Fatalf("the new log starts at %s", c[0])
		}
		d := f.Append(t, events(10, "Tx")...)
		want := concat(a, c, d)
		s.waitItems(t, len(want))
		s.stop(t)
		sameCursors(t, "delivered", cursorsOf(s.Items()), want)
		// Nothing replayed, and the restart is reported: what the old log held after the
		// last delivered event is gone.
		if gs := s.Gaps(); len(gs) != 1 || gs[0].Kind != GapRestarted || gs[0].After != a[49] || gs[0].Oldest != c[0] {
			t.Fatalf("gaps %+v, want one from %s to %s", gs, a[49], c[0])
		}
	})
}

// A cancelled context ends Stream whatever it is waiting for: a long-poll, or the delay the
// node asked for before a retry. Both waits are an hour, so only the cancel can end them
// within the test; nothing more is sent after it.
func TestStreamCancel(t *testing.T) {
	for _, k := range nodeKinds {
		t.Run(k.name+"/long-poll", func(t *testing.T) {
			n := k.new(t, nodeOpts{MaxWait: time.Hour})
			n.Append(t, events(1, "Tx")...)
			c := newTestClient(t, n.URL())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- c.Stream(ctx, StreamOptions{Wait: time.Hour}, func(Batch) error { return nil })
			}()
			waitFor(t, func() bool { return n.Waiting() >= 1 && n.Rec().NumCalls() >= 2 },
				func() string { return "no long-poll waiting" })
			calls := n.Rec().NumCalls()
			cancel()
			select {
			case err := <-done:
				if err != context.Canceled {
					t.Fatalf("Stream returned %v, want ctx.Err()", err)
				}
			case <-testwait.Expired(t):
				t.Fatal("Stream did not return after cancel")
			}
			if got := n.Rec().NumCalls(); got != calls {
				t.Fatalf("%d calls after the cancel", got-calls)
			}
		})
		t.Run(k.name+"/retry wait", func(t *testing.T) {
			n := k.new(t, nodeOpts{})
			n.Rec().FailNext(fault503Hour)
			c := newTestClient(t, n.URL())
			ctx, cancel := context.WithCancel(context.Background())
			retrying := make(chan time.Duration, 1)
			done := make(chan error, 1)
			go func() {
				done <- c.Stream(ctx, StreamOptions{FromStart: true, OnRetry: func(_ error, _ int, d time.Duration) { retrying <- d }},
					func(Batch) error { return nil })
			}()
			if d := <-retrying; d != time.Hour { // now waiting the hour the node asked for
				t.Fatalf("retrying after %v, want the hour of the Retry-After", d)
			}
			cancel()
			select {
			case err := <-done:
				if err != context.Canceled {
					t.Fatalf("Stream returned %v, want ctx.Err()", err)
				}
			case <-testwait.Expired(t):
				t.Fatal("Stream did not return after cancel")
			}
			if got := n.Rec().NumCalls(); got != 1 {
				t.Fatalf("%d calls, want the one answered 503", got)
			}
		})
	}
}

func TestStreamBoundedMemory(t *testing.T) {
	forEachNode(t, func(t *testing.T, k nodeKind) {
		n := k.new(t, nodeOpts{})
		var want []string
		for range 20 {
			want = append(want, n.Append(t, events(1000, "Tx")...)...)
		}
		s := startStream(t, newTestClient(t, n.URL()), StreamOptions{FromStart: true, PageSize: 100, Wait: 2 * time.Second}, nil)
		s.waitItems(t, len(want))
		s.stop(t)
		sameCursors(t, "delivered", cursorsOf(s.Items()), want)
		bs := s.Batches()
		largest := 0
		for _, b := range bs {
			largest = max(largest, len(b.Items))
		}
		switch k.name {
		case "evtctl":
			// The ascending walk holds one page at a time.
			if largest > 100 {
				t.Fatalf("a batch of %d items with PageSize 100", largest)
			}
		case "tendermint":
			// Newest-first paging gathers the whole backlog (the documented cost) and hands
			// it out a page at a time.
			if largest > 100 || bs[0].CaughtUp {
				t.Fatalf("a batch of %d items with PageSize 100 (first caught up: %v)", largest, bs[0].CaughtUp)
			}
		}
		t.Logf("%d batches, largest %d, %d calls", len(bs), largest, n.Rec().NumCalls())
	})
}

// TestStreamTendermintFilteredGapOnce: on a Tendermint node a filtered stream whose resume
// cursor fell out of the log, with nothing matching left, reports the gap once and then
// resumes at the head the node examined, instead of reporting it on every long-poll.
func TestStreamTendermintFilteredGapOnce(t *testing.T) {
	f := newFakeTendermint(t, nodeOpts{Retain: 10})
	tx := f.Append(t, events(3, "Tx")...)
	s := startStream(t, newTestClient(t, f.URL()), StreamOptions{FromStart: true, Query: "tm.event = 'Tx'", Wait: 30 * time.Millisecond}, nil)
	s.waitItems(t, 3)
	f.Append(t, events(20, "Other")...) // 23 > 10: cut to the last 7
	oldest := f.Oldest(t)
	waitFor(t, func() bool { return len(s.Gaps()) == 1 }, func() string { return "no gap" })
	b0 := s.numBatches()
	waitFor(t, func() bool { return s.numBatches() >= b0+3 }, func() string { return "long-polls stopped" })
	last := f.Append(t, events(1, "Tx")...)
	s.waitItems(t, 4)
	s.stop(t)
	sameCursors(t, "delivered", cursorsOf(s.Items()), append(tx, last...))
	// 23 events, cut to the newest 7: the 13 between the third and the 17th are lost.
	if gs := s.Gaps(); len(gs) != 1 || gs[0] != (Gap{After: tx[2], Oldest: oldest, Lost: 13}) {
		t.Fatalf("gaps %+v, want one from %s to %s", gs, tx[2], oldest)
	}
	for _, b := range s.Batches() {
		if b.Gap != nil && (len(b.Items) != 0 || cursor.CompareText(b.Cursor, oldest) < 0) {
			t.Fatalf("the gap's batch: %+v", b)
		}
	}
}

// A cursor past the node's newest event (another node's, or of a log that went back) is
// told at once — the first request does not wait, whatever Wait says — and the stream goes
// on from the node's newest event: the events it takes next, numbered and stamped before
// the cursor, are delivered, and the gap is told once.
func TestStreamCursorPastNewest(t *testing.T) {
	forEachNode(t, func(t *testing.T, k nodeKind) {
		n := k.new(t, nodeOpts{})
		a := n.Append(t, events(3, "Tx")...)
		last := cursor.MustParse(a[2])
		past := cursor.New(last.TS+int64(time.Hour), last.Seq+100, last.Width).String()
		s := startStream(t, newTestClient(t, n.URL()), StreamOptions{After: past, Wait: time.Hour}, nil)
		waitFor(t, func() bool { return len(s.Gaps()) == 1 }, func() string { return "no gap" })
		if g := s.Gaps()[0]; g.Kind != GapPastNewest || g.After != past || g.Newest != a[2] || !g.NotOfLog() {
			t.Fatalf("gap %+v, want the cursor past the newest %s", g, a[2])
		}
		if w := string(n.Rec().Calls()[0].Params.WaitTime); w == "" || len(w) > len("1000000000") {
			t.Fatalf("the first request waits %s", w)
		}
		b := n.Append(t, events(2, "Tx")...)
		s.waitItems(t, 2)
		s.stop(t)
		sameCursors(t, "delivered", cursorsOf(s.Items()), b)
		if len(s.Gaps()) != 1 {
			t.Fatalf("gaps %+v", s.Gaps())
		}
	})
}
