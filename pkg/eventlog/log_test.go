package eventlog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
)

var ctx = context.Background()

func ev(i int) Entry {
	typ := "org.example.thing.created.v1"
	if i%3 == 0 {
		typ = "org.example.thing.deleted.v1"
	}
	id := fmt.Sprintf("id-%d", i)
	return Entry{
		Type: typ, Source: "/test", ID: id,
		JSON: fmt.Appendf(nil, `{"specversion":"1.0","id":%q,"source":"/test","type":%q,"data":{"n":%d}}`, id, typ, i),
	}
}

func openT(t testing.TB, opts Options) *Log {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func appendN(t testing.TB, l *Log, from, n, batch int) []cursor.Cursor {
	t.Helper()
	var cs []cursor.Cursor
	for i := from; i < from+n; i += batch {
		var es []Entry
		for j := i; j < min(i+batch, from+n); j++ {
			es = append(es, ev(j))
		}
		res, err := l.Append(ctx, es)
		if err != nil {
			t.Fatal(err)
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

// modes runs a test against the in-memory log and a durable one with tiny segments.
func modes(t *testing.T, f func(t *testing.T, opts Options)) {
	t.Run("memory", func(t *testing.T) { f(t, Options{SegmentBytes: 4096}) })
	t.Run("disk", func(t *testing.T) { f(t, Options{Dir: t.TempDir(), SegmentBytes: 4096}) })
}

func TestCursorsIncrease(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		l := openT(t, opts)
		cs := appendN(t, l, 0, 500, 7)
		for i := 1; i < len(cs); i++ {
			if !cs[i-1].Before(cs[i]) || !(cs[i-1].String() < cs[i].String()) {
				t.Fatalf("cursor %d (%s) not after %d (%s)", i, cs[i], i-1, cs[i-1])
			}
		}
		if st := l.Stats(); st.Segments < 3 {
			t.Fatalf("want several segments with 4 KiB segments, got %d", st.Segments)
		}
	})
}

// model answers queries by brute force over the cursors appended.
func modelPage(cs []cursor.Cursor, match func(int) bool, q Query) ([]cursor.Cursor, bool) {
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
	lim := max(q.Max, 1)
	if !q.Ascending {
		for i, j := 0, len(elig)-1; i < j; i, j = i+1, j-1 {
			elig[i], elig[j] = elig[j], elig[i]
		}
	}
	if len(elig) > lim {
		return elig[:lim], true
	}
	return elig, false
}

func TestReadMatchesModel(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		l := openT(t, opts)
		const n = 700
		cs := appendN(t, l, 0, n, 13)
		deleted := func(i int) bool { return i%3 == 0 }
		rng := rand.New(rand.NewPCG(1, 2))
		pick := func() cursor.Cursor {
			switch rng.IntN(5) {
			case 0:
				return cursor.Cursor{}
			case 1: // between two cursors: same timestamp, other sequence, or a time cursor
				c := cs[rng.IntN(n)]
				return cursor.FromTime(c.Time(), cursor.TendermintWidth)
			default:
				return cs[rng.IntN(n)]
			}
		}
		for k := 0; k < 400; k++ {
			q := Query{After: pick(), Before: pick(), Max: 1 + rng.IntN(40), Ascending: rng.IntN(2) == 0}
			var match func(int) bool
			if rng.IntN(2) == 0 {
				q.Match = func(b []byte) bool { return bytes.Contains(b, []byte("deleted")) }
				match = deleted
			}
			page, err := l.Read(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			want, more := modelPage(cs, match, q)
			got := make([]cursor.Cursor, len(page.Items))
			for i, it := range page.Items {
				got[i] = it.Cursor
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || page.More != more {
				t.Fatalf("query %+v:\n got %v more=%v\nwant %v more=%v", q, got, page.More, want, more)
			}
			if page.Oldest != cs[0] || page.Newest != cs[n-1] {
				t.Fatalf("bounds %v..%v, want %v..%v", page.Oldest, page.Newest, cs[0], cs[n-1])
			}
		}
	})
}

func TestPagingWalksWholeLog(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		l := openT(t, opts)
		cs := appendN(t, l, 0, 333, 10)
		// Newest first with before, as Tendermint's client pages back.
		var got []cursor.Cursor
		q := Query{Max: 10}
		for {
			p, err := l.Read(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range p.Items {
				got = append(got, it.Cursor)
			}
			if !p.More {
				break
			}
			q.Before = p.Items[len(p.Items)-1].Cursor
		}
		if len(got) != len(cs) {
			t.Fatalf("walked %d items, want %d", len(got), len(cs))
		}
		for i := range got {
			if got[i] != cs[len(cs)-1-i] {
				t.Fatalf("item %d = %v, want %v", i, got[i], cs[len(cs)-1-i])
			}
		}
		// Oldest first with after: the ascending extension.
		got = got[:0]
		q = Query{Max: 17, Ascending: true}
		for {
			p, err := l.Read(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range p.Items {
				got = append(got, it.Cursor)
			}
			if !p.More {
				break
			}
			q.After = p.Items[len(p.Items)-1].Cursor
		}
		if fmt.Sprint(got) != fmt.Sprint(cs) {
			t.Fatal("ascending walk differs from the appended order")
		}
	})
}

func TestReopenKeepsEventsAndCursorsIncrease(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, SegmentBytes: 8192})
	cs := appendN(t, l, 0, 300, 9)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The sealed segments have index files; the reopened log must use them correctly.
	idx, _ := filepath.Glob(filepath.Join(dir, "*.idx"))
	if len(idx) == 0 {
		t.Fatal("no index files for sealed segments")
	}
	l2 := openT(t, Options{Dir: dir, SegmentBytes: 8192})
	p, err := l2.Read(ctx, Query{Max: 1000, Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != len(cs) {
		t.Fatalf("after reopen %d items, want %d", len(p.Items), len(cs))
	}
	for i, it := range p.Items {
		if it.Cursor != cs[i] || !bytes.Equal(it.JSON, ev(i).JSON) || it.Type != ev(i).Type {
			t.Fatalf("item %d differs after reopen", i)
		}
	}
	more := appendN(t, l2, 300, 5, 1)
	if !more[0].After(cs[len(cs)-1]) {
		t.Fatalf("cursor after reopen %v is not after %v", more[0], cs[len(cs)-1])
	}
}

func TestReopenIgnoresCorruptIndexFile(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, SegmentBytes: 4096})
	cs := appendN(t, l, 0, 200, 5)
	l.Close()
	idx, _ := filepath.Glob(filepath.Join(dir, "*.idx"))
	for _, f := range idx {
		b, _ := os.ReadFile(f)
		b[len(b)/2] ^= 0xff
		os.WriteFile(f, b, 0o600)
	}
	l2 := openT(t, Options{Dir: dir, SegmentBytes: 4096})
	p, _ := l2.Read(ctx, Query{Max: 1000, Ascending: true})
	if len(p.Items) != len(cs) || p.Items[150].Cursor != cs[150] {
		t.Fatalf("rescan after a bad index file: %d items", len(p.Items))
	}
}

