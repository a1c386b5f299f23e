package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/internal/testwait"
)

// Clients that misbehave on purpose: each must leave other clients unaffected.

// heldNode is a node whose handler counts the requests that reach it with an X-Held header.
type heldNode struct {
	*node
	held atomic.Int32
}

func newHeldNode(t *testing.T, cfg server.Config) *heldNode {
	t.Helper()
	l, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	cfg.Store = l
	srv := server.New(cfg)
	h := &heldNode{}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Held") != "" {
			h.held.Add(1)
		}
		srv.ServeHTTP(w, r)
	}))
	ts.Listener = srv.Attach(ts.Config, ts.Listener)
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	h.node = &node{t: t, srv: srv, log: l, ts: ts, hc: ts.Client()}
	return h
}

// hold opens a connection and sends the headers of a POST whose body of length bytes never
// comes (beyond the first sent bytes).
func (h *heldNode) hold(t *testing.T, path, contentType string, length int, sent string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", h.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nX-Held: 1\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
		path, contentType, length, sent)
	return c
}

// While 64 POSTs (as many as the node takes in at once) hold their connections open and
// never send their bodies, other clients' ingest, signals and reads go through.
func TestBodylessPostsHoldUpNoOne(t *testing.T) {
	h := newHeldNode(t, server.Config{BodyTimeout: time.Minute})
	var held []net.Conn
	for range 64 {
		held = append(held, h.hold(t, "/events", "application/cloudevents+json", 1000, ""))
	}
	held = append(held, h.hold(t, "/", "application/json", 1000, ""))
	held = append(held, h.hold(t, "/signal/s", "application/x-www-form-urlencoded", 1000, ""))
	waitUntil(t, "the body-less POSTs reach the handler", func() bool { return h.held.Load() == int32(len(held)) })

	h.ingest(ceJSON("/ok", "1", "ok.t", 1))
	if resp, b := h.post("/signal/s", "application/x-www-form-urlencoded", "_domain=d&_name=n"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a signal beside the held POSTs: HTTP %d %s", resp.StatusCode, b)
	}
	if r := h.events(`{"before":"7fffffffffffffff-0000000000000000"}`); len(r.Items) != 2 {
		t.Fatalf("a read beside the held POSTs: %d items, want 2", len(r.Items))
	}
	// The held POSTs are still waiting for their bodies: they were not just cut off.
	for i, c := range held {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		var ne net.Error
		if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("held POST %d was answered (%d bytes, %v)", i, n, err)
		}
	}
}

// A body that does not arrive within BodyTimeout is answered 408 and its connection closed,
// on each endpoint that reads one.
func TestBodyTimeout(t *testing.T) {
	h := newHeldNode(t, server.Config{BodyTimeout: 200 * time.Millisecond})
	for _, c := range []struct{ path, contentType string }{
		{"/events", "application/cloudevents+json"},
		{"/", "application/json"},
		{"/signal/s", "application/x-www-form-urlencoded"},
	} {
		conn := h.hold(t, c.path, c.contentType, 100, "{")
		if d, ok := testwait.Deadline(t); ok {
			_ = conn.SetReadDeadline(d)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("POST %s with a stalled body: %v", c.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive within 200ms") {
			t.Fatalf("POST %s with a stalled body: HTTP %d %s", c.path, resp.StatusCode, b)
		}
		if n, err := conn.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("POST %s: the connection stayed open after the 408 (%d, %v)", c.path, n, err)
		}
	}
	// A long-poll whose body came in time is not cut off by the body's deadline.
	r := h.events(`{"waitTime":"600ms"}`)
	if len(r.Items) != 0 {
		t.Fatalf("a long-poll of an empty log: %+v", r)
	}
}

// bodyBytes is the node's gauge of request bodies held.
func bodyBytes(t *testing.T, n *node) float64 {
	v, ok := scrape(t, n)["evtctl_http_request_body_bytes"]
	if !ok {
		t.Fatal("no evtctl_http_request_body_bytes in /metrics")
	}
	return v
}

