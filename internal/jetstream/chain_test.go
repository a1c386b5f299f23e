package jetstream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/eventlog/storetest"
	"github.com/evtctl/evtctl/internal/jetstream"
	"github.com/evtctl/evtctl/internal/jetstream/natstest"
	evserver "github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// checkOrder fails unless cursors grow strictly along items and every event is there once.
func checkOrder(t testing.TB, items []eventlog.Item, want int) {
	t.Helper()
	seen := map[string]bool{}
	for i, it := range items {
		if i > 0 && !items[i-1].Cursor.Before(it.Cursor) {
			t.Fatalf("cursor %v (item %d) does not come after %v", it.Cursor, i, items[i-1].Cursor)
		}
		k := string(it.JSON)
		if seen[k] {
			t.Fatalf("item %d is there twice: %s", i, it.JSON)
		}
		seen[k] = true
	}
	if len(items) != want {
		t.Fatalf("read %d items, want %d", len(items), want)
	}
}

// Two nodes storing events in one stream at the same time: each event is stored once, at
// the cursor its node acknowledged; cursors grow along the stream, are the same read from
// either node, and stay near the clock.
func TestTwoWriters(t *testing.T) {
	srv := natstest.Solo(t)
	a := open(t, srv.ClientURL(), "TWO", storetest.Config{}, 1)
	defer a.Close()
	b := open(t, srv.ClientURL(), "TWO", storetest.Config{}, 1)
	defer b.Close()
	const batches, per = 20, 50
	acked := make(map[string]cursor.Cursor)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for w, s := range []*jetstream.Store{a, b} {
		wg.Go(func() {
			for k := range batches {
				entries := make([]eventlog.Entry, per)
				for i := range entries {
					entries[i] = ev(100_000*(w+1) + k*per + i)
				}
				res, err := s.Append(ctx, entries)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for i, r := range res {
					if r.Duplicate {
						t.Errorf("event %s answered as a duplicate", entries[i].ID)
					}
					acked[string(entries[i].JSON)] = r.Cursor
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	itemsA, itemsB := storetest.ReadAll(t, a), storetest.ReadAll(t, b)
	checkOrder(t, itemsA, 2*batches*per)
	for i, it := range itemsA {
		if itemsB[i].Cursor != it.Cursor {
			t.Fatalf("item %d: cursor %v read from one node, %v from the other", i, it.Cursor, itemsB[i].Cursor)
		}
		if c := acked[string(it.JSON)]; c != it.Cursor {
			t.Fatalf("item %d read at %v, acknowledged at %v", i, it.Cursor, c)
		}
		if ts := time.Unix(0, it.Cursor.TS); ts.Before(start.Add(-time.Second)) || ts.After(time.Now().Add(time.Second)) {
			t.Fatalf("item %d: cursor time %v, not between %v and now", i, ts, start)
		}
	}
}

// An event sent again in a chain of new ones is answered with its first cursor, and the
// new ones after it are stored after the others, in order.
func TestChainWithARepeat(t *testing.T) {
	srv := natstest.Solo(t)
	s := open(t, srv.ClientURL(), "REPEAT", storetest.Config{}, 1)
	defer s.Close()
	first, err := s.Append(ctx, []eventlog.Entry{ev(1), ev(2), ev(3), ev(4), ev(5)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, []eventlog.Entry{ev(6), ev(3), ev(7), ev(8)})
	if err != nil {
		t.Fatal(err)
	}
	if !res[1].Duplicate || res[1].Cursor != first[2].Cursor || res[0].Duplicate || res[2].Duplicate || res[3].Duplicate {
		t.Fatalf("answers %+v; the repeat's first cursor is %v", res, first[2].Cursor)
	}
	items := storetest.ReadAll(t, s)
	checkOrder(t, items, 8)
	for i, n := range []int{1, 2, 3, 4, 5, 6, 7, 8} {
		if string(items[i].JSON) != string(ev(n).JSON) {
			t.Fatalf("item %d is %s, want event %d", i, items[i].JSON, n)
		}
	}
	if items[6].Cursor != res[2].Cursor || items[7].Cursor != res[3].Cursor {
		t.Fatalf("read %v %v, acknowledged %v %v", items[6].Cursor, items[7].Cursor, res[2].Cursor, res[3].Cursor)
	}
}

// A message chained by a node has a cursor time no later than its stored time, so that a
// message stored after it without a chain (whose cursor time is its stored time) sorts
// after it; and other writers' messages in between keep the order.
func TestChainTimesFollowTheServer(t *testing.T) {
	srv := natstest.Solo(t)
	s := open(t, srv.ClientURL(), "CLOCK", storetest.Config{}, 1)
	defer s.Close()
	_, js := connect(t, srv.ClientURL())
	for i := range 20 {
		appendOne(t, s, ev(i))
		if i%5 == 4 {
			publishRaw(t, js, "evtctl.clock", []byte(`{"other":`+strconv.Itoa(i)+`}`))
		}
	}
	str, err := js.Stream(ctx, "CLOCK")
	if err != nil {
		t.Fatal(err)
	}
	chainedMsgs := 0
	for seq := uint64(1); seq <= 24; seq++ {
		m, err := str.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		v := m.Header.Get("Evtctl-Time")
		if v == "" {
			continue
		}
		chainedMsgs++
		ts, err := strconv.ParseInt(v, 16, 64)
		if err != nil || ts > m.Time.UnixNano() {
			t.Fatalf("message %d: chained time %s (%v) after its stored time %v", seq, v, time.Unix(0, ts), m.Time)
		}
	}
	if chainedMsgs == 0 {
		t.Fatal("no message was chained")
	}
	checkOrder(t, storetest.ReadAll(t, s), 24)
}

// Batches queued one behind the other go out before the one before them is stored, and
// are stored in their order.
func TestEnqueueAfterInOrder(t *testing.T) {
	srv := natstest.Solo(t)
	s := open(t, srv.ClientURL(), "QUEUE", storetest.Config{}, 1)
	defer s.Close()
	var prev *eventlog.Pending
	var ps []*eventlog.Pending
	for k := range 10 {
		entries := make([]eventlog.Entry, 100)
		for i := range entries {
			entries[i] = ev(k*100 + i)
		}
		p, err := s.EnqueueAfter(ctx, entries, prev)
		if err != nil {
			t.Fatal(err)
		}
		ps, prev = append(ps, p), p
	}
	var acked []cursor.Cursor
	for _, p := range ps {
		res, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			acked = append(acked, r.Cursor)
		}
	}
	items := storetest.ReadAll(t, s)
	checkOrder(t, items, 1000)
	for i, it := range items {
		if string(it.JSON) != string(ev(i).JSON) || it.Cursor != acked[i] {
			t.Fatalf("item %d: %s at %v, want event %d at %v", i, it.JSON, it.Cursor, i, acked[i])
		}
	}
}

// A batch the stream refuses one event of (too large for it) stores nothing after that
// event, and a batch queued behind it is not stored after the gap: it fails with
// eventlog.ErrPredecessorNotStored, storing nothing.
func TestEnqueueAfterAFailure(t *testing.T) {
	srv := natstest.Solo(t)
	_, js := connect(t, srv.ClientURL())
	foreignStream(t, js, natsjs.StreamConfig{Name: "SMALL", Subjects: []string{"evtctl.small"}, AllowDirect: true,
		MaxMsgSize: 2048, Duplicates: time.Minute})
	s := openForeign(t, srv.ClientURL(), "SMALL")
	batch := func(from int) []eventlog.Entry {
		entries := make([]eventlog.Entry, 4)
		for i := range entries {
			entries[i] = ev(from + i)
		}
		return entries
	}
	p1, err := s.EnqueueAfter(ctx, batch(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	big := ev(5)
	big.JSON = []byte(`{"specversion":"1.0","id":"id-5","source":"/test","type":"t","data":"` + strings.Repeat("x", 3000) + `"}`)
	second := batch(4)
	second[1] = big
	p2, err := s.EnqueueAfter(ctx, second, p1)
	if err != nil {
		t.Fatal(err)
	}
	p3, err := s.EnqueueAfter(ctx, batch(8), p2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p1.Wait(ctx); err != nil {
		t.Fatalf("the first batch: %v", err)
	}
	if _, err := p2.Wait(ctx); err == nil || errors.Is(err, eventlog.ErrPredecessorNotStored) || !strings.Contains(err.Error(), "1 of 4 events were stored") {
		t.Fatalf("the batch with an event too large: %v", err)
	}
	if _, err := p3.Wait(ctx); !errors.Is(err, eventlog.ErrPredecessorNotStored) {
		t.Fatalf("the batch behind it: %v, want ErrPredecessorNotStored", err)
	}
	items := storetest.ReadAll(t, s)
	checkOrder(t, items, 5)
	for i, it := range items {
		if string(it.JSON) != string(ev(i).JSON) {
			t.Fatalf("item %d is %s", i, it.JSON)
		}
	}
}

// An event appended after a moment has a cursor time no earlier than that moment (as on
// the embedded store), so that a time position finds it: the chain takes the node's clock.
func TestChainTimeIsTheNodesClock(t *testing.T) {
	srv := natstest.Solo(t)
	s := open(t, srv.ClientURL(), "NOW", storetest.Config{}, 1)
	defer s.Close()
	appendOne(t, s, ev(0))
	for i := 1; i <= 50; i++ {
		before := time.Now()
		c := appendOne(t, s, ev(i)).Cursor
		if c.TS < before.UnixNano() {
			t.Fatalf("event %d appended after %v has cursor time %v", i, before, time.Unix(0, c.TS))
		}
	}
}

// A read on one node finds an event another node acknowledged just before, though neither
// node follows the stream with a consumer (nobody waits).
func TestReadSeesAnotherNodesAppend(t *testing.T) {
	srv := natstest.Solo(t)
	a := open(t, srv.ClientURL(), "FRESH", storetest.Config{}, 1)
	defer a.Close()
	b := open(t, srv.ClientURL(), "FRESH", storetest.Config{}, 1)
	defer b.Close()
	for i := range 20 {
		c := appendOne(t, a, ev(i)).Cursor
		p, err := b.Read(ctx, eventlog.Query{Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != 1 || p.Items[0].Cursor != c || p.Newest != c {
			t.Fatalf("after the append of event %d at %v, the other node reads %v (newest %v)", i, c, p.Items, p.Newest)
		}
		time.Sleep(60 * time.Millisecond) // reads look at the stream at most every 50 ms
	}
}

// Through the node's HTTP API: a batch with an event the stream refuses (too large for it)
// is answered 422, and the second of the client's ordered batches, sent before the first
// is answered, is refused (409, "Evtctl-Order: refused"); nothing of it is stored.
func TestOrderedBatchBehindAFailureOverHTTP(t *testing.T) {
	srv := natstest.Solo(t)
	_, js := connect(t, srv.ClientURL())
	foreignStream(t, js, natsjs.StreamConfig{Name: "ORDERED", Subjects: []string{"evtctl.ordered"}, AllowDirect: true,
		MaxMsgSize: 2048, Duplicates: time.Minute})
	s := openForeign(t, srv.ClientURL(), "ORDERED")
	h := evserver.New(evserver.Config{Store: s})
	hs := httptest.NewServer(h)
	defer hs.Close()
	defer h.Shutdown(context.Background())
	batch := func(from int, big bool) []byte {
		var b strings.Builder
		b.WriteByte('[')
		for i := from; i < from+4; i++ {
			if i > from {
				b.WriteByte(',')
			}
			data := `{"i":` + strconv.Itoa(i) + `}`
			if big && i == from+1 {
				data = `"` + strings.Repeat("x", 3000) + `"`
			}
			fmt.Fprintf(&b, `{"specversion":"1.0","id":"o-%d","source":"/order","type":"t","data":%s}`, i, data)
		}
		b.WriteByte(']')
		return []byte(b.String())
	}
	type reply struct {
		status int
		order  string
	}
	post := func(n int, body []byte) reply {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/events", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/cloudevents-batch+json")
		req.Header.Set("Evtctl-Order", "seq1 "+strconv.Itoa(n))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return reply{}
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return reply{resp.StatusCode, resp.Header.Get("Evtctl-Order")}
	}
	first := make(chan reply, 1)
	go func() { first <- post(1, batch(0, true)) }()
	second := post(2, batch(4, false))
	r1 := <-first
	if r1.status != http.StatusUnprocessableEntity {
		t.Fatalf("the batch with an event too large for the stream: %d %q, want 422", r1.status, r1.order)
	}
	if second.status != http.StatusConflict || second.order != "refused" {
		t.Fatalf("the batch behind it: %d %q, want 409 refused", second.status, second.order)
	}
	items := storetest.ReadAll(t, s)
	if len(items) != 1 || !strings.Contains(string(items[0].JSON), `"o-0"`) {
		t.Fatalf("stored %d events: %v", len(items), items)
	}
}

// After another writer stores a message, a node publishes its events without a chain (their
// cursor times the stored times) for a while, then chains again; cursors grow throughout.
func TestSharedModeAndBack(t *testing.T) {
	jetstream.SharedFor(t, 300*time.Millisecond)
	srv := natstest.Solo(t)
	s := open(t, srv.ClientURL(), "SHARED", storetest.Config{}, 1)
	defer s.Close()
	_, js := connect(t, srv.ClientURL())
	appendOne(t, s, ev(0))
	publishRaw(t, js, "evtctl.shared", []byte(`{"other":1}`))
	appendOne(t, s, ev(1)) // refused on the chain: the node finds the other writer
	appendOne(t, s, ev(2)) // in shared mode, unless this machine took 300 ms to get here
	time.Sleep(400 * time.Millisecond)
	appendOne(t, s, ev(3)) // nobody else wrote since: chained again
	str, err := js.Stream(ctx, "SHARED")
	if err != nil {
		t.Fatal(err)
	}
	chained := map[uint64]bool{}
	for seq := uint64(1); seq <= 5; seq++ {
		m, err := str.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		chained[seq] = m.Header.Get("Evtctl-Time") != ""
	}
	if !chained[1] || chained[2] || chained[3] || !chained[5] {
		t.Fatalf("chained messages by sequence %v; want 1 and 5 chained, 2 (the other writer's) and 3 not", chained)
	}
	checkOrder(t, storetest.ReadAll(t, s), 5)
}

// A chain's messages are answered sparsely (one answer for up to AckEvery): a repeat in the
// middle of a run — JetStream drops it without a word, and refuses the rest of the chain —
// is answered as a duplicate with its first cursor, and every other event as stored once, at
// the cursor it is read at, none of them taken for a repeat.
func TestSparseAnswersWithARepeat(t *testing.T) {
	srv := natstest.Solo(t)
	s := open(t, srv.ClientURL(), "SPARSE", storetest.Config{}, 1)
	defer s.Close()
	first, err := s.Append(ctx, []eventlog.Entry{ev(0), ev(1)})
	if err != nil {
		t.Fatal(err)
	}
	n := 2*jetstream.AckEvery + 50
	run := make([]eventlog.Entry, n)
	for i := range run {
		run[i] = ev(2 + i)
	}
	at := jetstream.AckEvery + 7 // in the second span, not its answered end
	run[at] = ev(1)
	res, err := s.Append(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Duplicate != (i == at) {
			t.Fatalf("event %d answered duplicate=%v", i, r.Duplicate)
		}
	}
	if res[at].Cursor != first[1].Cursor {
		t.Fatalf("the repeat answered %v, first stored at %v", res[at].Cursor, first[1].Cursor)
	}
	if n := jetstream.InFlight(s); n != 0 {
		t.Fatalf("the publisher holds room for %d messages after every answer came", n)
	}
	items := storetest.ReadAll(t, s)
	checkOrder(t, items, n+1)
	k := 2
	for i, r := range res {
		if i == at {
			continue
		}
		if items[k].Cursor != r.Cursor || string(items[k].JSON) != string(run[i].JSON) {
			t.Fatalf("item %d is %s at %v; event %d was acknowledged at %v", k, items[k].JSON, items[k].Cursor, i, r.Cursor)
		}
		k++
	}
}

// An event the stream refuses for what it is, in the middle of a sparsely answered run:
// the events before it are stored and said to be, nothing after it is, and the error names
// how many were.
func TestSparseAnswersAFailure(t *testing.T) {
	for _, at := range []int{jetstream.AckEvery + 30, jetstream.AckEvery - 1, 0} {
		t.Run(strconv.Itoa(at), func(t *testing.T) {
			srv := natstest.Solo(t)
			_, js := connect(t, srv.ClientURL())
			foreignStream(t, js, natsjs.StreamConfig{Name: "SMALL", Subjects: []string{"evtctl.small"}, AllowDirect: true,
				MaxMsgSize: 2048, Duplicates: time.Minute})
			s := openForeign(t, srv.ClientURL(), "SMALL")
			n := 2*jetstream.AckEvery + 10
			run := make([]eventlog.Entry, n)
			for i := range run {
				run[i] = ev(i)
			}
			run[at].JSON = []byte(`{"specversion":"1.0","id":"id-big","source":"/test","type":"t","data":"` + strings.Repeat("x", 3000) + `"}`)
			_, err := s.Append(ctx, run)
			if at == 0 {
				if err == nil || strings.Contains(err.Error(), "were stored") {
					t.Fatalf("append: %v, want the stream's refusal alone", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d of %d events were stored", at, n)) {
				t.Fatalf("append: %v, want %d of %d stored", err, at, n)
			}
			items := storetest.ReadAll(t, s)
			checkOrder(t, items, at)
			for i, it := range items {
				if string(it.JSON) != string(ev(i).JSON) {
					t.Fatalf("item %d is %s", i, it.JSON)
				}
			}
			if n := jetstream.InFlight(s); n != 0 {
				t.Fatalf("the publisher holds room for %d messages after every answer came", n)
			}
		})
	}
}

// A repeat of the stream's last message at the head of an append: JetStream drops it
// without a word, and the message after it, naming it as the one before, is stored right
// after the original — one place earlier than the chain expected. It is answered as
// stored, not as a repeat, and every cursor is the one it is read at.
func TestSparseAnswersARepeatOfTheLast(t *testing.T) {
	srv := natstest.Solo(t)
	s := open(t, srv.ClientURL(), "LASTREPEAT", storetest.Config{}, 1)
	defer s.Close()
	first, err := s.Append(ctx, []eventlog.Entry{ev(0), ev(1), ev(2)})
	if err != nil {
		t.Fatal(err)
	}
	n := jetstream.AckEvery + 20
	run := []eventlog.Entry{ev(2)}
	for i := 3; len(run) < n; i++ {
		run = append(run, ev(i))
	}
	res, err := s.Append(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Duplicate || res[0].Cursor != first[2].Cursor {
		t.Fatalf("the repeat answered %+v, first stored at %v", res[0], first[2].Cursor)
	}
	for i, r := range res[1:] {
		if r.Duplicate {
			t.Fatalf("event %d, new, answered as a repeat", i+1)
		}
	}
	items := storetest.ReadAll(t, s)
	checkOrder(t, items, n+2)
	for i, r := range res[1:] {
		if it := items[3+i]; it.Cursor != r.Cursor || string(it.JSON) != string(run[i+1].JSON) {
			t.Fatalf("item %d is %s at %v; event %d was acknowledged at %v", 3+i, it.JSON, it.Cursor, i+1, r.Cursor)
		}
	}
	if k := jetstream.InFlight(s); k != 0 {
		t.Fatalf("the publisher holds room for %d messages after every answer came", k)
	}
}
