package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// rangeFixture is a node holding 25 blocks of 10 events, alternately Tx and NewBlock; the
// events of a block share one timestamp on an evtctl node, and have increasing ones on a
// Tendermint node.
type rangeFixture struct {
	n      testNode
	c      *Client
	blocks [][]string
	all    []string
	tx     []string // the Tx events' cursors
}

func newRangeFixture(t *testing.T, k nodeKind) *rangeFixture {
	t.Helper()
	f := &rangeFixture{n: k.new(t, nodeOpts{})}
	f.c = newTestClient(t, f.n.URL())
	for range 25 {
		evs := events(10, "Tx")
		for i := range evs {
			if i%2 == 1 {
				evs[i].Type = "NewBlock"
			}
		}
		cs := f.n.Append(t, evs...)
		f.blocks = append(f.blocks, cs)
		f.all = append(f.all, cs...)
		for i := 0; i < 10; i += 2 {
			f.tx = append(f.tx, cs[i])
		}
	}
	return f
}

// run runs Range and returns the cursors delivered, the size of each delivery and the number
// of calls the node saw.
func (f *rangeFixture) run(t *testing.T, opts RangeOptions) (got []string, sizes []int, calls int) {
	t.Helper()
	before := f.n.Rec().NumCalls()
	err := f.c.Range(context.Background(), opts, func(items []Item) error {
		if len(items) == 0 {
			t.Error("fn called with no items")
		}
		sizes = append(sizes, len(items))
		got = append(got, cursorsOf(items)...)
		return nil
	})
	if err != nil {
		t.Fatalf("Range: %v", err)
	}
	return got, sizes, f.n.Rec().NumCalls() - before
}

func tsTime(c string) time.Time { return time.Unix(0, cursor.MustParse(c).TS) }

// sameTimeAs returns the events of a block stamped with the same time as its i-th.
func sameTimeAs(block []string, i int) []string {
	var out []string
	for _, c := range block {
		if tsTime(c).Equal(tsTime(block[i])) {
			out = append(out, c)
		}
	}
	return out
}

func TestRangeFull(t *testing.T) {
	forEachRangeNode(t, func(t *testing.T, k nodeKind) {
		f := newRangeFixture(t, k)
		got, sizes, calls := f.run(t, RangeOptions{PageSize: 40})
		sameCursors(t, "chronological", got, f.all)
		for _, s := range sizes {
			if s > 40 {
				t.Fatalf("a delivery of %d items with PageSize 40", s)
			}
		}
		want := 1 + 7 // the probe, then 250 items in pages of 40
		if k.name == streamNode.name {
			want = 1 + 1 // the probe, then the stream
		}
		if calls != want {
			t.Errorf("%d calls, want %d", calls, want)
		}
		got, sizes, calls = f.run(t, RangeOptions{PageSize: 40, Reverse: true})
		sameCursors(t, "reverse", got, reversed(f.all))
		if calls != 1+7 || len(sizes) != 7 {
			t.Errorf("reverse: %d calls, %d deliveries; want 8 and 7", calls, len(sizes))
		}
		got, _, calls = f.run(t, RangeOptions{}) // default page size 100
		sameCursors(t, "default page size", got, f.all)
		if want = 1 + 3; k.name == streamNode.name {
			want = 1 + 1
		}
		if calls != want {
			t.Errorf("default page size: %d calls, want %d", calls, want)
		}
		for _, c := range f.n.Rec().Calls() {
			if c.Params.WaitTime != nil && c.Params.Before != "" {
				t.Errorf("a paging call asked to wait: %s", c.Raw)
			}
		}
	})
}

