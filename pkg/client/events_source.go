package client

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// eventsSource is the source of a node that serves the events method: an evtctl node,
// which pages in both directions (its ascending extension), or a Tendermint node, which
// pages newest first only. Its positions are the node's cursors, ordered and checked for
// loss by the rules of pkg/cursor.
type eventsSource struct {
	n *rpcNode
	// held keeps the rest of ranges gathered newest first on a Tendermint node, to be
	// handed out page by page (see forwardDescending).
	held heldRanges
	// width is the sequence width of the node's cursors, once known.
	widthMu sync.Mutex
	width   int
}

func newEventsSource(n *rpcNode) *eventsSource { return &eventsSource{n: n} }

// Node is the node's base URL, any password redacted.
func (s *eventsSource) Node() string { return s.n.Node() }

// Compare orders two cursors of the node's log.
func (s *eventsSource) Compare(a, b string) int { return cursor.CompareText(a, b) }

// CheckPosition refuses text that is not a cursor.
func (s *eventsSource) CheckPosition(pos string) error {
	_, err := cursor.Parse(pos)
	return err
}

// noWait is the long-poll wait of a request that wants its answer now.
const noWait = time.Nanosecond

// probeBefore is a cursor after every real one, in the width both kinds of node accept. A
// `before` bound makes even a node that clamps waits to a minimum (Tendermint: 1 s) answer
// at once.
const probeBefore = "7fffffffffffffff-ffff"

// probe asks for the newest item without waiting, to learn the head, the node's cursor
// width and whether it has the ascending extension.
func (s *eventsSource) probe(ctx context.Context) (*Reply, error) {
	r, err := s.n.Events(ctx, Request{MaxItems: 1, Before: probeBefore, Ascending: true})
	if err == nil {
		s.noteWidth(r)
	}
	return r, err
}

func (s *eventsSource) noteWidth(r *Reply) {
	w := cursor.WidthOf(r.Newest)
	if w == 0 {
		w = cursor.WidthOf(r.Oldest)
	}
	if w != 0 {
		s.widthMu.Lock()
		s.width = w
		s.widthMu.Unlock()
	}
}

// Bounds reports the log's oldest and newest cursors.
func (s *eventsSource) Bounds(ctx context.Context) (string, string, error) {
	r, err := s.probe(ctx)
	if err != nil {
		return "", "", err
	}
	return r.Oldest, r.Newest, nil
}

// At is the cursor before every item stamped at or after t, in the width of the node's own
// cursors; "" on an empty log, where everything from now on is after t.
func (s *eventsSource) At(ctx context.Context, t time.Time) (string, error) {
	s.widthMu.Lock()
	w := s.width
	s.widthMu.Unlock()
	if w == 0 {
		if _, err := s.probe(ctx); err != nil {
			return "", err
		}
		s.widthMu.Lock()
		w = s.width
		s.widthMu.Unlock()
		if w == 0 {
			return "", nil
		}
	}
	return cursor.FromTime(t, w).String(), nil
}

// know makes sure the node's kind is known before a filtered page, and checks the query
// against what the node takes. An unfiltered page needs no probe: the reply to a request
// for ascending order tells the kind.
func (s *eventsSource) know(ctx context.Context, query string) error {
	if s.n.Kind() == KindUnknown && query != "" {
		if _, err := s.probe(ctx); err != nil {
			return err
		}
	}
	return s.n.CheckQuery(query)
}

// Page reads one page.
func (s *eventsSource) Page(ctx context.Context, r PageRequest) (*Page, error) {
	if err := s.know(ctx, r.Query); err != nil {
		return nil, err
	}
	switch {
	case r.Backward:
		return s.backward(ctx, r)
	case s.n.Kind() == KindTendermint:
		return s.forwardDescending(ctx, r)
	}
	return s.forwardAscending(ctx, r)
}

// gap is what a reply says of the log after r.After, unless r.After was made up.
func gapOf(r PageRequest, oldest, newest string, none bool) *Gap {
	if r.NoGap {
		return nil
	}
	return GapAfter(r.After, oldest, newest, none)
}

// through is the exclusive `before` of a request that must include the item at end.
func (s *eventsSource) through(end string) (string, error) {
	ec, err := cursor.Parse(end)
	if err != nil {
		return "", err
	}
	return s.n.BeforeThrough(ec).String(), nil
}

