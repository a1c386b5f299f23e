// Package tmfake is a fake Tendermint node for tests: it answers the `events` method the way
// a node of the v0.36 line does, as its rpc/core/events.go and the recorded replies show, for
// what a real node cannot be made to do on demand (restarts that lose the log, a sequence
// about to wrap, a hook before a page is read, exact counts of waiting long-polls).
//
// Newest-first pages only; cursors "%016x-%04x" of a Unix-nanosecond timestamp and a 16-bit
// sequence counter that starts at 0001 and wraps; maxItems <= 0 → 10, capped at 100;
// waitTime clamped to [MinWait, MaxWait]; long-polls answering `items: []` when the wait
// ends; `order` ignored and never answered; filter.query compiled with pkg/filter over the
// tm.event attribute; cursors compared by their timestamp alone; an item cap that cuts the
// log to 3/4 of it when exceeded. The log is kept in memory.
package tmfake

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/filter"
	"github.com/evtctl/evtctl/pkg/wire"
)

// Options configures a Node. Zero values: no item cap, waits clamped to [10ms, 30s].
type Options struct {
	MaxItems int           // item cap; 0: none
	MinWait  time.Duration // waitTime clamp (1s and 30s on a real node)
	MaxWait  time.Duration
	// Wrap, when set, wraps the node's handler (to record or disturb requests).
	Wrap func(http.Handler) http.Handler
}

// Event is one event to append: its tm.event type and its data.
type Event struct {
	Type string
	Data json.RawMessage
}

// Node is a fake Tendermint node serving on a loopback port.
type Node struct {
	t    testing.TB
	opts Options

	mu       sync.Mutex
	items    []wire.Item // oldest first
	seq      uint16
	lastTS   int64
	changed  chan struct{}
	waiting  int
	heads    map[string]int // waiting long-polls by their after cursor
	onBefore func()         // called once when the next request with `before` arrives
	ts       *httptest.Server
	addr     string
}

// Start starts a node; it stops when the test ends.
func Start(t testing.TB, o Options) *Node {
	t.Helper()
	if o.MinWait <= 0 {
		o.MinWait = 10 * time.Millisecond
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 30 * time.Second
	}
	n := &Node{t: t, opts: o, changed: make(chan struct{}), heads: map[string]int{}}
	n.start("")
	t.Cleanup(n.stop)
	return n
}

func (n *Node) start(addr string) {
	var h http.Handler = http.HandlerFunc(n.serve)
	if n.opts.Wrap != nil {
		h = n.opts.Wrap(h)
	}
	ts := httptest.NewUnstartedServer(h)
	if addr != "" {
		ts.Listener.Close()
		ts.Listener = ListenAgain(n.t, addr)
	}
	ts.Start()
	n.mu.Lock()
	n.ts, n.addr = ts, ts.Listener.Addr().String()
	n.mu.Unlock()
}

// ListenAgain listens on addr again after a server on it stopped, retrying for a few
// seconds while the old socket lets go of the port (a node restarting on its address).
func ListenAgain(tb testing.TB, addr string) net.Listener {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln
		}
		if time.Now().After(deadline) {
			tb.Fatalf("listening on %s again: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *Node) stop() {
	n.mu.Lock()
	ts := n.ts
	n.ts = nil
	n.wakeLocked() // waiting long-polls answer with what they have
	n.mu.Unlock()
	if ts != nil {
		ts.Close()
	}
}

// Restart stops serving and serves again on the same address; between runs while nothing
// serves. With keepLog false the log is lost, as a real node loses it on restart, and its
// sequence starts again at 0001.
func (n *Node) Restart(keepLog bool, between func()) {
	n.stop()
	if !keepLog {
		n.mu.Lock()
		n.items, n.seq = nil, 0
		n.mu.Unlock()
	}
	if between != nil {
		between()
	}
	n.start(n.addr)
}

// URL is the node's address.
func (n *Node) URL() string { return "http://" + n.addr }

// Waiting counts the long-polls waiting now.
func (n *Node) Waiting() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.waiting
}

// WaitingAtHead counts the long-polls waiting for an item after the newest one.
func (n *Node) WaitingAtHead() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.items) == 0 {
		return 0
	}
	return n.heads[n.items[len(n.items)-1].Cursor]
}

// Oldest is the cursor of the oldest item held, "" when none.
func (n *Node) Oldest() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.items) == 0 {
		return ""
	}
	return n.items[0].Cursor
}

// Len is the number of items held.
func (n *Node) Len() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.items)
}

// SetSeq makes the next item's sequence number seq.
func (n *Node) SetSeq(seq uint16) {
	n.mu.Lock()
	n.seq = seq - 1
	n.mu.Unlock()
}

// OnNextBefore runs fn once, when the next paging request (one with `before`) arrives.
func (n *Node) OnNextBefore(fn func()) {
	n.mu.Lock()
	n.onBefore = fn
	n.mu.Unlock()
}

// Append publishes the events as one block and returns their cursors. Each gets a timestamp
// of its own, later than the one before, as on a real node (each cursor is stamped with the
// wall clock when its item is added, one at a time).
func (n *Node) Append(evs ...Event) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	ts := max(time.Now().UnixNano(), n.lastTS+1)
	out := make([]string, len(evs))
	for i, e := range evs {
		n.seq++
		if i > 0 {
			ts++
		}
		c := fmt.Sprintf("%016x-%04x", ts, n.seq)
		n.items = append(n.items, wire.Item{Cursor: c, Event: e.Type, Data: e.Data})
		out[i] = c
	}
	n.lastTS = ts
	if n.opts.MaxItems > 0 && len(n.items) > n.opts.MaxItems {
		keep := 3 * n.opts.MaxItems / 4
		n.items = append([]wire.Item(nil), n.items[len(n.items)-keep:]...)
	}
	n.wakeLocked()
	return out
}

