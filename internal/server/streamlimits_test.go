package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/wire"
)

// heldStore is a budgetStore whose reads wait at a gate until it is closed, and which notes
// the most bytes of items one read returned.
type heldStore struct {
	*budgetStore
	gate     chan struct{}
	waiting  atomic.Int32
	mostRead atomic.Int64
}

func (h *heldStore) Read(ctx context.Context, q eventlog.Query) (eventlog.Page, error) {
	if h.gate != nil {
		h.waiting.Add(1)
		select {
		case <-h.gate:
		case <-ctx.Done():
			return eventlog.Page{}, ctx.Err()
		}
	}
	p, err := h.budgetStore.Read(ctx, q)
	n := 0
	for _, it := range p.Items {
		n += len(it.JSON) + len(it.Type)
	}
	for {
		m := h.mostRead.Load()
		if int64(n) <= m || h.mostRead.CompareAndSwap(m, int64(n)) {
			break
		}
	}
	return p, err
}

// Streams at once are bounded by MaxStreams: one more is refused with 503 and Retry-After,
// and is served once one has ended.
func TestStreamsAreBounded(t *testing.T) {
	h := &heldStore{budgetStore: newBudgetStore(10, func(int) string { return "t" }), gate: make(chan struct{})}
	s := New(Config{Store: h, MaxStreams: 2})
	defer s.Shutdown(context.Background())
	ctx, cancel := testwait.Context(t, t.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	within := make([]*httptest.ResponseRecorder, 2)
	for i := range within {
		within[i] = httptest.NewRecorder()
		wg.Go(func() { s.ServeHTTP(within[i], httptest.NewRequestWithContext(ctx, "GET", wire.PathStream, nil)) })
	}
	testwait.Until(t, "two streams are reading", func() bool { return h.waiting.Load() == 2 })
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "GET", wire.PathStream, nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a stream beyond the bound: %d, Retry-After %q: %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	close(h.gate)
	wg.Wait()
	for _, rec := range within {
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `{"end":{"more":false`) {
			t.Fatalf("a stream within the bound: %d %s", rec.Code, rec.Body)
		}
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "GET", wire.PathStream, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("a stream once the others ended: %d %s", rec.Code, rec.Body)
	}
}

// A stream holds about its write buffer's worth of events at a time, not a step of a
// thousand events whatever their size.
func TestStreamStepsAreBoundedInBytes(t *testing.T) {
	st := newBudgetStore(400, func(int) string { return "t" })
	for i := range st.items {
		st.items[i].JSON = append(st.items[i].JSON[:len(st.items[i].JSON)-1], `,"more":"`+strings.Repeat("y", 8<<10)+`"}`...)
	}
	h := &heldStore{budgetStore: st}
	s := New(Config{Store: h})
	defer s.Shutdown(context.Background())
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", wire.PathStream, nil))
	if rec.Code != http.StatusOK || strings.Count(rec.Body.String(), "\n") != len(st.items)+1 {
		t.Fatalf("the stream: %d, %d lines", rec.Code, strings.Count(rec.Body.String(), "\n"))
	}
	if most := h.mostRead.Load(); most > streamFlush+64<<10 {
		t.Fatalf("a step of the stream held %d bytes of events, over %d", most, streamFlush+64<<10)
	}
}

// smallBuffers is a listener whose connections have small socket buffers, so that what a
// client has not read stays with the server.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// A stream whose reader takes its bytes too slowly overall is ended, though each write
// makes some progress: the reader's time in writes may be StreamGrace plus a second for
// every MinStreamRate bytes sent.
func TestSlowStreamReaderIsCutOff(t *testing.T) {
	st := newBudgetStore(20000, func(int) string { return "t" }) // about 7 MB
	s := New(Config{Store: st, StreamGrace: 200 * time.Millisecond, MinStreamRate: 1 << 20})
	defer s.Shutdown(context.Background())
	ts := httptest.NewUnstartedServer(s)
	ts.Listener = smallBuffers{ts.Listener}
	ts.Start()
	defer ts.Close()

	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := io.WriteString(c, "GET "+wire.PathStream+" HTTP/1.1\r\nHost: node\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 512), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream: %v %v", resp, err)
	}
	// 1,600 bytes every 25 ms: every write goes on, 64 KB/s overall.
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	expired := testwait.Expired(t)
	buf := make([]byte, 1600)
	var got int
	for {
		select {
		case <-tick.C:
		case <-expired:
			t.Fatalf("the stream went on with a reader taking 64 KB/s (%d bytes read)", got)
		}
		n, err := resp.Body.Read(buf)
		got += n
		if err != nil {
			if strings.Contains(string(buf[:n]), `{"end":`) {
				t.Fatalf("the stream was read to its end (%d bytes)", got)
			}
			return // cut off
		}
	}
}
