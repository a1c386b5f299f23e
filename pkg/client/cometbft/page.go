package cometbft

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/filter"
)

// Defaults of a PageRequest.
const (
	DefaultPageItems   = 100
	DefaultPageHeights = 1000
)

// PageRequest asks for a page of items.
type PageRequest struct {
	// After (Forward) is where the page starts: after this position; the zero Position
	// starts at the oldest height. Before (Backward) is where it ends: before this
	// position; the zero Position ends at the newest item.
	After, Before Position
	// Max is the most items a page holds; default DefaultPageItems.
	Max int
	// Query, when set, keeps only the items it matches (see filter.Query.MatchAttributes).
	Query *filter.Query
	// Heights bounds the heights a page looks at, so that a query that matches little
	// costs a bounded amount of work a page; default DefaultPageHeights.
	Heights int
	// Wait (Forward only): when nothing after After matches yet, wait this long for the
	// chain to grow, as a long-poll does. 0 returns at once.
	Wait time.Duration
}

// Page is a page of items.
type Page struct {
	// Items are oldest first going forward, newest first going back.
	Items []client.Item
	// Next is where the next page starts: Forward, the After of the next page (it may lie
	// past the last item, over items the query did not match and over whole heights read
	// to their end, which it names with EndOf); Backward, the Before of the next page.
	Next Position
	// More: Forward, the chain holds heights after Next that the page did not read (not
	// caught up); Backward, older items may remain.
	More bool
	// Oldest and Newest are the chain's first and last items as the node serves them now:
	// item 0 of the lowest height whose results it keeps, and the newest height's last item.
	Oldest, Newest Position
}

// GapError is a reader behind what the node keeps: the page was to start at height From,
// and the lowest height whose results the node serves is Oldest.Height. Heights From to To
// are lost to the reader (with From, the items of From after After, when After lies inside
// it).
type GapError struct {
	After    Position
	From, To int64
	Oldest   Position
}

func (e *GapError) Error() string {
	span := fmt.Sprintf("heights %d to %d are", e.From, e.To)
	if e.From == e.To {
		span = fmt.Sprintf("height %d is", e.From)
	}
	return fmt.Sprintf("events lost: %s no longer served by the node (its oldest height with block results is %d)", span, e.Oldest.Height)
}

// Resume is where to read on from after the gap: the After that starts at the oldest height.
func (e *GapError) Resume() Position { return EndOf(e.Oldest.Height - 1) }

// statusAge is how old a status a page may start from while the heights it reads are below
// the latest it shows.
const statusAge = 500 * time.Millisecond

// next is the first item a page after p reads: height and index.
func next(p Position) (int64, int64) {
	if p.Index >= EndIndex {
		return p.Height + 1, 0
	}
	return p.Height, p.Index + 1
}

// Forward returns the page of items after req.After, oldest first: from the height after
// it, as many heights as fit in req.Max items (a page ends where a height does, unless a
// single height holds more matching items than that, which it then splits), reading ahead
// with several calls in flight. A reader below the oldest height the node serves gets a
// *GapError naming the lost heights; the zero After starts at the oldest height without
// one. A node that keeps no block results gives a *DiscardError.
func (r *Reader) Forward(ctx context.Context, req PageRequest) (*Page, error) {
	var deadline time.Time
	if req.Wait > 0 {
		deadline = time.Now().Add(req.Wait)
	}
	for {
		p, err := r.forward(ctx, req)
		if err != nil || len(p.Items) > 0 || p.More || req.Wait <= 0 {
			return p, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return p, nil
		}
		// Caught up, nothing matching: wait for the chain to pass the page's end.
		if _, err := r.WaitHeight(ctx, p.Next.Height, left); err != nil {
			return nil, err
		}
		req.After = p.Next
		if time.Until(deadline) <= 0 {
			// The wait ended: one more look at what it brought, no more waiting.
			req.Wait = 0
		}
	}
}

