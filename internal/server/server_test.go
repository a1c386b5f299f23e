package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/inprocess"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// --- test harness ---------------------------------------------------------------------------

// node is a Server over an event log, served by an httptest server on loopback with
// long-polls parked (Server.Attach), or, for a test on a fake clock, by its client alone
// (newFakeClockNode).
type node struct {
	t   testing.TB
	srv *server.Server
	log *eventlog.Log
	ts  *httptest.Server // nil on a fake clock
	hc  *http.Client
}

// url is where the node's client sends requests.
func (n *node) url() string {
	if n.ts == nil {
		return "http://node.test" // any: the client hands requests to the handler
	}
	return n.ts.URL
}

// newNode starts a node. Cleanup wakes long-polls, stops the HTTP server and closes the log.
func newNode(t testing.TB, cfg server.Config, opts eventlog.Options) *node {
	t.Helper()
	l := openLog(t, opts)
	cfg.Store = l
	return serveNode(t, cfg, l)
}

// newCountingNode starts a node on an in-memory log whose reads it counts.
func newCountingNode(t testing.TB, cfg server.Config) (*node, *readCounter) {
	t.Helper()
	l := openLog(t, eventlog.Options{})
	rc := &readCounter{Store: l}
	cfg.Store = rc
	return serveNode(t, cfg, l), rc
}

