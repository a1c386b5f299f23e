package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/cursor"
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

// retrying calls attempt until it succeeds, fails for good (see Retryable), or ctx ends,
// waiting between attempts as b says and telling onRetry of each failure.
func retrying[T any](ctx context.Context, b Backoff, onRetry RetryFunc, attempt func() (T, error)) (T, error) {
	var zero T
	var failingSince time.Time
	for n := 0; ; n++ {
		v, err := attempt()
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		if !Retryable(err) {
			return zero, err
		}
		d := max(b.delay(n), retryAfterOf(err))
		if n == 0 {
			failingSince = time.Now()
		}
		if b.GiveUp > 0 && time.Since(failingSince)+d > b.GiveUp {
			return zero, fmt.Errorf("%w (gave up after retrying for %s)", err, time.Since(failingSince).Round(time.Second))
		}
		if onRetry != nil {
			onRetry(err, n+1, d)
		}
		if err := retry.Sleep(ctx, d); err != nil {
			return zero, err
		}
	}
}

// PageRetry reads a page as Page does, retrying failures that may pass.
func (c *Client) PageRetry(ctx context.Context, r PageRequest, b Backoff, onRetry RetryFunc) (*Page, error) {
	return retrying(ctx, b, onRetry, func() (*Page, error) { return c.Page(ctx, r) })
}

func (c *Client) boundsRetry(ctx context.Context, b Backoff, onRetry RetryFunc) (oldest, newest string, err error) {
	type bounds struct{ oldest, newest string }
	v, err := retrying(ctx, b, onRetry, func() (bounds, error) {
		o, n, err := c.Bounds(ctx)
		return bounds{o, n}, err
	})
	return v.oldest, v.newest, err
}

func (c *Client) atRetry(ctx context.Context, t time.Time, b Backoff, onRetry RetryFunc) (string, error) {
	return retrying(ctx, b, onRetry, func() (string, error) { return c.At(ctx, t) })
}

// Gap reports that the node's log does not go on from where the client was: events lost to
// the node's retention or damage, a log that started again, or a position that is not of the
// log (see cursor.Check). The client had examined the log up to After.
type Gap struct {
	Kind   GapKind
	After  string
	Oldest string // the log's oldest item now, or the item that follows a loss within the log; "" when none is left
	Newest string // the log's newest item now, or the newest it ever held when it holds none
	// Lost is how many events were lost (GapLost), where the sequence numbers tell it:
	// modulo 65536 on a Tendermint node; 0 when they do not.
	Lost uint64
	// Detail says what happened in the log's own terms, where its source can say more than
	// the cursors do ("heights 12 to 40 are no longer served", "partition 2: offsets 100
	// to 199"); "" when it cannot. String says it, whatever the kind.
	Detail string
}

// GapKind is what a Gap reports.
type GapKind int

const (
	// GapLost: events after After were dropped before the client saw them.
	GapLost GapKind = iota
	// GapRestarted: the node restarted and its log starts again, later than After and
	// numbered from below it; every event it held after After is gone. A Tendermint node
	// does this whenever it restarts (its log lives in memory).
	GapRestarted
	// GapPastNewest: After is past the log's newest event, or the log holds none and never
	// did: it is not of this node's log, or the log went back.
	GapPastNewest
	// GapOutOfOrder: the log's cursors contradict After (events later than it numbered at
	// or below it, or earlier ones above it; or cursors of another form): it is not of
	// this node's log, or the log went back and numbers events again.
	GapOutOfOrder
)

// NotOfLog reports whether After is not a position in the node's log as it is now: another
// node's cursor, or one of a log that went back.
func (g *Gap) NotOfLog() bool { return g.Kind == GapPastNewest || g.Kind == GapOutOfOrder }