type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *logBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *logBuf) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func lastSegment(t *testing.T, dir string) string {
	names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(names) == 0 {
		t.Fatal("no segments")
	}
	return names[len(names)-1]
}

func TestTornTailIsTruncated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
		// bytes past the last acknowledged append: cut back whatever the mark says
		junk bool
	}{
		{"cut mid-frame", func(b []byte) []byte { return b[:len(b)-7] }, false},
		{"garbage appended", func(b []byte) []byte { return append(b, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9) }, true},
		{"flipped byte in last frame", func(b []byte) []byte { b[len(b)-3] ^= 0x40; return b }, false},
		{"zeros appended", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }, true},
	} {
		for _, acked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/acknowledged=%v", tc.name, acked), func(t *testing.T) {
				dir := t.TempDir()
				l := openT(t, Options{Dir: dir})
				kept := appendN(t, l, 0, 20, 5)
				appendN(t, l, 20, 4, 4) // one append of 4 records
				l.Close()
				if !acked {
					// A crash before the append was acknowledged: the mark still says 20.
					setHighWater(t, dir, 20, kept[19].TS)
				}
				seg := lastSegment(t, dir)
				b, _ := os.ReadFile(seg)
				orig := len(b)
				os.WriteFile(seg, tc.damage(b), 0o600)

				var logs logBuf
				l2 := openT(t, Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				p, _ := l2.Read(ctx, Query{Max: 100, Ascending: true})
				n := len(p.Items)
				st := l2.Stats()
				switch {
				case tc.junk:
					// The append was whole: only the bytes after it go.
					if n != 24 || len(st.Damage) != 0 {
						t.Fatalf("kept %d items, damage %v; want all 24 and none", n, st.Damage)
					}
				case !acked:
					// A torn append that was never acknowledged vanishes whole.
					if n != len(kept) || len(st.Damage) != 0 {
						t.Fatalf("kept %d items, damage %v; want %d (the torn append removed whole)", n, st.Damage, len(kept))
					}
				default:
					// Acknowledged records are never cut: the intact ones stay, the damaged
					// last one is reported lost.
					if n != 23 || len(st.Damage) != 1 || st.Damage[0].First != 24 || st.Damage[0].Last != 24 || st.Lost != 1 {
						t.Fatalf("kept %d items, damage %+v; want 23 and sequence number 24 lost", n, st.Damage)
					}
					if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), seg) {
						t.Fatalf("the damage is not logged as an error naming the file: %s", logs.String())
					}
				}
				if (tc.junk || !acked) && (st.DroppedOnOpen <= 0 || !strings.Contains(logs.String(), "dropped_bytes=")) {
					t.Fatalf("dropped %d bytes; log: %s", st.DroppedOnOpen, logs.String())
				}
				fi, _ := os.Stat(seg)
				if tc.name == "cut mid-frame" && !acked && fi.Size() >= int64(orig) {
					t.Fatal("file not truncated")
				}
				if acked && !tc.junk && fi.Size() != int64(len(tc.damage(b[:orig]))) && tc.name != "cut mid-frame" {
					t.Fatal("a file holding acknowledged records was changed")
				}
				// Appending after recovery works, continues the order, and never reuses a
				// sequence number, lost or not.
				c := appendN(t, l2, 100, 1, 1)[0]
				if !c.After(p.Items[n-1].Cursor) || c.Seq != 25 && (acked || tc.junk) || c.Seq != 21 && !acked && !tc.junk {
					t.Fatalf("cursor after recovery %v (last kept %v)", c, p.Items[n-1].Cursor)
				}
			})
		}
	}
}

