package client

// fakeTendermint speaks the `events` method the way a Tendermint node (v0.36 line) does, as
// its rpc/core/events.go and the recorded replies show:
// newest-first pages only, cursors "%016x-%04x" of a Unix-nanosecond timestamp and a 16-bit
// sequence counter that starts at 0001 and wraps, maxItems <= 0 → 10 and capped at 100,
// waitTime clamped (to [MinWait, MaxWait]: 1s and 30s on a real node, shorter in tests),
// long-polls answering `items: []` when the wait ends, `order` ignored and never answered,
// filter.query compiled with pkg/filter over the tm.event attribute, and an item cap that
// cuts the log to 3/4 of it when exceeded. It keeps the log in memory; Restart can keep it
// (an outage between client and node) or lose it (a node restart).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/filter"
)

type tmItem struct {
	Cursor string
	Event  string
	Data   json.RawMessage
}

type fakeTendermint struct {
	t   testing.TB
	rec *recorder

	// Settings; change them only before requests arrive.
	MaxItems int           // item cap; 0: none
	MinWait  time.Duration // waitTime clamp
	MaxWait  time.Duration

	mu       sync.Mutex
	items    []tmItem // oldest first
	seq      uint16
	lastTS   int64
	changed  chan struct{}
	waiting  int
	onBefore func() // called once when the next request with `before` arrives
	ts       *httptest.Server
	addr     string
}

func newFakeTendermint(t testing.TB, o nodeOpts) *fakeTendermint {
	t.Helper()
	f := &fakeTendermint{t: t, rec: &recorder{}, MaxItems: o.Retain, MinWait: 20 * time.Millisecond, MaxWait: o.MaxWait, changed: make(chan struct{})}
	if f.MaxWait <= 0 {
		f.MaxWait = 30 * time.Second
	}
	f.rec.setHandler(http.HandlerFunc(f.serve))
	f.start("")
	t.Cleanup(f.stop)
	return f
}

func (f *fakeTendermint) start(addr string) {
	ts := httptest.NewUnstartedServer(f.rec)
	if addr != "" {
		ts.Listener.Close()
		ts.Listener = listenOn(f.t, addr)
	}
	ts.Start()
	f.mu.Lock()
	f.ts, f.addr = ts, ts.Listener.Addr().String()
	f.mu.Unlock()
}

func (f *fakeTendermint) stop() {
	f.mu.Lock()
	ts := f.ts
	f.ts = nil
	f.wakeLocked() // waiting long-polls answer with what they have
	f.mu.Unlock()
	if ts != nil {
		ts.Close()
	}
}

// Restart stops serving and serves again on the same address; between runs while nothing
// serves. With keepLog false the log is lost, as a real Tendermint node loses it on restart,
// and its sequence starts again at 0001.
func (f *fakeTendermint) Restart(keepLog bool, between func()) {
	f.stop()
	if !keepLog {
		f.mu.Lock()
		f.items, f.seq = nil, 0
		f.mu.Unlock()
	}
	if between != nil {
		between()
	}
	f.start(f.addr)
}

func (f *fakeTendermint) URL() string    { return "http://" + f.addr }
func (f *fakeTendermint) Rec() *recorder { return f.rec }

func (f *fakeTendermint) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}

func (f *fakeTendermint) Oldest(testing.TB) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.items) == 0 {
		return ""
	}
	return f.items[0].Cursor
}

// SetSeq makes the next item's sequence number seq.
func (f *fakeTendermint) SetSeq(seq uint16) {
	f.mu.Lock()
	f.seq = seq - 1
	f.mu.Unlock()
}

// OnNextBefore runs fn once, when the next paging request (one with `before`) arrives.
func (f *fakeTendermint) OnNextBefore(fn func()) {
	f.mu.Lock()
	f.onBefore = fn
	f.mu.Unlock()
}

