package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/inprocess"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/internal/testwait"
)

// unchanged fails the test if the log gained events since the snapshot was taken.
func unchanged(t *testing.T, n *node, what string, before eventlog.Stats) {
	t.Helper()
	after := n.log.Stats()
	if after.Appended != before.Appended || after.Items != before.Items || after.Newest != before.Newest {
		t.Fatalf("%s changed the log: appended %d→%d, items %d→%d", what, before.Appended, after.Appended, before.Items, after.Items)
	}
}

func TestBadRPCRequests(t *testing.T) {
	n := newMemNode(t)
	n.ingest(ceJSON("/bad", "0", "bad.t", 0))
	for _, tc := range []struct {
		name    string
		body    string
		id      string // the id echoed; "null" when the request could not be read
		code    int
		message string
		data    string // a substring of data; exact when exact is set
		exact   bool
	}{
		{"malformed JSON", `{"jsonrpc":"2.0","id":1,"method":"events"`, "null", -32700, "Parse error", "not valid JSON", false},
		{"not JSON at all", `hello`, "null", -32700, "Parse error", "not valid JSON", false},
		{"empty body", ``, "null", -32700, "Parse error", "", false},
		{"malformed batch", `[{"jsonrpc":"2.0"`, "null", -32700, "Parse error", "", false},
		{"not an object", `"events"`, "null", -32600, "Invalid Request", "request object", false},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":"a","method":"events"}`, `"a"`, -32600, "Invalid Request", `"jsonrpc" must be "2.0"`, true},
		{"empty batch", `[]`, "null", -32600, "Invalid Request", "empty batch", false},
		{"unknown method", `{"jsonrpc":"2.0","id":2,"method":"subscribe","params":{}}`, "2", -32601, "Method not found", `"subscribe"`, false},
		{"no method", `{"jsonrpc":"2.0","id":2}`, "2", -32601, "Method not found", "", false},
		{"maxItems abc", `{"jsonrpc":"2.0","id":3,"method":"events","params":{"maxItems":"abc"}}`, "3", -32602, "Invalid params", "maxItems:", false},
		{"maxItems fraction", `{"jsonrpc":"2.0","id":3,"method":"events","params":{"maxItems":2.5}}`, "3", -32602, "Invalid params", "whole number", false},
		{"max_results object", `{"jsonrpc":"2.0","id":3,"method":"events","params":{"max_results":{}}}`, "3", -32602, "Invalid params", "max_results:", false},
		{"waitTime true", `{"jsonrpc":"2.0","id":4,"method":"events","params":{"waitTime":true}}`, "4", -32602, "Invalid params", "waitTime:", false},
		{"waitTime out of range", `{"jsonrpc":"2.0","id":4,"method":"events","params":{"waitTime":-1e300}}`, "4", -32602, "Invalid params", "waitTime:", false},
		{"waitTime garbage", `{"jsonrpc":"2.0","id":4,"method":"events","params":{"wait_time":"soon"}}`, "4", -32602, "Invalid params", "wait_time:", false},
		{"waitTime NaN", `{"jsonrpc":"2.0","id":4,"method":"events","params":{"waitTime":"NaN"}}`, "4", -32602, "Invalid params", "waitTime:", false},
		{"after 5", `{"jsonrpc":"2.0","id":5,"method":"events","params":{"after":5}}`, "5", -32602, "Invalid params", "after: want a cursor string, got 5", true},
		{"before object", `{"jsonrpc":"2.0","id":5,"method":"events","params":{"before":{}}}`, "5", -32602, "Invalid params", "before:", false},
		{"filter 7", `{"jsonrpc":"2.0","id":6,"method":"events","params":{"filter":7}}`, "6", -32602, "Invalid params", "filter:", false},
		{"filter query 7", `{"jsonrpc":"2.0","id":6,"method":"events","params":{"filter":{"query":7}}}`, "6", -32602, "Invalid params", "filter:", false},
		{"order sideways", `{"jsonrpc":"2.0","id":6,"method":"events","params":{"order":"sideways"}}`, "6", -32602, "Invalid params", "order:", false},
		{"params a string", `{"jsonrpc":"2.0","id":6,"method":"events","params":"all"}`, "6", -32602, "Invalid params", "params must be", false},
		{"six positional", `{"jsonrpc":"2.0","id":6,"method":"events","params":["",1,"","",0,1]}`, "6", -32602, "Invalid params", "at most 5", false},
		{"positional maxItems", `{"jsonrpc":"2.0","id":6,"method":"events","params":["","x"]}`, "6", -32602, "Invalid params", "maxItems:", false},
		{"invalid after", `{"jsonrpc":"2.0","id":7,"method":"events","params":{"after":"zzz"}}`, "7", -32603, "Internal error", `invalid cursor "zzz": invalid cursor format`, true},
		{"invalid before", `{"jsonrpc":"2.0","id":7,"method":"events","params":{"before":"18EA61A27C39ABD8-00C7"}}`, "7", -32603, "Internal error", `invalid cursor "18EA61A27C39ABD8-00C7": invalid cursor format`, true},
		{"query syntax", `{"jsonrpc":"2.0","id":8,"method":"events","params":{"filter":{"query":"tm.event = Tx"}}}`, "8", -32603, "Internal error",
			"invalid filter query: offset 11: got tag, wanted number, timestamp, datestamp or string", true},
		{"query unterminated", `{"jsonrpc":"2.0","id":8,"method":"events","params":{"filter":"a = 'x"}}`, "8", -32603, "Internal error", "invalid filter query: offset ", false},
	} {
		before := n.log.Stats()
		r, raw := n.rpcRaw(tc.body)
		if r.Error == nil || r.Result != nil {
			t.Fatalf("%s: want an error, got %s", tc.name, raw)
		}
		if string(r.ID) != tc.id {
			t.Fatalf("%s: id %s, want %s", tc.name, r.ID, tc.id)
		}
		e := r.Error
		if e.Code != tc.code || e.Message != tc.message {
			t.Fatalf("%s: error %d %q, want %d %q (%s)", tc.name, e.Code, e.Message, tc.code, tc.message, raw)
		}
		if tc.exact && e.Data != tc.data || !strings.Contains(e.Data, tc.data) {
			t.Fatalf("%s: data %q, want %q", tc.name, e.Data, tc.data)
		}
		unchanged(t, n, tc.name, before)
	}

	// A batch of more than 16 calls is refused whole.
	calls := strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"events"},`, 17), ",")
	r, raw := n.rpcRaw("[" + calls + "]")
	if r.Error == nil || r.Error.Code != -32600 || !strings.Contains(r.Error.Data, "16") {
		t.Fatalf("batch of 17: %s", raw)
	}
}

// GET /events answers errors as a Tendermint node does: a bare error object, HTTP 200.
func TestBadGetRequests(t *testing.T) {
	n := newMemNode(t)
	n.ingest(ceJSON("/bad", "0", "bad.t", 0))
	for _, tc := range []struct {
		query string
		code  int
		data  string
	}{
		{"maxItems=abc", -32602, `maxItems: want a whole number, got "abc"`},
		{"waitTime=soon", -32602, "waitTime:"},
		{"wait_time=1e300", -32602, "wait_time:"},
		{"order=up", -32602, "order:"},
		{"after=zzz", -32603, `invalid cursor "zzz": invalid cursor format`},
		{`before=%22zzz%22`, -32603, `invalid cursor "zzz": invalid cursor format`},
		{"query=tm.event+%3D+Tx", -32603, "invalid filter query: offset 11: got tag, wanted number, timestamp, datestamp or string"},
	} {
		before := n.log.Stats()
		resp, b := n.get("/events?" + tc.query)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d", tc.query, resp.StatusCode)
		}
		var m map[string]json.RawMessage
		mustUnmarshal(t, b, &m)
		if len(m) != 3 || m["code"] == nil || m["message"] == nil || m["data"] == nil {
			t.Fatalf("%s: want a bare {code, message, data}, got %s", tc.query, b)
		}
		var e rpcError
		mustUnmarshal(t, b, &e)
		if e.Code != tc.code || !strings.Contains(e.Data, tc.data) {
			t.Fatalf("%s: %+v, want %d with %q", tc.query, e, tc.code, tc.data)
		}
		unchanged(t, n, tc.query, before)
	}
}

func TestRPCBodyTooLarge(t *testing.T) {
	n := newNode(t, server.Config{MaxRPCBody: 256}, eventlog.Options{})
	body := `{"jsonrpc":"2.0","id":1,"method":"events","params":{"filter":{"query":"` + strings.Repeat("a", 300) + `"}}}`
	resp, b := n.post("/", "application/json", body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("HTTP %d %s", resp.StatusCode, b)
	}
	var e errorReply
	mustUnmarshal(t, b, &e)
	if !strings.Contains(e.Error, "256") {
		t.Fatalf("error %q does not give the limit", e.Error)
	}
}

func TestBadIngest(t *testing.T) {
	n := newNode(t, server.Config{MaxBody: 200 << 10}, eventlog.Options{})
	n.ingest(ceJSON("/bad", "0", "bad.t", 0))
	big := `{"specversion":"1.0","id":"big","source":"/bad","type":"bad.t","data":"` + strings.Repeat("x", 65<<10) + `"}`
	good := ceJSON("/bad", "g", "bad.t", 1)
	idx := func(i int) *int { return &i }
	for _, tc := range []struct {
		name        string
		contentType string
		hdr         []string
		body        string
		status      int
		msg         []string // substrings of the error
		index       *int
	}{
		{"event over 64 KiB", "application/cloudevents+json", nil, big, 413, []string{"limit", "65536"}, nil},
		{"binary event over 64 KiB", "text/plain", []string{"ce-specversion", "1.0", "ce-id", "b", "ce-source", "/bad", "ce-type", "bad.t"},
			strings.Repeat("y", 65<<10), 413, []string{"limit"}, nil},
		{"body over MaxBody", "application/cloudevents-batch+json", nil,
			"[" + strings.TrimSuffix(strings.Repeat(good+",", 2000), ",") + "]", 413, []string{"204800"}, nil},
		{"missing source", "application/cloudevents+json", nil,
			`{"specversion":"1.0","id":"x","type":"bad.t"}`, 400, []string{`"source"`}, nil},
		{"bad specversion", "application/cloudevents+json", nil,
			`{"specversion":"0.3","id":"x","source":"/s","type":"bad.t"}`, 400, []string{"specversion", "0.3"}, nil},
		{"bad time", "application/cloudevents+json", nil,
			`{"specversion":"1.0","id":"x","source":"/s","type":"bad.t","time":"yesterday"}`, 400, []string{"time"}, nil},
		{"not JSON", "application/cloudevents+json", nil, `{"specversion":`, 400, []string{}, nil},
		{"empty body", "application/cloudevents+json", nil, ``, 400, []string{"empty"}, nil},
		{"binary without id", "application/json", []string{"ce-specversion", "1.0", "ce-source", "/s", "ce-type", "t"},
			`{}`, 400, []string{"id"}, nil},
		{"plain text", "text/plain", nil, "hello", 415, []string{"not a CloudEvent"}, nil},
		{"XML format", "application/cloudevents+xml", nil, "<e/>", 415, []string{"application/cloudevents+xml"}, nil},
		{"latin-1 charset", "application/cloudevents+json; charset=iso-8859-1", nil, good, 415, []string{"charset"}, nil},
		{"batch with one bad event", "application/cloudevents-batch+json", nil,
			"[" + ceJSON("/bad", "b0", "bad.t", 0) + `,{"specversion":"1.0","id":"b1","source":"/bad"},` + ceJSON("/bad", "b2", "bad.t", 2) + "]",
			400, []string{"batch index 1", `"type"`}, idx(1)},
		{"batch not an array", "application/cloudevents-batch+json", nil, good, 400, []string{"array"}, nil},
	} {
		before := n.log.Stats()
		resp, b := n.do(n.newRequest(http.MethodPost, "/events", tc.contentType, []byte(tc.body), tc.hdr...))
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: HTTP %d %s, want %d", tc.name, resp.StatusCode, abbrev(b), tc.status)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s: Content-Type %q", tc.name, ct)
		}
		var e errorReply
		mustUnmarshal(t, b, &e)
		if e.Error == "" {
			t.Fatalf("%s: no error message in %s", tc.name, b)
		}
		for _, s := range tc.msg {
			if !strings.Contains(e.Error, s) {
				t.Fatalf("%s: error %q does not mention %q", tc.name, e.Error, s)
			}
		}
		if (e.Index == nil) != (tc.index == nil) || e.Index != nil && *e.Index != *tc.index {
			t.Fatalf("%s: index %v in %s, want %v", tc.name, e.Index, b, tc.index)
		}
		if tc.status == 415 && resp.Header.Get("Accept-Post") == "" {
			t.Fatalf("%s: 415 without Accept-Post", tc.name)
		}
		unchanged(t, n, tc.name, before)
	}
	// Only the first event is in the log.
	if r := n.events(`{"maxItems":100}`); len(r.Items) != 1 {
		t.Fatalf("the log holds %d events, want 1", len(r.Items))
	}
}

// TestSlowHeaders checks that a client sending its headers slowly is cut off when the header
// timeout runs out, exactly then (on a fake clock), while other clients are served.
func TestSlowHeaders(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l, err := eventlog.Open(eventlog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		srv := server.New(server.Config{Store: l})
		hs := srv.HTTPServer("node.test:80", 200*time.Millisecond)
		ln := inprocess.NewListener()
		served := make(chan error, 1)
		go func() { served <- hs.Serve(ln) }()
		hc := &http.Client{Transport: &http.Transport{DialContext: ln.Dial}}
		t.Cleanup(func() {
			hc.CloseIdleConnections()
			srv.Shutdown(context.Background())
			_ = hs.Close()
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("Serve: %v", err)
			}
		})

		start := time.Now()
		slow, err := ln.Dial(t.Context(), "", "")
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Close()
		if _, err := io.WriteString(slow, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow"); err != nil {
			t.Fatal(err)
		}

		// Another client is served meanwhile.
		resp, err := hc.Get("http://node.test/healthz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ok"`) {
			t.Fatalf("a normal request beside the slow one: HTTP %d %s", resp.StatusCode, b)
		}

		// The slow client is disconnected when the header timeout runs out, its request not
		// served (what it has sent is a malformed header line, answered 400).
		got, err := io.ReadAll(slow)
		if err != nil {
			t.Fatalf("reading the slow connection: %v", err)
		}
		if strings.HasPrefix(string(got), "HTTP/1.1 200") {
			t.Fatalf("the incomplete request was answered: %q", got)
		}
		if el := time.Since(start); el != 200*time.Millisecond {
			t.Fatalf("the slow connection was closed after %v, want the 200ms header timeout", el)
		}
		// Writing the rest of the request now does not get it served.
		if _, err := io.WriteString(slow, ": 1\r\n\r\n"); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("writing to the closed connection: %v", err)
		}
	})
}

