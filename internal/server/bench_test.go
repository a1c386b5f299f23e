package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
)

const (
	benchBatch       = 100 // events per batch
	benchParallelism = 4   // clients per GOMAXPROCS
)

var benchPad = strings.Repeat("p", 300)

// appendBenchEvent writes an event of about 500 bytes in JSON.
func appendBenchEvent(b []byte, id int64) []byte {
	b = append(b, `{"specversion":"1.0","id":"bench-`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `","source":"https://bench.example.com/clients/ingest","type":"com.example.bench.ingested.v1","time":"2026-11-22T13:39:11.950062001Z","datacontenttype":"application/json","data":{"n":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"pad":"`...)
	b = append(b, benchPad...)
	return append(b, `"}}`...)
}

// keepAliveClient is a client that keeps a connection per concurrent client open.
func keepAliveClient(b *testing.B, n *node) *http.Client {
	tr := n.ts.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 256
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

// postBench posts body and wants 200; the body is drained so the connection is reused.
func postBench(b *testing.B, c *http.Client, url, contentType string, body []byte) bool {
	resp, err := c.Post(url, contentType, bytes.NewReader(body))
	if err != nil {
		b.Error(err)
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Errorf("HTTP %d", resp.StatusCode)
		return false
	}
	return true
}

// BenchmarkIngestBatch posts batches of 100 events of about 500 bytes each over loopback
// HTTP with keep-alive, from several concurrent clients, into a durable log (fsync per
// group commit). One iteration is one batch.
func BenchmarkIngestBatch(b *testing.B) {
	n := newNode(b, server.Config{}, eventlog.Options{Dir: b.TempDir()})
	c := keepAliveClient(b, n)
	url := n.ts.URL + "/events"
	var ids atomic.Int64
	var sent atomic.Int64
	b.SetParallelism(benchParallelism)
	b.SetBytes(int64(len(appendBenchEvent(nil, 1e9)) * benchBatch))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var body []byte
		for pb.Next() {
			first := ids.Add(benchBatch) - benchBatch
			body = append(body[:0], '[')
			for i := range int64(benchBatch) {
				if i > 0 {
					body = append(body, ',')
				}
				body = appendBenchEvent(body, first+i)
			}
			body = append(body, ']')
			if !postBench(b, c, url, "application/cloudevents-batch+json", body) {
				return
			}
			sent.Add(benchBatch)
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if got := n.log.Stats().Appended; got != uint64(sent.Load()) || got != uint64(b.N*benchBatch) {
		b.Fatalf("appended %d events, sent %d in %d batches", got, sent.Load(), b.N)
	}
	b.ReportMetric(float64(sent.Load())/elapsed.Seconds(), "events/s")
}

// BenchmarkIngestSingle posts one structured event per request over loopback HTTP with
// keep-alive, from several concurrent clients, into a durable log. One iteration is one post.
func BenchmarkIngestSingle(b *testing.B) {
	n := newNode(b, server.Config{}, eventlog.Options{Dir: b.TempDir()})
	c := keepAliveClient(b, n)
	url := n.ts.URL + "/events"
	var ids atomic.Int64
	var sent atomic.Int64
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var body []byte
		for pb.Next() {
			body = appendBenchEvent(body[:0], ids.Add(1))
			if !postBench(b, c, url, "application/cloudevents+json", body) {
				return
			}
			sent.Add(1)
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if got := n.log.Stats().Appended; got != uint64(sent.Load()) || got != uint64(b.N) {
		b.Fatalf("appended %d events, sent %d", got, sent.Load())
	}
	b.ReportMetric(float64(sent.Load())/elapsed.Seconds(), "posts/s")
}

// BenchmarkEventsPageHead asks over loopback HTTP for the newest page of 10 of a log of
// 10,000 events, as a client polling the head does.
func BenchmarkEventsPageHead(b *testing.B) {
	n := newMemNode(b)
	var entries []eventlog.Entry
	for i := range int64(10_000) {
		entries = append(entries, eventlog.Entry{
			Type: "com.example.bench.ingested.v1", Source: "/bench", ID: fmt.Sprint(i), JSON: appendBenchEvent(nil, i),
		})
	}
	if _, err := n.log.Append(context.Background(), entries); err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxItems":10}}`)
	want := []byte(`"cursor":`)
	b.Run("http", func(b *testing.B) {
		c := keepAliveClient(b, n)
		for b.Loop() {
			resp, err := c.Post(n.ts.URL+"/", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			reply, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || bytes.Count(reply, want) != 10 {
				b.Fatalf("HTTP %d %v: %s", resp.StatusCode, err, abbrev(reply))
			}
		}
		b.ReportMetric(float64(10*b.N)/b.Elapsed().Seconds(), "items/s")
	})
	// The handler alone, without the network and the client.
	b.Run("handler", func(b *testing.B) {
		for b.Loop() {
			rec := httptest.NewRecorder()
			n.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body)))
			if rec.Code != http.StatusOK || bytes.Count(rec.Body.Bytes(), want) != 10 {
				b.Fatalf("HTTP %d: %s", rec.Code, abbrev(rec.Body.Bytes()))
			}
		}
		b.ReportMetric(float64(10*b.N)/b.Elapsed().Seconds(), "items/s")
	})
}

// BenchmarkEventsReplayPage asks the handler for pages of 1,000 events, oldest first, each
// after the last, as a replay does: the page is read, encoded and written whole.
func BenchmarkEventsReplayPage(b *testing.B) {
	n := newNode(b, server.Config{MaxItems: 1000}, eventlog.Options{})
	const events = 20_000
	var entries []eventlog.Entry
	for i := range int64(events) {
		entries = append(entries, eventlog.Entry{
			Type: "com.example.bench.ingested.v1", Source: "/bench", ID: fmt.Sprint(i), JSON: appendBenchEvent(nil, i),
		})
	}
	if _, err := n.log.Append(context.Background(), entries); err != nil {
		b.Fatal(err)
	}
	want := []byte(`"cursor":`)
	after := ""
	for b.Loop() {
		body := `{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxItems":1000,"order":"asc","after":"` + after + `"}}`
		rec := httptest.NewRecorder()
		n.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
		reply := rec.Body.Bytes()
		if rec.Code != http.StatusOK || bytes.Count(reply, want) != 1000 {
			b.Fatalf("HTTP %d: %s", rec.Code, abbrev(reply))
		}
		after = string(reply[bytes.LastIndex(reply, want)+len(want)+1:][:33])
		if strings.Contains(string(reply[len(reply)-200:]), `"more":false`) {
			after = "" // the end of the log: from the start again
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "items/s")
}
