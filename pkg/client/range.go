package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// Position is one end of a range: a cursor, or a time (a cursor wins when both are set).
// The zero Position is open: the start of the log, or the head when the range starts.
type Position struct {
	Cursor string
	Time   time.Time
}

// IsZero reports whether p is open.
func (p Position) IsZero() bool { return p.Cursor == "" && p.Time.IsZero() }

// RangeOptions configure Range.
type RangeOptions struct {
	Query    string
	From     Position // exclusive: events after it
	To       Position // inclusive: events up to it; open means the head when the range starts
	Reverse  bool     // newest first
	PageSize int      // default 100
	Limit    int      // stop after this many events; 0: no limit
	// ReuseMemory reuses reply buffers: the items passed to fn (their strings and bytes)
	// are valid only until fn returns. It saves garbage on long ranges.
	ReuseMemory bool
	// OnGap is told when events after From.Cursor are no longer in the log (see
	// cursor.Lost); its error ends the range. It is called before the first event is
	// delivered, or, newest first, after the last. A range from a time or from the start
	// has no gap. Nil: gaps are not reported.
	OnGap   func(Gap) error
	Backoff Backoff
	OnRetry RetryFunc
	// Paged pages through the events method even where the node offers its stream, which
	// chronological ranges otherwise read (tests, and measuring one against the other).
	Paged bool
}

// errLimit stops a range early.
var errLimit = errors.New("limit reached")

