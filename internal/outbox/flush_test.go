package outbox_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/outbox"
	"github.com/evtctl/evtctl/internal/server"
)

// flush sends every pending entry and removes those the target accepted.
func flush(ctx context.Context, sp *outbox.Spool, s *deliver.Sender) (results []deliver.Result, err error) {
	es, err := sp.Pending()
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		evs, err := e.Events()
		if err != nil {
			return results, err
		}
		res, err := s.Send(ctx, evs)
		if err != nil {
			return results, err
		}
		results = append(results, res...)
		if err := sp.Done(e); err != nil {
			return results, err
		}
	}
	return results, nil
}

// TestOutboxDeliversOnce spools events, "crashes" after sending the first
// batch but before removing it, fails against a node that is down, then
// flushes to a node that is up: every event is stored exactly once.
func TestOutboxDeliversOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	node := httptest.NewServer(server.New(server.Config{Store: st}))
	defer node.Close()

	sp, err := outbox.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const batches, per = 5, 4
	for b := range batches {
		var evs [][]byte
		for i := range per {
			evs = append(evs, fmt.Appendf(nil, `{"specversion":"1.0","id":"ev-%d-%d","source":"/outbox","type":"t"}`, b, i))
		}
		if _, err := sp.Put(evs); err != nil {
			t.Fatal(err)
		}
	}
	up, err := deliver.New(deliver.Options{URL: node.URL + "/events", Mode: deliver.Batch})
	if err != nil {
		t.Fatal(err)
	}
	es, _ := sp.Pending()
	first, _ := es[0].Events()
	sent, err := up.Send(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	sp.Close() // the crash: the first batch was delivered but not removed

	down := httptest.NewServer(nil)
	down.Close()
	quick := deliver.WebhookPolicy()
	quick.Backoff = deliver.Backoff{Initial: time.Millisecond, MaxAttempts: 2}
	dead, err := deliver.New(deliver.Options{URL: down.URL + "/events", Mode: deliver.Binary, Policy: &quick})
	if err != nil {
		t.Fatal(err)
	}
	sp, err = outbox.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if _, err := flush(ctx, sp, dead); err == nil {
		t.Fatal("flushing to a node that is down succeeded")
	}
	if es, _ := sp.Pending(); len(es) != batches {
		t.Fatalf("%d entries pending after a failed flush, want %d", len(es), batches)
	}

	for _, mode := range []deliver.Mode{deliver.Structured, deliver.Batch} {
		s, err := deliver.New(deliver.Options{URL: node.URL + "/events", Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		res, err := flush(ctx, sp, s)
		if err != nil {
			t.Fatal(err)
		}
		if mode == deliver.Batch {
			if len(res) != 0 {
				t.Errorf("a second flush sent %d events", len(res))
			}
			break
		}
		if len(res) != batches*per {
			t.Fatalf("flushed %d events, want %d", len(res), batches*per)
		}
		cursors := map[string]bool{}
		for i, r := range res {
			if i < per {
				if !r.Duplicate || r.Cursor != sent[i].Cursor {
					t.Errorf("resent event %d: %+v, want a duplicate of %s", i, r, sent[i].Cursor)
				}
			} else if r.Duplicate {
				t.Errorf("event %d: a duplicate", i)
			}
			cursors[r.Cursor] = true
		}
		if len(cursors) != batches*per {
			t.Errorf("%d distinct cursors, want %d", len(cursors), batches*per)
		}
	}
	if es, _ := sp.Pending(); len(es) != 0 {
		t.Errorf("%d entries left", len(es))
	}
	if n := st.Stats().Items; n != batches*per {
		t.Errorf("the log holds %d events, want %d", n, batches*per)
	}
}
