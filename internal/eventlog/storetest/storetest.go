// Package storetest is a behaviour suite for eventlog.Store implementations: one set of
// tests that the embedded log and every other backend must pass alike, so that the node
// serves the same answers whatever keeps its log.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// Config is what a test asks of a new store.
type Config struct {
	MaxItems     uint64        // retention: keep at most this many items; 0: no limit
	DedupeWindow time.Duration // 0: the store's default (at least a minute)
}

// Backend opens the stores under test.
type Backend struct {
	// Open returns a new, empty store. The suite closes it; closing it again must be harmless.
	Open func(t testing.TB, cfg Config) eventlog.Store
	// Reopen, when set, closes s and opens the same log again (a node restart).
	Reopen func(t testing.TB, s eventlog.Store, cfg Config) eventlog.Store
	// Second, when set, opens another store on the same log as s: a second node in front
	// of a shared log.
	Second func(t testing.TB, s eventlog.Store, cfg Config) eventlog.Store
	// Lose, when set, makes the given events of s lost from the middle of the log, as the
	// backend loses events (the embedded log: records damaged on disk; a stream: messages
	// deleted), and returns the store to read from (s, or s reopened).
	Lose func(t testing.TB, s eventlog.Store, lost []Lost) eventlog.Store
}

// Lost is an event a test makes lost.
type Lost struct {
	Cursor cursor.Cursor
	Entry  eventlog.Entry
}

// Run runs the suite against b.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		f    func(*testing.T, Backend)
	}{
		{"EmptyLog", testEmptyLog},
		{"CursorsIncrease", testCursorsIncrease},
		{"ReadMatchesModel", testReadMatchesModel},
		{"PagingWalksWholeLog", testPagingWalksWholeLog},
		{"OddPositions", testOddPositions},
		{"LargeBatch", testLargeBatch},
		{"Dedupe", testDedupe},
		{"ChangedWakesOnAppendAndClose", testChanged},
		{"RetentionMaxItems", testRetentionMaxItems},
		{"ConcurrentAppendAndRead", testConcurrent},
		{"Reopen", testReopen},
		{"SecondStore", testSecond},
		{"Budget", testBudget},
		{"LossInTheMiddle", testLoss},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, b) })
	}
}

var ctx = context.Background()

// Ev is event i of the suite: a third of them have type ...deleted.v1.
func Ev(i int) eventlog.Entry {
	typ := "org.example.thing.created.v1"
	if i%3 == 0 {
		typ = "org.example.thing.deleted.v1"
	}
	id := fmt.Sprintf("id-%d", i)
	return eventlog.Entry{
		Type: typ, Source: "/test", ID: id,
		JSON: fmt.Appendf(nil, `{"specversion":"1.0","id":%q,"source":"/test","type":%q,"data":{"n":%d}}`, id, typ, i),
	}
}

func isDeleted(b []byte) bool { return bytes.Contains(b, []byte("deleted")) }

func open(t *testing.T, b Backend, cfg Config) eventlog.Store {
	t.Helper()
	s := b.Open(t, cfg)
	t.Cleanup(func() { s.Close() })
	return s
}

// appendN appends events from..from+n-1 in batches and returns their cursors.
func appendN(t testing.TB, s eventlog.Store, from, n, batch int) []cursor.Cursor {
	t.Helper()
	var cs []cursor.Cursor
	for i := from; i < from+n; i += batch {
		var es []eventlog.Entry
		for j := i; j < min(i+batch, from+n); j++ {
			es = append(es, Ev(j))
		}
		res, err := s.Append(ctx, es)
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		if len(res) != len(es) {
			t.Fatalf("append of %d entries gave %d results", len(es), len(res))
		}
		for _, r := range res {
			if r.Duplicate {
				t.Fatalf("unexpected duplicate %v", r.Cursor)
			}
			cs = append(cs, r.Cursor)
		}
	}
	return cs
}

func read(t testing.TB, s eventlog.Store, q eventlog.Query) eventlog.Page {
	t.Helper()
	p, err := s.Read(ctx, q)
	if err != nil {
		t.Fatalf("read %+v: %v", q, err)
	}
	return p
}