// String says what the gap is, in a sentence that names the cursors: what evtctl prints.
func (g *Gap) String() string {
	switch g.Kind {
	case GapRestarted:
		if g.Detail != "" {
			return fmt.Sprintf("the log started again after cursor %s: %s", g.After, g.Detail)
		}
		start := "starts again at " + g.Oldest
		if g.Oldest == "" {
			start = "holds no events yet"
		}
		return fmt.Sprintf("the node restarted; its log %s, and the events it held after cursor %s, if any, are gone (or that cursor is of another node's log)", start, g.After)
	case GapPastNewest, GapOutOfOrder:
		if g.Detail != "" {
			return fmt.Sprintf("cursor %s is not of this node's log, or the log went back: %s", g.After, g.Detail)
		}
		return fmt.Sprintf("cursor %s is not of this node's log, or the log went back: %s", g.After, g.notOfLogDetail())
	}
	lost := ""
	switch {
	case g.Lost == 1:
		lost = " (1 event lost)"
	case g.Lost > 1:
		lost = fmt.Sprintf(" (%d events lost)", g.Lost)
	}
	switch {
	case g.Detail != "":
		return fmt.Sprintf("events were lost after cursor %s: %s%s", g.After, g.Detail, lost)
	case g.Oldest == "":
		return fmt.Sprintf("events were lost: the node no longer holds events after cursor %s, up to its newest, %s%s", g.After, g.Newest, lost)
	}
	return fmt.Sprintf("events were lost: the node no longer holds events after cursor %s; its log now starts at %s%s", g.After, g.Oldest, lost)
}

// notOfLogDetail says how the log contradicts the cursor.
func (g *Gap) notOfLogDetail() string {
	after, oldest, newest := mustParse(g.After), mustParse(g.Oldest), mustParse(g.Newest)
	switch {
	case newest.IsZero():
		return "it holds no events"
	case after.Width != newest.Width:
		return fmt.Sprintf("its cursors have %d sequence digits, as its newest, %s", newest.Width, g.Newest)
	case after.After(newest):
		return fmt.Sprintf("its newest event, %s, comes before the cursor", g.Newest)
	case !oldest.IsZero() && oldest.TS > after.TS && oldest.Seq <= after.Seq:
		return fmt.Sprintf("its oldest event, %s, is later than the cursor but numbered below it", g.Oldest)
	case newest.TS > after.TS && newest.Seq <= after.Seq:
		return fmt.Sprintf("its newest event, %s, is later than the cursor but numbered below it", g.Newest)
	}
	return fmt.Sprintf("its oldest event, %s, is earlier than the cursor but numbered above it", g.Oldest)
}

// Short says what the gap is in a few words, for a line in a list.
func (g *Gap) Short() string {
	switch g.Kind {
	case GapRestarted:
		if g.Oldest == "" {
			return "the node restarted: its log holds no events yet"
		}
		return "the node restarted: its log starts again at " + g.Oldest
	case GapPastNewest, GapOutOfOrder:
		return "cursor " + g.After + " is not of this node's log, or the log went back"
	}
	n := "events"
	switch {
	case g.Lost == 1:
		n = "1 event"
	case g.Lost > 1:
		n = fmt.Sprintf("%d events", g.Lost)
	}
	if g.Oldest == "" {
		return n + " lost after " + g.After + " (none after it is left)"
	}
	return n + " lost between " + g.After + " and " + g.Oldest
}

