package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/tmfake"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// tmMinWait is the fake Tendermint node's shortest long-poll (a real node's is 1s).
const tmMinWait = 20 * time.Millisecond

// fakeTendermint is the shared fake Tendermint node (internal/tmfake) as a testNode: its
// requests go through a recorder, and testEvents become Tendermint events.
type fakeTendermint struct {
	*tmfake.Node
	rec *recorder
}

func newFakeTendermint(t testing.TB, o nodeOpts) *fakeTendermint {
	t.Helper()
	rec := &recorder{}
	n := tmfake.Start(t, tmfake.Options{
		MaxItems: o.Retain, MinWait: tmMinWait, MaxWait: o.MaxWait,
		Wrap: func(h http.Handler) http.Handler { rec.setHandler(h); return rec },
	})
	return &fakeTendermint{Node: n, rec: rec}
}

func (f *fakeTendermint) Rec() *recorder           { return f.rec }
func (f *fakeTendermint) Oldest(testing.TB) string { return f.Node.Oldest() }

// Append publishes the events as one block.
func (f *fakeTendermint) Append(tb testing.TB, evs ...testEvent) []string {
	out := make([]tmfake.Event, len(evs))
	for i, e := range evs {
		pad := ""
		if e.Pad > 0 {
			pad = `,"pad":"` + strings.Repeat("x", e.Pad) + `"`
		}
		out[i] = tmfake.Event{Type: e.Type, Data: json.RawMessage(fmt.Sprintf(`{"type":"tendermint/event/%s","value":{"n":%d%s}}`, e.Type, e.N, pad))}
	}
	return f.Node.Append(out...)
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
	before := time.Now().Round(0) // the wall clock, as cursors are stamped
	cs := f.Append(t, events(150, "Tx")...)
	after := time.Now().Round(0)
	if cs[0][17:] != "0001" || len(cs[0]) != 21 {
		t.Fatalf("first cursor %s", cs[0])
	}
	if ts := cursor.MustParse(cs[0]).Time(); ts.Before(before) || ts.After(after) {
		t.Fatalf("cursor time %v is not the time of the append (%v to %v)", ts, before, after)
	}
	for _, tc := range []struct {
		max, want int
	}{{0, 10}, {-5, 10}, {7, 7}, {100, 100}, {500, 100}} {
		r, err := c.Events(ctx, Request{MaxItems: tc.max, Ascending: true})
		if err != nil || len(r.Items) != tc.want || !r.More {
			t.Fatalf("maxItems %d: %d items, more %v, %v", tc.max, len(r.Items), r.More, err)
		}
		// Newest first whatever the order asked, and no order in the reply.
		if r.Items[0].Cursor != cs[149] || r.Order != "" || r.Ascending() || bytes.Contains(r.Items[0].Raw, []byte("order")) {
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
	// A long-poll at the head waits its time, raised to the shortest the node takes, and ends
	// empty; the capture's shape. Only the lower bound is checked: the wait starts after the
	// call is sent and its timer cannot fire early, so no load makes it fail, and it is what
	// shows the nanosecond raised.
	start := time.Now()
	r, err = c.Events(ctx, Request{After: cs[149], Wait: time.Nanosecond})
	if el := time.Since(start); err != nil || len(r.Items) != 0 || el < tmMinWait {
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
	kept := f.Len()
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
