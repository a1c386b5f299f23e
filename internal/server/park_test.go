package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/parker"
	"github.com/evtctl/evtctl/internal/server"
)

// Long-polls parked out of net/http (Server.Attach): each test talks HTTP/1.1 over a raw
// connection, so that it sees what is written on the wire and when a connection closes.

// skipUnlessParking skips where connections are not parked.
func skipUnlessParking(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("long-polls are parked on Linux only")
	}
}

// rawConn is a raw HTTP/1.1 connection to a node.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialWire(t *testing.T, n *node) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", n.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (w *rawConn) send(raw string) {
	w.t.Helper()
	if _, err := io.WriteString(w.c, raw); err != nil {
		w.t.Fatal(err)
	}
}

// reply reads one response, failing after 15s.
func (w *rawConn) reply() (*http.Response, []byte) {
	w.t.Helper()
	_ = w.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(w.br, nil)
	if err != nil {
		w.t.Fatalf("reading a reply: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		w.t.Fatalf("reading a reply's body: %v", err)
	}
	return resp, b
}

// closed reports whether the node closed the connection (after any replies read).
func (w *rawConn) closed() bool {
	_ = w.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, err := w.br.ReadByte()
	return errors.Is(err, io.EOF)
}

// rpcPoll is a long-poll as a client sends it.
func rpcPoll(id int, params string, hdr ...string) string {
	body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"events","params":` + params + `}`
	return "POST / HTTP/1.1\r\nHost: node\r\nContent-Type: application/json\r\n" + strings.Join(hdr, "") +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

func getPoll(query string, hdr ...string) string {
	return "GET /events?" + query + " HTTP/1.1\r\nHost: node\r\n" + strings.Join(hdr, "") + "\r\n"
}

func rpcResult(t *testing.T, b []byte) *result {
	t.Helper()
	var r rpcReply
	mustUnmarshal(t, b, &r)
	if r.Result == nil {
		t.Fatalf("no result: %s", b)
	}
	return r.Result
}

func waitForParked(t *testing.T, n *node, want int) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("the parker holds %d connections", want), func() bool { return n.srv.Parked() == want })
}

// A client that hangs up while its long-poll is parked frees its place among the waiters
// (MaxWaiters) at once, and the parker lets go of its connection.
func TestParkedHangUpFreesSlot(t *testing.T) {
	skipUnlessParking(t)
	t.Parallel()
	n := newNode(t, server.Config{MaxWaiters: 1}, eventlog.Options{})
	head := n.ingest(ceJSON("/h", "0", "h.t", 0)).Cursor
	first := dialWire(t, n)
	first.send(rpcPoll(1, `{"after":"`+head+`","waitTime":30000000000}`))
	waitForWaiters(t, n, 1)
	waitForParked(t, n, 1)

	second := dialWire(t, n)
	second.send(rpcPoll(2, `{"after":"`+head+`","waitTime":30000000000}`))
	resp, b := second.reply()
	var busy rpcReply
	mustUnmarshal(t, b, &busy)
	if resp.StatusCode != http.StatusOK || busy.Error == nil || busy.Error.Code != -32000 {
		t.Fatalf("a long-poll over MaxWaiters: HTTP %d %s", resp.StatusCode, b)
	}

	first.c.Close()
	waitForWaiters(t, n, 0)
	waitForParked(t, n, 1) // the second connection, idle between requests

	// The place is free: the second client waits now, and an append wakes it.
	second.send(rpcPoll(3, `{"after":"`+head+`","waitTime":30000000000}`))
	waitForWaiters(t, n, 1)
	added := n.ingest(ceJSON("/h", "1", "h.t", 1)).Cursor
	resp, b = second.reply()
	if r := rpcResult(t, b); resp.StatusCode != http.StatusOK || len(r.Items) != 1 || r.Items[0].Cursor != added {
		t.Fatalf("woken long-poll: HTTP %d %s", resp.StatusCode, b)
	}
	wantMetric(t, scrape(t, n), `evtctl_http_requests_total{code="200",endpoint="rpc"}`, 3)
}

// Shutdown answers every parked long-poll at once with what it has and closes its
// connection, and closes the connections the parker holds between requests.
func TestShutdownAnswersParkedLongPolls(t *testing.T) {
	skipUnlessParking(t)
	t.Parallel()
	n := newMemNode(t)
	head := n.ingest(ceJSON("/s", "0", "s.t", 0)).Cursor
	rpc := dialWire(t, n)
	rpc.send(rpcPoll(1, `{"after":"`+head+`","waitTime":30000000000}`))
	get := dialWire(t, n)
	get.send(getPoll("waitTime=30s&after=" + head))
	// A connection net/http serves first, whose long-poll it then hands to the parker.
	via := dialWire(t, n)
	via.send("GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n")
	if resp, _ := via.reply(); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: HTTP %d", resp.StatusCode)
	}
	via.send(rpcPoll(2, `{"after":"`+head+`","waitTime":30000000000,"order":"asc"}`))
	idle := dialWire(t, n)
	idle.send(rpcPoll(3, `{"maxItems":1}`))
	if _, b := idle.reply(); len(rpcResult(t, b).Items) != 1 {
		t.Fatalf("a read that needs no wait: %s", b)
	}
	waitForWaiters(t, n, 3)
	waitForParked(t, n, 4)

	n.srv.Shutdown(context.Background())
	for name, w := range map[string]*rawConn{"rpc": rpc, "get": get, "via net/http": via} {
		resp, b := w.reply()
		var r result
		if name == "get" {
			mustUnmarshal(t, b, &r)
		} else {
			r = *rpcResult(t, b)
		}
		if resp.StatusCode != http.StatusOK || len(r.Items) != 0 || r.Newest != head || !resp.Close {
			t.Fatalf("%s: the long-poll answered at shutdown: HTTP %d close %v %s", name, resp.StatusCode, resp.Close, b)
		}
		if !w.closed() {
			t.Fatalf("%s: the connection stays open after the reply", name)
		}
	}
	if !idle.closed() {
		t.Fatalf("an idle connection stays open after Shutdown")
	}
	if n.srv.Waiters() != 0 || n.srv.Parked() != 0 {
		t.Fatalf("after Shutdown: %d waiters, %d connections parked", n.srv.Waiters(), n.srv.Parked())
	}
}

// A keep-alive connection goes on after a parked wait: the next request is read by the
// parker (a long-poll) or by net/http (anything else), and a long-poll net/http reads is
// parked in turn. Pipelined requests are answered in order.
func TestKeepAliveAfterParkedWait(t *testing.T) {
	skipUnlessParking(t)
	t.Parallel()
	n := newMemNode(t)
	head := n.ingest(ceJSON("/k", "0", "k.t", 0)).Cursor
	w := dialWire(t, n)
	w.send(rpcPoll(1, `{"after":"`+head+`","waitTime":30000000000}`))
	waitForWaiters(t, n, 1)
	c1 := n.ingest(ceJSON("/k", "1", "k.t", 1)).Cursor
	if _, b := w.reply(); rpcResult(t, b).Items[0].Cursor != c1 {
		t.Fatalf("first wake: %s", b)
	}

	w.send(rpcPoll(2, `{"after":"`+c1+`","waitTime":30000000000}`))
	waitForWaiters(t, n, 1)
	c2 := n.ingest(ceJSON("/k", "2", "k.t", 2)).Cursor
	resp, b := w.reply()
	if resp.Close || rpcResult(t, b).Items[0].Cursor != c2 {
		t.Fatalf("second wake on the same connection: close %v %s", resp.Close, b)
	}

	// Something for net/http, then a long-poll on the connection net/http now serves.
	w.send("GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n")
	if resp, b := w.reply(); resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"status":"ok"`)) {
		t.Fatalf("healthz after a parked wait: HTTP %d %s", resp.StatusCode, b)
	}
	w.send(getPoll("waitTime=30s&after=" + c2))
	waitForWaiters(t, n, 1)
	waitForParked(t, n, 1)
	c3 := n.ingest(ceJSON("/k", "3", "k.t", 3)).Cursor
	resp, b = w.reply()
	var r result
	mustUnmarshal(t, b, &r)
	if resp.StatusCode != http.StatusOK || len(r.Items) != 1 || r.Items[0].Cursor != c3 {
		t.Fatalf("GET long-poll after net/http: HTTP %d %s", resp.StatusCode, b)
	}

	// Pipelined: a read answered at once, a long-poll that waits, a read after it.
	w.send(rpcPoll(4, `{"maxItems":1}`) + rpcPoll(5, `{"after":"`+c3+`","waitTime":30000000000}`) + rpcPoll(6, `{"maxItems":2}`))
	if _, b := w.reply(); rpcResult(t, b).Items[0].Cursor != c3 {
		t.Fatalf("pipelined read: %s", b)
	}
	waitForWaiters(t, n, 1)
	c4 := n.ingest(ceJSON("/k", "4", "k.t", 4)).Cursor
	if _, b := w.reply(); !bytes.Contains(b, []byte(`"id":5`)) || rpcResult(t, b).Items[0].Cursor != c4 {
		t.Fatalf("pipelined long-poll: %s", b)
	}
	if _, b := w.reply(); !bytes.Contains(b, []byte(`"id":6`)) || len(rpcResult(t, b).Items) != 2 {
		t.Fatalf("pipelined read after the long-poll: %s", b)
	}

	// A filtered read, then one without a filter: nothing of a call stays for the next.
	c5 := n.ingest(ceJSON("/k", "5", "k.u", 5)).Cursor
	w.send(rpcPoll(9, `{"filter":{"query":"tm.event = 'k.u'"},"maxItems":5}`))
	if _, b := w.reply(); !bytes.Contains(b, []byte(`"id":9`)) || len(rpcResult(t, b).Items) != 1 || rpcResult(t, b).Items[0].Cursor != c5 {
		t.Fatalf("a filtered read: %s", b)
	}
	w.send(rpcPoll(10, `{"maxItems":5}`))
	if _, b := w.reply(); !bytes.Contains(b, []byte(`"id":10`)) || len(rpcResult(t, b).Items) != 5 {
		t.Fatalf("a read after a filtered one: %s", b)
	}

	// A request in two pieces.
	req := rpcPoll(7, `{"maxItems":1}`)
	w.send(req[:20])
	time.Sleep(10 * time.Millisecond) // let the first piece arrive alone (either way, it is answered)
	w.send(req[20:])
	if _, b := w.reply(); !bytes.Contains(b, []byte(`"id":7`)) || rpcResult(t, b).Items[0].Cursor != c5 {
		t.Fatalf("a request in pieces: %s", b)
	}

	// Connection: close is honoured.
	w.send(rpcPoll(8, `{"maxItems":1}`, "Connection: close\r\n"))
	if resp, _ := w.reply(); !resp.Close {
		t.Fatalf("no Connection: close in the reply to a request that asked for it")
	}
	if !w.closed() {
		t.Fatalf("the connection stays open after Connection: close")
	}
}