// ReadAll walks the whole log oldest first.
func ReadAll(t testing.TB, s eventlog.Store) []eventlog.Item {
	t.Helper()
	var all []eventlog.Item
	q := eventlog.Query{Max: 97, Ascending: true}
	for {
		p := read(t, s, q)
		all = append(all, p.Items...)
		if !p.More {
			return all
		}
		q.After = p.Items[len(p.Items)-1].Cursor
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func checkIncreasing(t testing.TB, cs []cursor.Cursor) {
	t.Helper()
	for i := 1; i < len(cs); i++ {
		if !cs[i-1].Before(cs[i]) || cs[i-1].String() >= cs[i].String() {
			t.Fatalf("cursor %d (%s) is not after cursor %d (%s)", i, cs[i], i-1, cs[i-1])
		}
	}
}

func testEmptyLog(t *testing.T, b Backend) {
	s := open(t, b, Config{})
	for _, q := range []eventlog.Query{
		{Max: 10}, {Max: 10, Ascending: true},
		{Max: 10, After: cursor.MustParse("18ea61a27c39abd8-0000000000000001")},
		{Max: 10, Before: cursor.MustParse("7fffffffffffffff-0000000000000000")},
	} {
		p := read(t, s, q)
		if len(p.Items) != 0 || p.More || !p.Oldest.IsZero() || !p.Newest.IsZero() {
			t.Fatalf("empty log, query %+v: %d items, more %v, bounds %q..%q", q, len(p.Items), p.More, p.Oldest, p.Newest)
		}
	}
	if st := s.Stats(); st.Items != 0 || !st.Newest.IsZero() {
		t.Fatalf("empty log stats: %+v", st)
	}
}

func testCursorsIncrease(t *testing.T, b Backend) {
	s := open(t, b, Config{})
	cs := appendN(t, s, 0, 500, 7)
	checkIncreasing(t, cs)
	for _, c := range cs {
		if c.Width != cursor.NodeWidth {
			t.Fatalf("cursor %s has sequence width %d, want %d", c, c.Width, cursor.NodeWidth)
		}
		if d := time.Since(c.Time()); d < -time.Minute || d > time.Hour {
			t.Fatalf("cursor %s: its time %v is not about now", c, c.Time())
		}
	}
	// Sequences have no holes: a client tells a lost event from the next one by them.
	for i := 1; i < len(cs); i++ {
		if cs[i].Seq != cs[i-1].Seq+1 {
			t.Fatalf("cursor %d has sequence %d after %d", i, cs[i].Seq, cs[i-1].Seq)
		}
	}
	p := read(t, s, eventlog.Query{Max: 1})
	if p.Newest != cs[len(cs)-1] || p.Oldest != cs[0] {
		t.Fatalf("bounds %v..%v, want %v..%v", p.Oldest, p.Newest, cs[0], cs[len(cs)-1])
	}
	if st := s.Stats(); st.Appended != 500 || st.Newest != cs[len(cs)-1] {
		t.Fatalf("stats after 500 appends: %+v", st)
	}
	waitFor(t, "Stats.Items is 500", func() bool { return s.Stats().Items == 500 })
}

// modelPage answers a query by brute force over the appended cursors.
func modelPage(cs []cursor.Cursor, match func(int) bool, q eventlog.Query) ([]cursor.Cursor, bool) {
	var elig []cursor.Cursor
	for i, c := range cs {
		if (!q.After.IsZero() && !c.After(q.After)) || (!q.Before.IsZero() && !c.Before(q.Before)) {
			continue
		}
		if match != nil && !match(i) {
			continue
		}
		elig = append(elig, c)
	}
	if !q.Ascending {
		slices.Reverse(elig)
	}
	if lim := max(q.Max, 1); len(elig) > lim {
		return elig[:lim], true
	}
	return elig, false
}

func testReadMatchesModel(t *testing.T, b Backend) {
	s := open(t, b, Config{})
	const n = 700
	cs := appendN(t, s, 0, n, 13)
	index := map[cursor.Cursor]int{}
	for i, c := range cs {
		index[c] = i
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() cursor.Cursor {
		c := cs[rng.IntN(n)]
		switch rng.IntN(8) {
		case 0:
			return cursor.Cursor{}
		case 1: // a time, as --since makes it, in both widths
			return cursor.FromTime(c.Time(), cursor.NodeWidth)
		case 2:
			return cursor.FromTime(c.Time().Add(time.Duration(rng.IntN(3)-1)), cursor.TendermintWidth)
		case 3: // the positions just around a cursor, as clients derive them
			return c.Next()
		case 4:
			p, _ := c.Prev()
			return p
		}
		return c
	}
	for k := 0; k < 300; k++ {
		q := eventlog.Query{After: pick(), Before: pick(), Max: rng.IntN(41), Ascending: rng.IntN(2) == 0}
		var match func(int) bool
		if rng.IntN(2) == 0 {
			q.Match = isDeleted
			match = func(i int) bool { return i%3 == 0 }
		}
		p := read(t, s, q)
		want, more := modelPage(cs, match, q)
		got := make([]cursor.Cursor, len(p.Items))
		for i, it := range p.Items {
			got[i] = it.Cursor
			j, ok := index[it.Cursor]
			if !ok || !bytes.Equal(it.JSON, Ev(j).JSON) || it.Type != Ev(j).Type {
				t.Fatalf("query %+v: item %d (%v) is not the event appended with that cursor", q, i, it.Cursor)
			}
		}
		if !slices.Equal(got, want) || p.More != more {
			t.Fatalf("query %+v:\n got %v more=%v\nwant %v more=%v", q, got, p.More, want, more)
		}
		if p.Oldest != cs[0] || p.Newest != cs[n-1] {
			t.Fatalf("bounds %v..%v, want %v..%v", p.Oldest, p.Newest, cs[0], cs[n-1])
		}
		p.Release()
	}
}

func testPagingWalksWholeLog(t *testing.T, b Backend) {
	s := open(t, b, Config{})
	cs := appendN(t, s, 0, 333, 10)
	for _, filtered := range []bool{false, true} {
		var want []cursor.Cursor
		q := eventlog.Query{Max: 10}
		for i, c := range cs {
			if !filtered || i%3 == 0 {
				want = append(want, c)
			}
		}
		if filtered {
			q.Match = isDeleted
		}
		// Newest first with before, as a Tendermint client pages back.
		var got []cursor.Cursor
		for {
			p := read(t, s, q)
			for _, it := range p.Items {
				got = append(got, it.Cursor)
			}
			if !p.More {
				break
			}
			if len(p.Items) != q.Max {
				t.Fatalf("a short page (%d of %d) with more", len(p.Items), q.Max)
			}
			q.Before = p.Items[len(p.Items)-1].Cursor
		}
		slices.Reverse(got)
		if !slices.Equal(got, want) {
			t.Fatalf("filtered %v: the walk back found %d items, want %d", filtered, len(got), len(want))
		}
		// Oldest first with after: the ascending extension.
		got = got[:0]
		q = eventlog.Query{Max: 17, Ascending: true, Match: q.Match}
		for {
			p := read(t, s, q)
			for _, it := range p.Items {
				got = append(got, it.Cursor)
			}
			if !p.More {
				break
			}
			q.After = p.Items[len(p.Items)-1].Cursor
		}
		if !slices.Equal(got, want) {
			t.Fatalf("filtered %v: the walk forward found %d items, want %d", filtered, len(got), len(want))
		}
	}
}

// testOddPositions reads from positions that are no cursor of the log.
func testOddPositions(t *testing.T, b Backend) {
	s := open(t, b, Config{})
	cs := appendN(t, s, 0, 20, 20)
	far := cursor.MustParse("7fffffffffffffff-0000000000000000")
	early := cursor.MustParse("0000000000000001-0000000000000000")
	for _, tc := range []struct {
		name string
		q    eventlog.Query
		want int
	}{
		{"after the far future", eventlog.Query{After: far, Max: 50}, 0},
		{"before the far future", eventlog.Query{Before: far, Max: 50}, 20},
		{"before 1970", eventlog.Query{Before: early, Max: 50}, 0},
		{"after 1970", eventlog.Query{After: early, Max: 50, Ascending: true}, 20},
		{"after the newest", eventlog.Query{After: cs[19], Max: 50}, 0},
		{"before the oldest", eventlog.Query{Before: cs[0], Max: 50}, 0},
		{"between two neighbours", eventlog.Query{After: cs[4], Before: cs[5], Max: 50}, 0},
		{"the cursor of a newer log at the same sequence", eventlog.Query{After: cursor.New(cs[19].TS+int64(time.Hour), cs[3].Seq, cursor.NodeWidth), Max: 50}, 0},
		{"the cursor of an older log at the same sequence", eventlog.Query{After: cursor.New(cs[0].TS-int64(time.Hour), cs[10].Seq, cursor.NodeWidth), Max: 50}, 20},
	} {
		p := read(t, s, tc.q)
		if len(p.Items) != tc.want {
			t.Fatalf("%s: %d items, want %d", tc.name, len(p.Items), tc.want)
		}
	}
}

func testLargeBatch(t *testing.T, b Backend) {
	s := open(t, b, Config{})
	head := appendN(t, s, 0, 5, 5)
	cs := appendN(t, s, 5, 2500, 2500)
	checkIncreasing(t, append(head, cs...))
	all := ReadAll(t, s)
	if len(all) != 2505 {
		t.Fatalf("read %d items, want 2505", len(all))
	}
	for i, it := range all {
		if !bytes.Equal(it.JSON, Ev(i).JSON) || it.Type != Ev(i).Type {
			t.Fatalf("item %d is not event %d", i, i)
		}
	}
}

func testDedupe(t *testing.T, b Backend) {
	s := open(t, b, Config{DedupeWindow: time.Hour})
	first := appendN(t, s, 0, 10, 10)
	// A batch with two repeats and one new event, and a repeat inside the batch.
	e := Ev(100)
	res, err := s.Append(ctx, []eventlog.Entry{Ev(3), e, Ev(7), e})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Duplicate || res[0].Cursor != first[3] || !res[2].Duplicate || res[2].Cursor != first[7] {
		t.Fatalf("repeats not answered with their original cursors: %+v (want %v, %v)", res, first[3], first[7])
	}
	if res[1].Duplicate || !res[3].Duplicate || res[3].Cursor != res[1].Cursor || !res[1].Cursor.After(first[9]) {
		t.Fatalf("repeat within a batch: %+v", res)
	}
	// A single repeat, and a whole batch repeated (a producer's retry).
	if r, err := s.Append(ctx, []eventlog.Entry{Ev(0)}); err != nil || !r[0].Duplicate || r[0].Cursor != first[0] {
		t.Fatalf("single repeat: %+v, %v", r, err)
	}
	var again []eventlog.Entry
	for i := range 10 {
		again = append(again, Ev(i))
	}
	r, err := s.Append(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r {
		if !r[i].Duplicate || r[i].Cursor != first[i] {
			t.Fatalf("repeated batch, event %d: %+v, want the duplicate of %v", i, r[i], first[i])
		}
	}
	// The same id from another source is another event.
	other := Ev(3)
	other.Source = "/elsewhere"
	if r, err := s.Append(ctx, []eventlog.Entry{other}); err != nil || r[0].Duplicate {
		t.Fatalf("same id, other source: %+v, %v", r, err)
	}
	// Sources and ids that need care: spaces, unicode, one a prefix of the other.
	odd := []eventlog.Entry{Ev(200), Ev(201), Ev(202), Ev(203)}
	odd[0].Source, odd[0].ID = "/a b", "c"
	odd[1].Source, odd[1].ID = "/a", "b c"
	odd[2].Source, odd[2].ID = "/é", "ü"
	odd[3].Source, odd[3].ID = "/a b c", ""
	if r, err := s.Append(ctx, odd); err != nil || r[0].Duplicate || r[1].Duplicate || r[2].Duplicate || r[3].Duplicate {
		t.Fatalf("distinct (source, id) pairs taken for repeats: %+v, %v", r, err)
	}
	if got := len(ReadAll(t, s)); got != 16 {
		t.Fatalf("log holds %d items, want 16", got)
	}
	if st := s.Stats(); st.Duplicates != 14 || st.Appended != 16 {
		t.Fatalf("Duplicates = %d, Appended = %d; want 14 and 16", st.Duplicates, st.Appended)
	}
}

func testChanged(t *testing.T, b Backend) {
	s := b.Open(t, Config{})
	defer s.Close()
	ch := s.Changed()
	select {
	case <-ch:
		t.Fatal("closed before any append")
	default:
	}
	appendN(t, s, 0, 1, 1)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("not woken by an append")
	}
	ch = s.Changed()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("not woken by Close")
	}
	if _, err := s.Append(ctx, []eventlog.Entry{Ev(1)}); !errors.Is(err, eventlog.ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if _, err := s.Read(ctx, eventlog.Query{Max: 1}); !errors.Is(err, eventlog.ErrClosed) && err != nil {
		t.Fatalf("Read after Close: %v", err)
	}
	select {
	case <-s.Changed():
	default:
		t.Fatal("Changed after Close is not closed: a reader would wait on a closed store")
	}
}

func testRetentionMaxItems(t *testing.T, b Backend) {
	s := open(t, b, Config{MaxItems: 50})
	cs := appendN(t, s, 0, 400, 3)
	p := read(t, s, eventlog.Query{Max: 1000, Ascending: true})
	if len(p.Items) != 50 || p.Items[0].Cursor != cs[350] || p.Oldest != cs[350] || p.Newest != cs[399] {
		t.Fatalf("got %d items from %v (bounds %v..%v), want 50 from %v", len(p.Items), p.Items[0].Cursor, p.Oldest, p.Newest, cs[350])
	}
	// A reader whose cursor is older than the oldest item is told so by Oldest.
	p = read(t, s, eventlog.Query{After: cs[100], Max: 5, Ascending: true})
	if len(p.Items) != 5 || p.Items[0].Cursor != cs[350] || p.Oldest != cs[350] {
		t.Fatalf("after a pruned cursor: %d items from %v, oldest %v; want from %v", len(p.Items), p.Items[0].Cursor, p.Oldest, cs[350])
	}
	p = read(t, s, eventlog.Query{Before: cs[360], Max: 100})
	if len(p.Items) != 10 || p.More {
		t.Fatalf("before a retained cursor: %d items, more %v; want the 10 retained", len(p.Items), p.More)
	}
	waitFor(t, "Stats.Items is 50", func() bool { return s.Stats().Items == 50 })
}

func testConcurrent(t *testing.T, b Backend) {
	s := open(t, b, Config{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				es := []eventlog.Entry{Ev(w*1000 + 2*i), Ev(w*1000 + 2*i + 1)}
				if _, err := s.Append(ctx, es); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	for range 3 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			var after cursor.Cursor
			for {
				select {
				case <-stop:
					return
				default:
				}
				p, err := s.Read(ctx, eventlog.Query{After: after, Max: 20, Ascending: true})
				if err != nil {
					t.Error(err)
					return
				}
				for _, it := range p.Items {
					if !it.Cursor.After(after) {
						t.Errorf("out of order: %v after %v", it.Cursor, after)
						return
					}
					after = it.Cursor
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	all := ReadAll(t, s)
	seen := map[string]bool{}
	for _, it := range all {
		if seen[string(it.JSON)] {
			t.Fatalf("an event is in the log twice: %s", it.JSON)
		}
		seen[string(it.JSON)] = true
	}
	if st := s.Stats(); st.Appended != 400 || len(all) != 400 {
		t.Fatalf("appended %d, %d in the log; want 400", st.Appended, len(all))
	}
}

func testReopen(t *testing.T, b Backend) {
	if b.Reopen == nil {
		t.Skip("the backend cannot reopen a log")
	}
	cfg := Config{DedupeWindow: time.Hour}
	s := b.Open(t, cfg)
	cs := appendN(t, s, 0, 300, 9)
	s = b.Reopen(t, s, cfg)
	defer s.Close()
	all := ReadAll(t, s)
	if len(all) != len(cs) {
		t.Fatalf("after reopen %d items, want %d", len(all), len(cs))
	}
	for i, it := range all {
		if it.Cursor != cs[i] || !bytes.Equal(it.JSON, Ev(i).JSON) || it.Type != Ev(i).Type {
			t.Fatalf("item %d differs after reopen", i)
		}
	}
	more := appendN(t, s, 300, 5, 1)
	if !more[0].After(cs[len(cs)-1]) {
		t.Fatalf("cursor after reopen %v is not after %v", more[0], cs[len(cs)-1])
	}
	res, err := s.Append(ctx, []eventlog.Entry{Ev(5), Ev(299)})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Duplicate || res[0].Cursor != cs[5] || !res[1].Duplicate || res[1].Cursor != cs[299] {
		t.Fatalf("repeats after reopen: %+v", res)
	}
}

// testSecond runs two stores on one log, as two nodes in front of one stream: each sees
// the other's events with the same cursors, and a reader may move between them.
func testSecond(t *testing.T, b Backend) {
	if b.Second == nil {
		t.Skip("the backend has no shared log")
	}
	cfg := Config{DedupeWindow: time.Hour}
	a := open(t, b, cfg)
	c := b.Second(t, a, cfg)
	defer c.Close()
	woken := c.Changed()
	cs := appendN(t, a, 0, 60, 6)
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("the second store was not woken by an append through the first")
	}
	waitFor(t, "the second store sees the newest event", func() bool {
		p, err := c.Read(ctx, eventlog.Query{Max: 1})
		return err == nil && p.Newest == cs[59]
	})
	for _, s := range []eventlog.Store{a, c} {
		all := ReadAll(t, s)
		got := make([]cursor.Cursor, len(all))
		for i, it := range all {
			got[i] = it.Cursor
		}
		if !slices.Equal(got, cs) {
			t.Fatalf("the stores disagree on cursors: %v...", got[:min(3, len(got))])
		}
	}
	// A repeat sent to the other store is answered with the first store's cursor.
	r, err := c.Append(ctx, []eventlog.Entry{Ev(7), Ev(1000)})
	if err != nil || !r[0].Duplicate || r[0].Cursor != cs[7] || r[1].Duplicate {
		t.Fatalf("repeat through the second store: %+v, %v", r, err)
	}
	// A reader moves from one store to the other in the middle of the log.
	var seen []cursor.Cursor
	q := eventlog.Query{Max: 7, Ascending: true}
	for i, s := 0, a; ; i++ {
		if i == 3 {
			s = c
		}
		p := read(t, s, q)
		for _, it := range p.Items {
			seen = append(seen, it.Cursor)
		}
		if !p.More {
			break
		}
		q.After = p.Items[len(p.Items)-1].Cursor
	}
	if want := append(slices.Clone(cs), r[1].Cursor); !slices.Equal(seen, want) {
		t.Fatalf("a reader moving between the stores saw %d events, want %d", len(seen), len(want))
	}
}

// testBudget reads with a budget of records to examine: a read stops after that many, with
// More and Resume at the last record examined, and reads that go on from Resume together
// find what one read without a budget finds.
func testBudget(t *testing.T, b Backend) {
	s := open(t, b, Config{})
	cs := appendN(t, s, 0, 300, 50)
	for _, asc := range []bool{true, false} {
		var want []cursor.Cursor
		for i, c := range cs {
			if i%3 == 0 {
				want = append(want, c)
			}
		}
		if !asc {
			slices.Reverse(want)
		}
		var got []cursor.Cursor
		q := eventlog.Query{Max: 1000, Ascending: asc, Match: isDeleted, Budget: 25}
		steps := 0
		for {
			p := read(t, s, q)
			steps++
			if len(p.Items) > 9 {
				t.Fatalf("ascending %v: a read with a budget of 25 records found %d of every third", asc, len(p.Items))
			}
			for _, it := range p.Items {
				got = append(got, it.Cursor)
			}
			if !p.More {
				if !p.Resume.IsZero() {
					t.Fatalf("ascending %v: the last read has Resume %v", asc, p.Resume)
				}
				break
			}
			if p.Resume.IsZero() {
				t.Fatalf("ascending %v: a read stopped by its budget has no Resume", asc)
			}
			if n := len(p.Items); n > 0 && (asc && p.Resume.Before(p.Items[n-1].Cursor) || !asc && p.Resume.After(p.Items[n-1].Cursor)) {
				t.Fatalf("ascending %v: Resume %v is before the last item %v", asc, p.Resume, p.Items[n-1].Cursor)
			}
			if asc {
				q.After = p.Resume
			} else {
				q.Before = p.Resume
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ascending %v: reads from Resume found %d items, want %d", asc, len(got), len(want))
		}
		if steps < 12 || steps > 13 {
			t.Fatalf("ascending %v: %d reads of 25 records for 300 records", asc, steps)
		}
	}
	// A range of exactly the budget: no More, no Resume.
	p := read(t, s, eventlog.Query{After: cs[274], Max: 1000, Ascending: true, Match: isDeleted, Budget: 25})
	if p.More || !p.Resume.IsZero() || len(p.Items) != 8 {
		t.Fatalf("the last 25 records with a budget of 25: %d items, more %v, resume %v", len(p.Items), p.More, p.Resume)
	}
	// A full page is not a stop for the budget: no Resume.
	p = read(t, s, eventlog.Query{Max: 5, Ascending: true, Budget: 100})
	if len(p.Items) != 5 || !p.More || !p.Resume.IsZero() {
		t.Fatalf("a full page within the budget: %d items, more %v, resume %v", len(p.Items), p.More, p.Resume)
	}
	// Without a filter every record examined is an item.
	for _, asc := range []bool{true, false} {
		p = read(t, s, eventlog.Query{Max: 100, Ascending: asc, Budget: 10})
		if len(p.Items) != 10 || !p.More || p.Resume != p.Items[9].Cursor {
			t.Fatalf("ascending %v, no filter, a budget of 10: %d items, more %v, resume %v", asc, len(p.Items), p.More, p.Resume)
		}
	}
}

// testLoss loses events in the middle of the log and checks that readers are told, once
// for each range they cross, and read every event that is left once.
func testLoss(t *testing.T, b Backend) {
	if b.Lose == nil {
		t.Skip("the backend cannot lose events in the middle of a log")
	}
	s := b.Open(t, Config{})
	defer func() { s.Close() }()
	cs := appendN(t, s, 0, 100, 10)
	var lost []Lost
	gone := map[int]bool{}
	for _, i := range []int{40, 41, 42, 43, 44, 70} {
		lost = append(lost, Lost{cs[i], Ev(i)})
		gone[i] = true
	}
	s = b.Lose(t, s, lost)

	// A reader paging forward, as the client does: told of each lost range once, exactly
	// where it crosses it.
	for _, filtered := range []bool{false, true} {
		var got, wantItems []cursor.Cursor
		for i, c := range cs {
			if !gone[i] && (!filtered || i%3 == 0) {
				wantItems = append(wantItems, c)
			}
		}
		var told []cursor.Cursor // Oldest, when it says events were lost
		var last cursor.Cursor
		q := eventlog.Query{Max: 10, Ascending: true}
		if filtered {
			q.Match = isDeleted
		}
		for range 100 {
			p := read(t, s, q)
			if !last.IsZero() && cursor.Lost(last.String(), p.Oldest.String()) {
				told = append(told, p.Oldest)
			}
			for _, it := range p.Items {
				got = append(got, it.Cursor)
				last = it.Cursor
			}
			if !p.Resume.IsZero() && p.Resume.After(last) {
				last = p.Resume
			}
			if !p.More {
				break
			}
			q.After = last
		}
		if !slices.Equal(got, wantItems) {
			t.Fatalf("filtered %v: a forward walk found %v, want %v", filtered, got, wantItems)
		}
		if len(told) != 2 || told[0] != cs[45] || told[1] != cs[71] {
			t.Fatalf("filtered %v: the walk was told of losses at %v, want at %v and %v", filtered, told, cs[45], cs[71])
		}
	}
	// A forward read stops short of a lost range, at the record before it.
	p := read(t, s, eventlog.Query{After: cs[20], Max: 100, Ascending: true, Match: isDeleted})
	if !p.More || !p.AtLoss || p.Resume != cs[39] {
		t.Fatalf("a filtered read towards a lost range: more %v, at loss %v, resume %v; want to stop at %v", p.More, p.AtLoss, p.Resume, cs[39])
	}
	// A read after the record before a lost range starts after it and says so.
	p = read(t, s, eventlog.Query{After: cs[39], Max: 3, Ascending: true})
	if len(p.Items) != 3 || p.Items[0].Cursor != cs[45] || p.Oldest != cs[45] {
		t.Fatalf("after the record before a lost range: %d items from %v, oldest %v; want from %v", len(p.Items), first(p.Items), p.Oldest, cs[45])
	}
	// Newest first, a read that reaches a lost range stops at it: the log begins above it.
	p = read(t, s, eventlog.Query{Max: 100})
	if len(p.Items) != 29 || p.More || p.Oldest != cs[71] || p.Items[28].Cursor != cs[71] {
		t.Fatalf("newest first to a lost range: %d items, more %v, oldest %v; want 29 down to %v", len(p.Items), p.More, p.Oldest, cs[71])
	}
	p = read(t, s, eventlog.Query{Before: cs[71], Max: 100})
	if len(p.Items) != 0 || p.More || p.Oldest != cs[71] {
		t.Fatalf("newest first before the record above a lost range: %d items, more %v, oldest %v", len(p.Items), p.More, p.Oldest)
	}
	// Between the lost ranges, newest first.
	p = read(t, s, eventlog.Query{Before: cs[60], After: cs[50], Max: 100})
	if len(p.Items) != 9 || p.More {
		t.Fatalf("newest first between lost ranges: %d items, more %v", len(p.Items), p.More)
	}
}

func first(items []eventlog.Item) cursor.Cursor {
	if len(items) == 0 {
		return cursor.Cursor{}
	}
	return items[0].Cursor
}