// Bodies being received count against MaxBodyMemory: past it, a request is refused with
// 503 rather than held, and the bytes are given back when a request is done.
func TestBodyMemoryIsBounded(t *testing.T) {
	h := newHeldNode(t, server.Config{MaxBodyMemory: 64 << 10, MaxBody: 64 << 10, MaxRPCBody: 16 << 10})
	conn := h.hold(t, "/events", "application/cloudevents+json", 60<<10, strings.Repeat("x", 60<<10-1))
	waitUntil(t, "the held body counts", func() bool { return bodyBytes(t, h.node) == 60<<10 })
	ev := ceJSON("/big", "1", "big.t", 1)
	ev = ev[:len(ev)-1] + `,"pad":"` + strings.Repeat("x", 8<<10) + `"}`
	resp, b := h.post("/events", "application/cloudevents+json", ev)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a body beyond the memory bound: HTTP %d %s", resp.StatusCode, b)
	}
	// A body of unknown length is held as it grows.
	req := h.newRequest(http.MethodPost, "/events", "application/cloudevents+json", nil)
	req.Body = io.NopCloser(strings.NewReader(ev))
	req.ContentLength = -1
	if resp, b := h.do(req); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a chunked body beyond the memory bound: HTTP %d %s", resp.StatusCode, b)
	}
	conn.Close()
	waitUntil(t, "the held body's bytes are given back", func() bool { return bodyBytes(t, h.node) == 0 })
	h.ingest(ev)
	if got := bodyBytes(t, h.node); got != 0 {
		t.Fatalf("%v bytes held after the ingest", got)
	}
}

// bigEvents ingests count events of about size bytes and returns their cursors, oldest first.
func bigEvents(n *node, count, size int) []string {
	var cursors []string
	for i := 0; i < count; i += 20 {
		var batch []string
		for j := i; j < min(i+20, count); j++ {
			ev := ceJSON("/big", strconv.Itoa(j), "big.t", j)
			batch = append(batch, ev[:len(ev)-1]+`,"pad":"`+strings.Repeat("x", size)+`"}`)
		}
		cursors = append(cursors, n.ingestBatch(batch)...)
	}
	return cursors
}

// A JSON-RPC batch of 16 calls for the largest pages gets a reply within MaxReplyBytes: the
// first page is cut short (more:true), the later calls find the budget spent, and a client
// that goes on from the last item gets the rest.
func TestBatchReplyIsBounded(t *testing.T) {
	const budget = 256 << 10
	n := newNode(t, server.Config{MaxItems: 1000, MaxReplyBytes: budget}, eventlog.Options{})
	cursors := bigEvents(n, 200, 8<<10) // 1.6 MB: each call alone asks for all of it
	call := `{"jsonrpc":"2.0","id":%d,"method":"events","params":{"maxItems":1000,"before":"7fffffffffffffff-0000000000000000"}}`
	var calls []string
	for i := range 16 {
		calls = append(calls, fmt.Sprintf(call, i))
	}
	resp, b := n.post("/", "application/json", "["+strings.Join(calls, ",")+"]")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d %s", resp.StatusCode, abbrev(b))
	}
	if len(b) > budget+2 {
		t.Fatalf("a reply of %d bytes, over the budget of %d", len(b), budget)
	}
	var replies []rpcReply
	mustUnmarshal(t, b, &replies)
	if len(replies) != 16 {
		t.Fatalf("%d replies, want 16", len(replies))
	}
	first := replies[0].Result
	if first == nil || len(first.Items) == 0 || !first.More || len(first.Items) >= len(cursors) {
		t.Fatalf("the first call: %+v", replies[0])
	}
	for i, it := range first.Items {
		if it.Cursor != cursors[len(cursors)-1-i] {
			t.Fatalf("item %d is %s, want %s", i, it.Cursor, cursors[len(cursors)-1-i])
		}
	}
	for i, r := range replies[1:] {
		if r.Result == nil || len(r.Result.Items) != 0 || !r.Result.More {
			t.Fatalf("call %d after the budget was spent: %+v", i+1, r)
		}
	}
	// A single call is bounded alike, and paging on from its last item misses nothing.
	got := len(first.Items)
	before := first.Items[got-1].Cursor
	for got < len(cursors) {
		r := n.getEvents("maxItems=1000&before=" + before)
		if len(r.Items) == 0 {
			t.Fatalf("an empty page after %d of %d items", got, len(cursors))
		}
		for _, it := range r.Items {
			if want := cursors[len(cursors)-1-got]; it.Cursor != want {
				t.Fatalf("item %d is %s, want %s", got, it.Cursor, want)
			}
			got++
		}
		if r.More != (got < len(cursors)) {
			t.Fatalf("more %v after %d of %d items", r.More, got, len(cursors))
		}
		before = r.Items[len(r.Items)-1].Cursor
	}
}