// forwardAscending asks an evtctl node for the oldest matching events after r.After,
// long-polling when there are none and the page is open at the head.
func (s *eventsSource) forwardAscending(ctx context.Context, r PageRequest) (*Page, error) {
	req := Request{Query: r.Query, MaxItems: r.Max, After: r.After, Wait: r.Wait, Ascending: true, reuse: r.Reuse}
	if r.Before != "" {
		req.Before, req.Wait = r.Before, 0 // a bounded page never waits
	} else if r.Through != "" {
		b, err := s.through(r.Through)
		if err != nil {
			return nil, err
		}
		req.Before, req.Wait = b, 0 // a bounded page never waits
	} else if req.Wait <= 0 {
		req.Wait = noWait
	}
	rep, err := s.n.Events(ctx, req)
	if err != nil {
		return nil, err
	}
	if !rep.Ascending() {
		// A node without the extension (this is its first reply, and the page is unfiltered:
		// a filtered one learns the kind first) ignored the order and answered with its
		// newest items: the first page of a newest-first gathering, as the request asked
		// for nothing it did not.
		s.n.kind.Store(int32(KindTendermint))
		if r.Through == "" && !r.Reuse {
			return s.gather(ctx, r, rep, "", req)
		}
		rep.release()
		return s.forwardDescending(ctx, r)
	}
	p := &Page{Items: rep.Items, More: rep.More && (len(rep.Items) > 0 || rep.Resume != ""), Oldest: rep.Oldest, Newest: rep.Newest, release: rep.release}
	p.Gap = gapOf(r, rep.Oldest, rep.Newest, len(rep.Items) == 0)
	next := r.After
	switch {
	case len(rep.Items) > 0:
		next = rep.Items[len(rep.Items)-1].Cursor
	case p.Gap != nil && rep.Oldest != "" && (p.Gap.Kind == GapLost || p.Gap.Kind == GapRestarted):
		// The log goes on at its oldest event, after the cursor.
		next = cursor.ResumeBefore(mustParse(rep.Oldest)).String()
	}
	if rep.More {
		// The node stopped short (its work budget, or a range lost to damage) after
		// examining the log up to Resume: the next page starts there.
		next = cursor.Later(next, rep.Resume)
	} else {
		// With nothing further to return, an evtctl node has examined every item up to
		// newest (or the range's end): none of the rest matched, and none is lost when the
		// log drops it later.
		end := rep.Newest
		if r.Through != "" && cursor.CompareText(r.Through, end) < 0 {
			end = r.Through
		}
		if r.Before != "" {
			end = "" // examined up to just before r.Before: no position to say it by
		}
		next = cursor.Later(next, end)
	}
	p.Next = s.afterGap(p, next)
	return p, nil
}

// afterGap is where a page with a gap and no items leaves the reader: past a log that holds
// nothing after it, and on the log's newest event when the position is not of the log (so
// that what it takes next is read).
func (s *eventsSource) afterGap(p *Page, next string) string {
	g := p.Gap
	if g == nil || len(p.Items) > 0 {
		return next
	}
	switch {
	case g.Kind == GapPastNewest:
		return g.Newest
	case g.Oldest == "":
		return cursor.Later(next, g.Newest) // all of it is gone
	}
	return next
}

