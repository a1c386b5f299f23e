package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/wire"
)

type orderNode struct {
	t   *testing.T
	s   *Server
	log *eventlog.Log
	url string
}

// plainStore hides the log's Enqueue, as a store without one (JetStream) is: a batch is
// placed once the one before it is stored.
type plainStore struct{ eventlog.Store }

func newOrderNode(t *testing.T, plain ...bool) *orderNode {
	t.Helper()
	l, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var store eventlog.Store = l
	if len(plain) > 0 && plain[0] {
		store = plainStore{l}
	}
	s := New(Config{Store: store})
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return &orderNode{t: t, s: s, log: l, url: ts.URL}
}

// batchBody is a batch of n events with ids prefix-1 ... prefix-n; bad (from 1) makes that
// event invalid (no type).
func batchBody(prefix string, n, bad int) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		typ := `,"type":"org.example.order.test.v1"`
		if i == bad {
			typ = ""
		}
		fmt.Fprintf(&b, `{"specversion":"1.0","id":"%s-%d","source":"/order"%s,"data":{"i":%d}}`, prefix, i, typ, i)
	}
	b.WriteByte(']')
	return b.Bytes()
}

type orderReply struct {
	status int
	order  string
	body   string
}

func (n *orderNode) post(order string, body []byte) orderReply {
	n.t.Helper()
	req, err := http.NewRequest(http.MethodPost, n.url+"/events", bytes.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/cloudevents-batch+json")
	if order != "" {
		req.Header.Set(wire.HeaderOrder, order)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return orderReply{resp.StatusCode, resp.Header.Get(wire.HeaderOrder), string(b)}
}

// ids is the ids of the events in the log, oldest first.
func (n *orderNode) ids() []string {
	n.t.Helper()
	p, err := n.log.Read(context.Background(), eventlog.Query{Max: 1000, Ascending: true})
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, it := range p.Items {
		var e struct{ ID string }
		if err := json.Unmarshal(it.JSON, &e); err != nil {
			n.t.Fatal(err)
		}
		out = append(out, e.ID)
	}
	return out
}

// A batch that arrives before the one before it in its sequence waits for it: they are
// stored in the sequence's order, each answered "ok".
func TestOrderedBatchesKeepTheirOrder(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(map[bool]string{false: "enqueue", true: "append"}[plain], func(t *testing.T) { testOrderedBatches(t, plain) })
	}
}

func testOrderedBatches(t *testing.T, plain bool) {
	n := newOrderNode(t, plain)
	if r := n.post("seq1 1", batchBody("a", 3, 0)); r.status != 200 || r.order != "ok" {
		t.Fatalf("batch 1: %d %q %s", r.status, r.order, r.body)
	}
	third := make(chan orderReply, 1)
	go func() { third <- n.post("seq1 3", batchBody("c", 3, 0)) }()
	testwait.Until(t, "batch 3 waiting for batch 2", func() bool { return n.s.orders.waiting.Load() == 1 })
	if r := n.post("seq1 2", batchBody("b", 3, 0)); r.status != 200 || r.order != "ok" {
		t.Fatalf("batch 2: %d %q %s", r.status, r.order, r.body)
	}
	if r := <-third; r.status != 200 || r.order != "ok" {
		t.Fatalf("batch 3: %d %q %s", r.status, r.order, r.body)
	}
	if got, want := strings.Join(n.ids(), " "), "a-1 a-2 a-3 b-1 b-2 b-3 c-1 c-2 c-3"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
	// A retry of batch 1 (its reply was lost, say) is answered from the dedupe window.
	if r := n.post("seq1 1", batchBody("a", 3, 0)); r.status != 200 || !strings.Contains(r.body, `"duplicate":true`) {
		t.Fatalf("retry of batch 1: %d %s", r.status, r.body)
	}
	// Without the header, and on a second sequence, batches are as before.
	if r := n.post("", batchBody("c", 1, 0)); r.status != 200 || r.order != "" {
		t.Fatalf("without the header: %d %q", r.status, r.order)
	}
	if r := n.post("seq2 1", batchBody("d", 1, 0)); r.status != 200 || r.order != "ok" {
		t.Fatalf("second sequence: %d %q", r.status, r.order)
	}
}

// A batch refused for one of its events stores nothing, and nothing after it in its
// sequence is stored either: the batch waiting behind it is refused with 409.
func TestOrderedBatchAfterARefusedOneIsRefused(t *testing.T) {
	n := newOrderNode(t)
	if r := n.post("s 1", batchBody("a", 2, 0)); r.status != 200 {
		t.Fatalf("batch 1: %d %s", r.status, r.body)
	}
	third := make(chan orderReply, 1)
	go func() { third <- n.post("s 3", batchBody("c", 2, 0)) }()
	testwait.Until(t, "batch 3 waiting", func() bool { return n.s.orders.waiting.Load() == 1 })
	if r := n.post("s 2", batchBody("b", 2, 2)); r.status != 400 {
		t.Fatalf("a batch with an invalid event: %d %s", r.status, r.body)
	}
	r := <-third
	if r.status != http.StatusConflict || r.order != "refused" || !strings.Contains(r.body, "batch 2 of this sequence was not stored") {
		t.Fatalf("batch 3 after a refused batch 2: %d %q %s", r.status, r.order, r.body)
	}
	if r := n.post("s 4", batchBody("d", 1, 0)); r.status != http.StatusConflict {
		t.Fatalf("batch 4: %d %s", r.status, r.body)
	}
	if got, want := strings.Join(n.ids(), " "), "a-1 a-2"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
}

// A batch whose predecessor does not come is refused after the wait, and so is every later
// one, though the predecessor then arrives.
func TestOrderedBatchGivesUpWaiting(t *testing.T) {
	n := newOrderNode(t)
	n.s.orders.wait = 50 * time.Millisecond // the refusal, not its timing, is checked
	if r := n.post("w 1", batchBody("a", 1, 0)); r.status != 200 {
		t.Fatalf("batch 1: %d", r.status)
	}
	if r := n.post("w 3", batchBody("c", 1, 0)); r.status != http.StatusConflict || !strings.Contains(r.body, "batch 2 of this sequence did not arrive within 50ms") {
		t.Fatalf("batch 3 without batch 2: %d %s", r.status, r.body)
	}
	if r := n.post("w 2", batchBody("b", 1, 0)); r.status != 200 {
		t.Fatalf("batch 2, late: %d %s", r.status, r.body)
	}
	if r := n.post("w 4", batchBody("d", 1, 0)); r.status != http.StatusConflict {
		t.Fatalf("batch 4 after the given-up batch 3: %d %s", r.status, r.body)
	}
	if got, want := strings.Join(n.ids(), " "), "a-1 b-1"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
}

// At most maxAhead batches of one sequence wait at once; the next is refused, and so, then,
// is every later one.
func TestOrderedBatchesWaitingAreBounded(t *testing.T) {
	n := newOrderNode(t)
	if r := n.post("m 1", batchBody("a", 1, 0)); r.status != 200 {
		t.Fatalf("batch 1: %d", r.status)
	}
	replies := make(chan orderReply, maxAhead)
	for i := range maxAhead {
		go func() { replies <- n.post(fmt.Sprintf("m %d", 3+i), batchBody(fmt.Sprint("w", i), 1, 0)) }()
	}
	testwait.Until(t, "batches 3 to 10 waiting", func() bool { return n.s.orders.waiting.Load() == maxAhead })
	if r := n.post(fmt.Sprintf("m %d", 3+maxAhead), batchBody("x", 1, 0)); r.status != http.StatusConflict || !strings.Contains(r.body, "are waiting") {
		t.Fatalf("one more: %d %s", r.status, r.body)
	}
	if r := n.post("m 2", batchBody("b", 1, 0)); r.status != 200 {
		t.Fatalf("batch 2: %d %s", r.status, r.body)
	}
	stored := 0
	for range maxAhead {
		if r := <-replies; r.status == 200 {
			stored++
		}
	}
	// Batches 3 to 10 were waiting before 11 was refused: they are stored.
	if stored != maxAhead {
		t.Fatalf("%d of the waiting batches stored, want %d", stored, maxAhead)
	}
	if got := len(n.ids()); got != 2+maxAhead {
		t.Fatalf("%d events stored, want %d", got, 2+maxAhead)
	}
}

// A sequence the node does not know must start at 1; a malformed header is a bad request.
func TestOrderHeaderRefusals(t *testing.T) {
	n := newOrderNode(t)
	if r := n.post("fresh 2", batchBody("a", 1, 0)); r.status != http.StatusConflict || r.order != "refused" || !strings.Contains(r.body, "does not know") {
		t.Fatalf("batch 2 of an unknown sequence: %d %q %s", r.status, r.order, r.body)
	}
	for _, h := range []string{"x", "x 0", "x -1", "x 1 2", "bad/token 1", strings.Repeat("t", 65) + " 1", " 1"} {
		if r := n.post(h, batchBody("a", 1, 0)); r.status != http.StatusBadRequest || !strings.Contains(r.body, wire.HeaderOrder) {
			t.Errorf("header %q: %d %s", h, r.status, r.body)
		}
	}
	if got := n.ids(); len(got) != 0 {
		t.Fatalf("stored %v", got)
	}
}

func FuzzParseOrderHeader(f *testing.F) {
	for _, s := range []string{"a 1", "abc-_9 18446744073709551615", "x 0", "", " 1", "a  1", "a 1 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set(wire.HeaderOrder, v)
		token, n, ok, err := parseOrderHeader(r)
		if err != nil {
			return
		}
		if r.Header.Get(wire.HeaderOrder) == "" {
			if ok {
				t.Fatal("ok without a header")
			}
			return
		}
		if !ok || n == 0 || !validToken(token) || r.Header.Get(wire.HeaderOrder) != fmt.Sprintf("%s %d", token, n) && !strings.HasPrefix(r.Header.Get(wire.HeaderOrder), token+" ") {
			t.Fatalf("%q: token %q n %d ok %v", v, token, n, ok)
		}
	})
}
