package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/filter"
	"github.com/evtctl/evtctl/pkg/wire"
)

// A node may hold tens of thousands of long-polls. Three things keep them cheap:
//
//   - The state of a call lives in a small heap object (poll), and the functions that decode,
//     read and encode return before anything waits.
//   - A call that must wait is parked (package parker): its connection leaves net/http, and
//     nothing but the poll, the connection and a few links stays. Where it cannot be (TLS, a
//     batch, elsewhere than Linux), the goroutine of its request waits with a shallow stack,
//     which the runtime can shrink to its smallest useful size.
//   - Waiters woken by the same append that ask the same question (cursor, filter, size,
//     order) share one read of the log and one encoded page (sharedPage).

// result is an encoded page: pooled when this call alone holds it, or shared with other
// calls, and then read-only and never handed to the pool.
type result struct {
	b      []byte
	pooled bool
	items  int
	parked bool // no result yet: the call was parked, and the parker answers it
}

// release hands a pooled page back once the reply holding it has been written.
func (r result) release() {
	if r.pooled {
		putPageBuf(r.b)
	}
}

// poll is one call of the events method in progress.
type poll struct {
	q     eventlog.Query
	query string // the filter as given: with q, what makes two calls ask the same
	work  int    // the filter's work per byte of an event (filter.Query.Work)
	wait  time.Duration
	limit int    // the most bytes its result may take
	force bool   // its first item is written even when larger than limit
	scan  *int64 // the filter work left to its request (Config.ScanBudget)
	own   int64  // scan's target, when the call is its request's only one

	changed <-chan struct{} // taken before the last read: closes at the next append
	last    pageEnd         // what the last read found, which was no items
	timer   *time.Timer     // of a call waiting in its request's goroutine
	waiting bool            // counted in Server.waiters
}

// newPoll checks the parameters and settles what the call asks.
func (s *Server) newPoll(ctx context.Context, p *eventsParams, b callBudget) (*poll, *rpcError) {
	return s.initPoll(new(poll), ctx, p, b)
}

// initPoll is newPoll in pl, whose earlier call, if any, has ended (endPoll).
func (s *Server) initPoll(pl *poll, ctx context.Context, p *eventsParams, b callBudget) (*poll, *rpcError) {
	*pl = poll{query: p.Query, limit: b.reply, force: b.force, scan: b.scan}
	if pl.scan == nil {
		pl.own = s.cfg.ScanBudget
		pl.scan = &pl.own
	}
	pl.q.Ascending = p.Ascending
	var err error
	if pl.q.After, err = cursor.Parse(p.After); err != nil {
		return nil, newRPCError(wire.CodeInternalError, err.Error())
	}
	if pl.q.Before, err = cursor.Parse(p.Before); err != nil {
		return nil, newRPCError(wire.CodeInternalError, err.Error())
	}
	if p.Query != "" {
		fq, err := filter.Compile(p.Query)
		if err != nil {
			return nil, newRPCError(wire.CodeInternalError, "invalid filter query: "+err.Error())
		}
		if !fq.MatchesAll() {
			pl.q.Match = fq.MatchJSON
			pl.work = fq.Work()
		}
	}
	pl.q.Max = p.MaxItems
	if pl.q.Max <= 0 {
		pl.q.Max = s.cfg.DefaultItems
	}
	pl.q.Max = min(pl.q.Max, s.cfg.MaxItems)
	pl.wait = p.Wait
	if pl.wait <= 0 {
		pl.wait = s.cfg.DefaultWait
	}
	pl.wait = min(pl.wait, s.cfg.MaxWait)
	if deadline, ok := ctx.Deadline(); ok {
		// The calls of a JSON-RPC batch share one wait (see handleRPC).
		pl.wait = min(pl.wait, time.Until(deadline)-50*time.Millisecond)
	}
	return pl, nil
}

// mayWait says whether the call waits when it finds nothing: a page before a cursor is
// answered at once, and so is a call with no time to wait.
func (pl *poll) mayWait() bool { return pl.q.Before.IsZero() && pl.wait > 0 }

func (pl *poll) key() shareKey {
	return shareKey{after: pl.q.After, max: pl.q.Max, asc: pl.q.Ascending, query: pl.query}
}

// callBudget is what a call may spend of its request's budgets (see readInto).
type callBudget struct {
	reply int    // bytes its result may take
	force bool   // its first item is written even when larger than reply
	scan  *int64 // filter work left to the request, shared by the calls of a batch; nil: a request of one call
}

