package client

import (
	"context"
	"fmt"
	"slices"
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
		if err := retry.Sleep(ctx, d); err != nil {
			return nil, err
		}
	}
}

// Gap reports that the node's log does not go on from where the client was: events lost to
// the node's retention or damage, a log that started again, or a position that is not of the
// log (see cursor.Check). The client had examined the log up to After.
type Gap struct {
	Kind   GapKind
	After  string
	Oldest string // the log's oldest item now; "" when it holds none
	Newest string // the log's newest item now, or the newest it ever held when it holds none
	// Lost is how many events were lost (GapLost), where the sequence numbers tell it:
	// modulo 65536 on a Tendermint node; 0 when they do not.
	Lost uint64
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
		start := "starts again at " + g.Oldest
		if g.Oldest == "" {
			start = "holds no events yet"
		}
		return fmt.Sprintf("the node restarted; its log %s, and the events it held after cursor %s, if any, are gone (or that cursor is of another node's log)", start, g.After)
	case GapPastNewest, GapOutOfOrder:
		return fmt.Sprintf("cursor %s is not of this node's log, or the log went back: %s", g.After, g.notOfLogDetail())
	}
	lost := ""
	switch {
	case g.Lost == 1:
		lost = " (1 event lost)"
	case g.Lost > 1:
		lost = fmt.Sprintf(" (%d events lost)", g.Lost)
	}
	if g.Oldest == "" {
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

// Stream follows the node's log from a starting point and calls fn with each batch, oldest
// first, each matching event exactly once, until ctx ends, fn fails, or the node answers
// with an error that retrying cannot fix. It resumes after the last cursor fn accepted, so
// a reconnect neither skips nor repeats an event. With no starting point it begins at the
// head: only events appended from now on.
//
// A gap is reported exactly when events were lost: when the oldest item the node holds comes
// after the last one the client had the node examine and is not the next one (see
// cursor.Lost). The client keeps track of how far the node has examined the log for its
// query, so events that did not match and were pruned later are no loss.
//
// On a node with evtctl's ascending extension a backlog is walked forward page by page, in
// memory bounded by the page size. On other nodes (Tendermint) each round long-polls for the
// head to move, then fetches everything after the resume cursor up to that head newest first,
// page by page, holding it until it is complete, as ADR-075 prescribes: memory and time to
// first delivery grow with the backlog.
func (c *Client) Stream(ctx context.Context, opts StreamOptions, fn func(Batch) error) error {
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	if opts.Wait <= 0 {
		opts.Wait = 25 * time.Second
	}
	st := &streamer{c: c, opts: opts, fn: fn, last: opts.After, quick: opts.After != ""}
	if opts.After == "" && !opts.FromStart || opts.Query != "" && c.Kind() == KindUnknown {
		head, err := c.probe(ctx, opts.Backoff, opts.OnRetry)
		if err != nil {
			return err
		}
		if opts.After == "" && !opts.FromStart {
			if !opts.Since.IsZero() {
				st.last = sinceCursor(opts.Since, head)
				// A start time older than the log is not a loss the caller could have
				// prevented (the log may simply be younger): gaps count from a real cursor on.
				st.madeUp = st.last != ""
			} else {
				st.last = head.Newest
			}
		}
	}
	if err := c.CheckQuery(opts.Query); err != nil {
		return err
	}
	for {
		var err error
		if c.Kind() == KindTendermint {
			err = st.roundDescending(ctx)
		} else {
			err = st.roundAscending(ctx)
		}
		if err != nil {
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
	// last is the resume cursor: the node has been asked about every event up to it, and
	// every match up to it has been delivered.
	last string
	// madeUp: last is a time bound (--since), not an item of the log; nothing can be said
	// about events lost before it.
	madeUp bool
	// quick: the next round does not wait (see wait).
	quick bool
}

// wait is the long-poll wait of a round. The first round of a stream that resumes from a
// cursor does not wait for new events: what the node says of its log is checked against
// the cursor at once, and that cursor may not be of this log at all.
func (st *streamer) wait() time.Duration {
	if st.quick {
		return time.Millisecond
	}
	return st.opts.Wait
}

// roundAscending asks an evtctl node for the oldest matching events after the resume
// cursor, long-polling when there are none. The first reply tells whether the node has the
// ascending extension; when it has not, the round is handed to roundDescending.
func (st *streamer) roundAscending(ctx context.Context) error {
	o := st.opts
	r, err := st.c.eventsRetry(ctx, Request{Query: o.Query, MaxItems: o.PageSize, After: st.last, Wait: st.wait(), Ascending: true, reuse: o.ReuseMemory}, o.Backoff, o.OnRetry)
	if err != nil {
		return err
	}
	if !r.Ascending() {
		// A node without the extension (this is its first reply, and the query is empty:
		// Stream learns the kind first otherwise). It ignored the order and answered with
		// its newest items: the first page of a descending round.
		if o.Query != "" {
			r.release()
			return st.roundDescending(ctx)
		}
		return st.collect(ctx, r, Request{}, "")
	}
	b := Batch{Items: r.Items, CaughtUp: !r.More}
	b.Gap = st.gap(r.Oldest, r.Newest, len(r.Items) == 0)
	switch {
	case len(b.Items) > 0:
		b.Cursor = b.Items[len(b.Items)-1].Cursor
	case b.Gap != nil && r.Oldest != "" && (b.Gap.Kind == GapLost || b.Gap.Kind == GapRestarted):
		// The log goes on at its oldest event, after the resume cursor.
		b.Cursor = cursor.ResumeBefore(mustParse(r.Oldest)).String()
	default:
		b.Cursor = st.last
	}
	if r.More {
		// The node stopped short (its work budget, or a range lost to damage) after
		// examining the log up to Resume: the next page starts there.
		b.Cursor = cursor.Later(b.Cursor, r.Resume)
	} else {
		// With nothing further to return, an evtctl node has examined every item up to
		// newest: none of the rest matched, and none is lost when the log drops it later.
		b.Cursor = cursor.Later(b.Cursor, r.Newest)
	}
	return st.deliver(b, r)
}

// roundDescending is a round on a node that pages newest first only (Tendermint). It
// long-polls, unfiltered and for one item, until the head moves past the resume cursor;
// that reply names the head. Then it collects every matching event between the resume
// cursor and that head with queries that never wait, newest first and page by page. The
// last of those pages is a scan of the whole range as the node holds it then: items missing
// between the resume cursor and that page's oldest were dropped before the client saw them.
// Asking for the head unfiltered is what lets the client know how far the node examined the
// log for its query — a filtered long-poll does not say which non-matching items it saw.
func (st *streamer) roundDescending(ctx context.Context) error {
	o := st.opts
	if o.Query == "" {
		// Unfiltered, the long-poll's reply is the first page itself.
		return st.collect(ctx, nil, Request{MaxItems: o.PageSize, After: st.last, Wait: st.wait(), reuse: o.ReuseMemory}, "")
	}
	w, err := st.c.eventsRetry(ctx, Request{MaxItems: 1, After: st.last, Wait: st.wait()}, o.Backoff, o.OnRetry)
	if err != nil {
		return err
	}
	if len(w.Items) == 0 {
		// The wait ended with nothing new: nothing to examine yet.
		return st.deliver(Batch{CaughtUp: true, Cursor: st.last, Gap: st.gap(w.Oldest, w.Newest, true)}, w)
	}
	head := strings.Clone(w.Items[0].Cursor)
	w.release()
	hc, err := cursor.Parse(head)
	if err != nil {
		return &DecodeError{Err: err, Body: head}
	}
	return st.collect(ctx, nil, Request{Query: o.Query, MaxItems: o.PageSize, After: st.last, Before: st.c.BeforeThrough(hc).String(), reuse: o.ReuseMemory}, head)
}

// collect fetches the pages of one descending round and delivers them oldest first as one
// batch. The first page is r when it has come already, else the reply to req. head, when
// set, is the newest item the round covers: req is then bounded by its time, and the node
// is known to have examined the log up to it.
func (st *streamer) collect(ctx context.Context, r *Reply, req Request, head string) error {
	o := st.opts
	if r == nil {
		var err error
		if r, err = st.c.eventsRetry(ctx, req, o.Backoff, o.OnRetry); err != nil {
			return err
		}
	}
	used := []*Reply{r}
	defer func() {
		for _, p := range used {
			p.release()
		}
	}()
	items, last := r.Items, r
	for more := r.More && len(items) > 0; more; {
		// Page back from the oldest item so far towards the resume cursor.
		p, err := st.c.eventsRetry(ctx, Request{Query: o.Query, MaxItems: o.PageSize, After: st.last, Before: items[len(items)-1].Cursor, reuse: o.ReuseMemory}, o.Backoff, o.OnRetry)
		if err != nil {
			return err
		}
		used = append(used, p)
		items = append(items, p.Items...)
		more = p.More && len(p.Items) > 0 // an empty page cannot move before on
		last = p
	}
	if head != "" {
		// The range was bounded by time; anything after the head is for the next round.
		items = slices.DeleteFunc(items, func(it Item) bool { return cursor.CompareText(it.Cursor, head) > 0 })
	}
	slices.Reverse(items)
	b := Batch{Items: items, CaughtUp: true}
	b.Gap = st.gap(last.Oldest, r.Newest, len(items) == 0 && head == "")
	switch {
	case head != "":
		b.Cursor = head // the node examined everything up to the head for the query
		if len(items) > 0 {
			b.Cursor = cursor.Later(head, items[len(items)-1].Cursor)
		}
	case len(items) > 0:
		b.Cursor = items[len(items)-1].Cursor
	default:
		b.Cursor = st.last
	}
	return st.deliver(b, nil)
}

// gap reports the events lost between the resume cursor and the log's oldest item. An empty
// log whose newest item is past the cursor lost everything after it, when nothing new was
// returned (empty).
func (st *streamer) gap(oldest, newest string, empty bool) *Gap {
	if st.madeUp {
		return nil
	}
	return GapAfter(st.last, oldest, newest, empty)
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

// deliver hands a batch to fn and moves the resume cursor; r, when set, is released after.
func (st *streamer) deliver(b Batch, r *Reply) error {
	if g := b.Gap; g != nil && len(b.Items) == 0 {
		switch {
		case g.Kind == GapPastNewest:
			// Not a position in this log: go on from its newest event (from its start when
			// it holds none), so that what it takes next is read.
			b.Cursor = g.Newest
		case g.Oldest == "":
			b.Cursor = g.Newest // all of it is gone
		}
	}
	// The resume cursor and the gap outlive the replies, whose memory may be reused.
	b.Cursor = strings.Clone(b.Cursor)
	if b.Gap != nil {
		g := *b.Gap
		g.After, g.Oldest, g.Newest = strings.Clone(g.After), strings.Clone(g.Oldest), strings.Clone(g.Newest)
		b.Gap = &g
	}
	err := st.fn(b)
	r.release()
	if err != nil {
		return err
	}
	st.quick = false
	if b.Cursor != st.last {
		st.last, st.madeUp = b.Cursor, false
	}
	return nil
}

// probe asks for the newest item without waiting, to learn the head, the node's cursor
// width and whether it has the ascending extension. A `before` bound past any real cursor
// makes even a node that clamps waits to a minimum (Tendermint: 1 s) answer at once.
func (c *Client) probe(ctx context.Context, b Backoff, onRetry RetryFunc) (*Reply, error) {
	return c.eventsRetry(ctx, Request{MaxItems: 1, Before: probeBefore, Ascending: true}, b, onRetry)
}

// probeBefore is a cursor after every real one, in the width both kinds of node accept.
const probeBefore = "7fffffffffffffff-ffff"

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

// mustParse parses a cursor a node sent, which parseReply has not checked; an unreadable
// one is the empty cursor.
func mustParse(s string) cursor.Cursor {
	c, _ := cursor.Parse(s)
	return c
}
