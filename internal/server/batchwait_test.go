package server

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/eventlog"
)

// A batch of long-polls shares one wait, so it is answered within the write timeout: on a
// fake clock, eight calls that each ask for MaxWait are all answered within MaxWait, where
// eight waits one after another would take eight times that.
func TestBatchOfLongPollsSharesOneWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := eventlog.Open(eventlog.Options{})
		defer st.Close()
		const maxWait = 300 * time.Millisecond
		s := New(Config{Store: st, MaxWait: maxWait})
		defer s.Shutdown(context.Background())
		call := `{"jsonrpc":"2.0","id":1,"method":"events","params":{"waitTime":300000000}}`
		body := "[" + strings.Repeat(call+",", 7) + call + "]"
		start := time.Now()
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("POST", "/", strings.NewReader(body)))
		el := time.Since(start)
		if n := len(gjson.Get(rec.Body.String(), "#.result").Array()); n != 8 {
			t.Fatalf("%d results, want 8: %s", n, rec.Body.String())
		}
		if el == 0 || el > maxWait {
			t.Fatalf("a batch of 8 long-polls took %v; they should share one wait of at most %v", el, maxWait)
		}
	})
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

// Page building is bounded: a flood of reads cannot each hold a page in memory at once. In a
// synctest bubble, the reads are seen when every request has gone as far as it can.
func TestReadsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := eventlog.Open(eventlog.Options{})
		defer st.Close()
		bs := &blockingStore{Store: st, release: make(chan struct{})}
		s := New(Config{Store: bs, MaxReads: 2})
		defer s.Shutdown(context.Background())
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, httptest.NewRequest("GET", `/events?before="18ea61a27c39abd8-0000000000000001"`, nil))
			})
		}
		synctest.Wait() // each request reads, or waits for its turn to
		if n := bs.inFlight.Load(); n != 2 {
			t.Fatalf("%d reads in progress, want 2", n)
		}
		close(bs.release)
		wg.Wait()
		if p := bs.peak.Load(); p != 2 {
			t.Fatalf("%d reads ran at once, want at most 2 (and 2 reached)", p)
		}
	})
}