// Append publishes the events as one block. Each gets a timestamp of its own, later than
// the one before, as on a real node (each cursor is stamped with the wall clock when its
// item is added, one at a time).
func (f *fakeTendermint) Append(tb testing.TB, evs ...testEvent) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ts := max(time.Now().UnixNano(), f.lastTS+1)
	out := make([]string, len(evs))
	for i, e := range evs {
		f.seq++
		if i > 0 {
			ts++
		}
		c := fmt.Sprintf("%016x-%04x", ts, f.seq)
		pad := ""
		if e.Pad > 0 {
			pad = `,"pad":"` + strings.Repeat("x", e.Pad) + `"`
		}
		data := fmt.Sprintf(`{"type":"tendermint/event/%s","value":{"n":%d%s}}`, e.Type, e.N, pad)
		f.items = append(f.items, tmItem{Cursor: c, Event: e.Type, Data: json.RawMessage(data)})
		out[i] = c
	}
	f.lastTS = ts
	if f.MaxItems > 0 && len(f.items) > f.MaxItems {
		keep := 3 * f.MaxItems / 4
		f.items = append([]tmItem(nil), f.items[len(f.items)-keep:]...)
	}
	f.wakeLocked()
	return out
}

func (f *fakeTendermint) wakeLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type tmRequest struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      json.RawMessage  `json:"id"`
	Method  string           `json:"method"`
	Params  *json.RawMessage `json:"params"`
}

// tmParams decodes as Tendermint's RequestEvents does: waitTime is a time.Duration, so only
// a JSON number of nanoseconds is accepted; unknown fields such as order are ignored.
type tmParams struct {
	Filter *struct {
		Query string `json:"query"`
	} `json:"filter"`
	MaxItems int           `json:"maxItems"`
	After    string        `json:"after"`
	Before   string        `json:"before"`
	WaitTime time.Duration `json:"waitTime"`
}

type tmResult struct {
	Items  []tmItemJSON `json:"items"`
	More   bool         `json:"more"`
	Oldest string       `json:"oldest"`
	Newest string       `json:"newest"`
}

type tmItemJSON struct {
	Cursor string          `json:"cursor"`
	Event  string          `json:"event"`
	Data   json.RawMessage `json:"data"`
}

type tmError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data"`
}

func (f *fakeTendermint) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	var req tmRequest
	reply := func(result *tmResult, e *tmError) {
		out := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if e != nil {
			out["error"] = e
		} else {
			out["result"] = result
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		reply(nil, &tmError{-32700, "Parse error", err.Error()})
		return
	}
	if req.Method != "events" {
		reply(nil, &tmError{-32601, "Method not found", req.Method})
		return
	}
	if req.Params == nil {
		reply(nil, &tmError{-32602, "Invalid params", "params must be present"})
		return
	}
	var p tmParams
	if err := json.Unmarshal(*req.Params, &p); err != nil {
		reply(nil, &tmError{-32602, "Invalid params", err.Error()})
		return
	}
	result, e := f.events(r.Context(), p)
	reply(result, e)
}

func validTMCursor(s string) bool {
	if s == "" {
		return true
	}
	var ts uint64
	var seq uint16
	n, err := fmt.Sscanf(s, "%016x-%04x", &ts, &seq)
	return err == nil && n == 2 && len(s) == 21 && s == fmt.Sprintf("%016x-%04x", ts, seq)
}

