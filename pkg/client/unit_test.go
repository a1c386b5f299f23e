package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/wire"
)

const T0 = int64(0x18ea61a27c39abd8)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"5", 5 * time.Second},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"99999", time.Hour}, // capped
		{"1.5", 0},
		{"soon", 0},
		{"5s", 0},
		{date(30 * time.Second), 30 * time.Second},
		{date(-time.Minute), 0},
		{now.Add(90 * time.Second).Format(time.RFC850), 90 * time.Second},
		{now.Add(2 * time.Second).Format(time.ANSIC), 2 * time.Second},
		{date(48 * time.Hour), time.Hour}, // a date is capped as seconds are
		{"Mon, 32 Foo 2026 99:00:00 GMT", 0},
	} {
		if got := parseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// expectedBase is min(initial·2^attempt, max) computed without overflow.
func expectedBase(b Backoff, attempt int) time.Duration {
	initial, maxd := b.Initial, b.Max
	if initial <= 0 {
		initial = 200 * time.Millisecond
	}
	if maxd <= 0 {
		maxd = 15 * time.Second
	}
	f := float64(initial) * math.Pow(2, float64(attempt))
	if f >= float64(maxd) {
		return maxd
	}
	return time.Duration(f)
}

func TestBackoffDelay(t *testing.T) {
	for _, b := range []Backoff{
		{},
		{Initial: 5 * time.Millisecond, Max: 40 * time.Millisecond},
		{Initial: time.Second, Max: 500 * time.Millisecond}, // initial above the cap
		{Initial: 1, Max: 15 * time.Second},                 // needs more than 30 doublings
		{Initial: 1<<34 + 1, Max: time.Minute},              // shifting overflows int64
		{Initial: 10 * time.Second, Max: time.Duration(math.MaxInt64)},
	} {
		t.Run(fmt.Sprintf("%v/%v", b.Initial, b.Max), func(t *testing.T) {
			maxd := b.Max
			if maxd <= 0 {
				maxd = 15 * time.Second
			}
			prevBase := time.Duration(0)
			for attempt := 0; attempt <= 100; attempt++ {
				base := expectedBase(b, attempt)
				if base < prevBase {
					t.Fatalf("attempt %d: base shrank", attempt)
				}
				prevBase = base
				for range 20 {
					d := b.delay(attempt)
					if d > maxd {
						t.Fatalf("attempt %d: delay %v above the cap %v", attempt, d, maxd)
					}
					if d < base/2 || d > base {
						t.Fatalf("attempt %d: delay %v outside [%v, %v]", attempt, d, base/2, base)
					}
				}
			}
		})
	}
	// The delay grows: the 4th attempt waits at least as long as the 1st could.
	b := Backoff{Initial: 10 * time.Millisecond, Max: time.Second}
	if d0, d3 := b.delay(0), b.delay(3); d3 < d0 || d3 < 40*time.Millisecond {
		t.Errorf("delay(0) %v, delay(3) %v: no growth", d0, d3)
	}
	// Jitter: delays spread over [d/2, d].
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	for range 2000 {
		d := b.delay(0)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 5*time.Millisecond || hi > 10*time.Millisecond || hi-lo < 4*time.Millisecond {
		t.Errorf("2000 delays for 10ms ranged over [%v, %v], want spread over [5ms, 10ms]", lo, hi)
	}
}

func TestNormalizeNode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1:7480", "http://127.0.0.1:7480"},
		{"  127.0.0.1:7480 \n", "http://127.0.0.1:7480"},
		{"localhost", "http://localhost"},
		{"http://node:26657/", "http://node:26657"},
		{"http://node:26657///", "http://node:26657"},
		{"https://node.example/rpc/", "https://node.example/rpc"},
		{"node:1/x/", "http://node:1/x"},
		{"http://node:1/?q=1#frag", "http://node:1"},
		{"[::1]:7480", "http://[::1]:7480"},
	} {
		got, err := NormalizeNode(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormalizeNode(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "   ", "ftp://node:21", "ws://node:26657/websocket", "unix:///tmp/sock", "http://", "://node", "http:///path", "http://[::1"} {
		if got, err := NormalizeNode(bad); err == nil {
			t.Errorf("NormalizeNode(%q) = %q, want an error", bad, got)
		}
	}
	if _, err := New(Options{Node: "ftp://x"}); err == nil {
		t.Error("New took an ftp node")
	}
	if _, err := New(Options{Node: "x:1", CAFile: "/no/such/ca.pem"}); err == nil {
		t.Error("New took a missing CA file")
	}
	c, err := New(Options{Node: "node:1/"})
	if err != nil || c.Node() != "http://node:1" {
		t.Errorf("Node() = %q, %v", c.Node(), err)
	}
}

func TestRetryable(t *testing.T) {
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{fmt.Errorf("cannot reach the node: %w", context.Canceled), false},
		{&HTTPError{Status: 500}, true},
		{&HTTPError{Status: 502}, true},
		{&HTTPError{Status: 503, RetryAfter: time.Second}, true},
		{&HTTPError{Status: 504}, true},
		{&HTTPError{Status: 429}, true},
		{fmt.Errorf("wrapped: %w", &HTTPError{Status: 503}), true},
		{&HTTPError{Status: 400}, false},
		{&HTTPError{Status: 401}, false},
		{&HTTPError{Status: 403}, false},
		{&HTTPError{Status: 404}, false},
		{&HTTPError{Status: 413}, false},
		{&RPCError{Code: -32000, Message: "Server busy"}, true},
		{&RPCError{Code: -32603, Message: "Internal error"}, false},
		{&RPCError{Code: -32602}, false},
		{&RPCError{Code: -32601}, false},
		{&DecodeError{Err: errors.New("x")}, false},
		{&ContactError{Kind: NotEventsAPI, Err: &HTTPError{Status: 502}}, false},
		{&ContactError{Kind: NoNode, Err: opErr}, false},
		{io.EOF, true},
		{io.ErrUnexpectedEOF, true},
		{&FinalError{Err: errors.New("WRONGPASS invalid username-password pair")}, false},
		{fmt.Errorf("reading the stream: %w", &FinalError{Err: io.EOF}), false},
		{fmt.Errorf("cannot reach the node: %w", opErr), true},
		{errors.New("connection reset by peer"), true},
		// A source's own error says for itself whether it may pass.
		{sourceErr{retry: false}, false},
		{fmt.Errorf("page: %w", sourceErr{retry: false}), false},
		{sourceErr{retry: true}, true},
	} {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// sourceErr is an error of a source that says whether it may pass.
type sourceErr struct{ retry bool }

func (e sourceErr) Error() string   { return "the source failed" }
func (e sourceErr) Retryable() bool { return e.retry }

// A page a source made with its own memory gives it back when released.
func TestPageOnRelease(t *testing.T) {
	released := 0
	p := &Page{Items: []Item{{Item: wire.Item{Cursor: "c"}}}}
	p.OnRelease(func() { released++ })
	p.Release()
	p.Release()
	if released != 1 {
		t.Errorf("released %d times, want once", released)
	}
}

// TestEventsTimeoutRetryable: a node that does not answer within the call's own time limit
// is worth retrying; the caller's own deadline is not.
func TestEventsTimeoutRetryable(t *testing.T) {
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer ts.Close()
	defer close(release)

	// The HTTP client's timeout stands in for Events' own limit (wait + a margin, ≥ 45s).
	c, err := New(Options{Node: ts.URL, HTTPClient: &http.Client{Timeout: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Events(context.Background(), Request{})
	if err == nil || !Retryable(err) || !strings.Contains(err.Error(), "did not answer in time") {
		t.Errorf("the call's own timeout: %v, retryable %v; want a retryable timeout", err, Retryable(err))
	}

	// A round trip that ends with the call's deadline, as Events' own limit makes it end.
	c2, _ := New(Options{Node: ts.URL, HTTPClient: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, context.DeadlineExceeded
	})}})
	_, err = c2.Events(context.Background(), Request{})
	if err == nil || !Retryable(err) {
		t.Errorf("the call's own deadline: %v, retryable %v; want retryable", err, Retryable(err))
	}

	// The same while the reply's body is on its way.
	ts2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"items":[`))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer ts2.Close()
	c4, _ := New(Options{Node: ts2.URL, HTTPClient: &http.Client{Timeout: 100 * time.Millisecond}})
	_, err = c4.Events(context.Background(), Request{})
	if err == nil || !Retryable(err) {
		t.Errorf("a body cut short by the call's own timeout: %v, retryable %v; want retryable", err, Retryable(err))
	}

	// The caller's deadline ends the call and is final.
	c3 := newTestClient(t, ts.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c3.Events(ctx, Request{})
	if err == nil || Retryable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the caller's deadline: %v, retryable %v; want final and DeadlineExceeded", err, Retryable(err))
	}

	// Stream keeps trying a node that does not answer in time.
	var retries []error
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	err = c.Stream(ctx2, StreamOptions{FromStart: true, Backoff: fastBackoff, OnRetry: func(err error, attempt int, _ time.Duration) {
		retries = append(retries, err)
		if attempt == 3 {
			cancel2()
		}
	}}, func(Batch) error { return nil })
	if !errors.Is(err, context.Canceled) || len(retries) != 3 {
		t.Errorf("Stream returned %v after %d retries; want it to retry until cancelled", err, len(retries))
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestDecodeReplyShapes(t *testing.T) {
	resp := func(status int, kv ...string) *http.Response {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return &http.Response{StatusCode: status, Header: h}
	}
	t.Run("evtctl error body", func(t *testing.T) {
		_, err := decodeReply(resp(503, "Retry-After", "2"), []byte(`{"error":"the node is shutting down"}`))
		var he *HTTPError
		if !errors.As(err, &he) || he.Status != 503 || he.Message != "the node is shutting down" || he.RetryAfter != 2*time.Second {
			t.Fatalf("got %#v", err)
		}
		if err.Error() != "node answered 503: the node is shutting down" || he.Page {
			t.Errorf("Error() = %q", err.Error())
		}
	})
	t.Run("JSON-RPC error in a 500", func(t *testing.T) {
		_, err := decodeReply(resp(500), []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":"boom"}}`))
		var he *HTTPError
		if !errors.As(err, &he) || he.Message != "boom" || he.RetryAfter != 0 {
			t.Fatalf("got %#v", err)
		}
	})
	t.Run("text body, long", func(t *testing.T) {
		_, err := decodeReply(resp(502), []byte(strings.Repeat("bad gateway ", 40)))
		var he *HTTPError
		if !errors.As(err, &he) || len(he.Message) > 210 || !strings.HasPrefix(he.Message, "bad gateway") {
			t.Fatalf("got %#v", err)
		}
	})
	t.Run("empty body", func(t *testing.T) {
		_, err := decodeReply(resp(429), nil)
		if err == nil || err.Error() != "node answered 429: Too Many Requests" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a web page", func(t *testing.T) {
		_, err := decodeReply(resp(502), []byte("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<h1>502 Bad Gateway</h1>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"))
		var he *HTTPError
		if !errors.As(err, &he) || !he.Page || err.Error() != `node answered 502 (a web page: "502 Bad Gateway nginx")` {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("not JSON", func(t *testing.T) {
		_, err := decodeReply(resp(200), []byte("<html>"+strings.Repeat("x", 200)))
		var de *DecodeError
		if !errors.As(err, &de) || !strings.HasPrefix(de.Body, "<html>") || len(de.Body) > 84 {
			t.Fatalf("got %#v", err)
		}
		if errors.Unwrap(err) == nil {
			t.Error("DecodeError does not unwrap")
		}
	})
	t.Run("null result", func(t *testing.T) {
		_, err := decodeReply(resp(200), []byte(`{"jsonrpc":"2.0","id":1,"result":null}`))
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("got %#v", err)
		}
	})
	t.Run("ascending", func(t *testing.T) {
		r, err := decodeReply(resp(200), []byte(`{"jsonrpc":"2.0","id":1,"result":{"items":[{"cursor":"a","event":"e","data":{"x":1}}],"more":true,"oldest":"a","newest":"b","order":"asc"}}`))
		if err != nil || !r.Ascending() || !r.More || len(r.Items) != 1 || string(r.Items[0].Raw) != `{"cursor":"a","event":"e","data":{"x":1}}` {
			t.Fatalf("got %+v %v", r, err)
		}
	})
	t.Run("busy", func(t *testing.T) {
		_, err := decodeReply(resp(200), []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Server busy","data":"more than 1 readers are waiting; retry shortly"}}`))
		if !Retryable(err) {
			t.Fatalf("busy node: %v not retryable", err)
		}
	})
}

// TestRequestHeaders: the token, user agent and body of a call.
func TestRequestHeaders(t *testing.T) {
	var got *http.Request
	var body []byte
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"items":[],"more":false,"oldest":"","newest":""}}`))
	}))
	defer ts.Close()
	c, err := New(Options{Node: ts.URL + "/", Token: "s3cret", UserAgent: "test-agent/1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Events(context.Background(), Request{Query: "tm.event = 'Tx'", MaxItems: 7, After: "a", Before: "b", Wait: 3 * time.Second, Ascending: true}); err != nil {
		t.Fatal(err)
	}
	if got.Header.Get("Authorization") != "Bearer s3cret" || got.Header.Get("User-Agent") != "test-agent/1" || got.URL.Path != "/" {
		t.Errorf("headers %v path %q", got.Header, got.URL.Path)
	}
	want := `"params":{"filter":{"query":"tm.event = 'Tx'"},"maxItems":7,"after":"a","before":"b","waitTime":3000000000,"order":"asc"}`
	if !strings.Contains(string(body), want) {
		t.Errorf("body %s lacks %s", body, want)
	}
	// Without options, the body holds no optional params at all.
	c2 := newTestClient(t, ts.URL)
	if _, err := c2.Events(context.Background(), Request{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"params":{}`) || got.Header.Get("Authorization") != "" || got.Header.Get("User-Agent") != "evtctl" {
		t.Errorf("body %s, headers %v", body, got.Header)
	}
}