func openLog(t testing.TB, opts eventlog.Options) *eventlog.Log {
	t.Helper()
	l, err := eventlog.Open(opts)
	if err != nil {
		t.Fatalf("open event log: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// serveNode serves a Server for cfg, whose store is l or wraps it, with long-polls parked.
func serveNode(t testing.TB, cfg server.Config, l *eventlog.Log) *node {
	return serveNodeWith(t, cfg, l, true, nil)
}

// serveNodeWith is serveNode with long-polls parked or waiting in net/http's goroutines, and
// the HTTP server set up by setup, when given, before it starts.
func serveNodeWith(t testing.TB, cfg server.Config, l *eventlog.Log, parked bool, setup func(*http.Server)) *node {
	srv := server.New(cfg)
	ts := httptest.NewUnstartedServer(srv)
	if setup != nil {
		setup(ts.Config)
	}
	if parked {
		ts.Listener = srv.Attach(ts.Config, ts.Listener)
	}
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(func() { srv.Shutdown(context.Background()) }) // runs first: waiting long-polls must not hold ts.Close up
	return &node{t: t, srv: srv, log: l, ts: ts, hc: ts.Client()}
}

// newFakeClockNode starts a node for a test that runs in a synctest bubble, and is called in
// the bubble: the log, the Server and their timers are the bubble's, and the node's client
// hands each request to the Server's handler in the goroutine that sends it, with no
// connection, which a bubble cannot wait on. The node's waits run on the bubble's fake clock,
// which moves only when every goroutine in the bubble is blocked: the test may say exactly
// how long a wait lasted, whatever else the machine is doing. Its reads are counted.
func newFakeClockNode(t *testing.T, cfg server.Config) (*node, *readCounter) {
	t.Helper()
	l := openLog(t, eventlog.Options{})
	rc := &readCounter{Store: l}
	cfg.Store = rc
	srv := server.New(cfg)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return &node{t: t, srv: srv, log: l, hc: &http.Client{Transport: inprocess.Transport{Handler: srv}}}, rc
}

// readCounter counts the reads of a log that have returned.
type readCounter struct {
	eventlog.Store
	reads atomic.Int64
}

func (c *readCounter) Read(ctx context.Context, q eventlog.Query) (eventlog.Page, error) {
	defer c.reads.Add(1)
	return c.Store.Read(ctx, q)
}

func newMemNode(t testing.TB) *node { return newNode(t, server.Config{}, eventlog.Options{}) }

// do sends a request and returns the response (body read and closed) and the body.
func (n *node) do(req *http.Request) (*http.Response, []byte) {
	n.t.Helper()
	ctx, cancel := testwait.Context(n.t, req.Context())
	defer cancel()
	resp, err := n.hc.Do(req.WithContext(ctx))
	if err != nil {
		n.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		n.t.Fatalf("%s %s: reading the reply: %v", req.Method, req.URL.Path, err)
	}
	return resp, b
}

func (n *node) newRequest(method, path, contentType string, body []byte, hdr ...string) *http.Request {
	n.t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, n.url()+path, r)
	if err != nil {
		n.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

func (n *node) post(path, contentType, body string, hdr ...string) (*http.Response, []byte) {
	n.t.Helper()
	return n.do(n.newRequest(http.MethodPost, path, contentType, []byte(body), hdr...))
}

func (n *node) get(path string, hdr ...string) (*http.Response, []byte) {
	n.t.Helper()
	return n.do(n.newRequest(http.MethodGet, path, "", nil, hdr...))
}

// ceJSON is a structured-mode CloudEvent whose data is {"n": n}.
func ceJSON(source, id, typ string, n int) string {
	return fmt.Sprintf(`{"specversion":"1.0","id":%q,"source":%q,"type":%q,"datacontenttype":"application/json","data":{"n":%d}}`,
		id, source, typ, n)
}

type ingestResult struct {
	Cursor    string `json:"cursor"`
	Duplicate bool   `json:"duplicate"`
}

type batchReply struct {
	Count   int            `json:"count"`
	Results []ingestResult `json:"results"`
}

type errorReply struct {
	Error string `json:"error"`
	Index *int   `json:"index"`
}

// ingest posts one structured event and returns its result; it fails the test unless 200.
func (n *node) ingest(event string) ingestResult {
	n.t.Helper()
	resp, b := n.post("/events", "application/cloudevents+json", event)
	if resp.StatusCode != http.StatusOK {
		n.t.Fatalf("ingest: HTTP %d %s", resp.StatusCode, b)
	}
	var r ingestResult
	mustUnmarshal(n.t, b, &r)
	if r.Cursor == "" {
		n.t.Fatalf("ingest: no cursor in %s", b)
	}
	return r
}

// ingestBatch posts events as one batch and returns the cursors in order.
func (n *node) ingestBatch(events []string) []string {
	n.t.Helper()
	resp, b := n.post("/events", "application/cloudevents-batch+json", "["+strings.Join(events, ",")+"]")
	if resp.StatusCode != http.StatusOK {
		n.t.Fatalf("ingest batch: HTTP %d %s", resp.StatusCode, b)
	}
	var r batchReply
	mustUnmarshal(n.t, b, &r)
	if r.Count != len(events) || len(r.Results) != len(events) {
		n.t.Fatalf("ingest batch of %d: count %d, %d results", len(events), r.Count, len(r.Results))
	}
	cs := make([]string, len(r.Results))
	for i, res := range r.Results {
		if res.Duplicate {
			n.t.Fatalf("ingest batch: event %d reported as a duplicate", i)
		}
		cs[i] = res.Cursor
	}
	return cs
}

func mustUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %q: %v", abbrev(b), err)
	}
}

func abbrev(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// --- events replies -------------------------------------------------------------------------

type item struct {
	Cursor string          `json:"cursor"`
	Event  string          `json:"event"`
	Data   json.RawMessage `json:"data"`
}

type result struct {
	Items  []item `json:"items"`
	More   bool   `json:"more"`
	Oldest string `json:"oldest"`
	Newest string `json:"newest"`
	Order  string `json:"order"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data"`
}

type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  *result         `json:"result"`
	Error   *rpcError       `json:"error"`
}

// rpcRaw posts a JSON-RPC body to / and returns the decoded reply and the raw body.
func (n *node) rpcRaw(body string) (rpcReply, []byte) {
	n.t.Helper()
	resp, b := n.post("/", "application/json", body)
	if resp.StatusCode != http.StatusOK {
		n.t.Fatalf("POST /: HTTP %d %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		n.t.Fatalf("POST /: Content-Type %q", ct)
	}
	var r rpcReply
	mustUnmarshal(n.t, b, &r)
	if r.JSONRPC != "2.0" {
		n.t.Fatalf("POST /: jsonrpc %q in %s", r.JSONRPC, abbrev(b))
	}
	return r, b
}

// events calls the events method with the given params JSON and wants a result.
func (n *node) events(params string) *result {
	n.t.Helper()
	r, b := n.rpcRaw(`{"jsonrpc":"2.0","id":7,"method":"events","params":` + params + `}`)
	if r.Error != nil || r.Result == nil {
		n.t.Fatalf("events %s: no result: %s", params, abbrev(b))
	}
	if string(r.ID) != "7" {
		n.t.Fatalf("events: id %s, want 7", r.ID)
	}
	return r.Result
}

// eventsErr calls the events method and wants an error.
func (n *node) eventsErr(params string) *rpcError {
	n.t.Helper()
	r, b := n.rpcRaw(`{"jsonrpc":"2.0","id":"x","method":"events","params":` + params + `}`)
	if r.Error == nil || r.Result != nil {
		n.t.Fatalf("events %s: want an error, got %s", params, abbrev(b))
	}
	if string(r.ID) != `"x"` {
		n.t.Fatalf("events: id %s, want \"x\"", r.ID)
	}
	return r.Error
}

// getEvents calls GET /events with a raw query string and decodes the bare result.
func (n *node) getEvents(rawQuery string) *result {
	n.t.Helper()
	resp, b := n.get("/events?" + rawQuery)
	if resp.StatusCode != http.StatusOK {
		n.t.Fatalf("GET /events?%s: HTTP %d %s", rawQuery, resp.StatusCode, b)
	}
	var probe map[string]json.RawMessage
	mustUnmarshal(n.t, b, &probe)
	if _, ok := probe["items"]; !ok {
		n.t.Fatalf("GET /events?%s: not a result: %s", rawQuery, abbrev(b))
	}
	var r result
	mustUnmarshal(n.t, b, &r)
	return &r
}

// ce is the part of a stored CloudEvent the tests look at.
type ce struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`
}

func decodeCE(t testing.TB, it item) ce {
	t.Helper()
	var e ce
	mustUnmarshal(t, it.Data, &e)
	return e
}

func appended(n *node) uint64 { return n.log.Stats().Appended }

// waitUntil polls cond every millisecond until it holds, failing the test at its deadline.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, what, cond)
}

// --- dedupe ---------------------------------------------------------------------------------

func TestDedupeOverHTTP(t *testing.T) {
	n := newMemNode(t)
	ev := ceJSON("/orders", "order-1", "shop.order.placed", 1)
	first := n.ingest(ev)
	if first.Duplicate {
		t.Fatalf("first post reported as a duplicate")
	}
	if _, err := cursor.Parse(first.Cursor); err != nil {
		t.Fatalf("cursor %q: %v", first.Cursor, err)
	}
	second := n.ingest(ev)
	if !second.Duplicate || second.Cursor != first.Cursor {
		t.Fatalf("second post = %+v, want duplicate of %s", second, first.Cursor)
	}

	// The same (source, id) in binary mode, with another payload, is a duplicate too.
	resp, b := n.post("/events", "application/json", `{"n":99}`,
		"ce-specversion", "1.0", "ce-id", "order-1", "ce-source", "/orders", "ce-type", "shop.order.changed")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("binary post: HTTP %d %s", resp.StatusCode, b)
	}
	var third ingestResult
	mustUnmarshal(t, b, &third)
	if !third.Duplicate || third.Cursor != first.Cursor {
		t.Fatalf("binary post = %+v, want duplicate of %s", third, first.Cursor)
	}

	// Another source with the same id is a different event.
	other := n.ingest(ceJSON("/refunds", "order-1", "shop.refund", 2))
	if other.Duplicate || other.Cursor <= first.Cursor {
		t.Fatalf("other source = %+v, want a new cursor after %s", other, first.Cursor)
	}

	// A batch repeating an id inside itself and one stored before.
	resp, b = n.post("/events", "application/cloudevents-batch+json",
		"["+ceJSON("/b", "x", "t", 1)+","+ceJSON("/b", "x", "t", 2)+","+ev+"]")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("batch: HTTP %d %s", resp.StatusCode, b)
	}
	var br batchReply
	mustUnmarshal(t, b, &br)
	if br.Count != 3 || len(br.Results) != 3 {
		t.Fatalf("batch reply %s", b)
	}
	if br.Results[0].Duplicate || !br.Results[1].Duplicate || br.Results[1].Cursor != br.Results[0].Cursor {
		t.Fatalf("batch repeating an id: %+v", br.Results)
	}
	if !br.Results[2].Duplicate || br.Results[2].Cursor != first.Cursor {
		t.Fatalf("batch repeating a stored event: %+v", br.Results[2])
	}

	st := n.log.Stats()
	if st.Appended != 3 || st.Items != 3 || st.Duplicates != 4 {
		t.Fatalf("stats: appended %d items %d duplicates %d, want 3, 3, 4", st.Appended, st.Items, st.Duplicates)
	}
	res := n.events(`{"filter":{"query":"source = '/orders'"}}`)
	if len(res.Items) != 1 || res.Items[0].Cursor != first.Cursor || res.Items[0].Event != "shop.order.placed" {
		t.Fatalf("the log holds %+v, want the one original", res.Items)
	}
	if e := decodeCE(t, res.Items[0]); string(e.Data) != `{"n":1}` {
		t.Fatalf("stored data %s, want the original's", e.Data)
	}
}

// --- ingest modes ---------------------------------------------------------------------------

func TestIngestModes(t *testing.T) {
	n := newMemNode(t)

	// Binary mode.
	resp, b := n.post("/events", "application/json", `{"k":"v"}`,
		"ce-specversion", "1.0", "ce-id", "b1", "ce-source", "/bin", "ce-type", "bin.t", "ce-subject", "s1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("binary: HTTP %d %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("binary: Content-Type %q", ct)
	}
	// Structured mode, and structured without a Content-Type (sniffed from '{').
	n.ingest(ceJSON("/st", "s1", "st.t", 1))
	req := n.newRequest(http.MethodPost, "/events", "", []byte(ceJSON("/st", "s2", "st.t", 2)))
	resp, b = n.do(req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("structured without Content-Type: HTTP %d %s", resp.StatusCode, b)
	}
	var single map[string]any
	mustUnmarshal(t, b, &single)
	if _, ok := single["cursor"]; !ok {
		t.Fatalf("structured reply %s has no cursor", b)
	}
	// Batch mode with a charset parameter.
	resp, b = n.post("/events", "application/cloudevents-batch+json; charset=utf-8",
		"["+ceJSON("/bt", "1", "bt.t", 1)+","+ceJSON("/bt", "2", "bt.t", 2)+"]")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("batch: HTTP %d %s", resp.StatusCode, b)
	}
	var br batchReply
	mustUnmarshal(t, b, &br)
	if br.Count != 2 || len(br.Results) != 2 || br.Results[0].Cursor >= br.Results[1].Cursor {
		t.Fatalf("batch reply %s", b)
	}

	res := n.events(`{"maxItems":10}`)
	if len(res.Items) != 5 {
		t.Fatalf("%d items stored, want 5", len(res.Items))
	}
	bin := decodeCE(t, res.Items[4])
	if bin.Type != "bin.t" || bin.Source != "/bin" || bin.ID != "b1" || bin.Subject != "s1" || string(bin.Data) != `{"k":"v"}` {
		t.Fatalf("binary event stored as %+v", bin)
	}
	if res.Items[4].Event != "bin.t" {
		t.Fatalf("binary event served as %q", res.Items[4].Event)
	}
}

// A batch sent without a Content-Type is recognised by its '[' (internal/cevent decodes it as a
// batch), and must be answered as a batch: one result per event, zero for an empty array.
func TestIngestBatchWithoutContentType(t *testing.T) {
	n := newMemNode(t)
	for _, tc := range []struct {
		body string
		want int
	}{
		{"[" + ceJSON("/nb", "1", "nb.t", 1) + "," + ceJSON("/nb", "2", "nb.t", 2) + "]", 2},
		{" [" + ceJSON("/nb", "3", "nb.t", 3) + "]", 1},
		{"[]", 0},
	} {
		before := appended(n)
		req := n.newRequest(http.MethodPost, "/events", "", []byte(tc.body))
		resp, err := n.hc.Do(req)
		if err != nil {
			t.Fatalf("batch of %d without Content-Type: %v (did the handler panic?)", tc.want, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("batch of %d without Content-Type: HTTP %d %s", tc.want, resp.StatusCode, b)
		}
		var br batchReply
		mustUnmarshal(t, b, &br)
		if br.Count != tc.want || len(br.Results) != tc.want {
			t.Fatalf("batch of %d without Content-Type answered %s", tc.want, b)
		}
		if got := appended(n) - before; got != uint64(tc.want) {
			t.Fatalf("batch of %d appended %d", tc.want, got)
		}
		for _, r := range br.Results {
			if _, err := cursor.Parse(r.Cursor); err != nil || r.Cursor == "" {
				t.Fatalf("result cursor %q", r.Cursor)
			}
		}
	}
	// Binary mode without a Content-Type whose data is an array is one event, not a batch.
	req := n.newRequest(http.MethodPost, "/events", "", []byte(`[1,2]`),
		"ce-specversion", "1.0", "ce-id", "arr", "ce-source", "/nb", "ce-type", "nb.arr")
	resp, b := n.do(req)
	var single map[string]any
	mustUnmarshal(t, b, &single)
	if resp.StatusCode != http.StatusOK || single["cursor"] == nil || single["count"] != nil {
		t.Fatalf("binary event with array data: HTTP %d %s", resp.StatusCode, b)
	}
	// An empty batch with its Content-Type is answered the same way.
	resp, b = n.post("/events", "application/cloudevents-batch+json", "[]")
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != `{"count":0,"results":[]}` {
		t.Fatalf("empty batch: HTTP %d %s", resp.StatusCode, b)
	}
}

func TestIngestWhenLogClosed(t *testing.T) {
	n := newMemNode(t)
	n.ingest(ceJSON("/c", "1", "c.t", 1))
	if err := n.log.Close(); err != nil {
		t.Fatal(err)
	}
	resp, b := n.post("/events", "application/cloudevents+json", ceJSON("/c", "2", "c.t", 2))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("ingest into a closed log: HTTP %d %s", resp.StatusCode, b)
	}
	if ra := resp.Header.Get("Retry-After"); ra == "" {
		t.Fatalf("503 without Retry-After")
	}
	var e errorReply
	mustUnmarshal(t, b, &e)
	if !strings.Contains(e.Error, "shutting down") {
		t.Fatalf("error %q", e.Error)
	}
}

// appendGate holds every Append until released, counting those it holds.
type appendGate struct {
	eventlog.Store
	held    atomic.Int32
	release chan struct{}
}

func (g *appendGate) Append(ctx context.Context, entries []eventlog.Entry) ([]eventlog.AppendResult, error) {
	g.held.Add(1)
	<-g.release
	return g.Store.Append(ctx, entries)
}

// With every ingest slot taken, a further ingest waits briefly, then gets 503 + Retry-After.
func TestIngestSaturated(t *testing.T) {
	l, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	gate := &appendGate{Store: l, release: make(chan struct{})}
	srv := server.New(server.Config{Store: gate, MaxIngest: 1})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	n := &node{t: t, srv: srv, log: l, ts: ts, hc: ts.Client()}
	slowDone := make(chan int, 1)
	go func() {
		resp, err := n.hc.Post(ts.URL+"/events", "application/cloudevents+json", strings.NewReader(ceJSON("/slow", "1", "slow.t", 1)))
		if err != nil {
			slowDone <- -1
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		slowDone <- resp.StatusCode
	}()
	waitUntil(t, "the first ingest holds the slot, appending", func() bool { return gate.held.Load() == 1 })
	resp, b := n.post("/events", "application/cloudevents+json", ceJSON("/other", "2", "o.t", 1))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("saturated: HTTP %d %s, want 503", resp.StatusCode, b)
	}
	if resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("saturated: Retry-After %q", resp.Header.Get("Retry-After"))
	}
	var e errorReply
	mustUnmarshal(t, b, &e)
	if !strings.Contains(e.Error, "retry") {
		t.Fatalf("saturated: error %q", e.Error)
	}
	close(gate.release)
	if code := <-slowDone; code != http.StatusOK {
		t.Fatalf("the slow ingest finished with %d", code)
	}
}

// --- metrics --------------------------------------------------------------------------------

// scrape fetches /metrics and returns sample lines keyed by name{labels}.
func scrape(t *testing.T, n *node, hdr ...string) map[string]float64 {
	t.Helper()
	resp, b := n.get("/metrics", hdr...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: HTTP %d %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET /metrics: Content-Type %q", ct)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("metrics line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}

func wantMetric(t *testing.T, m map[string]float64, key string, want float64) {
	t.Helper()
	got, ok := m[key]
	if !ok {
		t.Fatalf("metric %s missing", key)
	}
	if got != want {
		t.Fatalf("metric %s = %v, want %v", key, got, want)
	}
}

func TestMetrics(t *testing.T) {
	n := newNode(t, server.Config{MaxWait: time.Hour}, eventlog.Options{}) // a long-poll waits until Shutdown
	n.ingestBatch([]string{ceJSON("/m", "1", "m.t", 1), ceJSON("/m", "2", "m.t", 2)})
	n.ingest(ceJSON("/m", "3", "m.t", 3))
	n.ingest(ceJSON("/m", "3", "m.t", 3)) // duplicate
	n.ingest(ceJSON("/m", "4", "m.t", 4))
	if resp, _ := n.post("/events", "application/cloudevents+json", `{"specversion":"1.0"}`); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad event: HTTP %d", resp.StatusCode)
	}
	n.events(`{}`)
	n.getEvents("maxItems=1")

	m := scrape(t, n)
	wantMetric(t, m, "evtctl_log_appended_events_total", 4)
	wantMetric(t, m, "evtctl_log_duplicates_total", 1)
	wantMetric(t, m, "evtctl_log_items", 4)
	wantMetric(t, m, "evtctl_ingest_events_total", 5)
	wantMetric(t, m, "evtctl_waiting_readers", 0)
	wantMetric(t, m, `evtctl_http_requests_total{code="200",endpoint="ingest"}`, 4)
	wantMetric(t, m, `evtctl_http_requests_total{code="400",endpoint="ingest"}`, 1)
	wantMetric(t, m, `evtctl_http_requests_total{code="200",endpoint="rpc"}`, 1)
	wantMetric(t, m, `evtctl_http_requests_total{code="200",endpoint="events_get"}`, 1)
	wantMetric(t, m, `evtctl_http_request_duration_seconds_count{endpoint="ingest"}`, 5)
	if m["evtctl_log_appended_bytes_total"] <= 0 || m["evtctl_log_bytes"] <= 0 {
		t.Fatalf("byte counters not positive: %v %v", m["evtctl_log_appended_bytes_total"], m["evtctl_log_bytes"])
	}
	if _, ok := m["go_goroutines"]; !ok {
		t.Fatalf("go collector missing")
	}
	if runtime.GOOS == "linux" {
		if v, ok := m["process_resident_memory_bytes"]; !ok || v <= 0 {
			t.Fatalf("process_resident_memory_bytes = %v, %v", v, ok)
		}
	}

	// A waiting long-poll shows in evtctl_waiting_readers.
	done := make(chan *result, 1)
	st := n.log.Stats()
	go func() {
		r, _ := n.rpcRaw(`{"jsonrpc":"2.0","id":1,"method":"events","params":{"after":"` + st.Newest.String() + `","waitTime":"1h"}}`)
		done <- r.Result
	}()
	waitUntil(t, "the long-poll waits", func() bool { return n.srv.Waiters() == 1 })
	wantMetric(t, scrape(t, n), "evtctl_waiting_readers", 1)
	n.srv.Shutdown(context.Background())
	select {
	case r := <-done:
		if r == nil || len(r.Items) != 0 {
			t.Fatalf("woken long-poll answered %+v", r)
		}
	case <-testwait.Expired(t):
		t.Fatalf("Shutdown did not wake the long-poll")
	}
	wantMetric(t, scrape(t, n), "evtctl_waiting_readers", 0)
}

// --- signals --------------------------------------------------------------------------------

type signalReply struct {
	Cursor    string `json:"cursor"`
	Duplicate bool   `json:"duplicate"`
	ID        string `json:"id"`
	Type      string `json:"type"`
}

func TestSignals(t *testing.T) {
	n := newMemNode(t)
	type stored struct {
		reply signalReply
		event ce
	}
	send := func(req *http.Request) stored {
		t.Helper()
		before := appended(n)
		resp, b := n.do(req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: HTTP %d %s", req.Method, req.URL, resp.StatusCode, b)
		}
		var r signalReply
		mustUnmarshal(t, b, &r)
		if _, err := uuid.Parse(r.ID); err != nil {
			t.Fatalf("signal id %q is not a UUID", r.ID)
		}
		if got := appended(n) - before; got != 1 {
			t.Fatalf("a signal appended %d events", got)
		}
		res := n.events(`{"maxItems":1}`)
		if len(res.Items) != 1 || res.Items[0].Cursor != r.Cursor || res.Items[0].Event != r.Type {
			t.Fatalf("head of the log %+v, want the signal %+v", res.Items, r)
		}
		e := decodeCE(t, res.Items[0])
		if e.ID != r.ID || e.SpecVersion != "1.0" || e.DataContentType != "application/json" {
			t.Fatalf("stored signal %+v", e)
		}
		return stored{r, e}
	}

	form := send(n.newRequest(http.MethodPost, "/signal/cust-1", "application/x-www-form-urlencoded",
		[]byte("_domain=shop&_name=order.placed&item=book&qty=2&_timestamp="+url.QueryEscape("Sun, 06 Nov 1994 08:49:37 GMT"))))
	if form.reply.Type != "shop.order.placed" || form.event.Type != "shop.order.placed" {
		t.Fatalf("form signal type %q / %q", form.reply.Type, form.event.Type)
	}
	if form.event.Source != "/signal/cust-1" || form.event.Subject != "cust-1" ||
		string(form.event.Data) != `{"item":"book","qty":"2"}` || form.event.Time != "1994-11-06T08:49:37Z" {
		t.Fatalf("form signal stored as %+v (data %s)", form.event, form.event.Data)
	}

	js := send(n.newRequest(http.MethodPost, "/signal/cust-1", "application/json",
		[]byte(`{"_domain":"shop","_name":"paid","amount":12.5,"tags":["a","b"]}`)))
	if js.event.Type != "shop.paid" || string(js.event.Data) != `{"amount":12.5,"tags":["a","b"]}` || js.event.Time != "" {
		t.Fatalf("JSON signal stored as %+v (data %s)", js.event, js.event.Data)
	}

	get := send(n.newRequest(http.MethodGet, "/signal/cust%202?_domain=shop&_name=viewed&x=1&x=2", "", nil))
	if get.event.Type != "shop.viewed" || get.event.Source != "/signal/cust%202" || get.event.Subject != "cust 2" ||
		string(get.event.Data) != `{"x":["1","2"]}` {
		t.Fatalf("GET signal stored as %+v (data %s)", get.event, get.event.Data)
	}
	if !(form.reply.Cursor < js.reply.Cursor && js.reply.Cursor < get.reply.Cursor) {
		t.Fatalf("signal cursors out of order: %s %s %s", form.reply.Cursor, js.reply.Cursor, get.reply.Cursor)
	}

	// Refusals store nothing.
	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		msg    string
	}{
		{"no _name", n.newRequest(http.MethodPost, "/signal/cust-1", "application/x-www-form-urlencoded", []byte("_domain=shop&item=book")),
			http.StatusBadRequest, "missing required signal key _name"},
		{"no _domain in JSON", n.newRequest(http.MethodPost, "/signal/cust-1", "application/json", []byte(`{"_name":"x"}`)),
			http.StatusBadRequest, "missing required signal key _domain"},
		{"GET without _name", n.newRequest(http.MethodGet, "/signal/c?_domain=shop", "", nil),
			http.StatusBadRequest, "_name"},
		{"bad _name", n.newRequest(http.MethodPost, "/signal/c", "application/x-www-form-urlencoded", []byte("_domain=shop&_name=a%20b")),
			http.StatusBadRequest, "_name"},
		{"unsupported body type", n.newRequest(http.MethodPost, "/signal/c", "text/csv", []byte("_domain,shop")),
			http.StatusUnsupportedMediaType, "Content-Type"},
		{"PUT", n.newRequest(http.MethodPut, "/signal/c", "application/json", []byte(`{"_domain":"a","_name":"b"}`)),
			http.StatusMethodNotAllowed, "POST"},
	} {
		before := appended(n)
		resp, b := n.do(tc.req)
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: HTTP %d %s, want %d", tc.name, resp.StatusCode, b, tc.status)
		}
		var e errorReply
		mustUnmarshal(t, b, &e)
		if !strings.Contains(e.Error, tc.msg) {
			t.Fatalf("%s: error %q, want it to mention %q", tc.name, e.Error, tc.msg)
		}
		if appended(n) != before {
			t.Fatalf("%s: the refused signal was appended", tc.name)
		}
		if tc.status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
			t.Fatalf("405 without Allow")
		}
	}
}

// --- auth -----------------------------------------------------------------------------------

func TestBearerTokens(t *testing.T) {
	n := newNode(t, server.Config{ReadToken: "read-secret", IngestToken: "ingest-secret"}, eventlog.Options{})
	readOK := []string{"Authorization", "Bearer read-secret"}
	ingestOK := []string{"Authorization", "Bearer ingest-secret"}
	ev := ceJSON("/auth", "1", "auth.t", 1)
	rpc := `{"jsonrpc":"2.0","id":1,"method":"events","params":{"before":"7fffffffffffffff-0000000000000000"}}`

	type call struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
	}
	calls := map[string]call{
		"rpc":     {"rpc", http.MethodPost, "/", "application/json", rpc},
		"get":     {"get", http.MethodGet, "/events?before=7fffffffffffffff-0000000000000000", "", ""},
		"metrics": {"metrics", http.MethodGet, "/metrics", "", ""},
		"ingest":  {"ingest", http.MethodPost, "/events", "application/cloudevents+json", ev},
		"signal":  {"signal", http.MethodPost, "/signal/e", "application/x-www-form-urlencoded", "_domain=a&_name=b"},
	}
	send := func(c call, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		return n.do(n.newRequest(c.method, c.path, c.contentType, body, hdr...))
	}
	for _, tc := range []struct {
		call    string
		hdr     []string
		invalid bool // a token was sent, but not the right one
	}{
		{"rpc", nil, false},
		{"rpc", ingestOK, true},
		{"rpc", []string{"Authorization", "read-secret"}, true},
		{"get", nil, false},
		{"get", []string{"Authorization", "Bearer read-secreT"}, true},
		{"metrics", nil, false},
		{"metrics", ingestOK, true},
		{"ingest", nil, false},
		{"ingest", readOK, true},
		{"ingest", []string{"Authorization", "Bearer "}, true},
		{"signal", nil, false},
		{"signal", readOK, true},
	} {
		c := calls[tc.call]
		resp, b := send(c, tc.hdr...)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s with %q: HTTP %d %s, want 401", c.name, tc.hdr, resp.StatusCode, b)
		}
		wa := resp.Header.Get("WWW-Authenticate")
		if !strings.HasPrefix(wa, "Bearer ") || strings.Contains(wa, "invalid_token") != tc.invalid {
			t.Fatalf("%s with %q: WWW-Authenticate %q", c.name, tc.hdr, wa)
		}
		var e errorReply
		mustUnmarshal(t, b, &e)
		if !strings.Contains(e.Error, "token") {
			t.Fatalf("%s: error %q", c.name, e.Error)
		}
		if got := appended(n); got != 0 {
			t.Fatalf("%s with %q: %d events appended without authorisation", c.name, tc.hdr, got)
		}
	}

	// The right tokens work.
	for _, tc := range []struct {
		call string
		hdr  []string
	}{{"ingest", ingestOK}, {"signal", ingestOK}, {"rpc", readOK}, {"get", readOK}, {"metrics", readOK}} {
		if resp, b := send(calls[tc.call], tc.hdr...); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s with the right token: HTTP %d %s", tc.call, resp.StatusCode, b)
		}
	}
	if got := appended(n); got != 2 {
		t.Fatalf("%d events appended with the right tokens, want 2", got)
	}
	// Health needs no token.
	if resp, b := n.get("/healthz"); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: HTTP %d %s", resp.StatusCode, b)
	}
}

// --- health, index, misc --------------------------------------------------------------------

func TestHealthAndIndex(t *testing.T) {
	n := newNode(t, server.Config{Version: "v9.9.9"}, eventlog.Options{})
	cs := n.ingestBatch([]string{ceJSON("/h", "1", "h.t", 1), ceJSON("/h", "2", "h.t", 2)})
	resp, b := n.get("/healthz")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: HTTP %d %s", resp.StatusCode, b)
	}
	var h struct {
		Status, Version, Oldest, Newest string
		Items                           int
	}
	mustUnmarshal(t, b, &h)
	if h.Status != "ok" || h.Version != "v9.9.9" || h.Items != 2 || h.Oldest != cs[0] || h.Newest != cs[1] {
		t.Fatalf("healthz %s", b)
	}
	resp, b = n.get("/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "v9.9.9") || !strings.Contains(string(b), "POST /events") {
		t.Fatalf("index: HTTP %d %s", resp.StatusCode, b)
	}
	// The webhook handshake of CloudEvents.
	resp, _ = n.do(n.newRequest(http.MethodOptions, "/events", "", nil, "WebHook-Request-Origin", "example.com"))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("WebHook-Allowed-Origin") != "example.com" {
		t.Fatalf("OPTIONS /events: HTTP %d, allowed origin %q", resp.StatusCode, resp.Header.Get("WebHook-Allowed-Origin"))
	}
	// Unknown paths and methods.
	if resp, _ := n.get("/nope"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /nope: HTTP %d", resp.StatusCode)
	}
	if resp, _ := n.do(n.newRequest(http.MethodDelete, "/events", "", nil)); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE /events: HTTP %d", resp.StatusCode)
	}
	n.srv.Shutdown(context.Background())
	resp, b = n.get("/healthz")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "shutting down") {
		t.Fatalf("healthz after Shutdown: HTTP %d %s", resp.StatusCode, b)
	}
}

func TestHTTPServerLimits(t *testing.T) {
	n := newNode(t, server.Config{MaxWait: 3 * time.Second}, eventlog.Options{})
	hs := n.srv.HTTPServer("127.0.0.1:0", 200*time.Millisecond)
	if hs.Addr != "127.0.0.1:0" || hs.Handler != n.srv {
		t.Fatalf("HTTPServer: addr %q handler %T", hs.Addr, hs.Handler)
	}
	if hs.ReadHeaderTimeout != 200*time.Millisecond || hs.ReadTimeout <= 0 || hs.IdleTimeout <= 0 || hs.MaxHeaderBytes <= 0 {
		t.Fatalf("HTTPServer limits: %+v", hs)
	}
	// A long-poll of the longest wait must fit in the write timeout.
	if hs.WriteTimeout <= 3*time.Second {
		t.Fatalf("WriteTimeout %v is not above MaxWait", hs.WriteTimeout)
	}
	if d := n.srv.HTTPServer(":0", 0).ReadHeaderTimeout; d <= 0 {
		t.Fatalf("default ReadHeaderTimeout %v", d)
	}
}
