package jetstream_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/eventlog/storetest"
	"github.com/evtctl/evtctl/internal/jetstream"
	"github.com/evtctl/evtctl/internal/jetstream/natstest"
)

// A node's cost does not depend on what it served before. After a replay to the newest
// event, the consumers the node holds on the stream go back to what they were; a consumer
// kept for the next page of a replay that stopped halfway has no pull request waiting, so
// the stream's new messages are not delivered to it, and the next page still reuses it.
// On the newest line (in process) and on 2.10, whose pull requests end differently.
func TestReadersLeaveNothingBehind(t *testing.T) {
	jetstream.ReadPath(t, 1)
	t.Run("solo", func(t *testing.T) {
		t.Parallel()
		testReadersLeaveNothingBehind(t, natstest.Solo(t).ClientURL())
	})
	t.Run("2.10", func(t *testing.T) {
		t.Parallel()
		testReadersLeaveNothingBehind(t, natstest.Start(t, natstest.NeedLine(t, "2.10"), natstest.Config{}).URL())
	})
}

func testReadersLeaveNothingBehind(t *testing.T, url string) {
	const name, stored, page = "IDLE", 300, 100
	s := open(t, url, name, storetest.Config{}, 1)
	defer s.Close()
	appendN(t, s, 0, stored)
	_, js := connect(t, url)
	str, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() []*natsjs.ConsumerInfo {
		t.Helper()
		var cs []*natsjs.ConsumerInfo
		l := str.ListConsumers(ctx)
		for c := range l.Info() {
			cs = append(cs, c)
		}
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
		return cs
	}
	before := len(consumers())
	// awaitConsumers waits, up to a bound far beyond the work involved, until the node holds
	// want consumers on the stream whose pull requests were all answered.
	awaitConsumers := func(want int, what string) []*natsjs.ConsumerInfo {
		t.Helper()
		deadline := time.Now().Add(3 * time.Second)
		for {
			cs := consumers()
			waiting := 0
			for _, c := range cs {
				waiting += c.NumWaiting
			}
			if len(cs) == want && waiting == 0 {
				return cs
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the node holds %d consumers on the stream (%d before), with %d pull requests waiting",
					what, len(cs), before, waiting)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// A replay to the newest event, page by page.
	var q eventlog.Query
	for n := 0; ; {
		q.Max, q.Ascending = page, true
		p, err := s.Read(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		n += len(p.Items)
		if !p.More {
			if n != stored {
				t.Fatalf("replayed %d events of %d", n, stored)
			}
			break
		}
		q.After = p.Items[len(p.Items)-1].Cursor
	}
	awaitConsumers(before, "after a replay to the newest event")

	// A replay that stops after its first page: the node keeps its consumer for the next.
	p, err := s.Read(ctx, eventlog.Query{Max: page, Ascending: true})
	if err != nil || len(p.Items) != page || !p.More {
		t.Fatalf("first page: %d items, more %v, %v", len(p.Items), p.More, err)
	}
	kept := awaitConsumers(before+1, "with a consumer kept for the next page")[0].Name
	appendN(t, s, stored, 50)
	c, err := str.Consumer(ctx, kept)
	if err != nil {
		t.Fatalf("the kept consumer: %v", err)
	}
	if info := c.CachedInfo(); info.Delivered.Stream > stored || info.NumWaiting != 0 {
		t.Fatalf("the kept consumer was delivered messages up to %d (%d stored before it was kept), %d pull requests waiting",
			info.Delivered.Stream, stored, info.NumWaiting)
	}
	// The next page reuses it.
	next, err := s.Read(ctx, eventlog.Query{After: p.Items[page-1].Cursor, Max: page, Ascending: true})
	if err != nil || len(next.Items) != page || next.Items[0].Cursor.Seq != page+1 {
		t.Fatalf("second page: %d items, %v", len(next.Items), err)
	}
	if cs := consumers(); len(cs) != before+1 || cs[0].Name != kept {
		t.Fatalf("the second page was served by consumers %v, not by the one kept (%s)", names(cs), kept)
	}
	// A node that stops deletes the consumers it kept.
	s.Close()
	if cs := consumers(); len(cs) != before {
		t.Fatalf("a closed node left consumers %v on the stream", names(cs))
	}
}

func appendN(t testing.TB, s eventlog.Store, from, n int) {
	t.Helper()
	var es []eventlog.Entry
	for i := range n {
		es = append(es, storetest.Ev(from+i))
	}
	if _, err := s.Append(ctx, es); err != nil {
		t.Fatal(err)
	}
}

func names(cs []*natsjs.ConsumerInfo) []string {
	var ns []string
	for _, c := range cs {
		ns = append(ns, fmt.Sprintf("%s (delivered up to %d)", c.Name, c.Delivered.Stream))
	}
	return ns
}

// Replays that run at once, each from where its last page ended, each go on with the
// consumer kept for it: one never takes the consumer of another that stands behind it, which
// would leave both to skip or read again what the other already read.
func TestConcurrentReplaysKeepTheirConsumers(t *testing.T) {
	jetstream.ReadPath(t, 1)
	url := natstest.Solo(t).ClientURL()
	const name = "TWOREPLAYS"
	s := open(t, url, name, storetest.Config{}, 1)
	defer s.Close()
	appendN(t, s, 0, 3000)
	_, js := connect(t, url)
	str, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		info, err := str.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	read := func(after eventlog.Item, max int) eventlog.Page {
		t.Helper()
		p, err := s.Read(ctx, eventlog.Query{After: after.Cursor, Max: max, Ascending: true})
		if err != nil || len(p.Items) != max {
			t.Fatalf("read %d items after %v: %d, %v", max, after.Cursor, len(p.Items), err)
		}
		return p
	}
	a := read(eventlog.Item{}, 800)  // replay A, first page
	b := read(eventlog.Item{}, 1000) // replay B, first page: A's consumer stands past its start
	if n := count(); n != 2 {
		t.Fatalf("%d consumers after two replays' first pages, want 2", n)
	}
	read(b.Items[999], 1000) // B's second page
	read(a.Items[799], 100)  // A's second page
	if n := count(); n != 2 {
		t.Fatalf("%d consumers after each replay's second page, want the 2 kept for them", n)
	}
}

// A kept consumer that the server no longer has (removed by an operator, or as inactive, or
// lost with the server's memory) does not fail the next page: the reader starts over with a
// new consumer where the old one stopped.
func TestReaderStartsOverWithoutItsConsumer(t *testing.T) {
	jetstream.ReadPath(t, 1)
	url := natstest.Solo(t).ClientURL()
	const name = "GONECONS"
	s := open(t, url, name, storetest.Config{}, 1)
	defer s.Close()
	appendN(t, s, 0, 3000)
	_, js := connect(t, url)
	str, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Read(ctx, eventlog.Query{Max: 1000, Ascending: true})
	if err != nil || len(first.Items) != 1000 {
		t.Fatalf("first page: %d items, %v", len(first.Items), err)
	}
	l := str.ConsumerNames(ctx)
	var gone []string
	for n := range l.Name() {
		gone = append(gone, n)
	}
	if len(gone) != 1 {
		t.Fatalf("consumers after the first page: %v, want the one kept", gone)
	}
	if err := str.DeleteConsumer(ctx, gone[0]); err != nil {
		t.Fatal(err)
	}
	for page, after := 2, first.Items[999]; page <= 3; page++ {
		p, err := s.Read(ctx, eventlog.Query{After: after.Cursor, Max: 1000, Ascending: true})
		if err != nil || len(p.Items) != 1000 || p.Items[0].Cursor.Seq != after.Cursor.Seq+1 {
			t.Fatalf("page %d: %d items, %v", page, len(p.Items), err)
		}
		after = p.Items[999]
	}
}

// A read whose kept reader gets nothing in time, because the server leading the stream
// stopped, is worth a retry (the stream is unavailable), never a bare deadline the node
// would answer as an internal error.
func TestReadAfterLeaderLossIsRetryable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JetStream cluster")
	}
	jetstream.ReadPath(t, 1)
	g := natstest.NewInProcess(t, natstest.InProcessConfig{Servers: 3})
	first := strings.Split(g.URL(), ",")[0]
	s, err := jetstream.Open(ctx, jetstream.Options{URL: first, Stream: "QUORUM", Replicas: 3, Manage: true,
		Timeout: time.Second, StartupWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendN(t, s, 0, 300)
	// The first page leaves its reader's consumer for the next.
	p, err := s.Read(ctx, eventlog.Query{Max: 100, Ascending: true})
	if err != nil || len(p.Items) != 100 {
		t.Fatalf("the first page: %d items, %v", len(p.Items), err)
	}
	after := p.Items[len(p.Items)-1].Cursor
	_, js := connect(t, first)
	str, err := js.Stream(ctx, "QUORUM")
	if err != nil {
		t.Fatal(err)
	}
	leader := str.CachedInfo().Cluster.Leader
	for i := range 3 {
		if g.Name(i) == leader {
			g.Stop(i)
		}
	}
	t.Logf("stopped the leader %s", leader)
	for i := range 3 {
		p, err := s.Read(ctx, eventlog.Query{After: after, Max: 100, Ascending: true})
		if err == nil {
			// A replica may answer, or a new leader was elected already.
			t.Logf("read %d: %d items", i, len(p.Items))
			continue
		}
		t.Logf("read %d: %v", i, err)
		if !errors.Is(err, eventlog.ErrUnavailable) {
			t.Fatalf("read %d after the leader stopped: %v; want an error worth retrying", i, err)
		}
	}
}