// setHighWater rewrites a closed log's high-water mark.
func setHighWater(t *testing.T, dir string, seq uint64, ts int64) {
	t.Helper()
	os.Remove(filepath.Join(dir, hwmName))
	h, err := hwmOpen(dir, seq, ts)
	if err != nil {
		t.Fatal(err)
	}
	h.close()
}

func TestRetentionMaxItems(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		opts.MaxItems = 50
		l := openT(t, opts)
		cs := appendN(t, l, 0, 400, 3)
		p, _ := l.Read(ctx, Query{Max: 1000, Ascending: true})
		if len(p.Items) != 50 || p.Items[0].Cursor != cs[350] || p.Oldest != cs[350] {
			t.Fatalf("got %d items from %v (oldest %v), want 50 from %v", len(p.Items), p.Items[0].Cursor, p.Oldest, cs[350])
		}
		if st := l.Stats(); st.Items != 50 {
			t.Fatalf("Stats.Items = %d", st.Items)
		}
		waitFor(t, func() bool { return l.Stats().Segments <= 4 }, "old segments deleted")
	})
}

func TestRetentionMaxBytes(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		opts.MaxBytes = 20_000
		l := openT(t, opts)
		appendN(t, l, 0, 1000, 10)
		st := l.Stats()
		if st.Bytes > 20_000 || st.Bytes < 20_000-6000 {
			t.Fatalf("retained %d bytes, want about 20000", st.Bytes)
		}
		p, _ := l.Read(ctx, Query{Max: 1000, Ascending: true})
		if uint64(len(p.Items)) != st.Items || p.Items[len(p.Items)-1].Cursor != p.Newest {
			t.Fatalf("%d items read, Stats says %d", len(p.Items), st.Items)
		}
	})
}

type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