// events runs the method for a request of one call.
func (s *Server) events(ctx context.Context, p *eventsParams) (result, *rpcError) {
	return s.eventsWithin(ctx, p, callBudget{reply: s.cfg.MaxReplyBytes, force: true})
}

// eventsWithin runs the method: it compiles the filter once, reads a page within the call's
// budget, and, with no `before` and nothing to return yet, waits for the head to move until
// the wait runs out.
func (s *Server) eventsWithin(ctx context.Context, p *eventsParams, b callBudget) (result, *rpcError) {
	pl, rerr := s.newPoll(ctx, p, b)
	if rerr != nil {
		return result{}, rerr
	}
	defer s.endPoll(pl)
	return s.wait(ctx, pl, false)
}

// eventsOrPark runs the method for a request of one call, as events does, unless the call
// must wait: then it returns the call, counted among the waiters, for the caller to park
// (parkRequest) or to wait for (waitFor).
func (s *Server) eventsOrPark(ctx context.Context, p *eventsParams) (result, *rpcError, *poll) {
	pl, rerr := s.newPoll(ctx, p, callBudget{reply: s.cfg.MaxReplyBytes, force: true})
	if rerr != nil {
		return result{}, rerr, nil
	}
	res, rerr, done := s.pollOnce(ctx, pl, false)
	if !done {
		if rerr = s.countWaiter(pl); rerr == nil {
			return result{}, nil, pl
		}
	}
	s.endPoll(pl)
	return res, rerr, nil
}

// waitFor waits for a call eventsOrPark returned, in the caller's goroutine.
func (s *Server) waitFor(ctx context.Context, pl *poll) (result, *rpcError) {
	defer s.endPoll(pl)
	return s.wait(ctx, pl, true)
}

// wait reads for the call until it has an answer, waiting between reads for the head to
// move; asked is whether the call has read once and found nothing already.
func (s *Server) wait(ctx context.Context, pl *poll, asked bool) (result, *rpcError) {
	woken := false
	for {
		if !asked {
			res, rerr, done := s.pollOnce(ctx, pl, woken)
			if done {
				return res, rerr
			}
		}
		asked = false
		if !pl.waiting {
			if rerr := s.countWaiter(pl); rerr != nil {
				return result{}, rerr
			}
		}
		if pl.timer == nil {
			pl.timer = time.NewTimer(pl.wait)
		}
		switch pl.await(ctx.Done(), s.quit) {
		case woke:
			woken = true
		case cancelled:
			return result{}, newRPCError(wire.CodeInternalError, "request cancelled")
		default: // the wait ran out, or the node is shutting down: answer with what there is
			return s.emptyPage(pl), nil
		}
	}
}

// emptyPage is the answer of a call whose wait ended with nothing: what its last read found.
func (s *Server) emptyPage(pl *poll) result {
	pw := newPageWriter(getPageBuf(replyTrailer+16), pl.limit, true)
	return result{b: pw.finish(pl.last), pooled: true}
}

// countWaiter counts the call among the waiters, unless there are too many.
func (s *Server) countWaiter(pl *poll) *rpcError {
	if n := s.waiters.Add(1); n > int64(s.cfg.MaxWaiters) {
		s.waiters.Add(-1)
		return newRPCError(wire.CodeBusy, fmt.Sprintf("more than %d readers are waiting; retry shortly", s.cfg.MaxWaiters))
	}
	pl.waiting = true
	return nil
}

// endPoll ends a call: it is no longer counted among the waiters.
func (s *Server) endPoll(pl *poll) {
	if pl.timer != nil {
		pl.timer.Stop()
		pl.timer = nil
	}
	if pl.waiting {
		pl.waiting = false
		s.waiters.Add(-1)
	}
}

const (
	woke = iota
	timedOut
	cancelled
)

// await blocks until the head moves, the wait runs out, the node shuts down or the request
// ends. It is what a waiting goroutine has on its stack, so it holds nothing else.
func (pl *poll) await(done, quit <-chan struct{}) int {
	select {
	case <-pl.changed:
		return woke
	case <-pl.timer.C:
		return timedOut
	case <-quit:
		return timedOut
	case <-done:
		return cancelled
	}
}