// forwardDescending is a forward page of a node that pages newest first only
// (Tendermint). It gathers every matching event between r.After and the head (or
// r.Through) newest first, page by page, and hands them out oldest first, r.Max at a time,
// keeping the rest for the pages that follow: as ADR-075 prescribes, memory and time to
// the first item grow with the backlog.
//
// Open at the head and filtered, it first long-polls, unfiltered and for one item, until
// the head moves past r.After; that reply names the head, up to which the gathering is
// bounded. Asking for the head unfiltered is what lets the client know how far the node
// examined the log for the query — a filtered long-poll does not say which non-matching
// items it saw. The last page of a gathering is a scan of the whole range as the node held
// it then: items missing between r.After and that page's oldest were dropped before the
// client saw them.
func (s *eventsSource) forwardDescending(ctx context.Context, r PageRequest) (*Page, error) {
	if p := s.held.take(r); p != nil {
		return p, nil
	}
	head := r.Through
	req := Request{Query: r.Query, MaxItems: max(r.Max, r.Size), After: r.After}
	switch {
	case r.Before != "":
		// Bounded by the caller: gathered up to it, never waiting.
		req.Before = r.Before
		rep, err := s.n.Events(ctx, req)
		if err != nil {
			return nil, err
		}
		return s.gather(ctx, r, rep, "", req)
	case head != "":
	case r.Wait <= 0:
		// Wanted now: bounded by the head as it is, without a long-poll (which a Tendermint
		// node holds for a second at least).
		pr, err := s.probe(ctx)
		if err != nil {
			return nil, err
		}
		if pr.Newest == "" || r.After != "" && cursor.CompareText(pr.Newest, r.After) <= 0 {
			p := &Page{Oldest: pr.Oldest, Newest: pr.Newest, Next: r.After}
			p.Gap = gapOf(r, pr.Oldest, pr.Newest, true)
			p.Next = s.afterGap(p, p.Next)
			return p, nil
		}
		head = strings.Clone(pr.Newest)
	case r.Query != "":
		w, err := s.n.Events(ctx, Request{MaxItems: 1, After: r.After, Wait: max(r.Wait, noWait)})
		if err != nil {
			return nil, err
		}
		if len(w.Items) == 0 {
			// The wait ended with nothing new: nothing to examine yet.
			p := &Page{Oldest: w.Oldest, Newest: w.Newest, Next: r.After}
			p.Gap = gapOf(r, w.Oldest, w.Newest, true)
			p.Next = s.afterGap(p, p.Next)
			return p, nil
		}
		head = strings.Clone(w.Items[0].Cursor)
	default:
		req.Wait = max(r.Wait, noWait) // unfiltered, the long-poll's reply is the first page
	}
	if head != "" {
		b, err := s.through(head)
		if err != nil {
			return nil, &DecodeError{Err: err, Body: head}
		}
		req.Before = b
	}
	rep, err := s.n.Events(ctx, req)
	if err != nil {
		return nil, err
	}
	return s.gather(ctx, r, rep, head, req)
}

// gather pages back from rep, the newest-first reply to req, to r.After, and hands out the
// first page of what it found, holding the rest. head, when set, is the newest item the
// gathering covers: req was bounded by its time, and the node is known to have examined
// the log up to it.
func (s *eventsSource) gather(ctx context.Context, r PageRequest, rep *Reply, head string, req Request) (*Page, error) {
	first, last := rep, rep
	items := rep.Items
	for more := rep.More && len(items) > 0; more; {
		// Page back from the oldest item so far towards r.After.
		p, err := s.n.Events(ctx, Request{Query: r.Query, MaxItems: req.MaxItems, After: r.After, Before: items[len(items)-1].Cursor})
		if err != nil {
			return nil, err
		}
		items = append(items, p.Items...)
		more = p.More && len(p.Items) > 0 // an empty page cannot move before on
		last = p
	}
	if head != "" {
		// The range was bounded by time; anything after the head is for the next round.
		items = slices.DeleteFunc(items, func(it Item) bool { return cursor.CompareText(it.Cursor, head) > 0 })
	}
	slices.Reverse(items)
	g := gapOf(r, last.Oldest, first.Newest, len(items) == 0 && head == "")
	next := r.After
	switch {
	case head != "":
		next = head // the node examined everything up to the head for the query
		if len(items) > 0 {
			next = cursor.Later(head, items[len(items)-1].Cursor)
		}
	case len(items) > 0:
		next = items[len(items)-1].Cursor
	}
	whole := &Page{Items: items, Oldest: last.Oldest, Newest: first.Newest, Next: next, Gap: g}
	whole.Next = s.afterGap(whole, whole.Next)
	return s.held.hand(r, whole), nil
}

