package eventlog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
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

// The sealed segments get index files, and a reopened log reads through them; the rest of
// reopening is the store suite's (storetest).
func TestReopenUsesIndexFiles(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, SegmentBytes: 8192})
	cs := appendN(t, l, 0, 300, 9)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
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
	os.Remove(filepath.Join(dir, highMark.file))
	h, err := openMark(dir, highMark, seq, ts)
	if err != nil {
		t.Fatal(err)
	}
	h.close()
}

// Retention deletes whole segments once no retained item is in them (what is retained is
// the store suite's).
func TestRetentionDeletesSegments(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		opts.MaxItems = 50
		l := openT(t, opts)
		appendN(t, l, 0, 400, 3)
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

// A repeat is suppressed within the dedupe window and taken after it (the rest of
// duplicate handling is the store suite's).
func TestDedupeWindowEnds(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		var clk clock
		clk.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		opts.Now, opts.DedupeWindow = clk.now, time.Minute
		l := openT(t, opts)
		first := appendN(t, l, 0, 10, 10)
		clk.add(30 * time.Second)
		if r, _ := l.Append(ctx, []Entry{ev(3)}); !r[0].Duplicate || r[0].Cursor != first[3] {
			t.Fatalf("a repeat within the window: %+v", r)
		}
		clk.add(2 * time.Minute)
		if r, _ := l.Append(ctx, []Entry{ev(3)}); r[0].Duplicate {
			t.Fatal("a repeat after the window was suppressed")
		}
	})
}

func TestSecondOpenOfDirFails(t *testing.T) {
	dir := t.TempDir()
	openT(t, Options{Dir: dir})
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open: %v", err)
	}
}

// A torn append cut off on open leaves the log's newest cursor at the last record kept — its
// sequence number and its time — not at the time of a record cut off.
func TestTornTailLeavesNewestAtTheLastRecordKept(t *testing.T) {
	for _, acked := range []bool{false, true} {
		t.Run(fmt.Sprintf("mark known=%v", acked), func(t *testing.T) {
			var clk clock
			clk.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
			dir := t.TempDir()
			opts := Options{Dir: dir, Now: clk.now}
			l := openT(t, opts)
			kept := appendN(t, l, 0, 20, 5)
			clk.add(time.Second)
			appendN(t, l, 20, 4, 4) // one append, torn below
			l.Close()
			if acked {
				setHighWater(t, dir, 20, kept[19].TS)
			} else {
				os.Remove(filepath.Join(dir, highMark.file))
			}
			seg := lastSegment(t, dir)
			b, _ := os.ReadFile(seg)
			os.WriteFile(seg, b[:len(b)-7], 0o600)
			l = openT(t, opts)
			p, err := l.Read(ctx, Query{Max: 1})
			if err != nil || len(p.Items) != 1 || p.Items[0].Cursor != kept[19] || p.Newest != kept[19] || l.Stats().Newest != kept[19] {
				t.Fatalf("after the torn append was cut: %v (%v), newest %v; want %v", p.Items, err, p.Newest, kept[19])
			}
		})
	}
}
