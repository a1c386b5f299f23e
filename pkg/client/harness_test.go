package client

// The test harness: a recorder in front of any node that logs every JSON-RPC call and can
// fail the next calls on demand, an evtctl node (internal/server over internal/eventlog) that can be
// restarted on the same address, a common interface over it and the fake Tendermint node,
// and a Stream runner that collects what fn receives.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/internal/tmfake"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/wire"
)

// --- fault injection and call recording ------------------------------------------------------

// fault is a way for the recorder to fail a call instead of passing it to the node.
type fault int

const (
	fault500     fault = iota + 1 // 500 Internal Server Error
	fault503                      // 503 with Retry-After: 1
	fault429                      // 429 Too Many Requests
	faultDrop                     // the connection is closed without an answer
	fault503Hour                  // 503 with Retry-After: 3600, longer than any test waits
)

func (f fault) String() string {
	return map[fault]string{0: "none", fault500: "500", fault503: "503+Retry-After", fault429: "429", faultDrop: "drop",
		fault503Hour: "503+Retry-After: 3600"}[f]
}

// callParams is what a client sent as params of the events method.
type callParams struct {
	Filter *struct {
		Query string `json:"query"`
	} `json:"filter"`
	MaxItems int             `json:"maxItems"`
	After    string          `json:"after"`
	Before   string          `json:"before"`
	WaitTime json.RawMessage `json:"waitTime"`
	Order    string          `json:"order"`
}

// rpcCall is one JSON-RPC call as the recorder saw it.
type rpcCall struct {
	At     time.Time
	Params callParams
	Raw    []byte
	Fault  fault // the call was failed this way and never reached the node
	Held   bool  // the call was held until the client gave up on it
}

// recorder sits in front of a node's handler: JSON-RPC calls (POST /) are recorded and may
// be failed; every other request passes through untouched.
type recorder struct {
	mu       sync.Mutex
	calls    []rpcCall
	faults   []fault
	h        http.Handler
	failFrom int // with pending: the call with this number (1-based) and the next ones fail
	pending  []fault
	onCall   func(n int) // runs before call n (1-based) reaches the node
	holdFrom int         // calls numbered from this on never reach the node: held until abandoned
	// stream lets the node's stream through; without it the node neither advertises nor
	// serves it, as a node from before the stream, and the client pages.
	stream bool
}

// noStream hides a node's advertisement of its stream.
type noStream struct{ http.ResponseWriter }

func (w noStream) WriteHeader(code int) {
	w.Header().Del(wire.HeaderStream)
	w.ResponseWriter.WriteHeader(code)
}

func (w noStream) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

func (w noStream) Write(b []byte) (int, error) {
	w.Header().Del(wire.HeaderStream)
	return w.ResponseWriter.Write(b)
}

// HoldFrom holds calls number n and later (counting from 1) until the client abandons them;
// 0 stops holding.
func (rec *recorder) HoldFrom(n int) {
	rec.mu.Lock()
	rec.holdFrom = n
	rec.mu.Unlock()
}

// OnCall sets a function run before each call reaches the node, with the call's number.
func (rec *recorder) OnCall(fn func(n int)) {
	rec.mu.Lock()
	rec.onCall = fn
	rec.mu.Unlock()
}

func (rec *recorder) setHandler(h http.Handler) {
	rec.mu.Lock()
	rec.h = h
	rec.mu.Unlock()
}

// FailNext makes the next len(fs) calls fail, in order.
func (rec *recorder) FailNext(fs ...fault) {
	rec.mu.Lock()
	rec.faults = append(rec.faults, fs...)
	rec.mu.Unlock()
}

// FailFrom makes calls number n, n+1, ... (counting from 1) fail with fs, in order.
func (rec *recorder) FailFrom(n int, fs ...fault) {
	rec.mu.Lock()
	rec.failFrom, rec.pending = n, fs
	rec.mu.Unlock()
}

