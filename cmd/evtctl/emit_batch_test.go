package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/emit"
	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/wire"
)

func init() {
	scriptCmds["genevents"] = cmdGenEvents
}

// cmdGenEvents writes a file of N CloudEvents in JSON lines, of SIZE bytes each (default
// 500), with the ids PREFIX-1 to PREFIX-N (default e), and beside it FILE.ids: the ids, one
// a line, in order.
//
//	genevents FILE N [SIZE [PREFIX]]
func cmdGenEvents(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 4 {
		ts.Fatalf("usage: genevents FILE N [SIZE [PREFIX]]")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	size, prefix := 500, "e"
	if len(args) > 2 {
		size, err = strconv.Atoi(args[2])
		ts.Check(err)
	}
	if len(args) > 3 {
		prefix = args[3]
	}
	var events, ids strings.Builder
	for i := 1; i <= n; i++ {
		ev := testEvent(prefix+"-"+strconv.Itoa(i), size)
		events.Write(ev)
		events.WriteByte('\n')
		fmt.Fprintf(&ids, "%s-%d\n", prefix, i)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(events.String()), 0o644))
	ts.Check(os.WriteFile(ts.MkAbs(args[0]+".ids"), []byte(ids.String()), 0o644))
}

// testEvent returns a CloudEvent in JSON with this id, padded to size bytes when it is
// shorter.
func testEvent(id string, size int) []byte {
	head := `{"specversion":"1.0","id":"` + id + `","source":"/test/file","type":"org.example.file.line.v1","time":"2026-11-22T10:00:00Z","data":{"pad":"`
	tail := `"}}`
	return []byte(head + strings.Repeat("x", max(0, size-len(head)-len(tail))) + tail)
}

// batchNode is a node in this process for the emit tests, with its log at hand. wrap, when
// set, stands between the listener and the node.
func batchNode(t *testing.T, lopts eventlog.Options, wrap func(node http.Handler) http.Handler) (string, *eventlog.Log) {
	t.Helper()
	return inProcessNode(t, lopts, server.Config{}, wrap)
}

// inProcessNode serves a node over a new log on a loopback port, with the node's own HTTP
// limits; wrap, when set, stands between the listener and the node. All is stopped when t
// ends.
func inProcessNode(t *testing.T, lopts eventlog.Options, cfg server.Config, wrap func(node http.Handler) http.Handler) (string, *eventlog.Log) {
	t.Helper()
	store, err := eventlog.Open(lopts)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = store
	srv := server.New(cfg)
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer(ln.Addr().String(), 5*time.Second)
	hs.Handler = h
	go hs.Serve(ln)
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		store.Close()
	})
	return "http://" + ln.Addr().String(), store
}

// storedIDs returns the ids of the events the log holds, oldest first.
func storedIDs(t *testing.T, store *eventlog.Log) []string {
	t.Helper()
	var ids []string
	var after cursor.Cursor
	for {
		p, err := store.Read(context.Background(), eventlog.Query{After: after, Max: 1000, Ascending: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			ids = append(ids, gjson.GetBytes(it.JSON, "id").String())
			after = it.Cursor
		}
		if !p.More {
			return ids
		}
	}
}

// waitFor waits until ok holds; it fails the test when that takes longer than a minute,
// which only a test that is going to fail anyway does.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A batch whose reply is lost after the node stored it (the connection drops between the
// append and the reply) is sent again; the node answers the repeat from its (source, id)
// window, so that every event is stored once, in the file's order.
func TestEmitRetriedBatchIsNotDuplicated(t *testing.T) {
	t.Parallel()
	var ingests atomic.Int32
	url, store := batchNode(t, eventlog.Options{}, func(node http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || r.URL.Path != "/events" || ingests.Add(1) != 2 {
				node.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			node.ServeHTTP(rec, r) // stored...
			if rec.Code != http.StatusOK {
				t.Errorf("the node answered the second batch %d: %s", rec.Code, rec.Body)
			}
			conn, _, err := http.NewResponseController(w).Hijack() // ...and the reply lost
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
		})
	})
	file, want := writeEventsFile(t, "r", 300, 200)
	out, errOut := emitFileInBatches(t, url, file)
	if !strings.Contains(errOut.String(), "retrying") {
		t.Errorf("no retry reported: %s", errOut)
	}
	if n := ingests.Load(); n != 4 {
		t.Errorf("%d ingest requests, want 4 (three batches, one sent twice)", n)
	}
	checkStored(t, store, want)
	// Each event has a line; those of the batch sent twice are the node's repeats.
	sc := bufio.NewScanner(out)
	n, dups := 0, 0
	for sc.Scan() {
		var r emit.Ack
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if n++; r.ID != want[n-1] {
			t.Fatalf("line %d is for %s, want %s", n, r.ID, want[n-1])
		}
		if r.Duplicate {
			dups++
		}
	}
	if n != 300 || dups != 100 {
		t.Errorf("%d lines, %d duplicates; want 300, 100", n, dups)
	}
}

