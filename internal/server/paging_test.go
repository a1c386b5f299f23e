package server_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/pkg/cursor"
)

const pagingEvents = 250

// pagingTypes gives event i its type: MATCHES 'x.*' takes only "x.a" (one word after x).
func pagingType(i int) string {
	switch i % 3 {
	case 0:
		return "x.a"
	case 1:
		return "x.b.c"
	}
	return "y.a"
}

// pagingLog is a node holding pagingEvents events, ingested in batches of 50, with the
// cursor of event i at cursors[i].
func pagingLog(t *testing.T) (*node, []string) {
	n := newMemNode(t)
	var cursors []string
	for from := 0; from < pagingEvents; from += 50 {
		var evs []string
		for i := from; i < from+50; i++ {
			evs = append(evs, ceJSON("/paging", "ev-"+strconv.Itoa(i), pagingType(i), i))
		}
		cursors = append(cursors, n.ingestBatch(evs)...)
	}
	for i := 1; i < len(cursors); i++ {
		if cursors[i] <= cursors[i-1] {
			t.Fatalf("cursor %d %s is not after %s", i, cursors[i], cursors[i-1])
		}
	}
	return n, cursors
}

// itemIndex returns n of the event's data, checking that item and event agree.
func itemIndex(t *testing.T, it item, cursors []string) int {
	t.Helper()
	e := decodeCE(t, it)
	var d struct{ N int }
	mustUnmarshal(t, e.Data, &d)
	if d.N < 0 || d.N >= len(cursors) || cursors[d.N] != it.Cursor || e.ID != "ev-"+strconv.Itoa(d.N) ||
		it.Event != pagingType(d.N) || e.Type != it.Event {
		t.Fatalf("item %+v does not match event %d (cursor %s)", it, d.N, cursors[d.N])
	}
	return d.N
}

type pager func(filter, after, before string, max int, asc bool) *result

func rpcPager(n *node, positional bool) pager {
	return func(filter, after, before string, max int, asc bool) *result {
		if positional {
			if asc {
				n.t.Fatalf("positional params have no order")
			}
			f, _ := json.Marshal(map[string]string{"query": filter})
			return n.events(fmt.Sprintf(`[%s,%d,%q,%q,0]`, f, max, after, before))
		}
		p := map[string]any{"filter": map[string]string{"query": filter}, "maxItems": max, "after": after, "before": before}
		if asc {
			p["order"] = "asc"
		}
		b, _ := json.Marshal(p)
		return n.events(string(b))
	}
}

// getPager uses GET /events, quoting cursors on every other page as a Tendermint client does.
func getPager(n *node) pager {
	page := 0
	return func(filter, after, before string, max int, asc bool) *result {
		page++
		q := func(c string) string {
			if page%2 == 0 {
				return url.QueryEscape(`"` + c + `"`)
			}
			return c
		}
		s := "maxItems=" + strconv.Itoa(max) + "&after=" + q(after) + "&before=" + q(before)
		if filter != "" {
			s += "&query=" + url.QueryEscape(filter)
		}
		if asc {
			s += "&order=asc"
		}
		return n.getEvents(s)
	}
}

// walk pages through the log, newest first with `before` or oldest first with `after`, and
// returns the event indexes in the order served.
func walk(t *testing.T, get pager, filter string, max int, asc bool, cursors []string) []int {
	t.Helper()
	var got []int
	after, before := "", ""
	for pages := 0; ; pages++ {
		if pages > 2*pagingEvents {
			t.Fatalf("the walk does not end")
		}
		r := get(filter, after, before, max, asc)
		if r.Oldest != cursors[0] || r.Newest != cursors[len(cursors)-1] {
			t.Fatalf("page %d: oldest %s newest %s, want the whole log's %s %s", pages, r.Oldest, r.Newest, cursors[0], cursors[len(cursors)-1])
		}
		if (r.Order == "asc") != asc {
			t.Fatalf("page %d: order %q (ascending %v)", pages, r.Order, asc)
		}
		if len(r.Items) == 0 || len(r.Items) > max {
			t.Fatalf("page %d: %d items, more %v (page size %d)", pages, len(r.Items), r.More, max)
		}
		if r.More && len(r.Items) != max {
			t.Fatalf("page %d: a short page (%d of %d) with more", pages, len(r.Items), max)
		}
		for _, it := range r.Items {
			got = append(got, itemIndex(t, it, cursors))
		}
		if !r.More {
			return got
		}
		last := r.Items[len(r.Items)-1].Cursor
		if asc {
			after = last
		} else {
			before = last
		}
	}
}