// The parker's replies are those net/http writes for the same requests, byte for byte but
// the date: at once, after a wait, and an error.
func TestParkedRepliesAsNetHTTP(t *testing.T) {
	skipUnlessParking(t)
	t.Parallel()
	parked := newNode(t, server.Config{MaxWaiters: 1}, eventlog.Options{})
	plain := newUnparkedNode(t, server.Config{MaxWaiters: 1})
	event := ceJSON("/b", "0", "b.t", 0)
	parked.ingest(event)
	plain.ingest(event)
	// Cursors hold the time of their append: they differ between the nodes.
	date := regexp.MustCompile(`Date: [^\r]*\r\n`)
	cursor := regexp.MustCompile(`[0-9a-f]{16}-[0-9a-f]{16}`)
	// Each request is made with the node's newest cursor.
	type request func(head string) string
	exchange := func(n *node, reqs ...request) string {
		w := dialWire(t, n)
		var raw bytes.Buffer
		w.br = bufio.NewReader(io.TeeReader(w.c, &raw)) // a reply is read whole before the next request
		for _, req := range reqs {
			w.send(req(n.log.Stats().Newest.String()))
			w.reply()
		}
		return cursor.ReplaceAllString(date.ReplaceAllString(raw.String(), ""), "C")
	}
	fixed := func(req string) request { return func(string) string { return req } }
	for _, reqs := range [][]request{
		{fixed(rpcPoll(1, `{"maxItems":1}`)), fixed(rpcPoll(2, `{"maxItems":1}`, "Connection: close\r\n"))},
		{
			fixed(getPoll("maxItems=1")),
			func(head string) string { return rpcPoll(3, `{"after":"`+head+`","waitTime":"20ms"}`) },
			func(head string) string { return getPoll("after=" + head + "&waitTime=20ms") },
		},
		{
			func(head string) string { return rpcPoll(4, `{"before":"`+head+`"}`) },
			func(head string) string { return getPoll("before="+head, "Connection: close\r\n") },
		},
	} {
		if a, b := exchange(parked, reqs...), exchange(plain, reqs...); a != b || strings.Contains(a, "error") {
			t.Fatalf("parked:\n%s\nnet/http:\n%s", a, b)
		}
	}
	// Over MaxWaiters: the busy error, with its Retry-After if any.
	for _, n := range []*node{parked, plain} {
		w := dialWire(t, n)
		w.send(rpcPoll(9, `{"after":"`+n.log.Stats().Newest.String()+`","waitTime":30000000000}`))
		waitForWaiters(t, n, 1)
	}
	busy := func(head string) string { return rpcPoll(10, `{"after":"`+head+`","waitTime":30000000000}`) }
	if a, b := exchange(parked, busy), exchange(plain, busy); a != b || !strings.Contains(a, "-32000") {
		t.Fatalf("busy: parked:\n%s\nnet/http:\n%s", a, b)
	}
}

