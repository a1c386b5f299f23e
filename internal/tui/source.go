package tui

import (
	"context"
	"slices"
	"time"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// Source is the UI's access to a node: pages of history in either direction, and the head
// as it grows. The UI does all its node I/O through it, so tests can give it a fake.
type Source interface {
	// Node names the node, for the status bar.
	Node() string
	// Page fetches one page of the events that match r.Query, in one attempt (the UI
	// decides about retrying, with client.Retryable).
	Page(ctx context.Context, r PageRequest) (Page, error)
	// Follow calls fn with each batch of matching events appended after r.After, oldest
	// first, until ctx ends, fn fails, or the node fails in a way retrying cannot fix.
	// Failed attempts are reported to r.OnRetry before each retry.
	Follow(ctx context.Context, r FollowRequest, fn func(client.Batch) error) error
}

// PageRequest asks for one page of events.
type PageRequest struct {
	Query string
	// After and Before bound the page, both exclusive; "" is open (the log's start, the head).
	After, Before string
	// Through, when Before is "", bounds the page inclusively: a range's last event.
	Through string
	// Limit is the most items to return.
	Limit int
	// Backward asks for the newest Limit items before Before (paging back in time);
	// otherwise the oldest Limit items after After.
	Backward bool
}

// Page is one page of events, oldest first.
type Page struct {
	Items []client.Item
	// More reports further matching items beyond the page in the direction asked for:
	// older ones for a backward page, newer ones otherwise.
	More bool
	// Oldest and Newest are the cursors of the log's oldest and newest items, whatever
	// the query ("" when the log is empty).
	Oldest, Newest string
	// Resume, with More, is where the node stopped the page short (its work budget, or a
	// range lost to damage): the next page in the same direction starts there.
	Resume string
}

// FollowRequest asks to follow the head.
type FollowRequest struct {
	Query string
	// After is where following starts; "" with FromStart means the log's oldest event, ""
	// without it the head.
	After     string
	FromStart bool
	OnRetry   client.RetryFunc
}

// ClientOptions tune a ClientSource.
type ClientOptions struct {
	PageSize int            // items per request while following; default 100
	Wait     time.Duration  // long-poll wait while following; default 25s
	Backoff  client.Backoff // retries while following
}

// ClientSource is a Source over a client of the events method.
type ClientSource struct {
	c    *client.Client
	opts ClientOptions
}

// NewClientSource returns a Source that asks c.
func NewClientSource(c *client.Client, opts ClientOptions) *ClientSource {
	return &ClientSource{c: c, opts: opts}
}

// Node is the client's node, any password redacted.
func (s *ClientSource) Node() string { return s.c.Node() }

// noWait is the long-poll wait of page requests: a page is wanted now, not when the next
// event arrives.
const noWait = time.Nanosecond

// Page fetches one page. A forward page uses evtctl's ascending extension; a node without
// it (Tendermint) is walked newest first from the head down to r.After, which costs a
// request per Limit items between the two.
func (s *ClientSource) Page(ctx context.Context, r PageRequest) (Page, error) {
	before := r.Before
	if before == "" && r.Through != "" {
		// On a node that compares cursors by time alone (Tendermint), a bound in time just
		// past the range's end; what shares its time and comes after it is dropped below.
		tc, err := cursor.Parse(r.Through)
		if err != nil {
			return Page{}, err
		}
		before = s.c.BeforeThrough(tc).String()
	}
	if err := s.c.CheckQuery(r.Query); err != nil {
		return Page{}, err
	}
	req := client.Request{Query: r.Query, MaxItems: r.Limit, After: r.After, Before: before, Wait: noWait, Ascending: !r.Backward}
	rep, err := s.c.Events(ctx, req)
	if err != nil {
		return Page{}, err
	}
	more := rep.More && (len(rep.Items) > 0 || rep.Resume != "")
	oldestRead := rep.Resume
	if more && oldestRead == "" {
		oldestRead = rep.Items[len(rep.Items)-1].Cursor
	}
	items, past := through(rep.Items, r.Through, rep.Ascending())
	for r.Backward && !rep.Ascending() && more && len(items) < r.Limit {
		// Items past the range's end that shared its time were dropped: page on back.
		req.Before, req.MaxItems = oldestRead, r.Limit-len(items)
		if rep, err = s.c.Events(ctx, req); err != nil {
			return Page{}, err
		}
		more = rep.More && len(rep.Items) > 0
		if len(rep.Items) > 0 {
			oldestRead = rep.Items[len(rep.Items)-1].Cursor
		}
		kept, _ := through(rep.Items, r.Through, false)
		items = append(items, kept...)
	}
	p := Page{Items: items, More: more && !past, Oldest: rep.Oldest, Newest: rep.Newest, Resume: rep.Resume}
	if rep.Ascending() || r.Backward {
		if !rep.Ascending() {
			slices.Reverse(p.Items)
		}
		return p, nil
	}
	// No ascending order: keep the oldest Limit items seen while paging back.
	trimmed := false
	for more {
		req.Before, req.Ascending = oldestRead, false
		rep, err = s.c.Events(ctx, req)
		if err != nil {
			return Page{}, err
		}
		if len(rep.Items) > 0 {
			oldestRead = rep.Items[len(rep.Items)-1].Cursor
		}
		kept, _ := through(rep.Items, r.Through, false)
		items = append(items, kept...)
		p.Oldest = rep.Oldest
		more = rep.More && len(rep.Items) > 0
		if len(items) > 2*r.Limit {
			items, trimmed = append(items[:0:0], items[len(items)-r.Limit:]...), true
		}
	}
	if len(items) > r.Limit {
		items, trimmed = items[len(items)-r.Limit:], true
	}
	slices.Reverse(items)
	p.Items, p.More = items, trimmed
	return p, nil
}

// through drops the items after the cursor last ("" keeps all), in a page oldest first
// (ascending) or newest first; past reports an ascending page that reached beyond it.
func through(items []client.Item, last string, ascending bool) (kept []client.Item, past bool) {
	if last == "" {
		return items, false
	}
	if ascending {
		for i, it := range items {
			if cursor.CompareText(it.Cursor, last) > 0 {
				return items[:i], true
			}
		}
		return items, false
	}
	i := 0
	for i < len(items) && cursor.CompareText(items[i].Cursor, last) > 0 {
		i++
	}
	return items[i:], false
}

// Follow follows the head with client.Stream.
func (s *ClientSource) Follow(ctx context.Context, r FollowRequest, fn func(client.Batch) error) error {
	return s.c.Stream(ctx, client.StreamOptions{
		Query: r.Query, After: r.After, FromStart: r.FromStart && r.After == "",
		PageSize: s.opts.PageSize, Wait: s.opts.Wait, Backoff: s.opts.Backoff, OnRetry: r.OnRetry,
	}, fn)
}
