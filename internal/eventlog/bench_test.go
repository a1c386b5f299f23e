package eventlog

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// benchEvent is a CloudEvent of about 500 bytes in JSON format.
func benchEvent(i int) Entry {
	id := fmt.Sprintf("bench-%012d", i)
	typ := "org.openedx.learning.course.enrollment.created.v1"
	if i%100 == 0 {
		typ = "org.openedx.ecommerce.order.purchased.v1"
	}
	js := fmt.Appendf(nil, `{"specversion":"1.0","id":%q,"source":"openedx/lms/web","type":%q,`+
		`"time":"2026-11-22T10:00:00.123456Z","datacontenttype":"application/json","minorversion":0,"pii":false,`+
		`"data":{"user":{"id":%d,"is_active":true,"pii":{"username":"learner%d","email":"learner%d@example.com","name":"A Learner"}},`+
		`"course":{"course_key":"course-v1:edX+DemoX+Demo_Course","display_name":"Demonstration Course","start":"2026-01-01T00:00:00Z"},`+
		`"mode":"audit","is_active":true,"creation_date":"2026-11-22T10:00:00Z","created_by":{"id":1}}}`, id, typ, i, i, i)
	return Entry{Type: typ, Source: "openedx/lms/web", ID: id, JSON: js}
}

// BenchmarkAppendBatch measures durable appends of 100-event batches from several
// concurrent appenders, fsync on (group commit).
func BenchmarkAppendBatch(b *testing.B) {
	for _, mode := range []struct {
		name string
		sync SyncMode
	}{{"fsync", SyncAlways}, {"nosync", SyncNone}} {
		b.Run(mode.name, func(b *testing.B) {
			l, err := Open(Options{Dir: b.TempDir(), Sync: mode.sync})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batches := make(chan []Entry, 64)
			go func() {
				defer close(batches)
				for i := 0; i < b.N; i++ {
					es := make([]Entry, 100)
					for j := range es {
						es[j] = benchEvent(i*100 + j)
					}
					batches <- es
				}
			}()
			b.SetBytes(100 * int64(len(benchEvent(0).JSON)))
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for es := range batches {
						if _, err := l.Append(ctx, es); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(100*b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}

// benchLog builds (once per process) a durable log of EVTCTL_BENCH_EVENTS events (default
// 200,000) for the read benchmarks.
var benchLogOnce struct {
	sync.Once
	l   *Log
	cs  []cursor.Cursor
	err error
}

func benchLog(b *testing.B) (*Log, []cursor.Cursor) {
	benchLogOnce.Do(func() {
		n := 200_000
		if s := os.Getenv("EVTCTL_BENCH_EVENTS"); s != "" {
			n, _ = strconv.Atoi(s)
		}
		dir, err := os.MkdirTemp("", "evtctl-bench-")
		if err != nil {
			benchLogOnce.err = err
			return
		}
		l, err := Open(Options{Dir: dir, Sync: SyncNone, DedupeWindow: -1})
		if err != nil {
			benchLogOnce.err = err
			return
		}
		// Keep one cursor per 1000 events as seek targets.
		for i := 0; i < n; i += 1000 {
			es := make([]Entry, min(1000, n-i))
			for j := range es {
				es[j] = benchEvent(i + j)
			}
			res, err := l.Append(ctx, es)
			if err != nil {
				benchLogOnce.err = err
				return
			}
			benchLogOnce.cs = append(benchLogOnce.cs, res[0].Cursor)
		}
		benchLogOnce.l = l
	})
	if benchLogOnce.err != nil {
		b.Fatal(benchLogOnce.err)
	}
	return benchLogOnce.l, benchLogOnce.cs
}

// BenchmarkPage reads a newest-first page of 10 at the head and deep in the log (before a
// cursor near the start): the ratio deep/head shows that finding a cursor is not a walk.
func BenchmarkPage(b *testing.B) {
	l, cs := benchLog(b)
	for _, tc := range []struct {
		name   string
		before cursor.Cursor
	}{{"head", cursor.Cursor{}}, {"middle", cs[len(cs)/2]}, {"deep", cs[1]}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				p, err := l.Read(ctx, Query{Before: tc.before, Max: 10})
				if err != nil || len(p.Items) != 10 {
					b.Fatalf("%d items, %v", len(p.Items), err)
				}
			}
		})
	}
}

// BenchmarkSeekAfter is the ascending catch-up page: 100 items after a cursor.
func BenchmarkSeekAfter(b *testing.B) {
	l, cs := benchLog(b)
	for _, tc := range []struct {
		name  string
		after cursor.Cursor
	}{{"near-head", cs[len(cs)-2]}, {"deep", cs[1]}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				p, err := l.Read(ctx, Query{After: tc.after, Max: 100, Ascending: true})
				if err != nil || len(p.Items) != 100 {
					b.Fatalf("%d items, %v", len(p.Items), err)
				}
			}
		})
	}
}

// BenchmarkFilteredScan walks the whole log oldest first with a filter that matches 1% of
// events, in pages of 100, and reports events scanned per second.
func BenchmarkFilteredScan(b *testing.B) {
	l, _ := benchLog(b)
	needle := []byte("ecommerce.order.purchased")
	match := func(js []byte) bool { return bytes.Contains(js, needle) }
	total := l.Stats().Items
	b.SetBytes(int64(total) * int64(len(benchEvent(0).JSON)))
	start := time.Now()
	for b.Loop() {
		q := Query{Max: 100, Ascending: true, Match: match}
		for {
			p, err := l.Read(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			if !p.More {
				break
			}
			q.After = p.Items[len(p.Items)-1].Cursor
		}
	}
	b.ReportMetric(float64(total)*float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkAppendLargeBatches measures the work of appending batches as evtctl emit --file
// sends them (2,000 events, one appender) to a durable log without fsync: the dedupe window,
// the framing and the write. One iteration is one batch.
func BenchmarkAppendLargeBatches(b *testing.B) {
	const n = 2000
	l, err := Open(Options{Dir: b.TempDir(), Sync: SyncNone})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	js := benchEvent(0).JSON
	entries := make([]Entry, b.N*n)
	for i := range entries {
		entries[i] = Entry{Type: "org.openedx.learning.course.enrollment.created.v1", Source: "openedx/lms/web", ID: "large-" + strconv.Itoa(i), JSON: js}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := l.Append(ctx, entries[i*n:(i+1)*n]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}
