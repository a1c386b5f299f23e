package tui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/pkg/client"
)

// Tests against a real node (internal/server over an in-memory internal/eventlog), through the
// client: the Source the command uses.

type testNode struct {
	t     *testing.T
	url   string
	calls atomic.Int64 // JSON-RPC calls
}

// startNode starts a node; withoutAscending makes it answer as a Tendermint node would,
// newest first only, by dropping evtctl's order parameter from each request.
func startNode(t *testing.T, withoutAscending bool) *testNode {
	t.Helper()
	store, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Store: store, MaxItems: 1000})
	n := &testNode{t: t}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/" {
			n.calls.Add(1)
			if withoutAscending {
				var call map[string]any
				body, _ := io.ReadAll(r.Body)
				if json.Unmarshal(body, &call) == nil {
					if p, ok := call["params"].(map[string]any); ok {
						delete(p, "order")
					}
					body, _ = json.Marshal(call)
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
			}
		}
		srv.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		ts.Close()
		store.Close()
	})
	n.url = ts.URL
	return n
}

// ingest appends n CloudEvents numbered from first.
func (n *testNode) ingest(first, count int, typ string) {
	n.t.Helper()
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range count {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"specversion":"1.0","id":"node-%d","source":"/test","type":%q,"data":{"n":%d}}`, first+i, typ, first+i)
	}
	b.WriteByte(']')
	resp, err := http.Post(n.url+"/events", "application/cloudevents-batch+json", &b)
	if err != nil {
		n.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		n.t.Fatalf("ingest: status %d", resp.StatusCode)
	}
}

func (n *testNode) source() *ClientSource {
	n.t.Helper()
	c, err := client.New(client.Options{Node: n.url})
	if err != nil {
		n.t.Fatal(err)
	}
	return NewClientSource(c, ClientOptions{Wait: 200 * time.Millisecond, Backoff: clientBackoff(10 * time.Millisecond)})
}

// numbers lists the events' data.n.
func numbers(items []client.Item) string {
	var s []string
	for _, it := range items {
		var ce struct {
			Data struct{ N int } `json:"data"`
		}
		json.Unmarshal(it.Data, &ce)
		s = append(s, fmt.Sprint(ce.Data.N))
	}
	return strings.Join(s, " ")
}

func TestClientSourcePages(t *testing.T) {
	for _, tendermint := range []bool{false, true} {
		t.Run(map[bool]string{false: "evtctl", true: "newest-first"}[tendermint], func(t *testing.T) {
			n := startNode(t, tendermint)
			n.ingest(1, 25, "org.example.a.v1")
			src := n.source()
			ctx := context.Background()
			page := func(r PageRequest) Page {
				t.Helper()
				p, err := src.Page(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			head := page(PageRequest{Limit: 10, Backward: true})
			if got := numbers(head.Items); got != "16 17 18 19 20 21 22 23 24 25" || !head.More || head.Newest != head.Items[9].Cursor {
				t.Fatalf("head page %s more %v", got, head.More)
			}
			c := func(i int) string { return page(PageRequest{Limit: 25, Backward: true}).Items[i-1].Cursor }
			first := c(1)
			before := n.calls.Load()
			if p := page(PageRequest{After: first, Limit: 3}); numbers(p.Items) != "2 3 4" || !p.More {
				t.Errorf("forward page %s", numbers(p.Items))
			}
			// Without ascending order the page is found by walking back from the head.
			if calls := n.calls.Load() - before; (calls > 1) != tendermint {
				t.Errorf("%d requests for a forward page", calls)
			}
			for _, tc := range []struct {
				r    PageRequest
				want string
				more bool
			}{
				{PageRequest{After: c(5), Limit: 4}, "6 7 8 9", true},
				{PageRequest{After: c(20), Limit: 10}, "21 22 23 24 25", false},
				{PageRequest{Before: c(4), Limit: 10, Backward: true}, "1 2 3", false},
				{PageRequest{Before: c(14), After: c(8), Limit: 3, Backward: true}, "11 12 13", true},
				{PageRequest{After: c(2), Before: c(9), Limit: 10}, "3 4 5 6 7 8", false},
				// A range's end is inclusive, on a node comparing by time alone too.
				{PageRequest{After: c(2), Through: c(9), Limit: 10}, "3 4 5 6 7 8 9", false},
				{PageRequest{After: c(2), Through: c(9), Limit: 3}, "3 4 5", true},
				{PageRequest{Through: c(9), Limit: 3, Backward: true}, "7 8 9", true},
				{PageRequest{Through: c(25), Limit: 2, Backward: true}, "24 25", true},
				{PageRequest{Query: "data.n > 20", Limit: 2}, "21 22", true},
			} {
				if p := page(tc.r); numbers(p.Items) != tc.want || p.More != tc.more {
					t.Errorf("%+v: got %s more %v, want %s more %v", tc.r, numbers(p.Items), p.More, tc.want, tc.more)
				}
			}
			if _, err := src.Page(ctx, PageRequest{Query: "data.n >", Limit: 1}); err == nil || client.Retryable(err) {
				t.Errorf("a bad query: %v", err)
			}
			// evtctl's extensions of the query language: taken by an evtctl node, refused
			// before sending to a node without them.
			p, err := src.Page(ctx, PageRequest{Query: "data.n < 3 OR data.n = 24", Limit: 5, Backward: true})
			var qe *client.QueryError
			switch {
			case tendermint && !errors.As(err, &qe):
				t.Errorf("an OR query to a newest-first node: %v, want a QueryError", err)
			case !tendermint && (err != nil || numbers(p.Items) != "1 2 24"):
				t.Errorf("an OR query: %s %v", numbers(p.Items), err)
			}
		})
	}
}

func TestClientSourceFollow(t *testing.T) {
	n := startNode(t, false)
	n.ingest(1, 3, "org.example.a.v1")
	src := n.source()
	head, err := src.Page(context.Background(), PageRequest{Limit: 1, Backward: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		done <- src.Follow(ctx, FollowRequest{Query: "type = 'org.example.b.v1'", After: head.Newest}, func(b client.Batch) error {
			if len(b.Items) > 0 {
				got <- numbers(b.Items)
			}
			return nil
		})
	}()
	n.ingest(4, 2, "org.example.a.v1")
	n.ingest(6, 2, "org.example.b.v1")
	select {
	case s := <-got:
		if s != "6 7" {
			t.Errorf("followed %s, want 6 7", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing followed")
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("Follow returned no error when its context ended")
	}
}

// TestUIAgainstNode runs the UI over a real node: it follows appends, pages back through
// history the window had let go, and applies a filter on the node.
func TestUIAgainstNode(t *testing.T) {
	n := startNode(t, false)
	n.ingest(1, 200, "org.example.a.v1")
	cfg := testConfig(n.source(), newClock())
	// A head page of 30 more than fills the list's 14 lines: no older page is fetched yet.
	cfg.Keep, cfg.PageSize = 60, 30
	u := startUI(t, cfg)
	u.waitFor("the head page", following(30))
	n.ingest(201, 5, "org.example.b.v1")
	u.waitFor("the new events", func(m *Model) bool {
		return m.list.loaded() == 35 && m.list.follow && strings.Contains(m.screen(), "org.example.b.v1")
	})

	u.pressUntil("pgup", "the oldest event", func(m *Model) bool {
		return m.list.win.olderDone && m.list.sel == 0 && len(m.list.win.rows) > 0 && m.list.win.rows[0].ev.id == "node-1"
	})
	if !u.is(func(m *Model) bool { return len(m.list.win.rows) <= 60 && !m.list.win.newerDone }) {
		t.Error("the window is not bounded")
	}
	n.ingest(206, 3, "org.example.b.v1") // arrives while the window is far from the head
	u.keys("end")
	u.waitFor("the head again", func(m *Model) bool {
		return m.list.follow && m.list.win.newerDone && m.list.sel >= 0 && m.list.win.rows[m.list.sel].ev.id == "node-208"
	})

	u.keys("/")
	u.typeText("type = 'org.example.b.v1'")
	u.keys("enter")
	u.waitFor("the filtered list", func(m *Model) bool { return m.list.query != "" && m.list.loaded() == 8 && m.list.win.olderDone })
	n.ingest(209, 1, "org.example.a.v1")
	n.ingest(210, 1, "org.example.b.v1")
	u.waitFor("the next match", func(m *Model) bool {
		return m.list.loaded() == 9 && m.list.win.rows[len(m.list.win.rows)-1].ev.id == "node-210"
	})
}
