package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/tmnode"
)

// requestLog is a proxy in front of a node that keeps the maxItems of each events call.
type requestLog struct {
	mu       sync.Mutex
	maxItems []int64
}

func (l *requestLog) proxy(t *testing.T, node string) string {
	t.Helper()
	u, err := url.Parse(node)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if m := gjson.GetBytes(body, "method"); m.String() == "events" {
			l.mu.Lock()
			l.maxItems = append(l.maxItems, gjson.GetBytes(body, "params.maxItems").Int())
			l.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (l *requestLog) calls() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.maxItems...)
}

// replay --limit N on a Tendermint node, which pages newest first only: the whole range is
// gathered in pages of the node's size, and the limit cuts the output, not the pages.
func TestReplayLimitOnTendermint(t *testing.T) {
	t.Parallel()
	tm := tmnode.Start(t, "create-empty-blocks=false")
	for _, tx := range []string{"a=1", "b=2", "c=3"} {
		if err := tm.Commit(tx); err != nil {
			t.Fatal(err)
		}
	}
	// The whole log, oldest first, as the node pages it.
	code, all, stderr := runCLI(t, "replay", "--node", tm.URL, "-o", "jsonl")
	if code != 0 || strings.Count(all, "\n") < 20 {
		t.Fatalf("replay: exit %d, %d lines: %s", code, strings.Count(all, "\n"), stderr)
	}
	oldest := gjson.Get(all[:strings.IndexByte(all, '\n')], "cursor").String()

	var rl requestLog
	node := rl.proxy(t, tm.URL)
	code, out, stderr := runCLI(t, "replay", "--node", node, "--limit", "1", "-o", "jsonl")
	if code != 0 || strings.Count(out, "\n") != 1 || gjson.Get(out, "cursor").String() != oldest {
		t.Fatalf("replay --limit 1: exit %d, want the oldest item %s, got %q: %s", code, oldest, out, stderr)
	}
	calls := rl.calls()
	for _, m := range calls[1:] { // the first is the probe of the head
		if m < 100 {
			t.Fatalf("replay --limit 1 asked for pages of %d items (requests: %v); want the node's page size", m, calls)
		}
	}
	if len(calls) > 3 {
		t.Fatalf("replay --limit 1 of %d items took %d requests: %v", strings.Count(all, "\n"), len(calls), calls)
	}

	// Newest first, the limit is all that is needed: one page of it.
	rl = requestLog{}
	node = rl.proxy(t, tm.URL)
	code, out, stderr = runCLI(t, "replay", "--node", node, "--reverse", "--limit", "2", "-o", "jsonl")
	if code != 0 || strings.Count(out, "\n") != 2 {
		t.Fatalf("replay --reverse --limit 2: exit %d, %q: %s", code, out, stderr)
	}
	if calls := rl.calls(); len(calls) != 2 || calls[1] != 2 {
		t.Fatalf("replay --reverse --limit 2: requests %v; want the probe and one page of 2", calls)
	}
}