// Calls returns a copy of the calls so far.
func (rec *recorder) Calls() []rpcCall {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]rpcCall(nil), rec.calls...)
}

// NumCalls is the number of calls so far.
func (rec *recorder) NumCalls() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.calls)
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	h, stream := rec.h, rec.stream
	rec.mu.Unlock()
	if !stream {
		if r.URL.Path == wire.PathStream {
			http.NotFound(w, r)
			return
		}
		w = noStream{w}
	}
	var call rpcCall
	var body []byte
	switch {
	case r.Method == http.MethodGet && r.URL.Path == wire.PathStream:
		// A stream is recorded as a call, with its parameters in the params' places.
		q := r.URL.Query()
		call = rpcCall{At: time.Now(), Params: callParams{After: q.Get("after"), Before: q.Get("before"), Order: "stream"}, Raw: []byte(r.URL.RawQuery)}
		if f := q.Get("query"); f != "" {
			call.Params.Filter = &struct {
				Query string `json:"query"`
			}{f}
		}
	case r.Method != http.MethodPost || r.URL.Path != "/":
		h.ServeHTTP(w, r)
		return
	default:
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var env struct {
			Params callParams `json:"params"`
		}
		_ = json.Unmarshal(body, &env)
		call = rpcCall{At: time.Now(), Params: env.Params, Raw: body}
	}
	rec.mu.Lock()
	if len(rec.pending) > 0 && len(rec.calls)+1 == rec.failFrom {
		rec.faults = append(rec.faults, rec.pending...)
		rec.pending = nil
	}
	if len(rec.faults) > 0 {
		call.Fault = rec.faults[0]
		rec.faults = rec.faults[1:]
	}
	if rec.holdFrom > 0 && len(rec.calls)+1 >= rec.holdFrom && call.Fault == 0 {
		call.Held = true
	}
	rec.calls = append(rec.calls, call)
	num, onCall := len(rec.calls), rec.onCall
	rec.mu.Unlock()
	if call.Held {
		<-r.Context().Done()
		return
	}
	if onCall != nil && call.Fault == 0 {
		onCall(num)
	}
	switch call.Fault {
	case fault500:
		http.Error(w, `{"error":"injected failure"}`, http.StatusInternalServerError)
		return
	case fault503:
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":"injected: come back later"}`, http.StatusServiceUnavailable)
		return
	case fault503Hour:
		w.Header().Set("Retry-After", "3600")
		http.Error(w, `{"error":"injected: come back in an hour"}`, http.StatusServiceUnavailable)
		return
	case fault429:
		http.Error(w, `{"error":"injected: slow down"}`, http.StatusTooManyRequests)
		return
	case faultDrop:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	h.ServeHTTP(w, r)
}

// --- nodes -------------------------------------------------------------------------------------

// testEvent is one event to append; N identifies it.
type testEvent struct {
	Type string
	N    int
	Pad  int // bytes of padding in the event's data
}

var eventSeq atomic.Int64

// events returns n events of the given type with fresh numbers.
func events(n int, typ string) []testEvent {
	out := make([]testEvent, n)
	for i := range out {
		out[i] = testEvent{Type: typ, N: int(eventSeq.Add(1))}
	}
	return out
}

// cloudEventJSON is the CloudEvent an evtctl node stores for e.
func cloudEventJSON(e testEvent) []byte {
	pad := ""
	if e.Pad > 0 {
		pad = `,"pad":"` + strings.Repeat("x", e.Pad) + `"`
	}
	return fmt.Appendf(nil, `{"specversion":"1.0","id":"ev-%d","source":"/client-test","type":%q,"datacontenttype":"application/json","data":{"n":%d%s}}`, e.N, e.Type, e.N, pad)
}

