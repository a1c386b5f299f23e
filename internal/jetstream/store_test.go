package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/eventlog/storetest"
	"github.com/evtctl/evtctl/internal/jetstream"
	"github.com/evtctl/evtctl/internal/jetstream/natstest"
	"github.com/evtctl/evtctl/pkg/cursor"
)

var ctx = context.Background()

func open(t testing.TB, url, stream string, cfg storetest.Config, replicas int) *jetstream.Store {
	t.Helper()
	return openOpts(t, jetstream.Options{URL: url, Stream: stream, Replicas: replicas}, cfg)
}

func openOpts(t testing.TB, o jetstream.Options, cfg storetest.Config) *jetstream.Store {
	t.Helper()
	o.Manage, o.MaxItems, o.DedupeWindow = true, cfg.MaxItems, cfg.DedupeWindow
	o.Timeout, o.StartupWait = 5*time.Second, 20*time.Second
	s, err := jetstream.Open(ctx, o)
	if err != nil {
		t.Fatalf("open stream %s: %v", o.Stream, err)
	}
	return s
}

// suiteStreams numbers the suite's streams, across runs on one server.
var suiteStreams atomic.Int64

// backend runs the shared suite on fresh streams of the servers at url.
// readMin, when not 0, is the store's ReadPath (UseReadPath): the suite's runs through each
// read path then run at once.
func backend(url string, replicas int, atomicBatches bool, readMin uint64) storetest.Backend {
	n := &suiteStreams
	var mu sync.Mutex
	names := map[eventlog.Store]string{}
	openNamed := func(t testing.TB, name string, cfg storetest.Config) eventlog.Store {
		b := jetstream.BatchesEach
		if atomicBatches {
			b = jetstream.BatchesAtomic
		}
		s := openOpts(t, jetstream.Options{URL: url, Stream: name, Replicas: replicas, Batches: b}, cfg)
		if readMin > 0 {
			jetstream.UseReadPath(s, readMin)
		}
		mu.Lock()
		names[s] = name
		mu.Unlock()
		return s
	}
	nameOf := func(s eventlog.Store) string {
		mu.Lock()
		defer mu.Unlock()
		return names[s]
	}
	return storetest.Backend{
		Open: func(t testing.TB, cfg storetest.Config) eventlog.Store {
			return openNamed(t, fmt.Sprintf("SUITE%d", n.Add(1)), cfg)
		},
		Reopen: func(t testing.TB, s eventlog.Store, cfg storetest.Config) eventlog.Store {
			s.Close()
			return openNamed(t, nameOf(s), cfg)
		},
		Second: func(t testing.TB, s eventlog.Store, cfg storetest.Config) eventlog.Store {
			return openNamed(t, nameOf(s), cfg)
		},
		// Events are lost by deleting their messages from the stream.
		Lose: func(t testing.TB, s eventlog.Store, lost []storetest.Lost) eventlog.Store {
			_, js := connect(t, url)
			str, err := js.Stream(ctx, nameOf(s))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range lost {
				if err := str.DeleteMsg(ctx, l.Cursor.Seq); err != nil {
					t.Fatalf("deleting message %d: %v", l.Cursor.Seq, err)
				}
			}
			return s
		},
	}
}

// The suite on a single server, storing batches event by event (on one replica the server
// stages each atomic batch in files of its own, which makes them slow: the cluster run and
// the node's end-to-end tests cover atomic batches).
func TestSuite(t *testing.T) {
	t.Parallel()
	srv := natstest.Solo(t)
	runSuite(t, srv.ClientURL(), 1, false)
}

// runSuite runs the suite twice at once: ascending reads through consumers, and through
// direct gets.
func runSuite(t *testing.T, url string, replicas int, atomicBatches bool) {
	t.Run("consumers", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, backend(url, replicas, atomicBatches, 1))
	})
	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, backend(url, replicas, atomicBatches, 1<<62))
	})
}

func ev(i int) eventlog.Entry { return storetest.Ev(i) }

func appendOne(t testing.TB, s eventlog.Store, e eventlog.Entry) eventlog.AppendResult {
	t.Helper()
	r, err := s.Append(ctx, []eventlog.Entry{e})
	if err != nil {
		t.Fatal(err)
	}
	return r[0]
}