// Batch is what Stream delivers at a time.
type Batch struct {
	Gap      *Gap   // lost events before Items, if any
	Items    []Item // oldest first; may be empty
	CaughtUp bool   // nothing older than the head is left to fetch: a long-poll comes next
	// Cursor is where to resume once this batch is handled: the node has been asked about
	// every event up to it. It may be past the last item, over events that did not match.
	Cursor string
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

// Stream follows the log from a starting point and calls fn with each batch, oldest first,
// each matching event exactly once, until ctx ends, fn fails, or the source fails in a way
// retrying cannot fix. It resumes after the last position fn accepted, so a reconnect
// neither skips nor repeats an event. With no starting point it begins at the head: only
// events appended from now on. It never returns nil.
//
// A gap is reported exactly when the log does not go on from the position the client held:
// events were lost (the source knows how to tell; on a node of the events method, when the
// oldest item it holds comes after the last one the client had it examine and is not the
// next one, see cursor.Check), the log started again, or the position is not of the log.
// The client keeps track of how far the source has examined the log for its query, so
// events that did not match and were dropped later are no loss.
//
// How a backlog is walked is the source's: forward page by page, in memory bounded by the
// page size, where the source pages forward; on a Tendermint node, which pages newest first
// only, each round gathers everything up to the head before its first item, as ADR-075
// prescribes.
func (c *Client) Stream(ctx context.Context, opts StreamOptions, fn func(Batch) error) error {
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	if opts.Wait <= 0 {
		opts.Wait = 25 * time.Second
	}
	st := &streamer{c: c, opts: opts, fn: fn, last: opts.After, quick: opts.After != ""}
	if opts.After == "" && !opts.FromStart {
		var err error
		if !opts.Since.IsZero() {
			st.last, err = c.atRetry(ctx, opts.Since, opts.Backoff, opts.OnRetry)
			// A start time older than the log is not a loss the caller could have
			// prevented (the log may simply be younger): gaps count from a real position on.
			st.madeUp = st.last != ""
		} else {
			_, st.last, err = c.boundsRetry(ctx, opts.Backoff, opts.OnRetry)
		}
		if err != nil {
			return err
		}
	}
	for {
		if err := st.round(ctx); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// streamer is the state of one Stream.
type streamer struct {
	c    *Client
	opts StreamOptions
	fn   func(Batch) error
	// last is the resume position: the source has been asked about every event up to it,
	// and every match up to it has been delivered.
	last string
	// madeUp: last is a bound made from a time (--since), not a position a reader held;
	// nothing can be said about events lost before it.
	madeUp bool
	// quick: the next round does not wait (see wait).
	quick bool
}

// wait is the long-poll wait of a round. The first round of a stream that resumes from a
// position does not wait for new events: what the source says of its log is checked against
// the position at once, and that position may not be of this log at all.
func (st *streamer) wait() time.Duration {
	if st.quick {
		return time.Millisecond
	}
	return st.opts.Wait
}

// round reads the next page after the resume position, long-polling at the head, and
// delivers it.
func (st *streamer) round(ctx context.Context) error {
	o := st.opts
	p, err := st.c.PageRetry(ctx, PageRequest{Query: o.Query, After: st.last, Max: o.PageSize, Wait: st.wait(), NoGap: st.madeUp, Reuse: o.ReuseMemory}, o.Backoff, o.OnRetry)
	if err != nil {
		return err
	}
	return st.deliver(Batch{Items: p.Items, Gap: p.Gap, CaughtUp: !p.More, Cursor: p.Next}, p)
}

// GapAfter is the gap a reader whose last examined item is last finds, by what a reply
// says of the log: its oldest item, its newest, and whether it returned nothing after last
// (none); nil when the log goes on from last. See cursor.Check for the rules.
func GapAfter(last, oldest, newest string, none bool) *Gap {
	b, lost := cursor.Check(last, oldest, newest, none)
	g := &Gap{After: last, Oldest: oldest, Newest: newest, Lost: lost}
	switch b {
	case cursor.BreakLost:
		g.Kind = GapLost
		if oldest != "" {
			g.Newest = "" // said by the oldest item
		}
	case cursor.BreakRestart:
		g.Kind = GapRestarted
	case cursor.BreakPastNewest:
		g.Kind = GapPastNewest
	case cursor.BreakOutOfOrder:
		g.Kind = GapOutOfOrder
	default:
		return nil
	}
	return g
}

// deliver hands a batch to fn and moves the resume position; p's memory is released after.
func (st *streamer) deliver(b Batch, p *Page) error {
	// The resume position and the gap outlive the page, whose memory may be reused.
	b.Cursor = strings.Clone(b.Cursor)
	if b.Gap != nil {
		g := *b.Gap
		g.After, g.Oldest, g.Newest, g.Detail = strings.Clone(g.After), strings.Clone(g.Oldest), strings.Clone(g.Newest), strings.Clone(g.Detail)
		b.Gap = &g
	}
	err := st.fn(b)
	p.Release()
	if err != nil {
		return err
	}
	st.quick = false
	if b.Cursor != st.last {
		st.last, st.madeUp = b.Cursor, false
	}
	return nil
}

// mustParse parses a cursor a node sent, which parseReply has not checked; an unreadable
// one is the empty cursor.
func mustParse(s string) cursor.Cursor {
	c, _ := cursor.Parse(s)
	return c
}