func (f *fakeTendermint) events(ctx context.Context, p tmParams) (*tmResult, *tmError) {
	maxItems := p.MaxItems
	if maxItems <= 0 {
		maxItems = 10
	} else if maxItems > 100 {
		maxItems = 100
	}
	wait := min(max(p.WaitTime, f.MinWait), f.MaxWait)
	var q *filter.Query
	if p.Filter != nil && p.Filter.Query != "" {
		var err error
		if q, err = filter.Compile(p.Filter.Query); err != nil {
			return nil, &tmError{-32603, "Internal error", "invalid filter query: " + err.Error()}
		}
	}
	for _, c := range []string{p.Before, p.After} {
		if !validTMCursor(c) {
			return nil, &tmError{-32603, "Internal error", fmt.Sprintf("invalid cursor %q: invalid cursor format", c)}
		}
	}
	if p.Before != "" {
		f.mu.Lock()
		hook := f.onBefore
		f.onBefore = nil
		f.mu.Unlock()
		if hook != nil {
			hook()
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.scanLocked(q, p.After, p.Before, maxItems), nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	waiting := false
	defer func() {
		if waiting {
			f.mu.Lock()
			f.waiting--
			f.mu.Unlock()
		}
	}()
	f.mu.Lock()
	for {
		res := f.scanLocked(q, p.After, "", maxItems)
		changed := f.changed
		stopped := f.ts == nil
		if len(res.Items) > 0 || stopped {
			f.mu.Unlock()
			return res, nil
		}
		if !waiting {
			waiting = true
			f.waiting++
		}
		f.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			f.mu.Lock()
			res = f.scanLocked(q, p.After, "", 0) // the wait ended: no items, the log's bounds now
			f.mu.Unlock()
			res.Items, res.More = []tmItemJSON{}, false
			return res, nil
		case <-ctx.Done():
			return nil, &tmError{-32603, "Internal error", ctx.Err().Error()}
		}
		f.mu.Lock()
	}
}

// scanLocked collects up to max of the newest items after `after` and before `before` that
// match q, newest first; more reports an eligible item left out.
func (f *fakeTendermint) scanLocked(q *filter.Query, after, before string, max int) *tmResult {
	res := &tmResult{Items: []tmItemJSON{}}
	if len(f.items) == 0 {
		return res
	}
	res.Oldest, res.Newest = f.items[0].Cursor, f.items[len(f.items)-1].Cursor
	// A real node compares cursors by their timestamp alone (Cursor.Before in its eventlog
	// package): `before` excludes every item stamped at or after its time, `after` every
	// item stamped at or before it, whatever the sequence parts.
	end := len(f.items)
	if before != "" {
		bt := tmTime(before)
		end = sort.Search(len(f.items), func(i int) bool { return tmTime(f.items[i].Cursor) >= bt })
	}
	at := tmTime(after)
	for i := end - 1; i >= 0; i-- {
		it := f.items[i]
		if after != "" && tmTime(it.Cursor) <= at {
			break
		}
		if !q.MatchJSON([]byte(`{"type":` + strconv.Quote(it.Event) + `}`)) {
			continue
		}
		if len(res.Items) == max {
			res.More = true
			break
		}
		res.Items = append(res.Items, tmItemJSON(it))
	}
	return res
}

// tmTime is the timestamp part of a cursor the fake has checked, 0 for "".
func tmTime(c string) uint64 {
	if c == "" {
		return 0
	}
	var ts uint64
	fmt.Sscanf(c[:16], "%016x", &ts)
	return ts
}

// TestFakeTendermint checks the fake against what a real node does (the facts and the
// captures), so that the tests built on it mean something.
func TestFakeTendermint(t *testing.T) {
	f := newFakeTendermint(t, nodeOpts{Retain: 200})
	c := newTestClient(t, f.URL())
	ctx := context.Background()

	// An empty log: a long-poll ends with items [] and no bounds.
	r, err := c.Events(ctx, Request{Wait: time.Nanosecond})
	if err != nil || r.Items == nil || len(r.Items) != 0 || r.Oldest != "" || r.Newest != "" || r.More {
		t.Fatalf("empty log: %+v %v", r, err)
	}
	cs := f.Append(t, events(150, "Tx")...)
	if cs[0][17:] != "0001" || len(cs[0]) != 21 {
		t.Fatalf("first cursor %s", cs[0])
	}
	if ts := cursor.MustParse(cs[0]).Time(); time.Since(ts) > time.Minute || time.Since(ts) < 0 {
		t.Fatalf("cursor time %v is not now", ts)
	}
	for _, tc := range []struct {
		max, want int
	}{{0, 10}, {-5, 10}, {7, 7}, {100, 100}, {500, 100}} {
		r, err := c.Events(ctx, Request{MaxItems: tc.max, Ascending: true})
		if err != nil || len(r.Items) != tc.want || !r.More {
			t.Fatalf("maxItems %d: %d items, more %v, %v", tc.max, len(r.Items), r.More, err)
		}
		// Newest first whatever the order asked, and no order in the reply.
		if r.Items[0].Cursor != cs[149] || r.Order != "" || r.Ascending || bytes.Contains(r.Items[0].Raw, []byte("order")) {
			t.Fatalf("maxItems %d: first %s order %q", tc.max, r.Items[0].Cursor, r.Order)
		}
		if r.Oldest != cs[0] || r.Newest != cs[149] {
			t.Fatalf("bounds %s %s", r.Oldest, r.Newest)
		}
	}
	// after and before are exclusive; more says an older eligible item was left out.
	r, err = c.Events(ctx, Request{After: cs[9], Before: cs[20], MaxItems: 5})
	if err != nil || !equalStrings(cursorsOf(r.Items), reversed(cs[15:20])) || !r.More {
		t.Fatalf("after/before: %v more %v %v", cursorsOf(r.Items), r.More, err)
	}
	r, err = c.Events(ctx, Request{After: cs[9], Before: cs[20], MaxItems: 10})
	if err != nil || !equalStrings(cursorsOf(r.Items), reversed(cs[10:20])) || r.More {
		t.Fatalf("after/before: %v more %v %v", cursorsOf(r.Items), r.More, err)
	}
	// A long-poll at the head waits its (clamped) time and ends empty; the capture's shape.
	start := time.Now()
	r, err = c.Events(ctx, Request{After: cs[149], Wait: time.Nanosecond})
	if el := time.Since(start); err != nil || len(r.Items) != 0 || el < f.MinWait {
		t.Fatalf("long-poll: %+v %v after %v", r, err, el)
	}
	// Filters: tm.event.
	f.Append(t, events(3, "NewBlock")...)
	r, err = c.Events(ctx, Request{Query: "tm.event = 'NewBlock'", After: cs[149]})
	if err != nil || len(r.Items) != 3 || r.Items[0].Event != "NewBlock" {
		t.Fatalf("filter: %+v %v", r, err)
	}
	// The cap: over 200 the log is cut to 3/4 of it.
	f.Append(t, events(50, "Tx")...) // 153 + 50 = 203 > 200: the oldest 53 go
	f.mu.Lock()
	kept := len(f.items)
	f.mu.Unlock()
	if r, err := c.Events(ctx, Request{MaxItems: 1}); err != nil || kept != 150 || r.Oldest != cs[53] {
		t.Fatalf("after the cut the log holds %d items from %s, want 150 from %s (%v)", kept, r.Oldest, cs[53], err)
	}
	// Errors as the captures record them.
	for _, tc := range []struct {
		file string
		req  Request
	}{
		{"post_bad_query.json", Request{Query: "tm.event = Tx", MaxItems: 2}},
		{"post_bad_cursor.json", Request{After: "zzz"}},
	} {
		var want struct{ Error RPCError }
		if err := json.Unmarshal(readCapture(t, tc.file), &want); err != nil {
			t.Fatal(err)
		}
		_, err := c.Events(ctx, tc.req)
		var re *RPCError
		if !errors.As(err, &re) || *re != want.Error {
			t.Errorf("%s: got %v, want %+v", tc.file, err, want.Error)
		}
	}
	// An evtctl cursor is no Tendermint cursor.
	if _, err := c.Events(ctx, Request{After: cursor.New(1, 1, cursor.NodeWidth).String()}); err == nil {
		t.Error("a 16-digit sequence was accepted")
	}
	// waitTime as a string is refused with -32602, as the capture shows.
	resp, err := http.Post(f.URL(), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"events","params":{"waitTime":"5s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Error RPCError }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Error.Code != -32602 || !strings.Contains(got.Error.Data, "cannot unmarshal string") {
		t.Errorf("string waitTime: %+v %v", got, err)
	}
}
