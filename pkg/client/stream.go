package client

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/retry"
)

// Backoff shapes retries: capped exponential delays with jitter. A node's Retry-After wins
// when it asks for longer.
type Backoff struct {
	Initial time.Duration // first delay; default 200ms
	Max     time.Duration // cap; default 15s
	GiveUp  time.Duration // stop retrying once failures have lasted this long; 0: never
}

func (b Backoff) delay(attempt int) time.Duration {
	initial, maxd := b.Initial, b.Max
	if initial <= 0 {
		initial = 200 * time.Millisecond
	}
	if maxd <= 0 {
		maxd = 15 * time.Second
	}
	return retry.Delay(attempt, initial, maxd)
}

// RetryFunc is told of each failed attempt before the client waits delay and tries again.
type RetryFunc func(err error, attempt int, delay time.Duration)

// eventsRetry calls Events until it succeeds, fails for good, or ctx ends.
func (c *Client) eventsRetry(ctx context.Context, req Request, b Backoff, onRetry RetryFunc) (*Reply, error) {
	var failingSince time.Time
	for attempt := 0; ; attempt++ {
		r, err := c.Events(ctx, req)
		if err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !Retryable(err) {
			return nil, err
		}
		d := max(b.delay(attempt), retryAfterOf(err))
		if attempt == 0 {
			failingSince = time.Now()
		}
		if b.GiveUp > 0 && time.Since(failingSince)+d > b.GiveUp {
			return nil, fmt.Errorf("%w (gave up after retrying for %s)", err, time.Since(failingSince).Round(time.Second))
		}
		if onRetry != nil {
			onRetry(err, attempt+1, d)
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// Gap reports events lost to the node's retention: the client had delivered up to After,
// and the node's log now starts at Oldest, so matching events between them may be gone.
type Gap struct {
	After  string
	Oldest string // the log's oldest item now; "" when retention has emptied the log
	Newest string // when the log is empty: the newest item it ever held
}

// Batch is what Stream delivers at a time.
type Batch struct {
	Gap      *Gap   // lost events before Items, if any
	Items    []Item // oldest first; may be empty
	CaughtUp bool   // nothing older than the head is left to fetch: a long-poll comes next
	Cursor   string // the cursor to resume after once this batch is handled
}

// StreamOptions configure Stream.
type StreamOptions struct {
	Query     string
	After     string    // resume after this cursor
	Since     time.Time // when After is empty: start at this time
	FromStart bool      // when After and Since are empty: start at the oldest retained event
	PageSize  int       // items per request; default 100
	// ReuseMemory reuses reply buffers: a Batch's items (their strings and bytes) are valid
	// only until fn returns; Batch.Cursor and Gap stay valid.
	ReuseMemory bool
	Wait        time.Duration // long-poll wait per request; default 25s (nodes cap it)
	Backoff     Backoff
	OnRetry     RetryFunc
}

// Stream follows the node's log from a starting point and calls fn with each batch, oldest
// first, each matching event exactly once, until ctx ends, fn fails, or the node answers
// with an error that retrying cannot fix. It resumes after the last cursor fn accepted, so
// a reconnect neither skips nor repeats an event. With no starting point it begins at the
// head: only events appended from now on.
//
// On a node with evtctl's ascending extension a backlog is walked forward page by page, in
// memory bounded by the page size. On other nodes (Tendermint) the backlog since the resume
// cursor is fetched newest first page by page and held until it is complete, as ADR-075
// prescribes: memory and time to first delivery grow with the backlog.
func (c *Client) Stream(ctx context.Context, opts StreamOptions, fn func(Batch) error) error {
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	if opts.Wait <= 0 {
		opts.Wait = 25 * time.Second
	}
	last := opts.After
	if last == "" && !opts.FromStart {
		head, err := c.probe(ctx, opts.Backoff, opts.OnRetry)
		if err != nil {
			return err
		}
		if !opts.Since.IsZero() {
			last = sinceCursor(opts.Since, head)
		} else {
			last = head.Newest
		}
	}
	asc := true       // until the node shows it lacks the extension
	var used []*Reply // replies of a page-back, released with the batch
	// A start time older than the log is not a loss the caller could have prevented (the
	// log may simply be younger): gaps count from the first reply on.
	fromTime := opts.After == "" && !opts.Since.IsZero()
	for {
		r, err := c.eventsRetry(ctx, Request{Query: opts.Query, MaxItems: opts.PageSize, After: last, Wait: opts.Wait, Ascending: asc, reuse: opts.ReuseMemory}, opts.Backoff, opts.OnRetry)
		if err != nil {
			return err
		}
		var b Batch
		oldest := r.Oldest
		if r.Ascending {
			b.Items, b.CaughtUp = r.Items, !r.More
		} else {
			asc = false
			items := r.Items
			for more := r.More; more && len(items) > 0; {
				// Page back from the oldest item so far towards the resume cursor.
				p, err := c.eventsRetry(ctx, Request{Query: opts.Query, MaxItems: opts.PageSize, After: last, Before: items[len(items)-1].Cursor, reuse: opts.ReuseMemory}, opts.Backoff, opts.OnRetry)
				if err != nil {
					return err
				}
				items = append(items, p.Items...)
				used = append(used, p)
				more = p.More && len(p.Items) > 0      // an empty page cannot move before on
				oldest = laterCursor(oldest, p.Oldest) // the log may lose its tail while we page
			}
			slices.Reverse(items)
			b.Items, b.CaughtUp = items, true
		}
		if !fromTime {
			b.Gap = detectGap(last, oldest)
			if b.Gap == nil && oldest == "" && len(b.Items) == 0 && last != "" && laterCursor(last, r.Newest) != last {
				// Retention emptied the log after events past our cursor were appended.
				b.Gap = &Gap{After: last, Newest: r.Newest}
			}
		}
		fromTime = false
		switch {
		case len(b.Items) > 0:
			b.Cursor = b.Items[len(b.Items)-1].Cursor
		case b.Gap != nil && oldest == "":
			b.Cursor = b.Gap.Newest // all of it is gone
		case b.Gap != nil:
			b.Cursor = justBefore(oldest, last) // nothing to resume from in between
		default:
			b.Cursor = last
		}
		if len(b.Items) == 0 && r.Ascending {
			// An evtctl node answers a long-poll with no items only after examining every
			// item up to newest: none matched, so none is lost when the log drops them later.
			// (A Tendermint node may report a newest it did not examine; stay put there.)
			b.Cursor = laterCursor(b.Cursor, r.Newest)
		}
		// The resume cursor and the gap outlive the replies, whose memory may be reused.
		b.Cursor = strings.Clone(b.Cursor)
		if b.Gap != nil {
			b.Gap = &Gap{After: strings.Clone(b.Gap.After), Oldest: strings.Clone(b.Gap.Oldest), Newest: strings.Clone(b.Gap.Newest)}
		}
		err = fn(b)
		r.release()
		for _, p := range used {
			p.release()
		}
		used = used[:0]
		if err != nil {
			return err
		}
		last = b.Cursor
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// probe asks for the newest item without waiting long, to learn the head and the node's
// cursor width.
func (c *Client) probe(ctx context.Context, b Backoff, onRetry RetryFunc) (*Reply, error) {
	return c.eventsRetry(ctx, Request{MaxItems: 1, Wait: time.Nanosecond}, b, onRetry)
}

// sinceCursor builds the cursor before every event stamped at or after t, in the width of
// the node's own cursors.
func sinceCursor(t time.Time, head *Reply) string {
	w := cursor.WidthOf(head.Newest)
	if w == 0 {
		w = cursor.WidthOf(head.Oldest)
	}
	if w == 0 {
		return "" // an empty log: everything from now on is after t
	}
	return cursor.FromTime(t, w).String()
}

// detectGap reports lost events when the resume cursor is older than the log's oldest item
// and something could have stood between them.
func detectGap(last, oldest string) *Gap {
	if last == "" || oldest == "" {
		return nil
	}
	lc, err1 := cursor.Parse(last)
	oc, err2 := cursor.Parse(oldest)
	if err1 != nil || err2 != nil {
		// Not cursors we can read: fall back to the string order ADR-075 promises.
		if len(last) == len(oldest) && last < oldest {
			return &Gap{After: last, Oldest: oldest}
		}
		return nil
	}
	if !lc.Before(oc) {
		return nil
	}
	if prev, ok := prevCursor(oc); ok && !lc.Before(prev) {
		return nil // nothing fits between them
	}
	if lc.Width == cursor.NodeWidth && oc.Width == cursor.NodeWidth && oc.Seq == lc.Seq+1 {
		return nil // an evtctl node numbers items without holes: oldest is the very next one
	}
	return &Gap{After: last, Oldest: oldest}
}

// laterCursor returns the later of two cursors of one log; a when b is empty or unreadable.
func laterCursor(a, b string) string {
	ac, err1 := cursor.Parse(a)
	bc, err2 := cursor.Parse(b)
	if b == "" || err1 != nil || err2 != nil || !bc.After(ac) {
		return a
	}
	return b
}

// prevCursor is the greatest cursor of the same width before c.
func prevCursor(c cursor.Cursor) (cursor.Cursor, bool) { return c.Prev() }

// justBefore returns the cursor just before oldest, to resume from after a gap when no item
// was delivered; it never goes back before last.
func justBefore(oldest, last string) string {
	oc, err := cursor.Parse(oldest)
	if err != nil {
		return last
	}
	p, ok := prevCursor(oc)
	if !ok {
		return last
	}
	if lc, err := cursor.Parse(last); err == nil && !lc.Before(p) {
		return last
	}
	return p.String()
}
