package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/pkg/wire"
)

// Ordered batches. A client sending a file in batches keeps its order with one request in
// flight, which leaves the node idle while each reply travels and the next request arrives,
// and the client idle while the node writes and syncs. With wire.HeaderOrder a client may have
// several batches of one sequence in flight: the node decodes them side by side but appends
// each only once the one before it has its place in the log, so they are stored in the
// order of the sequence; with the embedded log, the next batch is queued while the one
// before it is still being written and synced.
//
// The request header is wire.HeaderOrder, "Evtctl-Order: TOKEN N": TOKEN names the sequence (letters, digits,
// '-' and '_', at most 64), N numbers its batches from 1. The node answers a batch it
// stored in order with "Evtctl-Order: ok"; a client sends a second batch before the first
// one's reply only after seeing that (another receiver ignores the header, and would store
// batches in flight together in any order). A batch is refused with 409 Conflict and
// "Evtctl-Order: refused", storing nothing, when:
//
//   - a batch before it in the sequence was refused or failed: nothing after a batch that
//     was not stored may be (the client sends it again once the earlier ones are settled);
//   - the batch before it did not arrive within orderWait;
//   - the sequence is unknown and N is not 1 (the node restarted, or forgot the sequence
//     after orderIdle without batches): the client starts a new sequence;
//   - maxAhead batches of the sequence are already waiting: one client does not hold the
//     node's ingest slots with batches that wait.
//
// A batch numbered below the next expected one is a retry of a batch already placed, and
// is appended at once (the dedupe window answers its events as duplicates).
const (
	orderWait = 10 * time.Second
	orderIdle = 2 * time.Minute
	maxOrders = 4096 // sequences remembered at once
	maxAhead  = 8    // batches of one sequence waiting for their turn at once
)

// orderGate keeps the sequences of ordered batches.
type orderGate struct {
	mu      sync.Mutex
	seqs    map[string]*orderSeq
	wait    time.Duration // how long a batch waits for the one before it; 0: orderWait
	waiting atomic.Int64  // batches waiting for their turn
}

type orderSeq struct {
	last     *eventlog.Pending // the newest batch placed while it is being written; nil once written
	waiting  int               // batches waiting for their turn
	next     uint64            // the batch that may be placed next
	failed   uint64            // the first batch that was refused or failed; 0: none
	moved    chan struct{}     // closed (and replaced) when next or failed changes
	lastUsed time.Time
}

// errOrder is a batch refused for its place in a sequence.
type errOrder struct{ msg string }

func (e *errOrder) Error() string { return e.msg }

// parseOrderHeader reads the wire.HeaderOrder of r: ok false when there is none, an error when it is
// malformed.
func parseOrderHeader(r *http.Request) (token string, n uint64, ok bool, err error) {
	v := r.Header.Get(wire.HeaderOrder)
	if v == "" {
		return "", 0, false, nil
	}
	token, num, found := strings.Cut(v, " ")
	n, perr := strconv.ParseUint(num, 10, 64)
	if !found || perr != nil || n == 0 || !validToken(token) {
		return "", 0, false, fmt.Errorf("the %s header must be a token (letters, digits, - and _, at most 64) and a batch number from 1, as %q; got %q", wire.HeaderOrder, "a1b2 1", v)
	}
	return token, n, true, nil
}