func TestRangeCursors(t *testing.T) {
	forEachRangeNode(t, func(t *testing.T, k nodeKind) {
		f := newRangeFixture(t, k)
		for _, tc := range []struct {
			name     string
			from, to Position
			want     []string
		}{
			{"from and to", Position{Cursor: f.all[49]}, Position{Cursor: f.all[199]}, f.all[50:200]},
			{"from only", Position{Cursor: f.all[49]}, Position{}, f.all[50:]},
			{"to only", Position{}, Position{Cursor: f.all[199]}, f.all[:200]},
			{"adjacent", Position{Cursor: f.all[99]}, Position{Cursor: f.all[100]}, f.all[100:101]},
			{"to the last", Position{Cursor: f.all[240]}, Position{Cursor: f.all[249]}, f.all[241:]},
			{"from equals to", Position{Cursor: f.all[10]}, Position{Cursor: f.all[10]}, nil},
			{"from after to", Position{Cursor: f.all[20]}, Position{Cursor: f.all[10]}, nil},
			{"cursor wins over time", Position{Cursor: f.all[49], Time: tsTime(f.all[200])}, Position{Cursor: f.all[59]}, f.all[50:60]},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, _, _ := f.run(t, RangeOptions{From: tc.from, To: tc.to, PageSize: 30})
				sameCursors(t, "chronological", got, tc.want)
				got, _, _ = f.run(t, RangeOptions{From: tc.from, To: tc.to, PageSize: 30, Reverse: true})
				sameCursors(t, "reverse", got, reversed(tc.want))
			})
		}
	})
}

func TestRangeTimes(t *testing.T) {
	forEachRangeNode(t, func(t *testing.T, k nodeKind) {
		f := newRangeFixture(t, k)
		b := f.blocks
		at := func(i int) time.Time { return tsTime(b[i][0]) }      // the block's first event
		through := func(i int) time.Time { return tsTime(b[i][9]) } // its last
		for _, tc := range []struct {
			name     string
			from, to time.Time
			want     []string
		}{
			// An end time includes the events stamped at it: all ten of block 10.
			{"to at a block", time.Time{}, through(10), concat(b[:11]...)},
			{"to just before a block", time.Time{}, at(10).Add(-time.Nanosecond), concat(b[:10]...)},
			// A start time selects events from that time on, as Stream's Since does.
			{"from at a block", at(3), through(10), concat(b[3:11]...)},
			{"from just after a block", through(3).Add(time.Nanosecond), through(10), concat(b[4:11]...)},
			{"same time", at(7), through(7), b[7]},
			{"one event", tsTime(b[7][3]), tsTime(b[7][3]), sameTimeAs(b[7], 3)},
			{"before everything", at(0).Add(-time.Hour), time.Time{}, f.all},
			{"after everything", through(24).Add(time.Nanosecond), time.Time{}, nil},
			{"to before everything", time.Time{}, at(0).Add(-time.Nanosecond), nil},
			{"to far ahead: the head at the start", at(20), time.Now().Add(time.Hour), concat(b[20:]...)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				opts := RangeOptions{From: Position{Time: tc.from}, To: Position{Time: tc.to}, PageSize: 13}
				got, _, _ := f.run(t, opts)
				sameCursors(t, "chronological", got, tc.want)
				opts.Reverse = true
				got, _, _ = f.run(t, opts)
				sameCursors(t, "reverse", got, reversed(tc.want))
			})
		}
		// Mixed: a cursor start, a time end.
		got, _, _ := f.run(t, RangeOptions{From: Position{Cursor: b[5][4]}, To: Position{Time: through(6)}, PageSize: 3})
		sameCursors(t, "cursor to time", got, concat(b[5][5:], b[6]))
	})
}

