package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTM answers the events method as a Tendermint node does: JSON-RPC on POST /, newest
// first only (order is ignored and never answered), cursors with a 4-digit sequence, at
// most 100 items a page, long-polls that answer "items": [] when the wait ends, and no
// /healthz or /metrics. Its query support is the one form the tests use: tm.event = 'X'.
type fakeTM struct {
	mu      sync.Mutex
	items   []tmItem // oldest first
	seq     uint16
	lastTS  int64
	changed chan struct{}
	waiting int
	heads   map[string]int // waiting requests by their after cursor
	srv     *httptest.Server
}

type tmItem struct {
	Cursor string          `json:"cursor"`
	Event  string          `json:"event"`
	Data   json.RawMessage `json:"data"`
}

func newFakeTM(t *testing.T) *fakeTM {
	f := &fakeTM{changed: make(chan struct{}), heads: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.mu.Lock()
		close(f.changed) // wake waiting long-polls
		f.changed = make(chan struct{})
		f.mu.Unlock()
		f.srv.Close()
	})
	return f
}

func (f *fakeTM) URL() string { return f.srv.URL }

// add appends n Tx events.
func (f *fakeTM) add(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		ts := max(time.Now().UnixNano(), f.lastTS+1)
		f.lastTS = ts
		f.seq++
		h := len(f.items) + 1
		data := fmt.Sprintf(`{"type":"tendermint/event/Tx","value":{"height":%d,"tx":"dXNlcj1hbGljZQ==","result":{}}}`, h)
		f.items = append(f.items, tmItem{Cursor: fmt.Sprintf("%016x-%04x", ts, f.seq), Event: "Tx", Data: json.RawMessage(data)})
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeTM) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}

// WaitingAtHead counts the long-polls waiting for an item after the newest one.
func (f *fakeTM) WaitingAtHead() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	if len(f.items) > 0 {
		n = f.heads[f.items[len(f.items)-1].Cursor]
	}
	return n
}

func (f *fakeTM) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Filter *struct {
				Query string `json:"query"`
			} `json:"filter"`
			MaxItems int    `json:"maxItems"`
			After    string `json:"after"`
			Before   string `json:"before"`
			WaitTime int64  `json:"waitTime"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p := req.Params
	event := ""
	if p.Filter != nil && p.Filter.Query != "" {
		q := p.Filter.Query
		if !strings.HasPrefix(q, "tm.event = '") || !strings.HasSuffix(q, "'") {
			writeRPCError(w, req.ID, fmt.Sprintf("fake: unsupported query %q", q))
			return
		}
		event = strings.TrimSuffix(strings.TrimPrefix(q, "tm.event = '"), "'")
	}
	maxItems := p.MaxItems
	if maxItems <= 0 {
		maxItems = 10
	}
	maxItems = min(maxItems, 100)
	wait := min(max(time.Duration(p.WaitTime), 10*time.Millisecond), 30*time.Second)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	counted := false
	defer func() {
		if counted {
			f.mu.Lock()
			f.waiting--
			f.heads[p.After]--
			f.mu.Unlock()
		}
	}()
	for {
		f.mu.Lock()
		var page []tmItem
		more := false
		for i := len(f.items) - 1; i >= 0; i-- {
			it := f.items[i]
			if (p.After != "" && it.Cursor <= p.After) || (p.Before != "" && it.Cursor >= p.Before) || (event != "" && it.Event != event) {
				continue
			}
			if len(page) == maxItems {
				more = true
				break
			}
			page = append(page, it)
		}
		oldest, newest := "", ""
		if len(f.items) > 0 {
			oldest, newest = f.items[0].Cursor, f.items[len(f.items)-1].Cursor
		}
		changed := f.changed
		if len(page) == 0 && p.Before == "" && !counted {
			f.waiting++
			f.heads[p.After]++
			counted = true
		}
		f.mu.Unlock()
		if len(page) > 0 || p.Before != "" {
			writeResult(w, req.ID, page, more, oldest, newest)
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			writeResult(w, req.ID, []tmItem{}, false, oldest, newest)
			return
		case <-r.Context().Done():
			return
		}
	}
}

func writeResult(w http.ResponseWriter, id json.RawMessage, items []tmItem, more bool, oldest, newest string) {
	if items == nil {
		items = []tmItem{}
	}
	res, _ := json.Marshal(map[string]any{"items": items, "more": more, "oldest": oldest, "newest": newest})
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, res)
}

func writeRPCError(w http.ResponseWriter, id json.RawMessage, msg string) {
	w.Header().Set("Content-Type", "application/json")
	data, _ := json.Marshal(msg)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"Internal error","data":%s}}`, id, data)
}