// newUnparkedNode is a node whose long-polls wait in net/http's goroutines.
func newUnparkedNode(t *testing.T, cfg server.Config) *node {
	t.Helper()
	l := openLog(t, eventlog.Options{})
	cfg.Store = l
	return serveNodeWith(t, cfg, l, false, nil)
}

// Over TLS long-polls wait in goroutines, as before: the parker hands a listener's TLS
// connections to net/http untouched.
func TestLongPollOverTLS(t *testing.T) {
	t.Parallel()
	l, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	srv := server.New(server.Config{Store: l})
	ts := httptest.NewUnstartedServer(srv)
	ts.Listener = srv.Attach(ts.Config, ts.Listener)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	n := &node{t: t, srv: srv, log: l, ts: ts, hc: ts.Client()}
	head := n.ingest(ceJSON("/tls", "0", "tls.t", 0)).Cursor
	ch := pollAsync(t.Context(), n, pollBody(`{"after":"`+head+`","waitTime":30000000000}`))
	waitForWaiters(t, n, 1)
	if p := srv.Parked(); p != 0 {
		t.Fatalf("%d connections parked over TLS", p)
	}
	added := n.ingest(ceJSON("/tls", "1", "tls.t", 1)).Cursor
	if p := await(t, ch); len(p.reply.Result.Items) != 1 || p.reply.Result.Items[0].Cursor != added {
		t.Fatalf("TLS long-poll answered %s", p.raw)
	}
}