func TestRangeToOpenIsHeadAtStart(t *testing.T) {
	forEachNode(t, func(t *testing.T, k nodeKind) {
		f := newRangeFixture(t, k)
		log := f.all
		for _, reverse := range []bool{false, true} {
			t.Run(fmt.Sprintf("reverse=%v", reverse), func(t *testing.T) {
				// Events arrive between the probe for the head and the first page, and while
				// the consumer handles a page.
				base := f.n.Rec().NumCalls()
				early := make(chan []string, 1)
				f.n.Rec().OnCall(func(n int) {
					if n == base+2 {
						early <- f.n.Append(t, events(7, "Tx")...)
					}
				})
				defer f.n.Rec().OnCall(nil)
				var got, late []string
				calls := 0
				err := f.c.Range(context.Background(), RangeOptions{PageSize: 20, Reverse: reverse}, func(items []Item) error {
					calls++
					if calls == 1 {
						late = f.n.Append(t, events(30, "Tx")...)
					}
					got = append(got, cursorsOf(items)...)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				want := log
				if reverse {
					want = reversed(want)
				}
				sameCursors(t, "delivered", got, want)
				log = concat(log, <-early, late)
			})
		}
	})
}

// runLimited runs a range that must stop at its limit after `needed` calls (the probe
// included): any later call — at most the one page Range prefetches while it delivers — is
// held by the node until abandoned, so a range that waited for it would not return.
func (f *rangeFixture) runLimited(t *testing.T, opts RangeOptions, needed int) (got []string, sizes []int) {
	t.Helper()
	rec := f.n.Rec()
	base := rec.NumCalls()
	rec.HoldFrom(base + needed + 1)
	defer rec.HoldFrom(0)
	// A range that waits for a held call fails here, within a minute (a loaded machine's
	// pages take far less), saying which calls it made.
	ctx, cancel := testwait.Context(t, context.Background())
	defer cancel()
	ctx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	err := f.c.Range(ctx, opts, func(items []Item) error {
		sizes = append(sizes, len(items))
		got = append(got, cursorsOf(items)...)
		return nil
	})
	if err != nil {
		t.Fatalf("Range %+v: %v (did it want more than %d calls? it made %+v)", opts, err, needed, rec.Calls()[base:])
	}
	calls := rec.Calls()[base:]
	served := 0
	for _, c := range calls {
		if !c.Held {
			served++
		}
	}
	if served != needed || len(calls) > needed+1 {
		t.Errorf("Range %+v: %d calls served, %d made; want %d served and at most one prefetched", opts, served, len(calls), needed)
	}
	return got, sizes
}

func TestRangeLimit(t *testing.T) {
	forEachRangeNode(t, func(t *testing.T, k nodeKind) {
		f := newRangeFixture(t, k)
		// Newest first, every node pages towards the start and stops at the limit.
		got, sizes := f.runLimited(t, RangeOptions{PageSize: 10, Limit: 25, Reverse: true}, 1+3)
		sameCursors(t, "reverse", got, reversed(f.all)[:25])
		if fmt.Sprint(sizes) != "[10 10 5]" {
			t.Errorf("reverse: deliveries %v, want [10 10 5]", sizes)
		}
		got, _ = f.runLimited(t, RangeOptions{PageSize: 10, Limit: 20, Reverse: true}, 1+2)
		sameCursors(t, "reverse, a whole number of pages", got, reversed(f.all)[:20])
		// Chronologically, the ascending walk stops early too; a Tendermint node must be
		// paged back to the start first (the documented cost).
		needed := map[string]int{"evtctl": 1 + 3, "tendermint": 1 + 25, streamNode.name: 1 + 1}[k.name]
		got, sizes = f.runLimited(t, RangeOptions{PageSize: 10, Limit: 25}, needed)
		sameCursors(t, "chronological", got, f.all[:25])
		if fmt.Sprint(sizes) != "[10 10 5]" {
			t.Errorf("chronological deliveries %v, want [10 10 5]", sizes)
		}
		needed = map[string]int{"evtctl": 1 + 2, "tendermint": 1 + 25, streamNode.name: 1 + 1}[k.name]
		got, _ = f.runLimited(t, RangeOptions{PageSize: 10, Limit: 20}, needed)
		sameCursors(t, "chronological, a whole number of pages", got, f.all[:20])
		// With bounds and a filter.
		got, _, _ = f.run(t, RangeOptions{PageSize: 4, Limit: 7, Query: "tm.event = 'Tx'", From: Position{Cursor: f.all[99]}})
		sameCursors(t, "filtered", got, f.tx[50:57])
		// A limit beyond the range delivers the range.
		got, _, _ = f.run(t, RangeOptions{PageSize: 100, Limit: 1000, From: Position{Cursor: f.all[239]}})
		sameCursors(t, "over the range", got, f.all[240:])
		// The consumer's error ends the range.
		stop := errors.New("enough")
		n := 0
		err := f.c.Range(context.Background(), RangeOptions{PageSize: 10}, func([]Item) error { n++; return stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Errorf("Range returned %v after %d calls, want the consumer's error after 1", err, n)
		}
	})
}

func TestRangeEmptyLog(t *testing.T) {
	forEachRangeNode(t, func(t *testing.T, k nodeKind) {
		n := k.new(t, nodeOpts{})
		c := newTestClient(t, n.URL())
		for _, opts := range []RangeOptions{{}, {Reverse: true}, {Limit: 5, From: Position{Time: time.Now().Add(-time.Hour)}}} {
			called := false
			before := n.Rec().NumCalls()
			if err := c.Range(context.Background(), opts, func([]Item) error { called = true; return nil }); err != nil || called {
				t.Fatalf("%+v: err %v, fn called %v", opts, err, called)
			}
			if calls := n.Rec().NumCalls() - before; calls != 1 {
				t.Errorf("%+v: %d calls on an empty log, want the probe only", opts, calls)
			}
		}
	})
}

func TestRangeFilter(t *testing.T) {
	forEachRangeNode(t, func(t *testing.T, k nodeKind) {
		f := newRangeFixture(t, k)
		got, _, _ := f.run(t, RangeOptions{Query: "tm.event = 'Tx'", PageSize: 9})
		sameCursors(t, "Tx", got, f.tx)
		got, _, _ = f.run(t, RangeOptions{Query: "tm.event = 'Tx'", PageSize: 9, Reverse: true})
		sameCursors(t, "Tx reverse", got, reversed(f.tx))
		got, _, _ = f.run(t, RangeOptions{Query: "tm.event = 'Nothing'", PageSize: 9})
		sameCursors(t, "no match", got, nil)
		got, _, _ = f.run(t, RangeOptions{Query: "tm.event = 'Tx'", From: Position{Cursor: f.all[100]}, To: Position{Cursor: f.all[120]}})
		sameCursors(t, "Tx bounded", got, f.tx[51:61])

		ctx, cancel := testwait.Context(t, context.Background())
		defer cancel()
		retried := false
		onRetry := func(error, int, time.Duration) { retried = true; cancel() } // a retry ends it, failed
		err := f.c.Range(ctx, RangeOptions{Query: "tm.event = Tx", Backoff: fastBackoff, OnRetry: onRetry}, func([]Item) error { return nil })
		if retried {
			t.Errorf("bad query: retried (%v)", err)
		}
		var re *RPCError
		var qe *QueryError
		switch {
		case k.name == "tendermint":
			if !errors.As(err, &qe) {
				t.Errorf("bad query: %v, want it refused before it is sent", err)
			}
		case !errors.As(err, &re) || re.Code != -32603:
			t.Errorf("bad query: %v, want RPC error -32603", err)
		}
		for _, p := range []Position{{Cursor: "zzz"}, {Cursor: "18EA61A27C39ABD8-0001"}} {
			before := f.n.Rec().NumCalls()
			if err := f.c.Range(context.Background(), RangeOptions{From: p}, func([]Item) error { return nil }); !errors.Is(err, cursor.ErrFormat) {
				t.Errorf("From %q: %v, want a cursor format error", p.Cursor, err)
			}
			if err := f.c.Range(context.Background(), RangeOptions{To: p}, func([]Item) error { return nil }); !errors.Is(err, cursor.ErrFormat) {
				t.Errorf("To %q: %v, want a cursor format error", p.Cursor, err)
			}
			if calls := f.n.Rec().NumCalls() - before; calls != 2 {
				t.Errorf("a bad position cost %d calls, want only the two probes", calls)
			}
		}
	})
}

func TestRangeRetries(t *testing.T) {
	forEachRangeNode(t, func(t *testing.T, k nodeKind) {
		f := newRangeFixture(t, k)
		at, faults := 3, []fault{fault500, faultDrop, fault429} // the second page
		if k.name == streamNode.name {
			// The stream. HTTP clients send a GET again by themselves when a connection they
			// reused drops before the answer (streams cut later: TestStreamRangeCut).
			at, faults = 2, []fault{fault500, fault429, fault500}
		}
		f.n.Rec().FailFrom(f.n.Rec().NumCalls()+at, faults...)
		var attempts []int
		opts := RangeOptions{PageSize: 50, Backoff: fastBackoff, OnRetry: func(_ error, a int, _ time.Duration) { attempts = append(attempts, a) }}
		got, _, _ := f.run(t, opts)
		sameCursors(t, "after retries", got, f.all)
		if fmt.Sprint(attempts) != "[1 2 3]" {
			t.Errorf("retry attempts %v, want [1 2 3]", attempts)
		}
	})
}
