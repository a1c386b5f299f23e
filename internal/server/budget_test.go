package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/filter"
)

// budgetStore is a Store over events held in a slice that honours Query.Budget as a store
// is to: a read examines at most Budget records and, when it stops short of its range for
// that, sets Page.Resume to the last record it examined. It counts the work a filter does
// on the records it examines, as the server accounts for it.
type budgetStore struct {
	mu      sync.Mutex
	items   []eventlog.Item
	changed chan struct{}

	work     int64 // bytes examined by filtered reads, times the filter's work
	examined int64 // records examined by filtered reads
	filter   *filter.Query
}

func newBudgetStore(count int, typ func(i int) string) *budgetStore {
	st := &budgetStore{changed: make(chan struct{})}
	for i := range count {
		t := typ(i)
		st.items = append(st.items, eventlog.Item{
			Cursor: cursor.New(int64(1e18)+int64(i)*1000, uint64(i+1), cursor.NodeWidth),
			Type:   t,
			JSON:   fmt.Appendf(nil, `{"specversion":"1.0","id":"%d","source":"/b","type":%q,"data":{"pad":"%s"}}`, i, t, strings.Repeat("x", 300)),
		})
	}
	return st
}

func (st *budgetStore) Read(ctx context.Context, q eventlog.Query) (eventlog.Page, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var p eventlog.Page
	if len(st.items) == 0 {
		return p, nil
	}
	p.Oldest, p.Newest = st.items[0].Cursor, st.items[len(st.items)-1].Cursor
	var in []eventlog.Item
	for _, it := range st.items {
		if (q.After.IsZero() || it.Cursor.After(q.After)) && (q.Before.IsZero() || q.Before.After(it.Cursor)) {
			in = append(in, it)
		}
	}
	if !q.Ascending {
		for i, j := 0, len(in)-1; i < j; i, j = i+1, j-1 {
			in[i], in[j] = in[j], in[i]
		}
	}
	limit := max(q.Max, 1)
	for n, it := range in {
		if q.Budget > 0 && n == q.Budget {
			p.Resume = in[n-1].Cursor
			break
		}
		if q.Match != nil {
			st.examined++
			st.work += int64(len(it.JSON) * st.filter.Work())
			if !q.Match(it.JSON) {
				continue
			}
		}
		if len(p.Items) == limit {
			p.More = true
			break
		}
		p.Items = append(p.Items, it)
	}
	return p, nil
}

func (st *budgetStore) Append(context.Context, []eventlog.Entry) ([]eventlog.AppendResult, error) {
	panic("not used")
}
func (st *budgetStore) Changed() <-chan struct{} { return st.changed }
func (st *budgetStore) Stats() eventlog.Stats    { return eventlog.Stats{} }
func (st *budgetStore) Close() error             { return nil }

// budgetReply is a result as a client reads it, resume included.
type budgetReply struct {
	Items []struct {
		Cursor string `json:"cursor"`
	} `json:"items"`
	More   bool   `json:"more"`
	Resume string `json:"resume"`
}

func getJSON(t *testing.T, s *Server, url string) (budgetReply, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
	var r budgetReply
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, rec.Body.String())
	}
	return r, rec.Body.String()
}

// A filtered read stops once its filter has done ScanBudget's worth of work and says where
// to resume; a client that resumes there, in either order, gets every match once, in order.
func TestScanBudgetBoundsAFilteredRead(t *testing.T) {
	const events = 20000
	st := newBudgetStore(events, func(i int) string {
		if i%997 == 0 {
			return "rare"
		}
		return "common"
	})
	query := "type = 'rare'"
	st.filter, _ = filter.Compile(query)
	const budget = 2_000_000 // bytes times the filter's work: some thousand records a request
	s := New(Config{Store: st, MaxItems: 1000, MaxEventSize: 1024, ScanBudget: budget})
	var want []string
	for i, it := range st.items {
		if i%997 == 0 {
			want = append(want, it.Cursor.String())
		}
	}
	for _, asc := range []bool{true, false} {
		order := map[bool]string{true: "asc", false: "desc"}[asc]
		var got []string
		pos, requests := "", 0
		for {
			url := "/events?maxItems=1000&query=type%20%3D%20%27rare%27&order=" + order
			switch {
			case asc:
				url += "&after=" + pos
			case pos == "":
				url += "&before=7fffffffffffffff-0000000000000000"
			default:
				url += "&before=" + pos
			}
			before := st.work
			r, raw := getJSON(t, s, url)
			requests++
			if used := st.work - before; used > budget {
				t.Fatalf("%s: a request did %d of work, over the budget of %d", order, used, budget)
			}
			for _, it := range r.Items {
				got = append(got, it.Cursor)
			}
			switch {
			case r.Resume != "":
				if !r.More {
					t.Fatalf("%s: resume without more: %s", order, raw)
				}
				pos = r.Resume
			case r.More:
				pos = r.Items[len(r.Items)-1].Cursor
			default:
				pos = "done"
			}
			if pos == "done" {
				break
			}
			if requests > events {
				t.Fatalf("%s: no end after %d requests", order, requests)
			}
		}
		if !asc {
			for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
				got[i], got[j] = got[j], got[i]
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("%s: got %d matches, want %d:\n%v\n%v", order, len(got), len(want), got, want)
		}
		if requests < 5 {
			t.Fatalf("%s: %d requests: the budget did not stop any read", order, requests)
		}
	}
}

