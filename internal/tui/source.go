package tui

import (
	"context"
	"slices"
	"time"

	"github.com/evtctl/evtctl/pkg/client"
)

// Source is the UI's access to a log: pages of history in either direction, the head as it
// grows, and how the log's positions compare. The UI does all its I/O through it, so tests
// can give it a fake.
type Source interface {
	// Node names the log, for the status bar.
	Node() string
	// Page fetches one page of the events that match r.Query, in one attempt (the UI
	// decides about retrying, with client.Retryable).
	Page(ctx context.Context, r PageRequest) (Page, error)
	// Follow calls fn with each batch of matching events appended after r.After, oldest
	// first, until ctx ends, fn fails, or the log fails in a way retrying cannot fix.
	// Failed attempts are reported to r.OnRetry before each retry.
	Follow(ctx context.Context, r FollowRequest, fn func(client.Batch) error) error
	// At is the position just before the first event stamped at or after t.
	At(ctx context.Context, t time.Time) (string, error)
	// Compare orders two positions of the log.
	Compare(a, b string) int
	// PosBefore is the position just before an event: where a page of older events
	// starts.
	PosBefore(it client.Item) string
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
	// NoGap: After is not a position a reader held (the log's start, a bound made from a
	// time): nothing is measured from it.
	NoGap bool
}

// Page is one page of events, oldest first.
type Page struct {
	Items []client.Item
	// More reports further matching items beyond the page in the direction asked for:
	// older ones for a backward page, newer ones otherwise.
	More bool
	// Oldest and Newest are the log's oldest and newest positions, whatever the query
	// ("" when the log is empty).
	Oldest, Newest string
	// Next is where the next page in the same direction starts: for a forward page, the
	// position the log was examined up to; for a backward page, the position older
	// events lie before.
	Next string
	// Gap, on a page read after a position a reader held, reports that the log does not
	// go on from it.
	Gap *client.Gap
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

// ClientSource is a Source over a client of any log.
type ClientSource struct {
	c    *client.Client
	opts ClientOptions
}

// NewClientSource returns a Source that asks c.
func NewClientSource(c *client.Client, opts ClientOptions) *ClientSource {
	return &ClientSource{c: c, opts: opts}
}

// Node is the client's log, any password redacted.
func (s *ClientSource) Node() string { return s.c.Node() }

// Page fetches one page.
func (s *ClientSource) Page(ctx context.Context, r PageRequest) (Page, error) {
	p, err := s.c.Page(ctx, client.PageRequest{Query: r.Query, After: r.After, Before: r.Before, Through: r.Through, Max: r.Limit, Backward: r.Backward, NoGap: r.NoGap})
	if err != nil {
		return Page{}, err
	}
	items := p.Items
	if r.Backward {
		items = slices.Clone(items)
		slices.Reverse(items)
	}
	return Page{Items: items, More: p.More, Oldest: p.Oldest, Newest: p.Newest, Next: p.Next, Gap: p.Gap}, nil
}

// Follow follows the head with client.Stream.
func (s *ClientSource) Follow(ctx context.Context, r FollowRequest, fn func(client.Batch) error) error {
	return s.c.Stream(ctx, client.StreamOptions{
		Query: r.Query, After: r.After, FromStart: r.FromStart && r.After == "",
		PageSize: s.opts.PageSize, Wait: s.opts.Wait, Backoff: s.opts.Backoff, OnRetry: r.OnRetry,
	}, fn)
}

// At asks the log for the position of a time.
func (s *ClientSource) At(ctx context.Context, t time.Time) (string, error) { return s.c.At(ctx, t) }

// Compare orders two positions of the log.
func (s *ClientSource) Compare(a, b string) int { return s.c.Compare(a, b) }

// PosBefore is the position just before an event.
func (s *ClientSource) PosBefore(it client.Item) string { return s.c.PosBefore(it) }