// Range calls fn with the events between From and To, page by page, chronologically or
// newest first. It never waits for new events. Chronological order on a node without
// evtctl's ascending extension (Tendermint) collects the whole range before the first
// call, since such a node only pages newest first; newest-first order streams on any node.
func (c *Client) Range(ctx context.Context, opts RangeOptions, fn func([]Item) error) error {
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	head, err := c.probe(ctx, opts.Backoff, opts.OnRetry)
	if err != nil {
		return err
	}
	if err := c.CheckQuery(opts.Query); err != nil {
		return err
	}
	if head.Newest == "" {
		// An empty log that never held an event: a From cursor is not of it.
		if g := GapAfter(opts.From.Cursor, "", "", true); g != nil && opts.OnGap != nil {
			return opts.OnGap(*g)
		}
		return nil
	}
	width := cursor.WidthOf(head.Newest)
	after, err := resolve(opts.From, width, false)
	if err != nil {
		return err
	}
	end := head.Newest
	if !opts.To.IsZero() {
		if end, err = resolve(opts.To, width, true); err != nil {
			return err
		}
	}
	ec, err := cursor.Parse(end)
	if err != nil {
		return err
	}
	delivered := 0
	deliver := func(items []Item) error {
		if opts.Limit > 0 && delivered+len(items) >= opts.Limit {
			items = items[:opts.Limit-delivered]
			delivered = opts.Limit
			if len(items) > 0 {
				if err := fn(items); err != nil {
					return err
				}
			}
			return errLimit
		}
		delivered += len(items)
		if len(items) == 0 {
			return nil
		}
		return fn(items)
	}
	w := &rangeWalk{c: c, opts: opts, after: after, end: end, deliver: deliver, gapFrom: opts.From.Cursor}
	if w.gapFrom != "" {
		w.gapFrom = after
	}
	err = w.walk(ctx, c.BeforeThrough(ec).String())
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// rangeWalk is one range being walked.
type rangeWalk struct {
	c          *Client
	opts       RangeOptions
	after, end string // the range: after is exclusive, end inclusive
	deliver    func([]Item) error
	gapFrom    string // the From cursor, when the range starts at one: a gap is reported from it
	lastGap    string // the kind, oldest and newest cursors of the last gap reported
}

// walk fetches the range's pages. before is exclusive: a bound in time just past end, so
// that a node comparing cursors by their time alone (Tendermint) includes end; items after
// end that share its time are dropped here.
func (w *rangeWalk) walk(ctx context.Context, before string) error {
	if p := w.c.stream.Load(); p != nil && !w.opts.Reverse && !w.opts.Paged && w.c.Kind() == KindEvtctl {
		// One long response instead of pages: an evtctl node's stream.
		if err := w.walkStream(ctx, *p, before); !errors.Is(err, errNoStream) {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := w.opts
	type result struct {
		r   *Reply
		err error
	}
	// fetch starts a request in the background, so that the next page travels while the
	// caller writes out the current one.
	fetch := func(req Request) <-chan result {
		ch := make(chan result, 1)
		go func() {
			r, err := w.c.eventsRetry(ctx, req, opts.Backoff, opts.OnRetry)
			ch <- result{r, err}
		}()
		return ch
	}
	pageSize := opts.PageSize
	if opts.Limit > 0 && (opts.Reverse || w.c.Kind() != KindTendermint) {
		// Pages delivered as they come: --limit 10 needs no page of 1000. A chronological
		// range on a node that pages newest first only is gathered whole before the limit
		// cuts it, so there the pages stay as large as the node gives them.
		pageSize = min(pageSize, opts.Limit)
	}
	req := Request{Query: opts.Query, MaxItems: pageSize, After: w.after, Before: before, Ascending: !opts.Reverse, reuse: opts.ReuseMemory}
	next := fetch(req)
	var held []Item // chronological order without the extension: newest-first pages, held
	first := true
	for {
		res := <-next
		if res.err != nil {
			return res.err
		}
		r := res.r
		asked := req // what r answers
		items, past := w.within(r.Items, r.Ascending())
		more := r.More && (len(r.Items) > 0 || r.Resume != "") && !past
		if more {
			// A copy: the reply's memory may be reused once its items are delivered.
			last := ""
			if len(r.Items) > 0 {
				last = r.Items[len(r.Items)-1].Cursor
			}
			if r.Ascending() {
				req.After = strings.Clone(cursor.Later(last, r.Resume))
			} else {
				req.Ascending = false
				req.Before = strings.Clone(r.Resume)
				if req.Before == "" {
					req.Before = strings.Clone(last)
				}
			}
			if !r.Ascending() && !opts.Reverse {
				req.reuse = false // newest-first pages are held until the end: no reuse
			}
			next = fetch(req)
		}
		if r.Ascending() {
			// A forward page was read from the request's After: the log's oldest item then
			// says whether anything after it is gone — after the range's start on the first
			// page, after a range lost to damage on a later one.
			from := asked.After
			if first {
				from = w.gapFrom
			}
			if err := w.gap(from, r.Oldest, r.Newest, len(r.Items) == 0); err != nil {
				r.release()
				return err
			}
		}
		first = false
		switch {
		case r.Ascending(), opts.Reverse:
			err := w.deliver(items)
			r.release()
			if err != nil {
				return err
			}
		default:
			held = append(held, items...)
		}
		if !more {
			if !r.Ascending() {
				// The last newest-first page reached the range's start.
				if err := w.gap(w.gapFrom, r.Oldest, r.Newest, len(held) == 0); err != nil {
					return err
				}
			}
			break
		}
	}
	slices.Reverse(held)
	for len(held) > 0 {
		n := min(opts.PageSize, len(held))
		if err := w.deliver(held[:n]); err != nil {
			return err
		}
		held = held[n:]
	}
	return nil
}

// within drops the items of a page that lie after the range's end; past reports that the
// page reached beyond it (ascending), so no further page is needed.
func (w *rangeWalk) within(items []Item, ascending bool) (kept []Item, past bool) {
	if ascending {
		for i, it := range items {
			if cursor.CompareText(it.Cursor, w.end) > 0 {
				return items[:i], true
			}
		}
		return items, false
	}
	i := 0
	for i < len(items) && cursor.CompareText(items[i].Cursor, w.end) > 0 {
		i++
	}
	return items[i:], false
}

// gap reports a gap between from — the range's From cursor, or the cursor a later page
// continued after — and the log's oldest item, once per distinct loss.
func (w *rangeWalk) gap(from, oldest, newest string, empty bool) error {
	if w.opts.OnGap == nil {
		return nil
	}
	g := GapAfter(from, oldest, newest, empty)
	if g == nil {
		return nil
	}
	key := fmt.Sprint(g.Kind, "/", g.Oldest, "/", g.Newest)
	if key == w.lastGap {
		return nil // told already
	}
	w.lastGap = key
	g.After, g.Oldest, g.Newest = strings.Clone(g.After), strings.Clone(g.Oldest), strings.Clone(g.Newest)
	return w.opts.OnGap(*g)
}

// resolve turns a position into a cursor of the node's width. A time used as an end
// includes events stamped at that time.
func resolve(p Position, width int, end bool) (string, error) {
	if p.Cursor != "" {
		if _, err := cursor.Parse(p.Cursor); err != nil {
			return "", err
		}
		return p.Cursor, nil
	}
	if p.Time.IsZero() {
		return "", nil
	}
	if end {
		c := cursor.FromTime(p.Time.Add(time.Nanosecond), width)
		return c.String(), nil
	}
	return cursor.FromTime(p.Time, width).String(), nil
}