// A node with a read token parks the long-polls that carry it; net/http refuses the others.
func TestParkedLongPollsAndTokens(t *testing.T) {
	skipUnlessParking(t)
	t.Parallel()
	n := newNode(t, server.Config{ReadToken: "sesame"}, eventlog.Options{})
	w := dialWire(t, n)
	w.send(rpcPoll(1, `{"waitTime":30000000000}`, "Authorization: Bearer sesame\r\n"))
	waitForWaiters(t, n, 1)
	waitForParked(t, n, 1)
	for _, auth := range []string{"", "Authorization: Bearer nope\r\n", "Authorization: Basic c2VzYW1l\r\n"} {
		o := dialWire(t, n)
		o.send(rpcPoll(2, `{"waitTime":30000000000}`, auth))
		if resp, b := o.reply(); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%q: HTTP %d %s", auth, resp.StatusCode, b)
		}
	}
	added := n.ingest(ceJSON("/t", "1", "t.t", 1)).Cursor
	if resp, b := w.reply(); resp.StatusCode != http.StatusOK || rpcResult(t, b).Items[0].Cursor != added {
		t.Fatalf("the long-poll with the token: HTTP %d %s", resp.StatusCode, b)
	}
}

// Parked long-polls hold no goroutine.
func TestParkedLongPollsHoldNoGoroutine(t *testing.T) {
	skipUnlessParking(t)
	n := newMemNode(t)
	head := n.ingest(ceJSON("/g", "0", "g.t", 0)).Cursor
	const waiters = 200
	g0 := runtime.NumGoroutine()
	var ws []*rawConn
	for i := range waiters {
		w := dialWire(t, n)
		w.send(rpcPoll(i, `{"after":"`+head+`","waitTime":30000000000}`))
		ws = append(ws, w)
	}
	waitForWaiters(t, n, waiters)
	if g := runtime.NumGoroutine() - g0; g > waiters/4 {
		t.Fatalf("%d long-polls parked with %d goroutines more", waiters, g)
	}
	added := n.ingest(ceJSON("/g", "1", "g.t", 1)).Cursor
	for _, w := range ws {
		if _, b := w.reply(); rpcResult(t, b).Items[0].Cursor != added {
			t.Fatalf("woken: %s", b)
		}
	}
	m := scrape(t, n)
	wantMetric(t, m, "evtctl_parked_connections", waiters)
	wantMetric(t, m, `evtctl_http_requests_total{code="200",endpoint="rpc"}`, waiters)
}

// newNodeWith is newNode whose HTTP server is set up by setup before it is attached.
func newNodeWith(t *testing.T, cfg server.Config, setup func(*http.Server)) *node {
	t.Helper()
	l := openLog(t, eventlog.Options{})
	cfg.Store = l
	return serveNodeWith(t, cfg, l, true, setup)
}

// The parker holds connections between requests within the HTTP server's timeouts: a
// connection that sends nothing is closed after ReadHeaderTimeout, one idle after a reply
// after IdleTimeout.
func TestParkedConnectionTimeouts(t *testing.T) {
	skipUnlessParking(t)
	t.Parallel()
	n := newNodeWith(t, server.Config{}, func(hs *http.Server) {
		// Long enough for a request sent at once to be read on a busy machine, where a
		// look of the event loop may come tens of milliseconds late.
		hs.ReadHeaderTimeout = time.Second
		hs.IdleTimeout = 100 * time.Millisecond
	})
	n.ingest(ceJSON("/i", "0", "i.t", 0))
	silent := dialWire(t, n)
	answered := dialWire(t, n)
	answered.send(rpcPoll(1, `{"maxItems":1}`))
	if resp, _ := answered.reply(); resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("HTTP %d, close %v", resp.StatusCode, resp.Close)
	}
	if !silent.closed() {
		t.Fatal("a connection that sent nothing stays open past the header timeout")
	}
	if !answered.closed() {
		t.Fatal("an idle connection stays open past the idle timeout")
	}
	waitForParked(t, n, 0)
}

