package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
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
	// OnGap is told when the log does not go on from From.Cursor (events lost, a log that
	// started again, a cursor not of it), and of ranges lost on the way; its error ends the
	// range. It is called before the first event after the loss is delivered, or, newest
	// first, after the last. A range from a time or from the start has no gap at its start.
	// Nil: gaps are not reported.
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
// newest first. It never waits for new events. How the source reads the range is its own:
// chronological order on a node without evtctl's ascending extension (Tendermint) gathers
// the whole range before the first call, since such a node only pages newest first.
func (c *Client) Range(ctx context.Context, opts RangeOptions, fn func([]Item) error) error {
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	_, newest, err := c.boundsRetry(ctx, opts.Backoff, opts.OnRetry)
	if err != nil {
		return err
	}
	if newest == "" {
		return nil // an empty log
	}
	after, err := c.resolve(ctx, opts.From, false, opts)
	if err != nil {
		return err
	}
	end := newest
	if !opts.To.IsZero() {
		if end, err = c.resolve(ctx, opts.To, true, opts); err != nil {
			return err
		}
		if end == "" {
			return nil // the range ends before the log's first event
		}
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
	w := &rangeWalk{c: c, opts: opts, after: after, end: end, deliver: deliver}
	if opts.From.Cursor != "" {
		w.gapFrom = after
	}
	err = w.walk(ctx)
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
	gapFrom    string // the From position, when the range starts at one: a gap is reported from it
	lastGap    string // the last gap reported
}

// rangeStreamer is a source that can send a chronological range as one long response
// instead of pages (an evtctl node's stream); errNoStream when it cannot after all.
type rangeStreamer interface {
	streamRange(ctx context.Context, w *rangeWalk) error
}

// walk reads the range's pages, the next one travelling while the caller writes out the
// current one.
func (w *rangeWalk) walk(ctx context.Context) error {
	if rs, ok := w.c.Source().(rangeStreamer); ok && !w.opts.Reverse && !w.opts.Paged {
		if err := rs.streamRange(ctx, w); !errors.Is(err, errNoStream) {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := w.opts
	type result struct {
		p   *Page
		err error
	}
	fetch := func(r PageRequest) <-chan result {
		ch := make(chan result, 1)
		go func() {
			p, err := w.c.PageRetry(ctx, r, opts.Backoff, opts.OnRetry)
			ch <- result{p, err}
		}()
		return ch
	}
	pageSize := opts.PageSize
	if opts.Limit > 0 {
		pageSize = min(pageSize, opts.Limit) // --limit 10 needs no page of 1000
	}
	req := PageRequest{Query: opts.Query, After: w.after, Through: w.end, Max: pageSize, Size: opts.PageSize, Backward: opts.Reverse, NoGap: w.gapFrom == "", Reuse: opts.ReuseMemory}
	next := fetch(req)
	for {
		res := <-next
		if res.err != nil {
			return res.err
		}
		p := res.p
		if p.More {
			// Copies: the page's memory may be reused once its items are delivered.
			if opts.Reverse {
				req.Before, req.Through = strings.Clone(p.Next), ""
			} else {
				// A later page is read after a position of the log: a gap from there is one
				// the reader crossed (a range lost to damage).
				req.After, req.NoGap = strings.Clone(p.Next), false
			}
			next = fetch(req)
		}
		if p.Gap != nil {
			if err := w.gap(p.Gap); err != nil {
				p.Release()
				return err
			}
		}
		err := w.deliver(p.Items)
		p.Release()
		if err != nil || !p.More {
			return err
		}
	}
}

// gap reports a gap once per distinct loss.
func (w *rangeWalk) gap(g *Gap) error {
	if w.opts.OnGap == nil {
		return nil
	}
	key := fmt.Sprint(g.Kind, "/", g.Oldest, "/", g.Newest)
	if key == w.lastGap {
		return nil // told already
	}
	w.lastGap = key
	c := *g
	c.After, c.Oldest, c.Newest, c.Detail = strings.Clone(g.After), strings.Clone(g.Oldest), strings.Clone(g.Newest), strings.Clone(g.Detail)
	return w.opts.OnGap(c)
}

// resolve turns an end of a range into a position of the log. A time used as an end
// includes events stamped at that time.
func (c *Client) resolve(ctx context.Context, p Position, end bool, opts RangeOptions) (string, error) {
	if p.Cursor != "" {
		if err := c.CheckPosition(p.Cursor); err != nil {
			return "", err
		}
		return p.Cursor, nil
	}
	if p.Time.IsZero() {
		return "", nil
	}
	t := p.Time
	if end {
		t = t.Add(time.Nanosecond)
	}
	return c.atRetry(ctx, t, opts.Backoff, opts.OnRetry)
}
