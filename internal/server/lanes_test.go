package server

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/filter"
	"github.com/evtctl/evtctl/pkg/wire"
)

// gatedStore is a budgetStore whose filtered reads that may examine more than quick records
// wait at a gate: the long scans of costly filters, held for as long as a test likes.
type gatedStore struct {
	*budgetStore
	quick   int
	gate    chan struct{}
	waiting atomic.Int32
}

func (g *gatedStore) Read(ctx context.Context, q eventlog.Query) (eventlog.Page, error) {
	if q.Match != nil && (q.Budget == 0 || q.Budget > g.quick) {
		g.waiting.Add(1)
		select {
		case <-g.gate:
		case <-ctx.Done():
			return eventlog.Page{}, ctx.Err()
		}
	}
	return g.budgetStore.Read(ctx, q)
}

// A read's cost does not decide whether another client is served: while costly filtered
// reads and streams, more of them than there are read slots, are in the middle of long
// scans, a read of a few items is served.
func TestCostlyReadsLeaveCheapOnesServed(t *testing.T) {
	const maxEventSize = 1024
	query := strings.TrimSuffix(strings.Repeat("type CONTAINS 'zz' OR ", 80), " OR ")
	st := newBudgetStore(20000, func(int) string { return "common" })
	st.filter, _ = filter.Compile(query)
	g := &gatedStore{budgetStore: st, gate: make(chan struct{}),
		quick: int(quickWork/(int64(st.filter.Work())*maxEventSize)) + 1}
	s := New(Config{Store: g, MaxEventSize: maxEventSize, MaxReads: 2, MaxScans: 1})
	defer s.Shutdown(context.Background())

	ctx, cancel := testwait.Context(t, t.Context())
	defer cancel()
	q := url.QueryEscape(query)
	var wg sync.WaitGroup
	costly := []string{
		"/events?maxItems=10&before=7fffffffffffffff-0000000000000000&query=" + q,
		"/events?maxItems=10&order=asc&query=" + q,
		wire.PathStream + "?query=" + q,
		wire.PathStream + "?query=" + q,
	}
	bodies := make([]string, len(costly))
	for i, path := range costly {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "GET", path, nil))
			bodies[i] = rec.Body.String()
		})
	}
	testwait.Until(t, "costly reads are in their long scans", func() bool {
		held := len(s.reads)
		return g.waiting.Load() > 0 && (held == 0 || held == cap(s.reads))
	})

	done := make(chan string, 1)
	go func() {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "GET", "/events?maxItems=5&before=7fffffffffffffff-0000000000000000", nil))
		done <- rec.Body.String()
	}()
	select {
	case b := <-done:
		var r budgetReply
		if err := json.Unmarshal([]byte(b), &r); err != nil || len(r.Items) != 5 {
			t.Fatalf("the cheap read beside the costly ones: %s", b)
		}
	case <-ctx.Done():
		t.Fatal("the cheap read waited behind the costly ones until the end of the test's time")
	}
	close(g.gate)
	wg.Wait()
	for i, b := range bodies {
		if !strings.Contains(b, `"more":`) {
			t.Errorf("costly read %d: %s", i, b)
		}
	}
}