// A reply larger than the socket takes at once is finished by a writer of its own, whole,
// however slowly the client reads it; the connection then goes on.
func TestParkedReplyToASlowReader(t *testing.T) {
	skipUnlessParking(t)
	t.Parallel()
	n := newNode(t, server.Config{MaxItems: 500}, eventlog.Options{})
	pad := strings.Repeat("x", 8000)
	var events []string
	for i := range 300 {
		events = append(events, fmt.Sprintf(`{"specversion":"1.0","id":"big-%d","source":"/big","type":"big.t","data":{"pad":%q}}`, i, pad))
	}
	head := n.ingestBatch(events[:1])[0]
	w := dialWire(t, n)
	w.send(rpcPoll(1, `{"after":"`+head+`","maxItems":500,"order":"asc","waitTime":30000000000}`))
	waitForWaiters(t, n, 1)
	n.ingestBatch(events[1:])
	// Nothing is read until the node has written what the socket takes.
	waitUntil(t, "the node waits for the client to read", func() bool { return n.srv.Waiters() == 0 })
	resp, b := w.reply()
	if r := rpcResult(t, b); resp.StatusCode != http.StatusOK || len(r.Items) != 299 || len(b) < 299*8000 {
		t.Fatalf("HTTP %d, %d bytes, %d items", resp.StatusCode, len(b), len(r.Items))
	}
	w.send(rpcPoll(2, `{"maxItems":1}`))
	if _, b := w.reply(); len(rpcResult(t, b).Items) != 1 {
		t.Fatalf("the next request on the connection: %s", abbrev(b))
	}
}

// What the parker does not read as a long-poll goes to net/http, which answers it as
// before: a GET with a body, a batch, a notification, HTTP/1.0, a bad request.
func TestParkerLeavesOtherRequestsToNetHTTP(t *testing.T) {
	skipUnlessParking(t)
	t.Parallel()
	n := newMemNode(t)
	head := n.ingest(ceJSON("/o", "0", "o.t", 0)).Cursor
	w := dialWire(t, n)
	w.send("GET /events?maxItems=1 HTTP/1.1\r\nHost: node\r\nContent-Length: 2\r\n\r\n{}")
	if _, b := w.reply(); !bytes.Contains(b, []byte(head)) {
		t.Fatalf("GET with a body: %s", b)
	}
	batch := `[{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxItems":1}},{"jsonrpc":"2.0","method":"events"}]`
	w.send("POST / HTTP/1.1\r\nHost: node\r\nContent-Length: " + strconv.Itoa(len(batch)) + "\r\n\r\n" + batch)
	if _, b := w.reply(); !bytes.HasPrefix(b, []byte(`[{"jsonrpc":"2.0","id":1,"result":`)) {
		t.Fatalf("batch: %s", b)
	}
	note := `{"jsonrpc":"2.0","method":"events"}`
	w.send("POST / HTTP/1.1\r\nHost: node\r\nContent-Length: " + strconv.Itoa(len(note)) + "\r\n\r\n" + note)
	if resp, b := w.reply(); resp.StatusCode != http.StatusOK || len(b) != 0 {
		t.Fatalf("notification: HTTP %d %q", resp.StatusCode, b)
	}
	w.send(rpcPoll(2, `{"after":"not a cursor"}`))
	if _, b := w.reply(); !bytes.Contains(b, []byte(`"error"`)) {
		t.Fatalf("bad cursor: %s", b)
	}
	old := dialWire(t, n)
	old.send("POST / HTTP/1.0\r\nContent-Length: 60\r\n\r\n" + `{"jsonrpc":"2.0","id":3,"method":"events","params":{"maxItems":1}}`[:60])
	if resp, _ := old.reply(); resp.StatusCode != http.StatusOK || !old.closed() {
		t.Fatalf("HTTP/1.0: HTTP %d", resp.StatusCode)
	}
	bad := dialWire(t, n)
	bad.send("POST / HTTP/1.1\r\nHost: node\r\nContent-Length: x\r\n\r\n")
	if resp, _ := bad.reply(); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad Content-Length: HTTP %d", resp.StatusCode)
	}
	// A long-poll on the connection that net/http now serves still waits, parked.
	w.send(rpcPoll(4, `{"after":"`+head+`","waitTime":30000000000}`))
	waitForWaiters(t, n, 1)
	waitForParked(t, n, 1)
	added := n.ingest(ceJSON("/o", "1", "o.t", 1)).Cursor
	if _, b := w.reply(); rpcResult(t, b).Items[0].Cursor != added {
		t.Fatalf("long-poll after net/http: %s", b)
	}
}