// Events a slow producer writes to stdin are delivered while it is still writing: a batch
// does not wait to be full once the input pauses.
func TestEmitSlowProducerIsNotHeldUp(t *testing.T) {
	t.Parallel()
	url, store := batchNode(t, eventlog.Options{}, nil)
	pr, pw := io.Pipe()
	streams, _, out, errOut := testStreams()
	streams.In = pr
	done := make(chan int, 1)
	go func() {
		done <- execute(context.Background(), streams, nil, []string{"emit", "--node", url, "--file", "-", "-o", "json"})
	}()
	write := func(from, to int) {
		for i := from; i <= to; i++ {
			if _, err := pw.Write(append(testEvent("s-"+strconv.Itoa(i), 100), '\n')); err != nil {
				t.Fatal(err)
			}
		}
	}
	stored := func(n int) func() bool { return func() bool { return store.Stats().Items == uint64(n) } }
	write(1, 3)
	waitFor(t, "the first 3 events to be stored while stdin stays open", stored(3))
	write(4, 4)
	waitFor(t, "the 4th event", stored(4))
	// A line that arrives in two pieces is one event (io.Pipe hands each write over whole
	// before the next).
	ev := append(testEvent("s-5", 100), '\n')
	for _, piece := range [][]byte{ev[:40], ev[40:]} {
		if _, err := pw.Write(piece); err != nil {
			t.Fatal(err)
		}
	}
	write(6, 6)
	pw.Close()
	if code := <-done; code != 0 {
		t.Fatalf("emit exited %d: %s", code, errOut)
	}
	if got := strings.Join(storedIDs(t, store), " "); got != "s-1 s-2 s-3 s-4 s-5 s-6" {
		t.Errorf("the node holds %s", got)
	}
	if n := strings.Count(out.String(), "\n"); n != 6 {
		t.Errorf("%d lines on stdout, want 6: %s", n, out)
	}
}

// writeEventsFile writes n test events with ids prefix-1 to prefix-n and returns the file
// and the ids.
func writeEventsFile(t *testing.T, prefix string, n, size int) (string, []string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "events.jsonl")
	var lines strings.Builder
	var ids []string
	for i := 1; i <= n; i++ {
		id := prefix + "-" + strconv.Itoa(i)
		ids = append(ids, id)
		lines.Write(testEvent(id, size))
		lines.WriteByte('\n')
	}
	if err := os.WriteFile(file, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, ids
}

// emitFileInBatches runs emit --file to the node at url in batches of 100, and fails t
// unless it exits 0.
func emitFileInBatches(t *testing.T, url, file string) (out, errOut *bytes.Buffer) {
	t.Helper()
	streams, _, out, errOut := testStreams()
	if code := execute(context.Background(), streams, nil, []string{"emit", "--node", url, "--file", file, "--batch-size", "100", "-o", "json"}); code != 0 {
		t.Fatalf("emit exited %d: %s", code, errOut)
	}
	return out, errOut
}

// checkStored fails t unless the log holds exactly the events of want, once each, in order.
func checkStored(t *testing.T, store *eventlog.Log, want []string) {
	t.Helper()
	if got := storedIDs(t, store); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the node holds %d events: %v\nwant the %d of the file, once each, in order", len(got), got, len(want))
	}
}

// orderSeq is the batch number of an ordered batch request; 0 without the header.
func orderSeq(r *http.Request) int {
	_, n, _ := strings.Cut(r.Header.Get(wire.HeaderOrder), " ")
	seq, _ := strconv.Atoi(n)
	return seq
}

// With the defaults, once the node has said it keeps their order, the next batches are sent
// before the reply to the one before them, and the node stores them in the file's order:
// here batch 2 is held until batch 4 has arrived (three in flight), and batches 3 and 4
// reach the node first.
func TestEmitSendsTheNextBatchBeforeTheReply(t *testing.T) {
	t.Parallel()
	fourth := make(chan struct{})
	var once atomic.Bool
	url, store := batchNode(t, eventlog.Options{}, func(node http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch orderSeq(r) {
			case 2:
				select {
				case <-fourth:
				case <-time.After(time.Minute): // only a failing test waits this long
					t.Error("batch 4 was not sent while batch 2 was in flight")
				}
			case 4:
				if once.CompareAndSwap(false, true) {
					close(fourth)
				}
			}
			node.ServeHTTP(w, r)
		})
	})
	file, want := writeEventsFile(t, "p", 500, 200)
	out, _ := emitFileInBatches(t, url, file)
	checkStored(t, store, want)
	if n := strings.Count(out.String(), "\n"); n != len(want) {
		t.Fatalf("%d lines of output, want %d", n, len(want))
	}
	for i, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if id := gjson.Get(line, "id").String(); id != want[i] {
			t.Fatalf("output line %d is for %s, want %s", i+1, id, want[i])
		}
	}
}

// A batch the node refuses for its place in the sequence (as when the batch before it came
// too late, or the node restarted and forgot the sequence) is sent again on its own after
// the one before it, and the batch sent after it again after it; every event is stored
// once, in order.
func TestEmitResendsABatchRefusedForItsPlace(t *testing.T) {
	t.Parallel()
	var refused atomic.Bool
	var ingests atomic.Int32
	url, store := batchNode(t, eventlog.Options{}, func(node http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/events" {
				ingests.Add(1)
			}
			if orderSeq(r) == 3 && refused.CompareAndSwap(false, true) {
				w.Header().Set(wire.HeaderOrder, "refused")
				http.Error(w, `{"error":"batch 2 of this sequence did not arrive within 10s"}`, http.StatusConflict)
				return
			}
			node.ServeHTTP(w, r)
		})
	})
	file, want := writeEventsFile(t, "q", 500, 200)
	emitFileInBatches(t, url, file)
	if !refused.Load() {
		t.Fatal("no batch was sent as batch 3 of a sequence")
	}
	checkStored(t, store, want)
	// Batches 4 and 5 were in flight behind batch 3 (three batches are); they are stopped
	// (the node stores nothing after a batch it refused) and sent again after batch 3: five
	// batches, and batch 3 again with those of 4 and 5 that had reached the node before they
	// were stopped (batch 5 may not have).
	if n := ingests.Load(); n != 8 && n != 7 {
		t.Errorf("%d ingest requests, want 8 (five batches, three sent twice) or 7 (batch 5 stopped before it was sent)", n)
	}
}
