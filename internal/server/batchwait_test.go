package server

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/eventlog"
)

// A batch of long-polls shares one wait, so it is answered within the write timeout.
func TestBatchOfLongPollsSharesOneWait(t *testing.T) {
	st, _ := eventlog.Open(eventlog.Options{})
	defer st.Close()
	s := New(Config{Store: st, MaxWait: 300 * time.Millisecond})
	call := `{"jsonrpc":"2.0","id":1,"method":"events","params":{"waitTime":300000000}}`
	body := "[" + strings.Repeat(call+",", 7) + call + "]"
	start := time.Now()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/", strings.NewReader(body)))
	el := time.Since(start)
	if n := len(gjson.Get(rec.Body.String(), "#.result").Array()); n != 8 {
		t.Fatalf("%d results, want 8: %s", n, rec.Body.String())
	}
	if el > 2*300*time.Millisecond {
		t.Fatalf("a batch of 8 long-polls took %v; they should share one 300ms wait", el)
	}
}

// blockingStore holds every Read until released, to count reads in progress.
type blockingStore struct {
	eventlog.Store
	inFlight, peak atomic.Int32
	release        chan struct{}
}

func (b *blockingStore) Read(ctx context.Context, q eventlog.Query) (eventlog.Page, error) {
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for {
		p := b.peak.Load()
		if n <= p || b.peak.CompareAndSwap(p, n) {
			break
		}
	}
	<-b.release
	return b.Store.Read(ctx, q)
}

// Page building is bounded: a flood of reads cannot each hold a page in memory at once.
func TestReadsAreBounded(t *testing.T) {
	st, _ := eventlog.Open(eventlog.Options{})
	defer st.Close()
	bs := &blockingStore{Store: st, release: make(chan struct{})}
	s := New(Config{Store: bs, MaxReads: 2})
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest("GET", `/events?before="18ea61a27c39abd8-0000000000000001"`, nil))
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for bs.inFlight.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(bs.release)
	wg.Wait()
	if p := bs.peak.Load(); p != 2 {
		t.Fatalf("%d reads ran at once, want at most 2 (and 2 reached)", p)
	}
}