// Waiters that leave — a hang-up, a wait that runs out — leave no goroutine behind them.
func TestParkedWaitersLeaveNoGoroutine(t *testing.T) {
	skipUnlessParking(t)
	n := newMemNode(t)
	head := n.ingest(ceJSON("/l", "0", "l.t", 0)).Cursor
	g0 := runtime.NumGoroutine()
	gone := dialWire(t, n)
	gone.send(rpcPoll(1, `{"after":"`+head+`","waitTime":30000000000}`))
	waitForWaiters(t, n, 1)
	gone.c.Close()
	waitForWaiters(t, n, 0)
	waitUntil(t, "the goroutines of a hung-up waiter end", func() bool { return runtime.NumGoroutine() <= g0 })

	short := dialWire(t, n)
	short.send(rpcPoll(2, `{"after":"`+head+`","waitTime":"30ms"}`))
	if _, b := short.reply(); len(rpcResult(t, b).Items) != 0 {
		t.Fatalf("a wait that ran out: %s", b)
	}
	waitUntil(t, "the goroutines of a wait that ran out end", func() bool { return runtime.NumGoroutine() <= g0 })
}

// A HEAD of /events is answered as net/http answers it, without a body, also after a wait.
func TestHeadLongPollIsNotParked(t *testing.T) {
	skipUnlessParking(t)
	t.Parallel()
	n := newMemNode(t)
	head := n.ingest(ceJSON("/h", "0", "h.t", 0)).Cursor
	w := dialWire(t, n)
	w.send("GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n") // net/http serves the connection from now on
	w.reply()
	w.send("HEAD /events?waitTime=50ms&after=" + head + " HTTP/1.1\r\nHost: node\r\n\r\n")
	_ = w.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(w.br, &http.Request{Method: http.MethodHead})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("HEAD: HTTP %d %v", resp.StatusCode, resp.Header)
	}
	// Nothing but the head was written: the next reply is the next request's.
	w.send(rpcPoll(2, `{"maxItems":1}`))
	if _, b := w.reply(); rpcResult(t, b).Items[0].Cursor != head {
		t.Fatalf("after HEAD: %s", b)
	}
}

// gatedStore holds every Read while its gate is shut.
type gatedStore struct {
	eventlog.Store
	mu       sync.Mutex
	gate     chan struct{} // nil: open
	inFlight atomic.Int32
}

func (g *gatedStore) shut() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedStore) open() {
	g.mu.Lock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
	g.mu.Unlock()
}

func (g *gatedStore) Read(ctx context.Context, q eventlog.Query) (eventlog.Page, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		g.inFlight.Add(1)
		defer g.inFlight.Add(-1)
		select {
		case <-gate:
		case <-ctx.Done():
			return eventlog.Page{}, ctx.Err()
		}
	}
	return g.Store.Read(ctx, q)
}

// Reads of the log that hang hold up no other connection: with every worker waiting on one,
// a long-poll that needs no read of its own (it asks what another waiting call found
// nothing for) is still read and parked, and a hang-up still frees its place.
func TestParkedLongPollsPastAStuckRead(t *testing.T) {
	skipUnlessParking(t)
	t.Parallel()
	l := openLog(t, eventlog.Options{})
	gs := &gatedStore{Store: l}
	n := serveNode(t, server.Config{Store: gs}, l)
	t.Cleanup(gs.open)
	old := n.ingest(ceJSON("/g", "0", "g.t", 0)).Cursor
	head := n.ingest(ceJSON("/g", "1", "g.t", 1)).Cursor
	wait := rpcPoll(1, `{"after":"`+head+`","waitTime":30000000000}`)
	first := dialWire(t, n)
	first.send(wait)
	waitForWaiters(t, n, 1)

	// More reads that hang than there are workers (and room for them to queue).
	gs.shut()
	stuck := 2*runtime.GOMAXPROCS(0) + 2
	for range stuck {
		dialWire(t, n).send(rpcPoll(2, `{"after":"`+old+`","waitTime":30000000000}`))
	}
	// Every worker (max(2, GOMAXPROCS) of them) holds one.
	workers := int32(max(2, runtime.GOMAXPROCS(0)))
	waitUntil(t, "every worker's read hangs", func() bool { return gs.inFlight.Load() >= workers })

	same := dialWire(t, n)
	same.send(wait)
	waitForWaiters(t, n, 2)
	first.c.Close()
	waitForWaiters(t, n, 1)

	gs.open()
	n.ingest(ceJSON("/g", "2", "g.t", 2))
	if _, b := same.reply(); len(rpcResult(t, b).Items) != 1 {
		t.Fatalf("the long-poll parked past the stuck reads, once woken: %s", abbrev(b))
	}
}