func (n *Node) wakeLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// params decodes as Tendermint's RequestEvents does: waitTime is a time.Duration, so only a
// JSON number of nanoseconds is accepted; unknown fields are ignored, order (evtctl's) too,
// whatever its value.
type params struct {
	wire.Params
	Order json.RawMessage `json:"order"` // shadows Params.Order: taken, never read
}

// result is a Tendermint node's: without evtctl's resume and order.
type result = wire.Reply

type rpcError = wire.Error

func newError(code int, data string) *rpcError {
	return &rpcError{Code: code, Message: wire.Message(code), Data: data}
}

func (n *Node) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != wire.PathRPC {
		http.NotFound(w, r)
		return
	}
	var req wire.Request[*json.RawMessage]
	reply := func(res *result, e *rpcError) {
		out := map[string]any{wire.KeyJSONRPC: wire.Version, wire.KeyID: req.ID}
		if e != nil {
			out[wire.KeyError] = e
		} else {
			out[wire.KeyResult] = res
		}
		w.Header().Set("Content-Type", wire.MediaJSON)
		_ = json.NewEncoder(w).Encode(out)
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		reply(nil, newError(wire.CodeParseError, err.Error()))
		return
	}
	if req.Method != wire.Method {
		reply(nil, newError(wire.CodeMethodNotFound, req.Method))
		return
	}
	if req.Params == nil {
		reply(nil, newError(wire.CodeInvalidParams, "params must be present"))
		return
	}
	var p params
	if err := json.Unmarshal(*req.Params, &p); err != nil {
		reply(nil, newError(wire.CodeInvalidParams, err.Error()))
		return
	}
	reply(n.events(r.Context(), p))
}

func validCursor(s string) bool {
	if s == "" {
		return true
	}
	var ts uint64
	var seq uint16
	k, err := fmt.Sscanf(s, "%016x-%04x", &ts, &seq)
	return err == nil && k == 2 && len(s) == 21 && s == fmt.Sprintf("%016x-%04x", ts, seq)
}

func (n *Node) events(ctx context.Context, p params) (*result, *rpcError) {
	maxItems := p.MaxItems
	if maxItems <= 0 {
		maxItems = 10
	} else if maxItems > 100 {
		maxItems = 100
	}
	wait := min(max(p.WaitTime, n.opts.MinWait), n.opts.MaxWait)
	var q *filter.Query
	if p.Filter != nil && p.Filter.Query != "" {
		var err error
		if q, err = filter.Compile(p.Filter.Query); err != nil {
			return nil, newError(wire.CodeInternalError, "invalid filter query: "+err.Error())
		}
	}
	for _, c := range []string{p.Before, p.After} {
		if !validCursor(c) {
			return nil, newError(wire.CodeInternalError, fmt.Sprintf("invalid cursor %q: invalid cursor format", c))
		}
	}
	if p.Before != "" {
		n.mu.Lock()
		hook := n.onBefore
		n.onBefore = nil
		n.mu.Unlock()
		if hook != nil {
			hook()
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.scanLocked(q, p.After, p.Before, maxItems), nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	waiting := false
	defer func() {
		if waiting {
			n.mu.Lock()
			n.waiting--
			n.heads[p.After]--
			n.mu.Unlock()
		}
	}()
	n.mu.Lock()
	for {
		res := n.scanLocked(q, p.After, "", maxItems)
		changed := n.changed
		stopped := n.ts == nil
		if len(res.Items) > 0 || stopped {
			n.mu.Unlock()
			return res, nil
		}
		if !waiting {
			waiting = true
			n.waiting++
			n.heads[p.After]++
		}
		n.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			n.mu.Lock()
			res = n.scanLocked(q, p.After, "", 0) // the wait ended: no items, the log's bounds now
			n.mu.Unlock()
			res.Items, res.More = []wire.Item{}, false
			return res, nil
		case <-ctx.Done():
			return nil, newError(wire.CodeInternalError, ctx.Err().Error())
		}
		n.mu.Lock()
	}
}

// scanLocked collects up to max of the newest items after `after` and before `before` that
// match q, newest first; more reports an eligible item left out.
func (n *Node) scanLocked(q *filter.Query, after, before string, max int) *result {
	res := &result{Items: []wire.Item{}}
	if len(n.items) == 0 {
		return res
	}
	res.Oldest, res.Newest = n.items[0].Cursor, n.items[len(n.items)-1].Cursor
	// A real node compares cursors by their timestamp alone (Cursor.Before in its eventlog
	// package): `before` excludes every item stamped at or after its time, `after` every
	// item stamped at or before it, whatever the sequence parts.
	end := len(n.items)
	if before != "" {
		bt := timeOf(before)
		end = sort.Search(len(n.items), func(i int) bool { return timeOf(n.items[i].Cursor) >= bt })
	}
	at := timeOf(after)
	for i := end - 1; i >= 0; i-- {
		it := n.items[i]
		if after != "" && timeOf(it.Cursor) <= at {
			break
		}
		if !q.MatchJSON([]byte(`{"type":` + strconv.Quote(it.Event) + `}`)) {
			continue
		}
		if len(res.Items) == max {
			res.More = true
			break
		}
		res.Items = append(res.Items, it)
	}
	return res
}

// timeOf is the timestamp part of a cursor the node has checked, 0 for "".
func timeOf(c string) uint64 {
	if c == "" {
		return 0
	}
	ts, _ := strconv.ParseUint(c[:16], 16, 64)
	return ts
}