// testNode is what the tests need of either kind of node.
type testNode interface {
	URL() string
	// Append appends the events as one batch and returns their cursors in order.
	Append(tb testing.TB, evs ...testEvent) []string
	Oldest(tb testing.TB) string
	Rec() *recorder
	Waiting() int // long-polls waiting now
}

// nodeOpts configure a node for a test.
type nodeOpts struct {
	Retain  int           // keep at most this many items; 0: no cap
	MaxWait time.Duration // longest long-poll; default 30s
	Durable bool          // evtctl: a log on disk in a temporary directory
	Stream  bool          // evtctl: serve the stream (else the node pages only)
}

type nodeKind struct {
	name string
	new  func(t *testing.T, o nodeOpts) testNode
}

var nodeKinds = []nodeKind{
	{"tendermint", func(t *testing.T, o nodeOpts) testNode { return newFakeTendermint(t, o) }},
	{"evtctl", func(t *testing.T, o nodeOpts) testNode { return newEvtNode(t, o) }},
}

// streamNode is an evtctl node that serves its stream, which chronological ranges read.
var streamNode = nodeKind{"evtctl-stream", func(t *testing.T, o nodeOpts) testNode { o.Stream = true; return newEvtNode(t, o) }}

// forEachNode runs body once per kind of node, in parallel subtests.
func forEachNode(t *testing.T, body func(t *testing.T, k nodeKind)) {
	t.Helper()
	forKinds(t, nodeKinds, body)
}

// forEachRangeNode is forEachNode with an evtctl node that serves its stream too.
func forEachRangeNode(t *testing.T, body func(t *testing.T, k nodeKind)) {
	t.Helper()
	forKinds(t, append(nodeKinds[:len(nodeKinds):len(nodeKinds)], streamNode), body)
}

func forKinds(t *testing.T, kinds []nodeKind, body func(t *testing.T, k nodeKind)) {
	t.Helper()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			body(t, k)
		})
	}
}

// evtNode is an evtctl node: internal/server over internal/eventlog on loopback.
type evtNode struct {
	t    testing.TB
	o    nodeOpts
	dir  string
	rec  *recorder
	mu   sync.Mutex
	log  *eventlog.Log
	srv  *server.Server
	ts   *httptest.Server
	addr string
}

func newEvtNode(t testing.TB, o nodeOpts) *evtNode {
	t.Helper()
	n := &evtNode{t: t, o: o, rec: &recorder{stream: o.Stream}}
	if o.Durable {
		n.dir = t.TempDir()
	}
	n.start("")
	t.Cleanup(n.stop)
	return n
}

func (n *evtNode) logOptions() eventlog.Options {
	return eventlog.Options{Dir: n.dir, MaxItems: uint64(max(n.o.Retain, 0)), Sync: eventlog.SyncNone}
}

// start opens the log and serves it on addr ("" for any free port).
func (n *evtNode) start(addr string) {
	n.t.Helper()
	l, err := eventlog.Open(n.logOptions())
	if err != nil {
		n.t.Fatalf("open event log: %v", err)
	}
	n.mu.Lock()
	n.log = l
	n.mu.Unlock()
	n.serve(addr)
}

// Restart stops the node and closes its log, opens the log again, runs between while
// nothing serves it, and serves it again on the same address.
func (n *evtNode) Restart(between func()) {
	n.t.Helper()
	addr := n.addr
	n.stop()
	l, err := eventlog.Open(n.logOptions())
	if err != nil {
		n.t.Fatalf("reopen event log: %v", err)
	}
	n.mu.Lock()
	n.log = l
	n.mu.Unlock()
	if between != nil {
		between()
	}
	n.serve(addr)
}

func (n *evtNode) serve(addr string) {
	n.t.Helper()
	l := n.store()
	srv := server.New(server.Config{Store: l, MaxWait: n.o.MaxWait})
	n.rec.setHandler(srv)
	ts := httptest.NewUnstartedServer(n.rec)
	if addr != "" {
		ts.Listener.Close()
		ts.Listener = tmfake.ListenAgain(n.t, addr)
	}
	ts.Start()
	n.mu.Lock()
	n.srv, n.ts, n.addr = srv, ts, ts.Listener.Addr().String()
	n.mu.Unlock()
}