// A log whose reads all hang (a store out of reach) holds up nothing but those reads: with
// every worker stuck in one and more long-polls than the workers' queue holds, new
// connections are still read, /healthz and ingest answer on them, the deadlines of waits and
// idle connections still run out, and once the log answers again the calls held up are
// answered.
func TestStuckReadsHoldUpNoNewConnection(t *testing.T) {
	skipUnlessParking(t)
	// Not parallel: the long-polls take thousands of open files.
	workers := max(2, runtime.GOMAXPROCS(0))
	polls := parker.MaxQueuedReads + workers + 1 + 200 // more than the workers and their queue take
	if limit := openFileLimit(t); limit < uint64(2*polls+1000) {
		t.Skipf("%d long-polls need about %d open files; the limit is %d", polls, 2*polls+1000, limit)
	}
	l := openLog(t, eventlog.Options{})
	gs := &gatedStore{Store: l}
	n := serveNodeWith(t, server.Config{Store: gs, MaxWaiters: 2}, l, true, func(hs *http.Server) {
		hs.IdleTimeout = 300 * time.Millisecond
	})
	t.Cleanup(gs.open)
	head := n.ingest(ceJSON("/s", "0", "s.t", 0)).Cursor
	// A waiter whose finding (nothing after head) later calls asking the same take without a
	// read of their own.
	same := `{"after":"` + head + `","waitTime":30000000000}`
	first := dialWire(t, n)
	first.send(rpcPoll(1, same))
	waitForWaiters(t, n, 1)

	gs.shut()
	addr := n.ts.Listener.Addr().String()
	var mu sync.Mutex
	var flood []net.Conn
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < polls; i += 4 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					errs <- fmt.Errorf("long-poll %d: %w", i, err)
					return
				}
				mu.Lock()
				flood = append(flood, c)
				mu.Unlock()
				// Each asks its own question: no two share a read.
				q := fmt.Sprintf(`{"after":"%s","filter":{"query":"tm.event = 'f%d'"},"waitTime":30000000000}`, head, i)
				if _, err := io.WriteString(c, rpcPoll(i, q)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	t.Cleanup(func() {
		for _, c := range flood {
			c.Close()
		}
	})
	for err := range errs {
		t.Fatal(err)
	}
	waitUntil(t, "every worker's read hangs", func() bool { return gs.inFlight.Load() >= int32(workers) })
	waitUntil(t, "the workers' queue is full", func() bool { return server.QueuedReads(n.srv) >= parker.MaxQueuedReads })

	probe := dialWire(t, n)
	probe.send("GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n")
	if resp, b := probe.reply(); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz on a new connection while reads hang: HTTP %d %s", resp.StatusCode, b)
	}

	// A long-poll net/http reads (its body is chunked) and parks, whose wait runs out.
	via := dialWire(t, n)
	body := `{"jsonrpc":"2.0","id":2,"method":"events","params":{"after":"` + head + `","waitTime":"50ms"}}`
	via.send("POST / HTTP/1.1\r\nHost: node\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n")
	waitForWaiters(t, n, 2)
	// A long-poll over --max-waiters, answered at once; its connection then idles past the
	// idle timeout, whose deadline comes after that wait's.
	idle := dialWire(t, n)
	idle.send(rpcPoll(3, same))
	if _, b := idle.reply(); !bytes.Contains(b, []byte(`"code":-32000`)) {
		t.Fatalf("a long-poll over --max-waiters: %s", abbrev(b))
	}
	if !idle.closed() {
		t.Fatal("an idle connection outlived its idle timeout while reads hang")
	}
	// The wait that ran out was taken off its list by then: the append below does not wake it.

	producer := dialWire(t, n)
	ev := ceJSON("/s", "1", "s.t", 1)
	producer.send("POST /events HTTP/1.1\r\nHost: node\r\nContent-Type: application/cloudevents+json\r\nContent-Length: " +
		strconv.Itoa(len(ev)) + "\r\n\r\n" + ev)
	if resp, b := producer.reply(); resp.StatusCode != http.StatusOK {
		t.Fatalf("ingest on a new connection while reads hang: HTTP %d %s", resp.StatusCode, b)
	}

	// Their clients give up; the log answers again.
	for _, c := range flood {
		c.Close()
	}
	gs.open()
	if _, b := via.reply(); !bytes.Contains(b, []byte(`"id":2`)) || len(rpcResult(t, b).Items) != 0 {
		t.Fatalf("the wait that ran out, once the log answers: %s", abbrev(b))
	}
	if _, b := first.reply(); len(rpcResult(t, b).Items) != 1 {
		t.Fatalf("the waiter woken by the ingest, once the log answers: %s", abbrev(b))
	}
}

