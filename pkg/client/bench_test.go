package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
)

// paddedEvent returns an event whose CloudEvent JSON is size bytes.
func paddedEvent(typ string, size int) testEvent {
	e := events(1, typ)[0]
	base := len(cloudEventJSON(e)) + len(`,"pad":""`)
	e.Pad = max(size-base, 1)
	return e
}

// BenchmarkRangeAsc: a chronological Range over 100,000 stored ~600-byte CloudEvents from an
// in-process evtctl node over loopback HTTP, 1,000 events a page.
func BenchmarkRangeAsc(b *testing.B) {
	const total, size, page = 100_000, 600, 1000
	store, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	srv := server.New(server.Config{Store: store, MaxItems: page})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Shutdown(context.Background())
	for range total / page {
		entries := make([]eventlog.Entry, page)
		for i := range entries {
			e := paddedEvent("bench.event", size)
			entries[i] = eventlog.Entry{Type: e.Type, Source: "/bench", ID: fmt.Sprint(e.N), JSON: cloudEventJSON(e)}
		}
		if _, err := store.Append(context.Background(), entries); err != nil {
			b.Fatal(err)
		}
	}
	if got := len(cloudEventJSON(paddedEvent("bench.event", size))); got != size {
		b.Fatalf("events of %d bytes", got)
	}
	c := newTestClient(b, ts.URL)
	b.SetBytes(total * size)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		got := 0
		err := c.Range(context.Background(), RangeOptions{PageSize: page}, func(items []Item) error {
			got += len(items)
			return nil
		})
		if err != nil || got != total {
			b.Fatalf("Range: %d events, %v", got, err)
		}
		n += got
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkStreamLatency: events appended one at a time, about 1,000 a second, to a durable
// node (each append fsynced before it is acknowledged) while a Stream follows the head; the
// latency is from the append's acknowledgement to fn receiving the event.
func BenchmarkStreamLatency(b *testing.B) {
	store, err := eventlog.Open(eventlog.Options{Dir: b.TempDir(), Sync: eventlog.SyncAlways})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	srv := server.New(server.Config{Store: store})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Shutdown(context.Background())

	var mu sync.Mutex
	received := make(map[string]time.Time, b.N)
	c := newTestClient(b, ts.URL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.Stream(ctx, StreamOptions{Wait: 5 * time.Second}, func(bt Batch) error {
			now := time.Now()
			mu.Lock()
			for _, it := range bt.Items {
				received[it.Cursor] = now
			}
			mu.Unlock()
			return nil
		})
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitFor(b, func() bool { return srv.Waiters() >= 1 }, func() string { return "the stream is not waiting" })

	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	acked := make(map[string]time.Time, b.N)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	for range b.N {
		<-tick.C
		e := paddedEvent("bench.latency", 600)
		resp, err := hc.Post(ts.URL+"/events", "application/cloudevents+json", bytes.NewReader(cloudEventJSON(e)))
		if err != nil {
			b.Fatal(err)
		}
		var res struct {
			Cursor string `json:"cursor"`
		}
		err = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("ingest: %d %v", resp.StatusCode, err)
		}
		acked[res.Cursor] = time.Now()
	}
	waitFor(b, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(received) >= b.N
	}, func() string { return "the stream fell behind" })
	b.StopTimer()

	mu.Lock()
	lat := make([]time.Duration, 0, b.N)
	early := 0
	for c, at := range acked {
		r, ok := received[c]
		if !ok {
			b.Fatalf("event %s never arrived", c)
		}
		if r.Before(at) {
			early++ // delivered before the appender had read its acknowledgement
		}
		lat = append(lat, max(r.Sub(at), 0))
	}
	mu.Unlock()
	slices.Sort(lat)
	q := func(p int) float64 { return float64(lat[min(len(lat)-1, len(lat)*p/100)]) / float64(time.Millisecond) }
	b.ReportMetric(q(50), "p50-ms")
	b.ReportMetric(q(99), "p99-ms")
	b.ReportMetric(100*float64(early)/float64(len(lat)), "early-%")
}