func connect(t testing.TB, url string) (*nats.Conn, natsjs.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// A message stored with a floor ahead of its stored time (as when the previous leader's
// clock was ahead of the new one's) takes the floor as its cursor time, on every node,
// and cursors after it keep increasing.
func TestCursorTimeNeverGoesBack(t *testing.T) {
	srv := natstest.Solo(t)
	a := open(t, srv.ClientURL(), "FLOOR", storetest.Config{}, 1)
	defer a.Close()
	before := appendOne(t, a, ev(1)).Cursor

	// Another node published this one, having seen a cursor an hour ahead of this clock.
	nc, _ := connect(t, srv.ClientURL())
	ahead := time.Now().Add(time.Hour).UnixNano()
	m := nats.NewMsg("evtctl.floor")
	m.Header.Set("Evtctl-Type", storetest.Ev(2).Type)
	m.Header.Set("Evtctl-Floor", fmt.Sprintf("%x", ahead))
	m.Data = storetest.Ev(2).JSON
	reply, err := nc.RequestMsg(m, 5*time.Second)
	if err != nil || !strings.Contains(string(reply.Data), `"seq":2`) {
		t.Fatalf("publishing the forged message: %v %s", err, reply.Data)
	}
	// The floor a node publishes with is the newest cursor it has seen: let a see the
	// forged message first, as it would normally have seen the old leader's last ones.
	deadline := time.Now().Add(10 * time.Second)
	for a.Stats().Newest.Seq < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the store never saw the second message")
		}
		time.Sleep(5 * time.Millisecond)
	}
	after := appendOne(t, a, ev(3)).Cursor

	b := open(t, srv.ClientURL(), "FLOOR", storetest.Config{}, 1)
	defer b.Close()
	for _, s := range []eventlog.Store{a, b} {
		p, err := s.Read(ctx, eventlog.Query{Max: 10, Ascending: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != 3 || p.Items[0].Cursor != before || p.Items[2].Cursor != after {
			t.Fatalf("read %d items: %v", len(p.Items), p.Items)
		}
		mid := p.Items[1].Cursor
		if mid.TS != ahead || mid.Seq != 2 || !before.Before(mid) || !mid.Before(after) || after.TS < ahead {
			t.Fatalf("cursors %v, %v, %v: the middle one should take the floor %x and the last stay after it", before, mid, after, ahead)
		}
		// A time position between the real clock and the floor lands before the floored message.
		q := eventlog.Query{After: cursor.FromTime(time.Now().Add(time.Minute), cursor.NodeWidth), Max: 10, Ascending: true}
		if p, err := s.Read(ctx, q); err != nil || len(p.Items) != 2 || p.Items[0].Cursor != mid {
			t.Fatalf("reading from a minute ahead: %v %v", p.Items, err)
		}
	}
}

// Messages published on the stream's subject by something other than evtctl are served
// too: a CloudEvent as it is, anything else wrapped in one.
func TestForeignMessages(t *testing.T) {
	srv := natstest.Solo(t)
	s := open(t, srv.ClientURL(), "FOREIGN", storetest.Config{}, 1)
	defer s.Close()
	_, js := connect(t, srv.ClientURL())
	if _, err := js.Publish(ctx, "evtctl.foreign", []byte(`{"specversion":"1.0","id":"x","source":"/nats","type":"org.example.nats.v1"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "evtctl.foreign", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	last := appendOne(t, s, ev(1)).Cursor
	p, err := s.Read(ctx, eventlog.Query{Max: 10, Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 3 || p.Items[0].Type != "org.example.nats.v1" || p.Items[1].Type != "evtctl.foreign" ||
		!strings.Contains(string(p.Items[1].JSON), `"data":"not json"`) || p.Items[2].Cursor != last || p.Items[2].Cursor.Seq != 3 {
		t.Fatalf("items %+v", p.Items)
	}
}

// The node creates the stream with its retention as the stream's limits, and brings them
// to new settings when started with others.
func TestStreamLimits(t *testing.T) {
	srv := natstest.Solo(t)
	_, js := connect(t, srv.ClientURL())
	opts := jetstream.Options{
		URL: srv.ClientURL(), Stream: "LIMITS", Manage: true,
		Window: time.Hour, MaxItems: 1000, MaxBytes: 1 << 20, DedupeWindow: 2 * time.Minute,
	}
	s, err := jetstream.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	check := func(maxAge time.Duration, msgs, bytes int64, dup time.Duration) {
		t.Helper()
		str, err := js.Stream(ctx, "LIMITS")
		if err != nil {
			t.Fatal(err)
		}
		c := str.CachedInfo().Config
		if c.MaxAge != maxAge || c.MaxMsgs != msgs || c.MaxBytes != bytes || c.Duplicates != dup ||
			c.Storage != natsjs.FileStorage || c.Discard != natsjs.DiscardOld || !c.AllowDirect ||
			!c.AllowAtomicPublish || len(c.Subjects) != 1 || c.Subjects[0] != "evtctl.limits" {
			t.Fatalf("stream config %+v", c)
		}
	}
	check(time.Hour, 1000, 1<<20, 2*time.Minute)
	// A single-replica stream takes batches atomically when asked, else event by event.
	for _, b := range []struct {
		batches jetstream.Batches
		want    string
	}{{jetstream.BatchesAuto, "batches one by one"}, {jetstream.BatchesEach, "batches one by one"}, {jetstream.BatchesAtomic, "atomic batches"}} {
		o := opts
		o.Batches = b.batches
		s, err := jetstream.Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s.Describe(), b.want) {
			t.Fatalf("batches %v on one replica: %s, want %s", b.batches, s.Describe(), b.want)
		}
		s.Close()
	}
	// A dedupe window longer than the max age is cut to it; no limits become -1.
	opts.Window, opts.MaxItems, opts.MaxBytes, opts.DedupeWindow = time.Minute, 0, 0, 10*time.Minute
	if s, err = jetstream.Open(ctx, opts); err != nil {
		t.Fatal(err)
	}
	s.Close()
	check(time.Minute, -1, -1, time.Minute)

	// Without management, a missing stream is an error that says so, at once: not waited
	// for until the start-up wait runs out.
	_, err = jetstream.Open(ctx, jetstream.Options{URL: srv.ClientURL(), Stream: "MISSING"})
	if err == nil || !strings.Contains(err.Error(), `stream "MISSING" does not exist`) || strings.Contains(err.Error(), "not ready in time") {
		t.Fatalf("opening a missing unmanaged stream: %v", err)
	}
	// A stream evtctl cannot read from is refused.
	if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "WQ", Subjects: []string{"evtctl.wq"}, Retention: natsjs.WorkQueuePolicy, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	_, err = jetstream.Open(ctx, jetstream.Options{URL: srv.ClientURL(), Stream: "WQ"})
	if err == nil || !strings.Contains(err.Error(), "limits retention") {
		t.Fatalf("opening a work-queue stream: %v", err)
	}
}

// When NATS goes away the store answers with errors worth retrying, and once NATS is back
// it serves again by itself, cursors going on from where they were.
func TestReconnects(t *testing.T) {
	srv := natstest.NewInProcess(t, natstest.InProcessConfig{})
	s, err := jetstream.Open(ctx, jetstream.Options{URL: srv.URL(), Stream: "RECONNECT", Manage: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := appendOne(t, s, ev(1)).Cursor

	srv.Stop(0)
	_, err = s.Append(ctx, []eventlog.Entry{ev(2)})
	if !errors.Is(err, eventlog.ErrUnavailable) {
		t.Fatalf("append without NATS: %v, want an error worth retrying", err)
	}
	_, err = s.Read(ctx, eventlog.Query{Max: 10, After: first})
	if err != nil && !errors.Is(err, eventlog.ErrUnavailable) {
		t.Fatalf("read without NATS: %v", err)
	}
	if err := s.Failed(); err == nil {
		t.Fatal("Failed() is nil without NATS")
	}

	if err := srv.Restart(); err != nil { // on the same port and storage
		t.Fatal(err)
	}
	var second eventlog.AppendResult
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := s.Append(ctx, []eventlog.Entry{ev(2)})
		if err == nil {
			second = r[0]
			break
		}
		if !errors.Is(err, eventlog.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("append after NATS came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !second.Cursor.After(first) || second.Duplicate {
		t.Fatalf("cursor after reconnecting %v, before %v", second.Cursor, first)
	}
	pg, err := s.Read(ctx, eventlog.Query{Max: 10, Ascending: true})
	if err != nil || len(pg.Items) != 2 || pg.Items[0].Cursor != first || pg.Items[1].Cursor != second.Cursor {
		t.Fatalf("read after reconnecting: %+v, %v", pg.Items, err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for s.Failed() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still failed after reconnecting: %v", s.Failed())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A managed stream deleted under a running node is created again; appends meanwhile fail
// with an error that says what is wrong, and cursors after it still sort after those before.
func TestDeletedStreamIsRecreated(t *testing.T) {
	srv := natstest.Solo(t)
	s := open(t, srv.ClientURL(), "GONE", storetest.Config{}, 1)
	defer s.Close()
	first := appendOne(t, s, ev(1)).Cursor
	_, js := connect(t, srv.ClientURL())
	if err := js.DeleteStream(ctx, "GONE"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(ctx, []eventlog.Entry{ev(2)})
	if !errors.Is(err, eventlog.ErrUnavailable) {
		t.Fatalf("append to a deleted stream: %v", err)
	}
	var next eventlog.AppendResult
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := s.Append(ctx, []eventlog.Entry{ev(2)})
		if err == nil {
			next = r[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream was not recreated: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !next.Cursor.After(first) {
		t.Fatalf("cursor %v in the recreated stream is not after %v", next.Cursor, first)
	}
	// A reader still holding the old cursor gets the new events.
	deadline = time.Now().Add(10 * time.Second)
	for {
		p, err := s.Read(ctx, eventlog.Query{After: first, Max: 10, Ascending: true})
		if err == nil && len(p.Items) == 1 && p.Items[0].Cursor == next.Cursor {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reading after the old cursor: %+v %v", p.Items, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The suite again, on a stream replicated three times in a cluster of three servers: reads
// are answered by any replica, which may be a little behind the leader.
func TestSuiteCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a JetStream cluster")
	}
	url := natstest.NewInProcess(t, natstest.InProcessConfig{Servers: 3}).URL()
	// Each read path is held to the suite on one server (TestSuite); here the node chooses as
	// it does in use, so that the suite runs once against replication and leaders.
	t.Run("atomic", func(t *testing.T) { t.Parallel(); storetest.Run(t, backend(url, 3, true, 0)) })
	// Event by event, as on servers before 2.12: not chained on a replicated stream (see
	// chainable), stored times from the node's consumer.
	t.Run("each", func(t *testing.T) { t.Parallel(); storetest.Run(t, backend(url, 3, false, 0)) })
	// A replicated stream takes batches atomically unless told otherwise.
	s := openOpts(t, jetstream.Options{URL: url, Stream: "AUTO3", Replicas: 3}, storetest.Config{})
	defer s.Close()
	if !strings.Contains(s.Describe(), "atomic batches") {
		t.Fatalf("R3 with automatic batches: %s", s.Describe())
	}
}

// Readers over messages the node knows of, which were deleted before they were read,
// answer at once that there is nothing more (the leader says so), and a reader is told of
// the loss once a new message follows the deleted ones.
func TestReaderAfterDeletedTail(t *testing.T) {
	jetstream.ReadPath(t, 1)
	srv := natstest.Solo(t)
	s := open(t, srv.ClientURL(), "TAILGONE", storetest.Config{}, 1)
	defer s.Close()
	var cs []cursor.Cursor
	for i := range 15 {
		cs = append(cs, appendOne(t, s, ev(i)).Cursor)
	}
	_, js := connect(t, srv.ClientURL())
	str, err := js.Stream(ctx, "TAILGONE")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs[10:] {
		if err := str.DeleteMsg(ctx, c.Seq); err != nil {
			t.Fatal(err)
		}
	}
	// Each read is given a deadline far beyond its work: a read that waited for the deleted
	// messages would end there, with an error.
	read := func(st *jetstream.Store, q eventlog.Query) (eventlog.Page, error) {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return st.Read(rctx, q)
	}
	p, err := read(s, eventlog.Query{Max: 100, Ascending: true})
	if err != nil || len(p.Items) != 10 || p.More {
		t.Fatalf("a read to the deleted tail: %d items, more %v, %v", len(p.Items), p.More, err)
	}
	p, err = read(s, eventlog.Query{After: cs[9], Max: 100, Ascending: true})
	if err != nil || len(p.Items) != 0 || p.More {
		t.Fatalf("after the deleted tail: %d items, more %v, %v", len(p.Items), p.More, err)
	}
	// The same through a new reader, on another node.
	b := open(t, srv.ClientURL(), "TAILGONE", storetest.Config{}, 1)
	defer b.Close()
	p, err = read(b, eventlog.Query{After: cs[9], Max: 100, Ascending: true})
	if err != nil || len(p.Items) != 0 || p.More {
		t.Fatalf("a new reader after the deleted tail: %d items, more %v, %v", len(p.Items), p.More, err)
	}
	next := appendOne(t, s, ev(20)).Cursor
	p, err = s.Read(ctx, eventlog.Query{After: cs[9], Max: 100, Ascending: true})
	if err != nil || len(p.Items) != 1 || p.Items[0].Cursor != next || p.Oldest != next {
		t.Fatalf("after the deleted tail and a new message: %+v, oldest %v, %v", p.Items, p.Oldest, err)
	}
}

// A reader that moves to another node of the stream with a cursor the first node handed
// out a moment ago is never told its cursor is past the newest message: a node asked after
// a message it has not seen yet looks at the stream first.
func TestReaderAfterAnotherNodesCursor(t *testing.T) {
	srv := natstest.Solo(t)
	a := open(t, srv.ClientURL(), "TWONODES", storetest.Config{}, 1)
	defer a.Close()
	b := open(t, srv.ClientURL(), "TWONODES", storetest.Config{}, 1)
	defer b.Close()
	appendOne(t, a, ev(0))
	if _, err := b.Read(ctx, eventlog.Query{Max: 1}); err != nil { // b has just looked at the head
		t.Fatal(err)
	}
	c := appendOne(t, a, ev(1)).Cursor
	p, err := b.Read(ctx, eventlog.Query{After: c, Max: 10, Ascending: true})
	if err != nil || p.Newest.Before(c) {
		t.Fatalf("after another node's newest cursor %v: newest %v, %v", c, p.Newest, err)
	}
}