func (r *Reader) forward(ctx context.Context, req PageRequest) (*Page, error) {
	if !req.After.Valid() {
		return nil, fmt.Errorf("%w: %+v is no position (after)", ErrCursor, req.After)
	}
	maxItems := req.Max
	if maxItems <= 0 {
		maxItems = DefaultPageItems
	}
	maxHeights := req.Heights
	if maxHeights <= 0 {
		maxHeights = DefaultPageHeights
	}
	st, err := r.status(ctx, statusAge)
	if err != nil {
		return nil, err
	}
	after := req.After
	var h, from int64
	if after.IsZero() {
		if h, err = r.oldestHeight(ctx, st, false); err != nil {
			return nil, err
		}
	} else {
		h, from = next(after)
	}
	if h > st.Latest {
		if st, err = r.status(ctx, 0); err != nil {
			return nil, err
		}
	}
	page := &Page{Next: after}
	if h > st.Latest {
		return r.bounds(ctx, page, st) // caught up
	}
	// A reader below what the node serves: find the oldest height for sure, and say what
	// was lost.
	if !after.IsZero() && h < r.knownOldest(st) {
		gap, err := r.gap(ctx, st, after, h)
		if err != nil {
			return nil, err
		}
		if gap != nil {
			return nil, gap
		}
	}
	r.prefetch(h, r.window(), st.Latest, forward)
	for scanned := 0; h <= st.Latest && scanned < maxHeights && len(page.Items) < maxItems; scanned++ {
		r.prefetch(h+int64(r.window()), 1, st.Latest, forward)
		d, err := r.height(ctx, h, forward)
		if err != nil {
			stop, err := r.readFailed(ctx, st, after, h, len(page.Items) > 0 || scanned > 0, err)
			if stop {
				break
			}
			return nil, err
		}
		items := d.items[min(from, int64(len(d.items))):]
		if req.Query != nil {
			items = matching(d, int(from), req.Query)
		}
		room := maxItems - len(page.Items)
		if len(items) > room {
			if len(page.Items) > 0 {
				break // the next page starts with this height, read already
			}
			items = items[:room]
			page.Items = append(page.Items, items...)
			page.Next, _ = ParseCursor(items[len(items)-1].Cursor)
			break
		}
		page.Items = append(page.Items, items...)
		page.Next = EndOf(h)
		h, from = h+1, 0
	}
	if page.Next.IsZero() {
		page.Next = after
	}
	if _, err := r.bounds(ctx, page, st); err != nil {
		return nil, err
	}
	page.More = page.Next.Compare(page.Newest) < 0 && !(page.Next.IsZero() && page.Newest.IsZero())
	return page, nil
}

// window is how many heights a reader reads ahead.
func (r *Reader) window() int { return r.conc + r.conc/2 }

// matching returns the items of d from index from that q matches.
func matching(d *heightData, from int, q *filter.Query) []client.Item {
	var out []client.Item
	for i := from; i < len(d.items); i++ {
		if q.MatchAttributes(d.attributes(i)) {
			out = append(out, d.items[i])
		}
	}
	return out
}

// readFailed decides what a failure to read height h means for a page that started after
// after: stop the page there (the head, or a loss the next page reports), or fail with err
// (the loss as a *GapError when h is the page's first height). more says whether the page
// has read anything yet.
func (r *Reader) readFailed(ctx context.Context, st Status, after Position, h int64, more bool, err error) (stop bool, _ error) {
	var (
		nc *NotCommittedError
		pe *PrunedError
		rm *ResultsMissingError
	)
	switch {
	case errors.As(err, &nc):
		return true, nil // an endpoint behind the status it gave
	case errors.As(err, &pe), errors.As(err, &rm):
		fresh, serr := r.status(ctx, 0)
		if serr != nil {
			return false, serr
		}
		if rm != nil && h >= fresh.Latest {
			return true, nil // the newest height's results are being saved
		}
		if more {
			return true, nil // the next page starts here and reports what it finds
		}
		gap, gerr := r.gap(ctx, fresh, after, h)
		if gerr != nil {
			return false, gerr
		}
		if gap != nil {
			return false, gap
		}
	}
	return false, err
}