// backward reads the newest matching events before r.Before (or up to r.Through), newest
// first; on either kind of node.
func (s *eventsSource) backward(ctx context.Context, r PageRequest) (*Page, error) {
	before := r.Before
	if before == "" && r.Through != "" {
		// On a node that compares cursors by time alone (Tendermint), a bound in time just
		// past the range's end; what shares its time and comes after it is dropped below.
		b, err := s.through(r.Through)
		if err != nil {
			return nil, err
		}
		before = b
	}
	if before == "" {
		before = probeBefore // the head, without a long-poll
	}
	req := Request{Query: r.Query, MaxItems: r.Max, After: r.After, Before: before, reuse: r.Reuse && r.Through == ""}
	rep, err := s.n.Events(ctx, req)
	if err != nil {
		return nil, err
	}
	p := &Page{Oldest: rep.Oldest, Newest: rep.Newest, release: rep.release}
	more := rep.More && (len(rep.Items) > 0 || rep.Resume != "")
	oldestRead := rep.Resume
	if more && oldestRead == "" {
		oldestRead = rep.Items[len(rep.Items)-1].Cursor
	}
	items := dropAfter(rep.Items, r.Through)
	for more && len(items) < r.Max && len(items) < len(rep.Items) {
		// Items past the range's end that shared its time were dropped: page on back.
		req.Before, req.MaxItems, req.reuse = oldestRead, r.Max-len(items), false
		next, err := s.n.Events(ctx, req)
		if err != nil {
			p.Release()
			return nil, err
		}
		more = next.More && len(next.Items) > 0
		if len(next.Items) > 0 {
			oldestRead = next.Items[len(next.Items)-1].Cursor
		}
		p.Oldest = next.Oldest
		items = append(items, dropAfter(next.Items, r.Through)...)
		rep = next
	}
	p.Items, p.More = items, more
	switch {
	case rep.Resume != "":
		p.Next = rep.Resume // stopped short: the next page starts there
	case len(items) > 0:
		p.Next = items[len(items)-1].Cursor
	default:
		p.Next = oldestRead
	}
	if !more && r.After != "" {
		// The page reached r.After: whether the log still goes on from it.
		p.Gap = gapOf(r, p.Oldest, p.Newest, false)
	}
	return p, nil
}

// dropAfter drops the items, newest first, that lie after the cursor last ("" keeps all).
func dropAfter(items []Item, last string) []Item {
	if last == "" {
		return items
	}
	i := 0
	for i < len(items) && cursor.CompareText(items[i].Cursor, last) > 0 {
		i++
	}
	return items[i:]
}

// heldRanges keeps what forward pages of a Tendermint node gathered beyond the page asked
// for, so that the pages that follow (asking after the last item handed out, with the same
// query and bound) are answered without asking the node again. A few ranges are kept, for
// readers that page one log side by side (the terminal UI follows the head while it pages).
type heldRanges struct {
	mu     sync.Mutex
	ranges []*heldRange
}

type heldRange struct {
	query, through, before string
	at                     string // the position the next page must start after
	rest                   []Item
	page                   Page // the gathering's bounds, Next and Gap (the gap went out already)
}

const heldMax = 4

// take answers r from a range held for it, or returns nil.
func (h *heldRanges) take(r PageRequest) *Page {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, hr := range h.ranges {
		if hr.query != r.Query || hr.through != r.Through || hr.before != r.Before || hr.at != r.After {
			continue
		}
		h.ranges = slices.Delete(h.ranges, i, i+1)
		return h.handLocked(r, hr.rest, hr.page, nil)
	}
	return nil
}

// hand returns the first page of a whole gathering and holds the rest.
func (h *heldRanges) hand(r PageRequest, whole *Page) *Page {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.handLocked(r, whole.Items, *whole, whole.Gap)
}

func (h *heldRanges) handLocked(r PageRequest, items []Item, whole Page, gap *Gap) *Page {
	n := len(items)
	if r.Max > 0 {
		n = min(n, r.Max)
	}
	p := &Page{Items: items[:n:n], Oldest: whole.Oldest, Newest: whole.Newest, Next: whole.Next, Gap: gap}
	if rest := items[n:]; len(rest) > 0 {
		p.More = true
		p.Next = items[n-1].Cursor
		h.ranges = append(h.ranges, &heldRange{query: r.Query, through: r.Through, before: r.Before, at: p.Next, rest: rest, page: whole})
		if len(h.ranges) > heldMax {
			h.ranges = slices.Delete(h.ranges, 0, len(h.ranges)-heldMax)
		}
	}
	return p
}