func TestRetentionWindow(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		var clk clock
		clk.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		opts.Now, opts.Window = clk.now, time.Minute
		l := openT(t, opts)
		old := appendN(t, l, 0, 100, 10)
		clk.add(45 * time.Second)
		fresh := appendN(t, l, 100, 100, 10)
		clk.add(30 * time.Second) // the first 100 are now 75s old
		if err := l.applyWindow(); err != nil {
			t.Fatal(err)
		}
		p, _ := l.Read(ctx, Query{Max: 1000, Ascending: true})
		if len(p.Items) != 100 || p.Items[0].Cursor != fresh[0] {
			t.Fatalf("window kept %d items", len(p.Items))
		}
		if p.Oldest != fresh[0] || !old[99].Before(p.Oldest) {
			t.Fatal("oldest did not move past the expired items")
		}
		clk.add(time.Hour)
		l.applyWindow()
		p, _ = l.Read(ctx, Query{Max: 10})
		if len(p.Items) != 0 || !p.Oldest.IsZero() {
			t.Fatalf("everything expired, still %d items, oldest %v", len(p.Items), p.Oldest)
		}
		// The newest cursor stays, so that a client can tell events after its own were lost.
		if p.Newest != fresh[99] {
			t.Fatalf("newest of an emptied log = %v, want %v", p.Newest, fresh[99])
		}
		// New cursors keep increasing after everything expired.
		c := appendN(t, l, 500, 1, 1)[0]
		if !c.After(fresh[99]) {
			t.Fatal("cursor went back after expiry")
		}
	})
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDedupe(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		var clk clock
		clk.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		opts.Now, opts.DedupeWindow = clk.now, time.Minute
		l := openT(t, opts)
		first := appendN(t, l, 0, 10, 10)
		// A batch with two repeats and one new event, and a repeat inside the batch.
		e := ev(100)
		res, err := l.Append(ctx, []Entry{ev(3), e, ev(7), e})
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].Duplicate || res[0].Cursor != first[3] || !res[2].Duplicate || res[2].Cursor != first[7] {
			t.Fatalf("repeats not answered with their original cursors: %+v", res)
		}
		if res[1].Duplicate || !res[3].Duplicate || res[3].Cursor != res[1].Cursor {
			t.Fatalf("repeat within a batch: %+v", res)
		}
		// Same id from another source is a different event.
		other := ev(3)
		other.Source = "/elsewhere"
		if r, _ := l.Append(ctx, []Entry{other}); r[0].Duplicate {
			t.Fatal("same id, other source treated as duplicate")
		}
		p, _ := l.Read(ctx, Query{Max: 100})
		if len(p.Items) != 12 {
			t.Fatalf("log holds %d items, want 12", len(p.Items))
		}
		if l.Stats().Duplicates != 3 {
			t.Fatalf("Duplicates = %d", l.Stats().Duplicates)
		}
		clk.add(2 * time.Minute)
		if r, _ := l.Append(ctx, []Entry{ev(3)}); r[0].Duplicate {
			t.Fatal("a repeat after the window was suppressed")
		}
	})
}

func TestDedupeSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, SegmentBytes: 4096})
	cs := appendN(t, l, 0, 200, 20)
	l.Close()
	l2 := openT(t, Options{Dir: dir, SegmentBytes: 4096})
	res, err := l2.Append(ctx, []Entry{ev(5), ev(199)})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Duplicate || res[0].Cursor != cs[5] || !res[1].Duplicate || res[1].Cursor != cs[199] {
		t.Fatalf("after reopen: %+v", res)
	}
}

func TestChangedWakesOnAppendAndClose(t *testing.T) {
	l := openT(t, Options{})
	ch := l.Changed()
	select {
	case <-ch:
		t.Fatal("closed before any append")
	default:
	}
	appendN(t, l, 0, 1, 1)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("not woken by an append")
	}
	ch = l.Changed()
	l.Close()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("not woken by Close")
	}
	if _, err := l.Append(ctx, []Entry{ev(1)}); err != ErrClosed {
		t.Fatalf("Append after Close: %v", err)
	}
}

func TestSecondOpenOfDirFails(t *testing.T) {
	dir := t.TempDir()
	openT(t, Options{Dir: dir})
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open: %v", err)
	}
}

func TestConcurrentAppendAndRead(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		opts.MaxItems = 300
		l := openT(t, opts)
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					es := []Entry{ev(w*1000 + 2*i), ev(w*1000 + 2*i + 1)}
					if _, err := l.Append(ctx, es); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		stop := make(chan struct{})
		var rwg sync.WaitGroup
		for r := 0; r < 3; r++ {
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
					p, err := l.Read(ctx, Query{After: after, Max: 20, Ascending: true})
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
		if st := l.Stats(); st.Appended != 400 || st.Items != 300 {
			t.Fatalf("appended %d, retained %d", st.Appended, st.Items)
		}
	})
}