// logBuffer collects a node's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// When watching connections fails, the node says so and serves on through net/http: a
// waiting long-poll is answered with what it has, and every connection, held or new, is
// net/http's from then on, its long-polls waiting in their requests' goroutines.
func TestPollerFailureHandsConnectionsToNetHTTP(t *testing.T) {
	skipUnlessParking(t)
	t.Parallel()
	l := openLog(t, eventlog.Options{})
	var logs logBuffer
	srv := server.New(server.Config{Store: l, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ts := httptest.NewUnstartedServer(srv)
	var brk func(error)
	ts.Listener, brk = server.AttachBreakable(srv, ts.Config, ts.Listener)
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	n := &node{t: t, srv: srv, log: l, ts: ts, hc: ts.Client()}

	head := n.ingest(ceJSON("/p", "0", "p.t", 0)).Cursor
	waiter := dialWire(t, n)
	waiter.send(rpcPoll(1, `{"after":"`+head+`","waitTime":30000000000}`))
	idle := dialWire(t, n)
	idle.send(rpcPoll(2, `{"maxItems":1}`))
	if _, b := idle.reply(); len(rpcResult(t, b).Items) != 1 {
		t.Fatalf("a read: %s", b)
	}
	waitForWaiters(t, n, 1)
	waitForParked(t, n, 2)

	brk(errors.New("injected poller failure"))
	probe := dialWire(t, n) // its request is the event at which the poller fails
	probe.send("GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n")
	if resp, b := probe.reply(); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz on a new connection after the poller failed: HTTP %d %s", resp.StatusCode, b)
	}
	if resp, b := waiter.reply(); resp.Close || len(rpcResult(t, b).Items) != 0 {
		t.Fatalf("the waiting long-poll, when the poller failed: close %v %s", resp.Close, b)
	}
	if !strings.Contains(logs.String(), "injected poller failure") || n.srv.Parks() {
		t.Fatalf("after the poller failed: parks %v; log:\n%s", n.srv.Parks(), logs.String())
	}
	waitForParked(t, n, 0)

	// The same connections and a new one, each long-polling in net/http now.
	fresh := dialWire(t, n)
	for i, w := range []*rawConn{waiter, idle, fresh} {
		w.send(rpcPoll(10+i, `{"after":"`+head+`","waitTime":30000000000}`))
	}
	waitForWaiters(t, n, 3)
	if n.srv.Parked() != 0 {
		t.Fatalf("%d connections parked after the poller failed", n.srv.Parked())
	}
	added := n.ingest(ceJSON("/p", "1", "p.t", 1)).Cursor
	for i, w := range []*rawConn{waiter, idle, fresh} {
		if _, b := w.reply(); !bytes.Contains(b, []byte(`"id":`+strconv.Itoa(10+i))) || rpcResult(t, b).Items[0].Cursor != added {
			t.Fatalf("long-poll %d in net/http: %s", i, b)
		}
	}
}

// Shutdown waits for the calls the parker holds as long as its context lets it: while a read
// of the log holds one up, it returns when the context ends, with its error; with time
// enough, once the read ends and the call is answered.
func TestShutdownWaitsAsItsContextSays(t *testing.T) {
	skipUnlessParking(t)
	t.Parallel()
	for _, cut := range []bool{true, false} {
		t.Run(fmt.Sprintf("cut=%v", cut), func(t *testing.T) {
			t.Parallel()
			l := openLog(t, eventlog.Options{})
			gs := &gatedStore{Store: l}
			n := serveNode(t, server.Config{Store: gs}, l)
			t.Cleanup(gs.open)
			gs.shut()
			w := dialWire(t, n)
			w.send(rpcPoll(1, `{"maxItems":1}`))
			waitUntil(t, "the read hangs", func() bool { return gs.inFlight.Load() == 1 })

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- n.srv.Shutdown(ctx) }()
			waitUntil(t, "the node is shutting down", func() bool {
				resp, _ := n.get("/healthz")
				return resp.StatusCode == http.StatusServiceUnavailable
			})
			select {
			case err := <-done:
				t.Fatalf("Shutdown returned while a call was held up: %v", err)
			default:
			}
			if cut {
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("Shutdown cut short: %v, want context.Canceled", err)
				}
				return
			}
			gs.open()
			if err := <-done; err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if resp, b := w.reply(); !resp.Close || len(rpcResult(t, b).Items) != 0 {
				t.Fatalf("the call held up, once answered: close %v %s", resp.Close, b)
			}
		})
	}
}