func validToken(t string) bool {
	if t == "" || len(t) > 64 {
		return false
	}
	for _, c := range []byte(t) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// turn waits until batch n of sequence token may be placed. It returns prev, the batch
// before it while that is still being written (nil otherwise), and done, which the caller
// calls once the batch has its place (p) or will not get one (nil); a batch numbered below
// the next one (a retry) gets its turn at once, with no prev.
func (g *orderGate) turn(ctx context.Context, token string, n uint64) (prev *eventlog.Pending, done func(p *eventlog.Pending, placed bool), err error) {
	g.mu.Lock()
	if g.seqs == nil {
		g.seqs = map[string]*orderSeq{}
	}
	now := time.Now()
	sq := g.seqs[token]
	if sq == nil {
		if n != 1 {
			g.mu.Unlock()
			return nil, nil, &errOrder{fmt.Sprintf("batch %d of a sequence this node does not know (it restarted, or forgot the sequence after %s without batches): start a new sequence", n, orderIdle)}
		}
		if len(g.seqs) >= maxOrders {
			g.forgetIdleLocked(now)
		}
		if len(g.seqs) >= maxOrders {
			g.mu.Unlock()
			return nil, nil, &errOrder{fmt.Sprintf("the node keeps at most %d ordered sequences at once: send one batch at a time", maxOrders)}
		}
		sq = &orderSeq{next: 1, moved: make(chan struct{})}
		g.seqs[token] = sq
	}
	sq.lastUsed = now
	wait := g.wait
	if wait <= 0 {
		wait = orderWait
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		switch {
		case sq.failed != 0 && sq.failed < n:
			failed := sq.failed
			g.mu.Unlock()
			return nil, nil, &errOrder{fmt.Sprintf("batch %d of this sequence was not stored, so batch %d is not either: send them again in order", failed, n)}
		case n <= sq.next:
			retry := n < sq.next
			if !retry {
				prev = sq.last
			}
			g.mu.Unlock()
			return prev, func(p *eventlog.Pending, placed bool) {
				g.mu.Lock()
				defer g.mu.Unlock()
				switch {
				case retry:
				case placed:
					sq.next, sq.last = n+1, p
				case sq.failed == 0 || n < sq.failed:
					sq.failed = n
				}
				sq.lastUsed = time.Now()
				close(sq.moved)
				sq.moved = make(chan struct{})
			}, nil
		}
		if sq.waiting >= maxAhead {
			// One client's batches do not hold the node's ingest slots waiting.
			g.mu.Unlock()
			g.fail(token, n)
			return nil, nil, &errOrder{fmt.Sprintf("more than %d batches of this sequence are waiting for the ones before them: send fewer at once", maxAhead)}
		}
		sq.waiting++
		moved := sq.moved
		g.mu.Unlock()
		g.waiting.Add(1)
		select {
		case <-moved:
		case <-timer.C:
			// Not stored, so nothing after it may be: mark it as the batches refused are.
			g.waiting.Add(-1)
			g.mu.Lock()
			sq.waiting--
			g.mu.Unlock()
			g.fail(token, n)
			return nil, nil, &errOrder{fmt.Sprintf("batch %d of this sequence did not arrive within %s", n-1, wait)}
		case <-ctx.Done():
			g.waiting.Add(-1)
			g.mu.Lock()
			sq.waiting--
			g.mu.Unlock()
			g.fail(token, n)
			return nil, nil, ctx.Err()
		}
		g.waiting.Add(-1)
		g.mu.Lock()
		sq.waiting--
	}
}

// fail marks batch n of sequence token as not stored (refused before its turn, given up
// waiting for it, or failed in the log): no batch after it is placed from now on.
func (g *orderGate) fail(token string, n uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sq := g.seqs[token]; sq != nil && (sq.failed == 0 || n < sq.failed) {
		sq.failed = n
		close(sq.moved)
		sq.moved = make(chan struct{})
	}
}

func (g *orderGate) forgetIdleLocked(now time.Time) {
	for t, sq := range g.seqs {
		if now.Sub(sq.lastUsed) > orderIdle {
			delete(g.seqs, t)
		}
	}
}

// written forgets p as the newest batch of sequence token being written, once it is.
func (g *orderGate) written(token string, p *eventlog.Pending) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sq := g.seqs[token]; sq != nil && sq.last == p {
		sq.last = nil
	}
}

// enqueuer is a store that can give an append its place before it is written
// (eventlog.Log): the next batch of a sequence is queued while this one is written, on the
// condition that this one is stored.
type enqueuer interface {
	EnqueueAfter(ctx context.Context, entries []eventlog.Entry, prev *eventlog.Pending) (*eventlog.Pending, error)
}

// appendOrdered appends entries as batch n of sequence token: once the batch before it
// has its place, and before the batch after it; with an enqueuer, only if the batch before
// it is stored.
func (s *Server) appendOrdered(ctx context.Context, token string, n uint64, entries []eventlog.Entry) ([]eventlog.AppendResult, error) {
	prev, done, err := s.orders.turn(ctx, token, n)
	if err != nil {
		return nil, err
	}
	q, ok := s.cfg.Store.(enqueuer)
	if !ok {
		res, err := s.cfg.Store.Append(ctx, entries)
		done(nil, err == nil)
		return res, err
	}
	p, err := q.EnqueueAfter(ctx, entries, prev)
	if err != nil {
		done(nil, false)
		return nil, err
	}
	done(p, true) // placed: the next batch may queue behind it
	res, err := p.Wait(ctx)
	if err != nil {
		// Not stored (or this request is gone while it is being written): no batch after
		// it is placed from now on, and one already queued behind it is refused by the log.
		s.orders.fail(token, n)
	}
	s.orders.written(token, p)
	if errors.Is(err, eventlog.ErrPredecessorNotStored) {
		err = &errOrder{fmt.Sprintf("batch %d of this sequence was not stored, so batch %d is not either: send them again in order", n-1, n)}
	}
	return res, err
}

func isOrderRefusal(err error) bool {
	var e *errOrder
	return errors.As(err, &e)
}
