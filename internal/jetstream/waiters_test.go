package jetstream_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog/storetest"
	"github.com/evtctl/evtctl/internal/jetstream/natstest"
	evserver "github.com/evtctl/evtctl/internal/server"
)

// Readers waiting on a node cost it nothing on NATS: once the first waits (and the node
// has followed the stream with its consumer if it must), forty-nine more add no
// subscription and no request, and the one append that follows wakes them all.
func TestWaitingReadersShareOneSubscription(t *testing.T) {
	srv := natstest.Solo(t)
	s := open(t, srv.ClientURL(), "WAITERS", storetest.Config{}, 1)
	defer s.Close()
	head := appendOne(t, s, ev(0)).Cursor
	h := evserver.New(evserver.Config{Store: s, MaxWait: 30 * time.Second})
	hs := httptest.NewServer(h)
	defer hs.Close()
	defer h.Shutdown(context.Background())

	inMsgs := func() int64 {
		v, err := srv.Varz(nil)
		if err != nil {
			t.Fatal(err)
		}
		return v.InMsgs
	}
	const n = 50
	bodies := make(chan string, n)
	wait := func(k int64) {
		deadline := time.Now().Add(10 * time.Second)
		for h.Waiters() != k {
			if time.Now().After(deadline) {
				t.Fatalf("%d long-polls wait, want %d", h.Waiters(), k)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	poll := func() {
		go func() {
			resp, err := http.Get(hs.URL + "/events?waitTime=20s&after=" + head.String())
			if err != nil {
				bodies <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			bodies <- string(b)
		}()
	}
	poll()
	wait(1)
	subs := srv.NumSubscriptions()
	for deadline := time.Now().Add(10 * time.Second); ; {
		time.Sleep(100 * time.Millisecond) // the consumer starting
		if got := srv.NumSubscriptions(); got == subs {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("NATS subscriptions still change: %d, then %d", subs, got)
		} else {
			subs = got
		}
	}
	before := inMsgs()
	for range n - 1 {
		poll()
	}
	wait(n)
	if got := srv.NumSubscriptions(); got != subs {
		t.Fatalf("%d NATS subscriptions with %d waiting readers, %d before", got, n, subs)
	}
	// The node's own background look at the stream (once a second) aside, waiting sends nothing.
	if got := inMsgs() - before; got > 10 {
		t.Fatalf("%d messages reached NATS while %d readers waited", got, n)
	}
	added := appendOne(t, s, ev(1)).Cursor
	for range n {
		select {
		case b := <-bodies:
			if !strings.Contains(b, `"items":[{"cursor":"`+added.String()+`"`) {
				t.Fatalf("a woken long-poll answered %s", b)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("not every long-poll was woken by the append")
		}
	}
}