// pollOnce reads once: the answer and true, or false when there is nothing to answer yet and
// the call should wait on pl.changed (pl.last then holds what the read found). After a wake,
// calls asking the same share one read (see sharedPage); before their first wait, calls that
// find nothing share the finding. A call that has less than a whole reply's budget (within a
// batch) shares nothing.
func (s *Server) pollOnce(ctx context.Context, pl *poll, woken bool) (result, *rpcError, bool) {
	if !pl.mayWait() {
		pw, end, err := s.readPage(ctx, pl)
		if err != nil {
			return result{}, s.readError(ctx, err), true
		}
		return result{b: pw.finish(end), pooled: true, items: pw.n}, nil, true
	}
	changed := s.cfg.Store.Changed()
	key := pl.key()
	shares := s.sharesReads(pl)
	var sp *sharedPage
	var leader bool
	if shares {
		sp, leader = s.shared.lookup(changed, key, woken)
	}
	if sp != nil && !leader {
		select {
		case <-sp.ready:
		case <-ctx.Done():
			return result{}, newRPCError(wire.CodeInternalError, "request cancelled"), true
		}
		if sp.err != nil || (!woken && sp.answer) {
			// The read failed for the call that made it (its request may have gone), or it
			// found an answer before this call began: read anew.
			sp = nil
		}
	}
	if leader {
		s.readShared(ctx, pl, sp)
		s.shared.settle(key, sp)
		if sp.err != nil {
			return result{}, s.readError(ctx, sp.err), true
		}
	}
	if sp == nil {
		pw, end, err := s.readPage(ctx, pl)
		if err != nil {
			return result{}, s.readError(ctx, err), true
		}
		if pw.n > 0 || pw.cut || !end.resume.IsZero() {
			// Items, or items there was no room for, or a read that stopped on its budget:
			// a client goes on at once rather than wait on a range it has not seen the end
			// of.
			return result{b: pw.finish(end), pooled: true, items: pw.n}, nil, true
		}
		putPageBuf(pw.b)
		if shares {
			s.shared.offer(changed, key, end)
		}
		pl.nothingUpTo(changed, end)
	} else {
		if sp.answer {
			return result{b: sp.body, items: sp.items}, nil, true
		}
		pl.nothingUpTo(sp.changed, sp.end)
	}
	return result{}, nil, false
}

// sharesReads says whether pl shares reads with calls asking the same: not with less than
// a whole reply's budget (within a batch).
func (s *Server) sharesReads(pl *poll) bool { return pl.limit == s.cfg.MaxReplyBytes }

// nothingUpTo notes that a read at the head of changed found nothing for the call up to
// end: it waits on changed.
func (pl *poll) nothingUpTo(changed <-chan struct{}, end pageEnd) {
	pl.changed, pl.last = changed, end
	// Nothing up to newest matched: later reads need only look past it, so a rare filter
	// costs one scan per append, not a rescan from the client's cursor.
	if pl.last.newest.After(pl.q.After) {
		pl.q.After = pl.last.newest
	}
}

// waitsAtOnce is pollOnce for a new call, where it can tell without reading the log or
// waiting on another call's read: true, and the call is to wait, when a call asking the
// same found nothing at the head as it is now (the shared finding pollOnce would take);
// false, with pl as it was, when pollOnce is needed.
func (s *Server) waitsAtOnce(pl *poll) bool {
	if !pl.mayWait() || !s.sharesReads(pl) {
		return false
	}
	changed := s.cfg.Store.Changed()
	sp, _ := s.shared.lookup(changed, pl.key(), false)
	if sp == nil {
		return false
	}
	select {
	case <-sp.ready:
	default:
		return false // a read under way
	}
	if sp.err != nil || sp.answer {
		return false
	}
	pl.nothingUpTo(sp.changed, sp.end)
	return true
}

// readPage reads the call's page into a pooled buffer.
func (s *Server) readPage(ctx context.Context, pl *poll) (pageWriter, pageEnd, error) {
	pw := newPageWriter(getPageBuf(0), pl.limit, pl.force)
	end, err := s.readInto(ctx, pl.q, pl.work, pl.scan, &pw)
	if err != nil {
		putPageBuf(pw.b)
		return pageWriter{}, pageEnd{}, err
	}
	return pw, end, nil
}

// readLog reads from the log, and notes a read that succeeds (readError notes one that
// fails).
func (s *Server) readLog(ctx context.Context, q eventlog.Query) (eventlog.Page, error) {
	p, err := s.cfg.Store.Read(ctx, q)
	if err == nil {
		s.readsDown.ok(s.log)
		s.readsFailed.ok(s.log)
	}
	return p, err
}