// stop wakes waiting long-polls, stops serving and closes the log.
func (n *evtNode) stop() {
	n.mu.Lock()
	l, srv, ts := n.log, n.srv, n.ts
	n.log, n.srv, n.ts = nil, nil, nil
	n.mu.Unlock()
	if ts != nil {
		srv.Shutdown(context.Background())
		ts.Close()
	}
	if l != nil {
		if err := l.Close(); err != nil {
			n.t.Errorf("close event log: %v", err)
		}
	}
}

func (n *evtNode) URL() string    { return "http://" + n.addr }
func (n *evtNode) Rec() *recorder { return n.rec }

func (n *evtNode) Waiting() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv == nil {
		return 0
	}
	return int(n.srv.Waiters())
}

func (n *evtNode) store() *eventlog.Log {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.log
}

func (n *evtNode) Append(tb testing.TB, evs ...testEvent) []string {
	tb.Helper()
	entries := make([]eventlog.Entry, len(evs))
	for i, e := range evs {
		entries[i] = eventlog.Entry{Type: e.Type, Source: "/client-test", ID: fmt.Sprintf("ev-%d", e.N), JSON: cloudEventJSON(e)}
	}
	res, err := n.store().Append(context.Background(), entries)
	if err != nil {
		tb.Fatalf("append: %v", err)
	}
	out := make([]string, len(res))
	for i, r := range res {
		if r.Duplicate {
			tb.Fatalf("event %d was taken for a duplicate", evs[i].N)
		}
		out[i] = r.Cursor.String()
	}
	return out
}

func (n *evtNode) Oldest(tb testing.TB) string { return n.store().Stats().Oldest.String() }

