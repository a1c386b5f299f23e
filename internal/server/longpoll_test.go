package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/internal/testwait"
)

// polled is the outcome of a request sent from another goroutine.
type polled struct {
	reply   rpcReply
	raw     []byte
	err     error
	elapsed time.Duration // on a fake clock (newFakeClockNode), exactly how long the call took
}

// pollAsync sends a JSON-RPC events call (or, with a path starting "/events?", a GET) in a
// goroutine; it does not touch t, so it may outlive a failing test harmlessly.
func pollAsync(ctx context.Context, n *node, body string) <-chan polled {
	ch := make(chan polled, 1)
	go func() {
		var p polled
		start := time.Now()
		var req *http.Request
		if strings.HasPrefix(body, "/events?") {
			req, p.err = http.NewRequestWithContext(ctx, http.MethodGet, n.url()+body, nil)
		} else {
			req, p.err = http.NewRequestWithContext(ctx, http.MethodPost, n.url()+"/", strings.NewReader(body))
		}
		if p.err == nil {
			var resp *http.Response
			if resp, p.err = n.hc.Do(req); p.err == nil {
				p.raw, p.err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
		}
		p.elapsed = time.Since(start)
		if p.err == nil {
			if strings.HasPrefix(body, "/events?") {
				var r result
				p.err = json.Unmarshal(p.raw, &r)
				p.reply.Result = &r
			} else {
				p.err = json.Unmarshal(p.raw, &p.reply)
			}
		}
		ch <- p
	}()
	return ch
}

// await takes the outcome of a poll, failing the test if it failed, or if it has not come by
// the end of the test's time.
func await(t *testing.T, ch <-chan polled) polled {
	t.Helper()
	select {
	case p := <-ch:
		if p.err != nil {
			t.Fatalf("long-poll: %v (%s)", p.err, abbrev(p.raw))
		}
		if p.reply.Result == nil {
			t.Fatalf("long-poll: no result: %s", abbrev(p.raw))
		}
		return p
	case <-testwait.Expired(t):
		t.Fatalf("long-poll did not answer")
	}
	panic("unreachable")
}

func pollBody(params string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"events","params":` + params + `}`
}

func waitForWaiters(t *testing.T, n *node, want int64) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d long-polls wait", want), func() bool { return n.srv.Waiters() == want })
}

// A waiting long-poll is answered by an append. It waits an hour unless woken, and a wait
// that runs out answers without items: the new event in its reply shows the append woke it.
// nodeKinds are the two ways a node serves long-polls: parked out of net/http (where
// connections can be watched), or each in the goroutine of its request.
var nodeKinds = []struct {
	name string
	new  func(t *testing.T, cfg server.Config) *node
}{
	{"parked", func(t *testing.T, cfg server.Config) *node { return newNode(t, cfg, eventlog.Options{}) }},
	{"goroutine", newUnparkedNode},
}

func TestLongPollWokenByAppend(t *testing.T) {
	t.Parallel()
	for _, kind := range nodeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			testLongPollWokenByAppend(t, func() *node { return kind.new(t, server.Config{MaxWait: time.Hour}) })
		})
	}
}

func testLongPollWokenByAppend(t *testing.T, newNode func() *node) {
	for _, viaGET := range []bool{false, true} {
		n := newNode()
		head := n.ingest(ceJSON("/lp", "0", "lp.t", 0)).Cursor
		var ch <-chan polled
		if viaGET {
			ch = pollAsync(t.Context(), n, "/events?waitTime=1h&after=%22"+head+"%22")
		} else {
			ch = pollAsync(t.Context(), n, pollBody(`{"after":"`+head+`","waitTime":"1h"}`))
		}
		waitForWaiters(t, n, 1)
		select {
		case p := <-ch:
			t.Fatalf("the long-poll answered before any append: %s", p.raw)
		default:
		}
		added := n.ingest(ceJSON("/lp", "1", "lp.t", 1))
		p := await(t, ch)
		r := p.reply.Result
		if len(r.Items) != 1 || r.Items[0].Cursor != added.Cursor || r.More || r.Newest != added.Cursor {
			t.Fatalf("woken long-poll (GET %v) answered %s, want the new event %s", viaGET, p.raw, added.Cursor)
		}
		if n.srv.Waiters() != 0 {
			t.Fatalf("%d waiters after the answer", n.srv.Waiters())
		}
	}
}

// A long-poll with nothing new answers when its wait runs out, exactly then (on a fake clock),
// with an empty page.
func TestLongPollTimesOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		n, _ := newFakeClockNode(t, server.Config{})
		head := n.ingest(ceJSON("/lp", "0", "lp.t", 0)).Cursor
		p := await(t, pollAsync(t.Context(), n, pollBody(`{"after":"`+head+`","waitTime":200000000}`)))
		r := p.reply.Result
		if len(r.Items) != 0 || r.More || r.Newest != head || r.Oldest != head {
			t.Fatalf("timed-out long-poll answered %s", p.raw)
		}
		if !strings.Contains(string(p.raw), `"items":[]`) {
			t.Fatalf("items is not an empty array: %s", p.raw)
		}
		if p.elapsed != 200*time.Millisecond {
			t.Fatalf("answered after %v, want 200ms", p.elapsed)
		}
		// The wait as a duration string, and on an empty log.
		e, _ := newFakeClockNode(t, server.Config{})
		p = await(t, pollAsync(t.Context(), e, pollBody(`{"wait_time":"150ms"}`)))
		if len(p.reply.Result.Items) != 0 || p.reply.Result.Newest != "" || p.elapsed != 150*time.Millisecond {
			t.Fatalf("long-poll of an empty log answered %s after %v, want no items after 150ms", p.raw, p.elapsed)
		}
	})
}

func TestLongPollIgnoresNonMatchingAppends(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		n, reads := newFakeClockNode(t, server.Config{})
		head := n.ingest(ceJSON("/lp", "0", "lp.wanted", 0)).Cursor

		// It keeps waiting past an append that does not match, then answers the one that does.
		ch := pollAsync(t.Context(), n, pollBody(`{"filter":{"query":"tm.event = 'lp.wanted'"},"after":"`+head+`","waitTime":10000000000}`))
		synctest.Wait()
		if w := n.srv.Waiters(); w != 1 {
			t.Fatalf("%d long-polls wait, want 1", w)
		}
		before := reads.reads.Load()
		other := n.ingest(ceJSON("/lp", "1", "lp.other", 1))
		synctest.Wait() // woken, it has read past the append and waits again
		if reads.reads.Load() == before {
			t.Fatal("the non-matching append did not wake the long-poll to read")
		}
		select {
		case p := <-ch:
			t.Fatalf("answered %s after an append that does not match", p.raw)
		default:
		}
		wanted := n.ingest(ceJSON("/lp", "2", "lp.wanted", 2))
		p := await(t, ch)
		r := p.reply.Result
		if len(r.Items) != 1 || r.Items[0].Cursor != wanted.Cursor {
			t.Fatalf("answered %s, want only the matching %s (not %s)", p.raw, wanted.Cursor, other.Cursor)
		}
		if p.elapsed != 0 {
			t.Fatalf("answered after %v of its wait, want at the append", p.elapsed)
		}

		// With only a non-matching append, it runs its whole wait; the newest it reports shows
		// it saw the append.
		ch = pollAsync(t.Context(), n, pollBody(`{"filter":{"query":"tm.event = 'lp.wanted'"},"after":"`+wanted.Cursor+`","waitTime":"400ms"}`))
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		other = n.ingest(ceJSON("/lp", "3", "lp.other", 3))
		p = await(t, ch)
		r = p.reply.Result
		if len(r.Items) != 0 || r.Newest != other.Cursor {
			t.Fatalf("answered %s, want no items and newest %s", p.raw, other.Cursor)
		}
		if p.elapsed != 400*time.Millisecond {
			t.Fatalf("answered after %v, want its whole wait of 400ms", p.elapsed)
		}
	})
}

// Shutdown answers every waiting long-poll. They wait an hour unless woken, so only Shutdown
// can answer them within the test.
func TestShutdownWakesLongPolls(t *testing.T) {
	t.Parallel()
	for _, kind := range nodeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			testShutdownWakesLongPolls(t, kind.new(t, server.Config{MaxWait: time.Hour}))
		})
	}
}

func testShutdownWakesLongPolls(t *testing.T, n *node) {
	head := n.ingest(ceJSON("/lp", "0", "lp.t", 0)).Cursor
	chs := []<-chan polled{
		pollAsync(t.Context(), n, pollBody(`{"after":"`+head+`","waitTime":"1h"}`)),
		pollAsync(t.Context(), n, "/events?waitTime=1h&after="+head),
		pollAsync(t.Context(), n, pollBody(`{"after":"`+head+`","waitTime":"1h","order":"asc"}`)),
	}
	waitForWaiters(t, n, int64(len(chs)))
	n.srv.Shutdown(context.Background())
	for _, ch := range chs {
		p := await(t, ch)
		if len(p.reply.Result.Items) != 0 || p.reply.Result.Newest != head {
			t.Fatalf("woken long-poll answered %s", p.raw)
		}
	}
	if n.srv.Waiters() != 0 {
		t.Fatalf("%d waiters after Shutdown", n.srv.Waiters())
	}
	// After Shutdown nothing waits: an hour's wait is answered.
	p := await(t, pollAsync(t.Context(), n, pollBody(`{"after":"`+head+`","waitTime":"1h"}`)))
	if len(p.reply.Result.Items) != 0 || n.srv.Waiters() != 0 {
		t.Fatalf("long-poll after Shutdown: %s, %d waiters", p.raw, n.srv.Waiters())
	}
}

// A page before a cursor is answered at once, never after a wait: on a fake clock, no time
// passes.
func TestBeforeNeverWaits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		n, _ := newFakeClockNode(t, server.Config{})
		cs := n.ingestBatch([]string{ceJSON("/bw", "0", "bw.t", 0), ceJSON("/bw", "1", "bw.t", 1)})
		for _, params := range []string{
			`{"before":"` + cs[0] + `","waitTime":10000000000}`,                                       // nothing before the oldest
			`{"after":"` + cs[1] + `","before":"7fffffffffffffff-0000000000000000","waitTime":"10s"}`, // nothing after the newest
			`{"filter":{"query":"tm.event = 'none'"},"before":"` + cs[1] + `","waitTime":"10s"}`,      // nothing matches
		} {
			p := await(t, pollAsync(t.Context(), n, pollBody(params)))
			if len(p.reply.Result.Items) != 0 || p.reply.Result.More {
				t.Fatalf("%s answered %s", params, p.raw)
			}
			if p.elapsed != 0 {
				t.Fatalf("%s waited %v", params, p.elapsed)
			}
		}
		p := await(t, pollAsync(t.Context(), n, "/events?waitTime=10s&before="+cs[0]))
		if len(p.reply.Result.Items) != 0 || p.elapsed != 0 {
			t.Fatalf("GET with before answered %s after %v", p.raw, p.elapsed)
		}
		if n.srv.Waiters() != 0 {
			t.Fatalf("%d waiters", n.srv.Waiters())
		}
	})
}

// A wait longer than MaxWait lasts MaxWait, and a call that asks for none waits DefaultWait:
// exactly, on a fake clock.
func TestWaitCappedAtMaxWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		n, _ := newFakeClockNode(t, server.Config{MaxWait: 300 * time.Millisecond, DefaultWait: 100 * time.Millisecond})
		head := n.ingest(ceJSON("/cap", "0", "cap.t", 0)).Cursor
		for _, body := range []string{
			pollBody(`{"after":"` + head + `","waitTime":3600000000000}`),
			pollBody(`{"after":"` + head + `","waitTime":"1h"}`),
			"/events?waitTime=3600000000000&after=" + head,
		} {
			p := await(t, pollAsync(t.Context(), n, body))
			if len(p.reply.Result.Items) != 0 {
				t.Fatalf("%s answered %s", body, p.raw)
			}
			if p.elapsed != 300*time.Millisecond {
				t.Fatalf("%s: an hour's wait capped at 300ms took %v", body, p.elapsed)
			}
		}
		// No waitTime: the default wait.
		p := await(t, pollAsync(t.Context(), n, pollBody(`{"after":"`+head+`"}`)))
		if p.elapsed != 100*time.Millisecond {
			t.Fatalf("the default wait of 100ms took %v", p.elapsed)
		}
	})
}

// TestLongPollLimits covers MaxWaiters and a client that goes away while waiting.
func TestLongPollLimits(t *testing.T) {
	t.Parallel()
	for _, kind := range nodeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			testLongPollLimits(t, kind.new(t, server.Config{MaxWaiters: 1, MaxWait: time.Hour}))
		})
	}
}

func testLongPollLimits(t *testing.T, n *node) {
	head := n.ingest(ceJSON("/lim", "0", "lim.t", 0)).Cursor
	ctx, cancel := context.WithCancel(t.Context())
	first := pollAsync(ctx, n, pollBody(`{"after":"`+head+`","waitTime":"1h"}`))
	waitForWaiters(t, n, 1)

	e := n.eventsErr(`{"after":"` + head + `","waitTime":"1h"}`)
	if e.Code != -32000 || !strings.Contains(e.Data, "retry") {
		t.Fatalf("a waiter over MaxWaiters got %+v", e)
	}
	// A read that need not wait is still served.
	if r := n.events(`{"maxItems":1}`); len(r.Items) != 1 || r.Items[0].Cursor != head {
		t.Fatalf("read beside a full wait list: %+v", r)
	}
	// The client goes away: its waiter is released.
	cancel()
	select {
	case p := <-first:
		if p.err == nil {
			t.Fatalf("cancelled long-poll answered %s", p.raw)
		}
	case <-testwait.Expired(t):
		t.Fatalf("the cancelled request did not end")
	}
	waitForWaiters(t, n, 0)
	// and the slot is free again.
	p := await(t, pollAsync(t.Context(), n, pollBody(`{"after":"`+head+`","waitTime":"50ms"}`)))
	if len(p.reply.Result.Items) != 0 {
		t.Fatalf("answered %s", p.raw)
	}
}