// A batch of long-polls whose first call takes the whole budget answers at once: the later
// calls find items they have no room for, which is no reason to wait.
func TestBatchOfLongPollsOverTheBudget(t *testing.T) {
	n := newNode(t, server.Config{MaxItems: 1000, MaxReplyBytes: 256 << 10, MaxWait: time.Hour}, eventlog.Options{})
	bigEvents(n, 100, 8<<10)
	call := `{"jsonrpc":"2.0","id":%d,"method":"events","params":{"maxItems":1000,"waitTime":"1h"}}`
	var calls []string
	for i := range 16 {
		calls = append(calls, fmt.Sprintf(call, i))
	}
	done := make(chan []byte, 1)
	go func() {
		_, b := n.post("/", "application/json", "["+strings.Join(calls, ",")+"]")
		done <- b
	}()
	var b []byte
	for b == nil {
		select {
		case b = <-done:
		case <-time.After(time.Millisecond):
			if n.srv.Waiters() > 0 {
				t.Fatal("a call of the batch waits")
			}
		}
	}
	var replies []rpcReply
	mustUnmarshal(t, b, &replies)
	for i, r := range replies {
		if r.Result == nil || !r.Result.More || (i > 0) != (len(r.Result.Items) == 0) {
			t.Fatalf("call %d: %s", i, abbrev(b))
		}
	}
}

// A single GET is bounded by MaxReplyBytes too, in either order.
func TestPageIsBounded(t *testing.T) {
	const budget = 200 << 10
	n := newNode(t, server.Config{MaxItems: 1000, MaxReplyBytes: budget}, eventlog.Options{})
	cursors := bigEvents(n, 100, 8<<10) // 800 KB
	for _, order := range []string{"asc", "desc"} {
		resp, b := n.get("/events?maxItems=1000&order=" + order + "&before=7fffffffffffffff-0000000000000000")
		if resp.StatusCode != http.StatusOK || len(b) > budget {
			t.Fatalf("order %s: HTTP %d, %d bytes", order, resp.StatusCode, len(b))
		}
		var r result
		mustUnmarshal(t, b, &r)
		if len(r.Items) == 0 || len(r.Items) == len(cursors) || !r.More {
			t.Fatalf("order %s: %d items, more %v", order, len(r.Items), r.More)
		}
	}
}

// Filters that would cost a node minutes of CPU are refused before the log is read, or run
// in a cost linear in the events they read: the 2 KB pattern against 4,096-word types reads
// each word of a type at most twice, which the filter package's TestPatternCostIsLinear
// counts for this pattern and text; here it reads the whole log and finds nothing.
func TestPathologicalFilters(t *testing.T) {
	n, rc := newCountingNode(t, server.Config{})
	longType := strings.TrimSuffix(strings.Repeat("a.", 4096), ".") // 4,096 words
	var batch []string
	for i := range 500 {
		batch = append(batch, ceJSON("/long", strconv.Itoa(i), longType, i))
		if len(batch) == 50 {
			n.ingestBatch(batch)
			batch = nil
		}
	}
	var ors []string
	for i := range 10000 {
		ors = append(ors, fmt.Sprintf("subject = 'x%d'", i))
	}
	for _, c := range []struct {
		name, query string
		refused     string
	}{
		{"a 5,002-word pattern", "type MATCHES '#." + strings.Repeat("a.", 5000) + "b'", "the query is 10018 bytes long; at most 4096 are taken"},
		{"an OR of 10,000 conditions", strings.Join(ors, " OR "), "at most 4096 are taken"},
		{"300 conditions", strings.Repeat("a EXISTS OR ", 299) + "b EXISTS", "more than 256 conditions in one query"},
		{"a 2 KB pattern against 4,096-word types", "type MATCHES '#." + strings.Repeat("a.", 1000) + "b'", ""},
	} {
		params, _ := json.Marshal(map[string]any{"filter": map[string]string{"query": c.query},
			"before": "7fffffffffffffff-0000000000000000", "maxItems": 10})
		reads := rc.reads.Load()
		r, b := n.rpcRaw(`{"jsonrpc":"2.0","id":1,"method":"events","params":` + string(params) + `}`)
		if c.refused != "" {
			if r.Error == nil || r.Error.Code != -32603 || !strings.Contains(r.Error.Data, c.refused) {
				t.Errorf("%s: %s, want it refused: %s", c.name, abbrev(b), c.refused)
			}
			if got := rc.reads.Load() - reads; got != 0 {
				t.Errorf("%s: refused after %d reads of the log, want none", c.name, got)
			}
		} else if r.Result == nil || len(r.Result.Items) != 0 || r.Result.More {
			t.Errorf("%s: %s, want an empty page of the whole log", c.name, abbrev(b))
		}
	}
}

