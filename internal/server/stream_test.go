package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/pkg/wire"
)

// pageItems reads the whole log oldest first through the events method and returns each
// item as the page holds it, byte for byte.
func pageItems(t *testing.T, n *node, query string) [][]byte {
	t.Helper()
	var out [][]byte
	after := ""
	for {
		p := map[string]any{"maxItems": 7, "order": "asc", "after": after}
		if query != "" {
			p["filter"] = map[string]string{"query": query}
		}
		params, _ := json.Marshal(p)
		_, b := n.rpcRaw(`{"jsonrpc":"2.0","id":1,"method":"events","params":` + string(params) + `}`)
		var raw struct {
			Result struct {
				Items []json.RawMessage `json:"items"`
				More  bool              `json:"more"`
			} `json:"result"`
		}
		mustUnmarshal(t, b, &raw)
		for _, it := range raw.Result.Items {
			out = append(out, it)
			var x item
			mustUnmarshal(t, it, &x)
			after = x.Cursor
		}
		if !raw.Result.More {
			return out
		}
	}
}

// The stream holds the items a page holds, byte for byte, one a line (stored JSON with line
// breaks compacted), between headers with the log's bounds and a last line that ends it.
func TestStreamHoldsThePagesItems(t *testing.T) {
	n := newMemNode(t)
	var cursors []string
	for i := range 40 {
		cursors = append(cursors, n.ingest(ceJSON("/s", fmt.Sprint("e", i), "org.example.a.b.c.v1", i)).Cursor)
	}
	// Binary mode stores a JSON body as it came, line breaks and all.
	req := n.newRequest(http.MethodPost, "/events", "application/json", []byte("{\n  \"a\": [1,\r\n 2],\t\"b\": \"x y\"\n}\n"),
		"ce-specversion", "1.0", "ce-id", "bin", "ce-source", "/s", "ce-type", "org.example.bin.sent.v1")
	if resp, b := n.do(req); resp.StatusCode != http.StatusOK {
		t.Fatalf("binary ingest: %d %s", resp.StatusCode, b)
	}
	resp, body := n.get(wire.PathStream)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("stream: %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if resp.Header.Get(wire.HeaderOldest) != cursors[0] {
		t.Errorf("oldest %q, want %q", resp.Header.Get(wire.HeaderOldest), cursors[0])
	}
	lines := bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
	want := pageItems(t, n, "")
	if len(lines) != len(want)+1 {
		t.Fatalf("%d lines, want %d items and the end", len(lines), len(want))
	}
	for i, w := range want {
		var c bytes.Buffer
		json.Compact(&c, w)
		if bytes.Contains(w, []byte("\n")) {
			w = c.Bytes()
		}
		if !bytes.Equal(lines[i], w) {
			t.Errorf("line %d:\n %s\nwant\n %s", i, lines[i], w)
		}
	}
	newest := resp.Header.Get(wire.HeaderNewest)
	if end := string(lines[len(lines)-1]); end != `{"end":{"more":false,"newest":"`+newest+`"}}` {
		t.Errorf("last line %s", end)
	}

	// After a cursor and before another, filtered.
	q := url.Values{"after": {cursors[4]}, "before": {cursors[30]}, "query": {"data.n > 20"}}
	_, body = n.get(wire.PathStream + "?" + q.Encode())
	lines = bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
	if len(lines) != 10 {
		t.Fatalf("filtered: %d lines, want 9 items and the end:\n%s", len(lines), body)
	}
	for i, l := range lines[:9] {
		if !bytes.HasPrefix(l, []byte(`{"cursor":"`+cursors[21+i]+`"`)) {
			t.Errorf("filtered line %d: %s", i, l)
		}
	}

	// Refusals, as the events method words them.
	for _, q := range []string{"after=zz", "query=" + url.QueryEscape("data.n >"), "%zz"} {
		resp, b := n.get(wire.PathStream + "?" + q)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "error") && !strings.Contains(string(b), "code") {
			t.Errorf("%s: %d %s", q, resp.StatusCode, b)
		}
	}
	// The events method advertises the stream.
	resp, _ = n.get("/events?maxItems=1")
	if resp.Header.Get(wire.HeaderStream) != wire.PathStream {
		t.Errorf("GET /events: %s %q", wire.HeaderStream, resp.Header.Get(wire.HeaderStream))
	}
}

// A filter that spends the scan budget ends the stream with more:true and where to resume.
func TestStreamStopsOnBudget(t *testing.T) {
	n := newNode(t, server.Config{ScanBudget: 300 << 10}, eventlog.Options{})
	var events []string
	for i := range 3000 {
		events = append(events, ceJSON("/s", fmt.Sprint("e", i), "org.example.a.b.c.v1", i))
	}
	n.ingestBatch(events)
	_, body := n.get(wire.PathStream + "?query=" + url.QueryEscape("data.n = 2999"))
	lines := bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
	end := string(lines[len(lines)-1])
	if len(lines) != 1 || !strings.HasPrefix(end, `{"end":{"more":true,"resume":"`) {
		t.Fatalf("a stream past its budget: %s", body)
	}
}

// A read token guards the stream as it guards the events method.
func TestStreamNeedsReadToken(t *testing.T) {
	n := newNode(t, server.Config{ReadToken: "r"}, eventlog.Options{})
	if resp, _ := n.get(wire.PathStream); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d", resp.StatusCode)
	}
	if resp, b := n.get(wire.PathStream, "Authorization", "Bearer r"); resp.StatusCode != http.StatusOK || !bytes.HasPrefix(b, []byte(`{"end":{"more":false`)) {
		t.Errorf("with the token: %d %s", resp.StatusCode, b)
	}
}