// readError turns a failed read into the call's error.
func (s *Server) readError(ctx context.Context, err error) *rpcError {
	if ctx.Err() != nil {
		return newRPCError(wire.CodeInternalError, "request cancelled")
	}
	if errors.Is(err, eventlog.ErrUnavailable) {
		// A distributed store between leaders, or reconnecting: worth a retry.
		s.readsDown.fail(s.log, err)
		e := newRPCError(wire.CodeBusy, publicText(err.Error())+"; retry shortly")
		e.retryAfter = 1
		return e
	}
	s.readsFailed.fail(s.log, err)
	return newRPCError(wire.CodeInternalError, "reading the event log failed: "+publicText(err.Error()))
}

// readShared reads the page of a shared read. Its memory is never pooled again: any number of
// replies may be writing it at once.
func (s *Server) readShared(ctx context.Context, pl *poll, sp *sharedPage) {
	defer close(sp.ready)
	pw, end, err := s.readPage(ctx, pl)
	if err != nil {
		sp.err = err
		return
	}
	sp.end = end
	sp.answer, sp.items = pw.n > 0 || pw.cut || !end.resume.IsZero(), pw.n
	if sp.answer {
		b := pw.finish(end)
		sp.body = b[:len(b):len(b)] // full: appending to it must copy
	} else {
		putPageBuf(pw.b)
	}
}

// --- shared reads ---------------------------------------------------------------------------

// shareKey is what a waiting call asks: calls with equal keys get equal pages from one state
// of the log. (A waiting call has no `before`.)
type shareKey struct {
	after cursor.Cursor
	max   int
	asc   bool
	query string
}

// sharedPage is one read of the log, made for one call and used by every call that asks
// the same while the log's head stays where it was when the read began.
type sharedPage struct {
	ready   chan struct{}   // closed once the fields below are set
	changed <-chan struct{} // the store's Changed, taken before the read
	err     error
	answer  bool    // the read found items, or stopped on its budget: body is the answer
	items   int     // how many
	end     pageEnd // what the read found
	body    []byte  // the encoded page when it answers; read-only
}

// Limits of what shared reads keep until the next append: pages of more than sharedBytes
// in all are handed to the calls waiting for them but not kept for later ones.
const (
	sharedMaxPages = 4096
	sharedBytes    = 4 << 20
)

// shareCache holds the shared reads made since the head last moved. An entry is keyed by
// the store's Changed channel as it was before the read: a call that finds the same channel
// still open knows that no append has landed since, so the entry's page is the page its own
// read would get now (the store's contract: Changed closes at the next change of the head),
// and it waits on the same channel afterwards, so it misses nothing appended after the read.
type shareCache struct {
	mu      sync.Mutex
	changed <-chan struct{}
	pages   map[shareKey]*sharedPage
	bytes   int
}

// lookup finds the read for key at the head of changed. With lead set and none found, it
// starts one: the caller is its leader and must call readShared and settle.
func (c *shareCache) lookup(changed <-chan struct{}, key shareKey, lead bool) (sp *sharedPage, leader bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.current(changed) {
		return nil, false
	}
	if sp := c.pages[key]; sp != nil {
		return sp, false
	}
	if !lead || len(c.pages) >= sharedMaxPages {
		return nil, false
	}
	sp = &sharedPage{ready: make(chan struct{}), changed: changed}
	c.pages[key] = sp
	return sp, true
}

// current moves the cache to the head of changed, dropping older reads; false when changed
// has closed already (the caller's view of the head is stale: it shares nothing).
func (c *shareCache) current(changed <-chan struct{}) bool {
	if c.changed == changed {
		return true
	}
	select {
	case <-changed:
		return false
	default:
	}
	c.changed = changed
	if c.pages == nil {
		c.pages = make(map[shareKey]*sharedPage)
	}
	clear(c.pages)
	c.bytes = 0
	return true
}

// settle keeps a finished read for later calls, or forgets it when it failed or is too
// large to keep.
func (c *shareCache) settle(key shareKey, sp *sharedPage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed != sp.changed || c.pages[key] != sp {
		return
	}
	if sp.err != nil || c.bytes+len(sp.body) > sharedBytes {
		delete(c.pages, key)
		return
	}
	c.bytes += len(sp.body)
}

// offer keeps the finding of a read that found nothing, for calls that ask the same before
// the next append.
func (c *shareCache) offer(changed <-chan struct{}, key shareKey, end pageEnd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.current(changed) || c.pages[key] != nil || len(c.pages) >= sharedMaxPages {
		return
	}
	sp := &sharedPage{ready: make(chan struct{}), changed: changed, end: end}
	close(sp.ready)
	c.pages[key] = sp
}