// postEvents ingests events over HTTP in batch mode and returns their cursors.
func postEvents(tb testing.TB, hc *http.Client, base string, evs ...testEvent) []string {
	tb.Helper()
	var body bytes.Buffer
	body.WriteByte('[')
	for i, e := range evs {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(cloudEventJSON(e))
	}
	body.WriteByte(']')
	resp, err := hc.Post(base+"/events", "application/cloudevents-batch+json", &body)
	if err != nil {
		tb.Fatalf("ingest: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Results []struct {
			Cursor    string `json:"cursor"`
			Duplicate bool   `json:"duplicate"`
		} `json:"results"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		tb.Fatalf("ingest answered %d: %s", resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		tb.Fatalf("ingest reply: %v", err)
	}
	cs := make([]string, len(out.Results))
	for i, r := range out.Results {
		cs[i] = r.Cursor
	}
	if len(cs) != len(evs) {
		tb.Fatalf("ingest took %d of %d events", len(cs), len(evs))
	}
	return cs
}

// --- clients and streams -------------------------------------------------------------------

func newTestClient(tb testing.TB, node string) *Client {
	tb.Helper()
	c, err := New(Options{Node: node})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// fastBackoff keeps retries quick in tests.
var fastBackoff = Backoff{Initial: 5 * time.Millisecond, Max: 40 * time.Millisecond}

type retryRec struct {
	Err     error
	Attempt int
	Delay   time.Duration
	At      time.Time
}

// streamRun is a Stream running in the background, with everything fn was given.
type streamRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set once done is closed

	mu      sync.Mutex
	batches []Batch
	items   []Item
	retries []retryRec
}

// startStream runs c.Stream with opts; hook, when set, runs inside fn after the batch is
// recorded (it may block to pause the consumer, or fail to end the stream).
func startStream(t testing.TB, c *Client, opts StreamOptions, hook func(Batch) error) *streamRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &streamRun{cancel: cancel, done: make(chan struct{})}
	if opts.OnRetry == nil {
		opts.OnRetry = func(err error, attempt int, delay time.Duration) {
			s.mu.Lock()
			s.retries = append(s.retries, retryRec{err, attempt, delay, time.Now()})
			s.mu.Unlock()
		}
	}
	if opts.Backoff == (Backoff{}) {
		opts.Backoff = fastBackoff
	}
	go func() {
		defer close(s.done)
		s.err = c.Stream(ctx, opts, func(b Batch) error {
			s.mu.Lock()
			s.batches = append(s.batches, b)
			s.items = append(s.items, b.Items...)
			s.mu.Unlock()
			if hook != nil {
				return hook(b)
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s
}

func (s *streamRun) numItems() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

func (s *streamRun) numBatches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.batches)
}

func (s *streamRun) Items() []Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Item(nil), s.items...)
}

func (s *streamRun) Batches() []Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Batch(nil), s.batches...)
}

func (s *streamRun) Retries() []retryRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]retryRec(nil), s.retries...)
}

func (s *streamRun) Gaps() []Gap {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gs []Gap
	for _, b := range s.batches {
		if b.Gap != nil {
			gs = append(gs, *b.Gap)
		}
	}
	return gs
}

// waitItems waits until at least n items were delivered.
func (s *streamRun) waitItems(t testing.TB, n int) {
	t.Helper()
	waitFor(t, func() bool { return s.numItems() >= n || s.finished() },
		func() string { return fmt.Sprintf("%d items delivered, want %d", s.numItems(), n) })
	if s.finished() && s.numItems() < n {
		t.Fatalf("stream ended with %v after %d items, want %d", s.err, s.numItems(), n)
	}
}

func (s *streamRun) finished() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stop cancels the stream and returns what Stream returned.
func (s *streamRun) stop(t testing.TB) error {
	t.Helper()
	s.cancel()
	select {
	case <-s.done:
	case <-testwait.Expired(t):
		t.Fatal("Stream did not return after its context was cancelled")
	}
	return s.err
}

// waitFor polls cond until it holds, failing the test at its deadline with what().
func waitFor(t testing.TB, cond func() bool, what func() string) {
	t.Helper()
	d, bounded := testwait.Deadline(t)
	for !cond() {
		if bounded && time.Now().After(d) {
			t.Fatalf("not by the end of the test's time: %s", what())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// --- assertions --------------------------------------------------------------------------------

func cursorsOf(items []Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Cursor
	}
	return out
}

// sameCursors fails unless got equals want exactly, naming the first difference, any
// duplicate and anything missing.
func sameCursors(t testing.TB, what string, got, want []string) {
	t.Helper()
	if equalStrings(got, want) {
		return
	}
	seen := map[string]int{}
	for _, c := range got {
		seen[c]++
	}
	var dups, missing []string
	for c, n := range seen {
		if n > 1 {
			dups = append(dups, c)
		}
	}
	for _, c := range want {
		if seen[c] == 0 {
			missing = append(missing, c)
		}
	}
	first := min(len(got), len(want))
	for i := range first {
		if got[i] != want[i] {
			first = i
			break
		}
	}
	t.Fatalf("%s: got %d cursors, want %d; first difference at %d; %d duplicated %v; %d missing %v",
		what, len(got), len(want), first, len(dups), head(dups, 5), len(missing), head(missing, 5))
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func head[T any](s []T, n int) []T { return s[:min(n, len(s))] }

// strictlyAscending fails unless the cursors are in strictly increasing order.
func strictlyAscending(t testing.TB, what string, cs []string) {
	t.Helper()
	for i := 1; i < len(cs); i++ {
		if cursor.MustParse(cs[i-1]).Compare(cursor.MustParse(cs[i])) >= 0 {
			t.Fatalf("%s: cursor %d %s is not after %s", what, i, cs[i], cs[i-1])
		}
	}
}

func reversed[T any](s []T) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
