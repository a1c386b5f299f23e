package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/eventlog"
	"github.com/evtctl/evtctl/pkg/server"
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
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Held") != "" {
			h.held.Add(1)
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Shutdown)
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
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
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
	h := newHeldNode(t, server.Config{MaxBodyMemory: 64 << 10})
	conn := h.hold(t, "/events", "application/cloudevents+json", 60<<10, "")
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