// gap returns the *GapError of a reader whose next height is h, or nil if h is served.
func (r *Reader) gap(ctx context.Context, st Status, after Position, h int64) (*GapError, error) {
	oldest, err := r.oldestHeight(ctx, st, true)
	if err != nil {
		return nil, err
	}
	if h >= oldest {
		return nil, nil
	}
	return &GapError{After: after, From: h, To: oldest - 1, Oldest: Position{Height: oldest}}, nil
}

// bounds fills in the page's Oldest, Newest and (going forward) More.
func (r *Reader) bounds(ctx context.Context, p *Page, st Status) (*Page, error) {
	oldest, err := r.oldestHeight(ctx, st, false)
	if err != nil {
		return nil, err
	}
	p.Oldest = Position{Height: oldest}
	if st.Latest >= oldest {
		m, err := r.meta(ctx, st.Latest, backward)
		if err != nil {
			return nil, err
		}
		p.Newest = Position{Height: st.Latest, Index: int64(m.numTxs)}
	}
	return p, nil
}

// Backward returns the page of items before req.Before, newest first, down to the oldest
// height the node serves.
func (r *Reader) Backward(ctx context.Context, req PageRequest) (*Page, error) {
	if !req.Before.Valid() {
		return nil, fmt.Errorf("%w: %+v is no position (before)", ErrCursor, req.Before)
	}
	maxItems := req.Max
	if maxItems <= 0 {
		maxItems = DefaultPageItems
	}
	maxHeights := req.Heights
	if maxHeights <= 0 {
		maxHeights = DefaultPageHeights
	}
	st, err := r.status(ctx, statusAge)
	if err != nil {
		return nil, err
	}
	h, limit := st.Latest, int64(EndIndex)+1 // items of h with an index below limit
	if b := req.Before; !b.IsZero() && b.Height <= st.Latest {
		h, limit = b.Height, b.Index
		if limit == 0 {
			h, limit = h-1, EndIndex+1
		}
	}
	oldest, err := r.oldestHeight(ctx, st, false)
	if err != nil {
		return nil, err
	}
	page := &Page{Next: Position{Height: h + 1}}
	if h >= oldest {
		r.prefetch(h, r.window(), oldest, backward)
	}
	for scanned := 0; h >= oldest && scanned < maxHeights && len(page.Items) < maxItems; scanned++ {
		r.prefetch(h-int64(r.window()), 1, oldest, backward)
		d, err := r.height(ctx, h, backward)
		if err != nil {
			var pe *PrunedError
			var rm *ResultsMissingError
			if errors.As(err, &pe) || errors.As(err, &rm) {
				// Pruned while paging back: nothing older is served.
				oldest = h + 1
				break
			}
			return nil, err
		}
		end := min(limit, int64(len(d.items)))
		var items []client.Item
		for i := end - 1; i >= 0; i-- {
			if req.Query == nil || req.Query.MatchAttributes(d.attributes(int(i))) {
				items = append(items, d.items[i])
			}
		}
		room := maxItems - len(page.Items)
		if len(items) > room {
			if len(page.Items) > 0 {
				break
			}
			items = items[:room]
			page.Items = append(page.Items, items...)
			page.Next, _ = ParseCursor(items[len(items)-1].Cursor)
			break
		}
		page.Items = append(page.Items, items...)
		page.Next = Position{Height: h}
		h, limit = h-1, EndIndex+1
	}
	page.More = page.Next.Height > oldest || page.Next.Height == oldest && page.Next.Index > 0
	if page.Next.Height <= 0 {
		page.Next = Position{}
	}
	return r.bounds(ctx, page, st)
}