func TestPaging(t *testing.T) {
	n, cursors := pagingLog(t)
	filters := []struct {
		query string
		match func(i int) bool
	}{
		{"", func(int) bool { return true }},
		{"type MATCHES 'x.*'", func(i int) bool { return i%3 == 0 }},
		{"tm.event = 'y.a'", func(i int) bool { return i%3 == 2 }},
		{"data.n > 100", func(i int) bool { return i > 100 }},
		{"data.n > 100 AND type MATCHES 'x.#'", func(i int) bool { return i > 100 && i%3 != 2 }},
		{"data.n >= 240 OR data.n < 3", func(i int) bool { return i >= 240 || i < 3 }},
	}
	for _, f := range filters {
		var wantAsc []int
		for i := range pagingEvents {
			if f.match(i) {
				wantAsc = append(wantAsc, i)
			}
		}
		wantDesc := slices.Clone(wantAsc)
		slices.Reverse(wantDesc)
		if len(wantAsc) == 0 {
			t.Fatalf("filter %q matches nothing", f.query)
		}
		for _, tc := range []struct {
			name string
			get  pager
			max  int
			asc  bool
		}{
			{"post-desc", rpcPager(n, false), 17, false},
			{"post-desc-positional", rpcPager(n, true), 100, false},
			{"get-desc", getPager(n), 23, false},
			{"post-asc", rpcPager(n, false), 19, true},
			{"get-asc", getPager(n), 50, true},
		} {
			want := wantDesc
			if tc.asc {
				want = wantAsc
			}
			got := walk(t, tc.get, f.query, tc.max, tc.asc, cursors)
			if !slices.Equal(got, want) {
				t.Fatalf("%s %q: walked %d events %v..., want %d %v...", tc.name, f.query, len(got), head(got), len(want), head(want))
			}
		}
	}
}

func head(s []int) []int { return s[:min(len(s), 8)] }