// Error replies count against a batch's reply budget as they are: a batch whose first call
// takes the budget's worth of items and whose other calls are refused with long messages
// stays within MaxReplyBytes, and no message echoes more than a bounded part of a request.
func TestBatchReplyBoundedWithErrors(t *testing.T) {
	n := newNode(t, server.Config{MaxItems: 1000, MaxRPCBody: 1 << 20}, eventlog.Options{})
	bigEvents(n, 100, 60<<10) // 6 MB: the first call alone asks for more than the budget
	calls := []string{`{"jsonrpc":"2.0","id":0,"method":"events","params":{"maxItems":1000,"before":"7fffffffffffffff-0000000000000000"}}`}
	for i := 1; i < 16; i++ {
		// Bytes that are not UTF-8 come back as U+FFFD, three bytes each.
		bad := strings.Repeat("\xff", 60<<10)
		if i%2 == 0 {
			calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"%s"}`, i, bad))
		} else {
			calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"events","params":{"waitTime":"%s"}}`, i, bad))
		}
	}
	resp, b := n.post("/", "application/json", "["+strings.Join(calls, ",")+"]")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d %s", resp.StatusCode, abbrev(b))
	}
	if len(b) > 4<<20+2 {
		t.Fatalf("a reply of %d bytes, over the budget of %d", len(b), 4<<20)
	}
	var replies []rpcReply
	mustUnmarshal(t, b, &replies)
	if len(replies) != 16 || replies[0].Result == nil || len(replies[0].Result.Items) == 0 || !replies[0].Result.More {
		t.Fatalf("%d replies, the first %s", len(replies), abbrev(b))
	}
	for i, r := range replies[1:] {
		if r.Error == nil || len(r.Error.Data) > 2<<10 {
			t.Fatalf("call %d: want an error of at most 2 KiB, got %s", i+1, abbrev(b[:min(len(b), 300)]))
		}
	}
}

// A call of a batch that finds the request's scan budget spent by the calls before it
// answers "items":[] and "more":true at once, as one that finds the reply budget spent does.
func TestBatchCallsAfterTheScanBudget(t *testing.T) {
	n := newNode(t, server.Config{MaxItems: 1000, ScanBudget: 5_000_000}, eventlog.Options{})
	bigEvents(n, 300, 60<<10)
	call := `{"jsonrpc":"2.0","id":%d,"method":"events","params":{"maxItems":1000,"before":"7fffffffffffffff-0000000000000000","filter":{"query":"type = 'big.t'"}}}`
	var calls []string
	for i := range 16 {
		calls = append(calls, fmt.Sprintf(call, i))
	}
	_, b := n.post("/", "application/json", "["+strings.Join(calls, ",")+"]")
	var replies []rpcReply
	mustUnmarshal(t, b, &replies)
	if len(replies) != 16 || replies[0].Result == nil || len(replies[0].Result.Items) == 0 || !replies[0].Result.More {
		t.Fatalf("the first call: %s", abbrev(b))
	}
	for i, r := range replies[1:] {
		if r.Result == nil {
			t.Fatalf("call %d after the scan budget was spent: %+v", i+1, r.Error)
		}
		if res := r.Result; len(res.Items) != 0 || !res.More || res.Newest == "" {
			t.Fatalf("call %d after the scan budget was spent: %d items, more %v, newest %q", i+1, len(res.Items), res.More, res.Newest)
		}
	}
}

