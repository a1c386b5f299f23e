package client

import (
	"context"
	"errors"
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
	Backoff     Backoff
	OnRetry     RetryFunc
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
	if head.Newest == "" {
		return nil // an empty log
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
	// before is exclusive; the range includes end.
	before, err := nextCursor(end)
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
	err = c.walk(ctx, opts, after, before, deliver)
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

func (c *Client) walk(ctx context.Context, opts RangeOptions, after, before string, deliver func([]Item) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		r   *Reply
		err error
	}
	// fetch starts a request in the background, so that the next page travels while the
	// caller writes out the current one.
	fetch := func(req Request) <-chan result {
		ch := make(chan result, 1)
		go func() {
			r, err := c.eventsRetry(ctx, req, opts.Backoff, opts.OnRetry)
			ch <- result{r, err}
		}()
		return ch
	}
	pageSize := opts.PageSize
	if opts.Limit > 0 {
		pageSize = min(pageSize, opts.Limit) // --limit 10 needs no page of 1000
	}
	req := Request{Query: opts.Query, MaxItems: pageSize, After: after, Before: before, Ascending: !opts.Reverse, reuse: opts.ReuseMemory}
	next := fetch(req)
	var held []Item // chronological order without the extension: newest-first pages, held
	for {
		res := <-next
		if res.err != nil {
			return res.err
		}
		r := res.r
		more := r.More && len(r.Items) > 0
		if more {
			// A copy: the reply's memory may be reused once its items are delivered.
			last := strings.Clone(r.Items[len(r.Items)-1].Cursor)
			if r.Ascending {
				req.After = last
			} else {
				req.Ascending = false
				req.Before = last
			}
			if !r.Ascending && !opts.Reverse {
				req.reuse = false // newest-first pages are held until the end: no reuse
			}
			next = fetch(req)
		}
		switch {
		case r.Ascending, opts.Reverse:
			err := deliver(r.Items)
			r.release()
			if err != nil {
				return err
			}
		default:
			held = append(held, r.Items...)
		}
		if !more {
			break
		}
	}
	slices.Reverse(held)
	for len(held) > 0 {
		n := min(opts.PageSize, len(held))
		if err := deliver(held[:n]); err != nil {
			return err
		}
		held = held[n:]
	}
	return nil
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

// nextCursor is the least cursor of the same width after s.
func nextCursor(s string) (string, error) {
	c, err := cursor.Parse(s)
	if err != nil {
		return "", err
	}
	return c.Next().String(), nil
}