// TestSlowHeadersParked is TestSlowHeaders with long-polls parked, on real sockets (the
// parker watches them with epoll): it hands a request that comes in pieces to net/http, which
// cuts the slow client off at its header timeout while another client is served. How soon is
// the fake-clock test's to check; this one checks that it happens, within the test's deadline.
func TestSlowHeadersParked(t *testing.T) {
	t.Parallel()
	l, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	srv := server.New(server.Config{Store: l})
	hs := srv.HTTPServer("127.0.0.1:0", 200*time.Millisecond)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln = srv.Attach(hs, ln)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		_ = hs.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	addr := ln.Addr().String()

	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := io.WriteString(slow, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ok"`) {
		t.Fatalf("a normal request beside the slow one: HTTP %d %s", resp.StatusCode, b)
	}
	// The slow client is disconnected: its read ends (EOF or reset) before the test's deadline.
	if d, ok := testwait.Deadline(t); ok {
		_ = slow.SetReadDeadline(d)
	}
	got, err := io.ReadAll(slow)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept the slow connection open")
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, os.ErrClosed) {
		t.Fatalf("reading the slow connection: %v", err)
	}
	if strings.HasPrefix(string(got), "HTTP/1.1 200") {
		t.Fatalf("the incomplete request was answered: %q", got)
	}
}