// A long-poll whose read stops on the budget without finding anything answers at once, with
// where to resume, rather than wait on a range it has not seen the end of.
func TestLongPollAnswersWhenTheBudgetStopsIt(t *testing.T) {
	st := newBudgetStore(5000, func(int) string { return "common" })
	st.filter, _ = filter.Compile("type = 'rare'")
	s := New(Config{Store: st, MaxEventSize: 1024, ScanBudget: 1_000_000, MaxWait: time.Hour})
	defer s.Shutdown(context.Background())
	ctx := t.Context()
	done := pollGo(ctx, s, eventsParams{After: st.items[0].Cursor.String(), Query: "type = 'rare'", Wait: time.Hour})
	var res result
	for res.b == nil {
		select {
		case o := <-done:
			if o.rerr != nil {
				t.Fatalf("the long-poll: %+v", o.rerr)
			}
			res = o.res
		case <-time.After(time.Millisecond):
			if s.Waiters() > 0 {
				t.Fatal("the long-poll waits")
			}
		}
	}
	defer res.release()
	var r budgetReply
	if err := json.Unmarshal(res.b, &r); err != nil || len(r.Items) != 0 || !r.More || r.Resume == "" {
		t.Fatalf("the long-poll answered %s (%v), want no items, more and resume", res.b, err)
	}
	// resume follows newest and comes before order.
	res2, _ := s.events(ctx, &eventsParams{After: st.items[0].Cursor.String(), Query: "type = 'rare'", Ascending: true})
	defer res2.release()
	if !regexp.MustCompile(`"more":true,"oldest":"[0-9a-f-]+","newest":"[0-9a-f-]+","resume":"[0-9a-f-]+","order":"asc"}$`).Match(res2.b) {
		t.Fatalf("an ascending page that stopped on its budget: %s", res2.b)
	}
}

// A filter's work is counted per byte of the events it examines, times its passes over
// them: a filter that costs much per event is stopped after fewer events than a cheap one.
func TestScanBudgetWeighsTheFilter(t *testing.T) {
	const budget = 5_000_000
	examined := map[string]int64{}
	cheap, costly := "type = 'rare'", "type MATCHES '#.b.#' OR type MATCHES '#.c.#' OR a EXISTS OR b EXISTS"
	for _, query := range []string{cheap, costly} {
		st := newBudgetStore(20000, func(int) string { return strings.TrimSuffix(strings.Repeat("a.", 400), ".") })
		st.filter, _ = filter.Compile(query)
		s := New(Config{Store: st, MaxEventSize: 2048, ScanBudget: budget})
		q := strings.NewReplacer(" ", "%20", "'", "%27", "#", "%23", "=", "%3D").Replace(query)
		r, raw := getJSON(t, s, "/events?before=7fffffffffffffff-0000000000000000&query="+q)
		if len(r.Items) != 0 || !r.More || r.Resume == "" || st.work > budget {
			t.Fatalf("%s: %d records examined, %d of work: %s", query, st.examined, st.work, raw)
		}
		examined[query] = st.examined
	}
	if examined[cheap] < 5*examined[costly] {
		t.Fatalf("a cheap filter examined %d records, a costly one %d", examined[cheap], examined[costly])
	}
}