// Bodies count against MaxBodyMemory as their bytes arrive, not as their Content-Length
// says they will: 64 POSTs that declare the largest body and send none of it hold next to
// nothing, and a producer beside them is served.
func TestDeclaredBodiesHoldNoMemory(t *testing.T) {
	h := newHeldNode(t, server.Config{BodyTimeout: time.Minute})
	for range 64 {
		h.hold(t, "/events", "application/cloudevents-batch+json", 8<<20, "")
	}
	waitUntil(t, "the body-less POSTs reach the handler", func() bool { return h.held.Load() == 64 })
	if got := bodyBytes(t, h.node); got > 64*4<<10 {
		t.Fatalf("64 POSTs that sent no body hold %v bytes, more than 4 KiB each", got)
	}
	resp, b := h.post("/events", "application/cloudevents+json", ceJSON("/ok", "1", "ok.t", 1))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a producer beside the held POSTs: HTTP %d %s", resp.StatusCode, b)
	}
}

// Readers' JSON-RPC bodies and producers' bodies are held in rooms of their own: clients
// with no token, on a node whose reads are open, that send most of their calls and stall
// fill only the readers' room, and a producer with the ingest token is served. A POST
// without the ingest token is refused before anything of its body is held.
func TestReadersBodiesLeaveProducersRoom(t *testing.T) {
	h := newHeldNode(t, server.Config{BodyTimeout: time.Minute, IngestToken: "secret",
		MaxBodyMemory: 1 << 20, MaxBody: 256 << 10, MaxRPCBody: 64 << 10})
	var sent int
	call := `{"jsonrpc":"2.0","id":1,"method":"events","params":{"pad":"` + strings.Repeat("x", 64<<10)
	for range 32 {
		// 64 KiB declared, all but a byte sent.
		h.hold(t, "/", "application/json", 64<<10, call[:64<<10-1])
		sent += 64<<10 - 1
	}
	waitUntil(t, "the stalled calls reach the handler", func() bool { return h.held.Load() == 32 })
	resp, b := h.post("/events", "application/cloudevents+json", ceJSON("/ok", "1", "ok.t", 1), "Authorization", "Bearer secret")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a producer beside %d bytes of stalled calls: HTTP %d %s", sent, resp.StatusCode, b)
	}
	held := bodyBytes(t, h.node)
	for range 16 {
		c := h.hold(t, "/events", "application/cloudevents-batch+json", 8<<20, "")
		if d, ok := testwait.Deadline(t); ok {
			_ = c.SetReadDeadline(d)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a POST without the ingest token: %v %v", resp, err)
		}
	}
	if got := bodyBytes(t, h.node); got != held {
		t.Fatalf("POSTs refused for want of a token changed the bodies held from %v to %v", held, got)
	}
}

// brokenWriter is the reply of a connection that fails once its first bytes are written.
type brokenWriter struct {
	*httptest.ResponseRecorder
	writes int
}

func (w *brokenWriter) Write(b []byte) (int, error) {
	if w.writes++; w.writes > 1 {
		return 0, errors.New("broken pipe")
	}
	return w.ResponseRecorder.Write(b)
}

// A batch whose reply can no longer be written reads no more for its calls.
func TestBatchStopsWhenItsReplyFails(t *testing.T) {
	l, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rc := &readCounter{Store: l}
	srv := server.New(server.Config{Store: rc})
	call := `{"jsonrpc":"2.0","id":%d,"method":"events","params":{"before":"7fffffffffffffff-0000000000000000"}}`
	var calls []string
	for i := range 16 {
		calls = append(calls, fmt.Sprintf(call, i))
	}
	req := httptest.NewRequest("POST", "/", strings.NewReader("["+strings.Join(calls, ",")+"]"))
	req.Header.Set("Content-Type", "application/json")
	srv.ServeHTTP(&brokenWriter{ResponseRecorder: httptest.NewRecorder()}, req)
	if n := rc.reads.Load(); n > 2 {
		t.Fatalf("a batch whose reply failed read the log %d times for its 16 calls", n)
	}
}