// TestPageBounds checks `more`, windows between after and before, and the caps on maxItems.
func TestPageBounds(t *testing.T) {
	n := newNode(t, server.Config{DefaultItems: 4, MaxItems: 30}, eventlog.Options{})
	var evs []string
	for i := range 40 {
		evs = append(evs, ceJSON("/b", strconv.Itoa(i), "b.t", i))
	}
	cs := n.ingestBatch(evs)
	idx := func(r *result) []int {
		var out []int
		for _, it := range r.Items {
			out = append(out, slices.Index(cs, it.Cursor))
		}
		return out
	}

	// Defaults and caps.
	if r := n.events(`{}`); !slices.Equal(idx(r), []int{39, 38, 37, 36}) || !r.More {
		t.Fatalf("default page: %v more %v", idx(r), r.More)
	}
	if r := n.events(`null`); len(r.Items) != 4 {
		t.Fatalf("null params: %d items", len(r.Items))
	}
	if r := n.events(`{"maxItems":1000}`); len(r.Items) != 30 || !r.More {
		t.Fatalf("maxItems over the cap: %d items more %v", len(r.Items), r.More)
	}
	if r := n.events(`{"maxItems":-5}`); len(r.Items) != 4 {
		t.Fatalf("negative maxItems: %d items", len(r.Items))
	}
	if r := n.events(`{"max_results":"6"}`); len(r.Items) != 6 {
		t.Fatalf("max_results as a string: %d items", len(r.Items))
	}
	if r := n.events(`{"max_items":40, "maxItems": 3}`); len(r.Items) != 3 {
		t.Fatalf("maxItems beside max_items: %d items", len(r.Items))
	}

	// A window between after and before, both orders.
	p := fmt.Sprintf(`{"after":%q,"before":%q,"maxItems":30`, cs[10], cs[15])
	if r := n.events(p + `}`); !slices.Equal(idx(r), []int{14, 13, 12, 11}) || r.More {
		t.Fatalf("window desc: %v more %v", idx(r), r.More)
	}
	if r := n.events(p + `,"order":"asc"}`); !slices.Equal(idx(r), []int{11, 12, 13, 14}) || r.More || r.Order != "asc" {
		t.Fatalf("window asc: %v more %v order %q", idx(r), r.More, r.Order)
	}
	p = fmt.Sprintf(`{"after":%q,"before":%q,"maxItems":2`, cs[10], cs[15])
	if r := n.events(p + `}`); !slices.Equal(idx(r), []int{14, 13}) || !r.More {
		t.Fatalf("window desc, short page: %v more %v", idx(r), r.More)
	}
	if r := n.events(p + `,"order":"ASC"}`); !slices.Equal(idx(r), []int{11, 12}) || !r.More {
		t.Fatalf("window asc, short page: %v more %v", idx(r), r.More)
	}
	// Ascending from the start of the log gives the oldest first.
	if r := n.events(`{"order":"asc","maxItems":3}`); !slices.Equal(idx(r), []int{0, 1, 2}) || !r.More {
		t.Fatalf("asc from the start: %v more %v", idx(r), r.More)
	}
	// order "desc" is the default, and its reply carries no order.
	_, raw := n.rpcRaw(`{"jsonrpc":"2.0","id":1,"method":"events","params":{"order":"desc","maxItems":2}}`)
	if strings.Contains(string(raw), `"order"`) {
		t.Fatalf("a newest-first reply carries an order: %s", raw)
	}
	// A cursor of a Tendermint node (4 sequence digits) orders by time against ours.
	mid := cursor.MustParse(cs[20])
	tm := cursor.New(mid.TS, mid.Seq, cursor.TendermintWidth).String()
	if len(tm) != 21 {
		t.Fatalf("Tendermint-width cursor %q", tm)
	}
	if r := n.events(fmt.Sprintf(`{"after":%q,"order":"asc","maxItems":1}`, tm)); !slices.Equal(idx(r), []int{21}) {
		t.Fatalf("after a Tendermint-width cursor of item 20: %v", idx(r))
	}
	if r := n.events(fmt.Sprintf(`{"before":%q,"maxItems":1}`, tm)); !slices.Equal(idx(r), []int{19}) {
		t.Fatalf("before a Tendermint-width cursor of item 20: %v", idx(r))
	}
	// before the oldest, or after the newest with before set: empty, at once, not more.
	if r := n.events(fmt.Sprintf(`{"before":%q}`, cs[0])); len(r.Items) != 0 || r.More || r.Oldest != cs[0] {
		t.Fatalf("before the oldest: %+v", r)
	}
	// An empty log has empty bounds.
	e := newMemNode(t)
	if r := e.events(fmt.Sprintf(`{"before":%q}`, cs[0])); len(r.Items) != 0 || r.More || r.Oldest != "" || r.Newest != "" {
		t.Fatalf("empty log: %+v", r)
	}
}

// TestRPCBatch sends several calls in one JSON-RPC batch.
func TestRPCBatch(t *testing.T) {
	n := newMemNode(t)
	cs := n.ingestBatch([]string{ceJSON("/rb", "1", "rb.a", 1), ceJSON("/rb", "2", "rb.b", 2)})
	resp, b := n.post("/", "application/json", ` [
		{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxItems":1}},
		{"jsonrpc":"2.0","id":"two","method":"events","params":{"filter":{"query":"tm.event = 'rb.a'"}}},
		{"jsonrpc":"2.0","id":3,"method":"status"},
		{"jsonrpc":"2.0","id":4,"method":"events","params":{"after":"zzz"}},
		5
	]`)
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP %d %s", resp.StatusCode, b)
	}
	var rs []rpcReply
	mustUnmarshal(t, b, &rs)
	if len(rs) != 5 {
		t.Fatalf("%d replies: %s", len(rs), b)
	}
	if string(rs[0].ID) != "1" || rs[0].Result == nil || len(rs[0].Result.Items) != 1 || rs[0].Result.Items[0].Cursor != cs[1] {
		t.Fatalf("reply 1: %s", b)
	}
	if string(rs[1].ID) != `"two"` || rs[1].Result == nil || len(rs[1].Result.Items) != 1 || rs[1].Result.Items[0].Cursor != cs[0] {
		t.Fatalf("reply 2: %s", b)
	}
	if string(rs[2].ID) != "3" || rs[2].Error == nil || rs[2].Error.Code != -32601 {
		t.Fatalf("reply 3: %s", b)
	}
	if string(rs[3].ID) != "4" || rs[3].Error == nil || rs[3].Error.Code != -32603 {
		t.Fatalf("reply 4: %s", b)
	}
	if string(rs[4].ID) != "null" || rs[4].Error == nil || rs[4].Error.Code != -32600 {
		t.Fatalf("reply 5: %s", b)
	}
}
