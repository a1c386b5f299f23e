package jetstream

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Chained publishing: how a node stores events without reading each one back.
//
// A cursor's time must grow with the stream sequence, and every node must derive the same
// cursor from a message. A message's stored time does both, but JetStream's publish
// acknowledgement does not carry it, so a node that used it had to have every message
// delivered to it a second time (a headers-only consumer) before it could answer an ingest
// request — measured as a third of the node's ingest rate.
//
// So a node publishes its events as a chain: it keeps the stream's last message (sequence,
// cursor time, message id) and gives each new message a cursor time of its own choosing in
// the Evtctl-Time header, at least the time of the message before it, with a condition that
// JetStream checks when it stores the message: Nats-Expected-Last-Msg-Id names the message
// before it in the chain (Nats-Expected-Last-Sequence for the first, after the node read the
// stream's last message, when that one has no id). The condition names the message, not its
// sequence: a sequence would also be met by another writer's message stored where one of
// the chain's was refused. A message is therefore stored only directly after the message
// whose time the node knew, so cursor times grow along the stream, and once one message of
// the chain is not stored every later one is refused: a chain never leaves a gap.
//
// That also makes most acknowledgements redundant: when a chained message is stored, every
// message of the chain before it was stored, each at the sequence before. So a chain's
// messages are published with sparse acknowledgements: only every ackEvery-th and the last
// of a publish carry a reply subject, and a stored one answers for the messages sent since
// the one before it — measured as a fifth of the server's work per message. When such an
// answer is anything else (a refusal, an error, a duplicate), the node reads the stream
// from where those messages were to go to find which of them were stored; the rest are
// published again, each with its own answer.
//
// The time a node chooses is its clock's when it publishes the message, capped by an upper
// bound of the clock of the server that stores the stream (see serverClock): no later than
// the message's stored time when the clocks agree, at most a stream-info round trip ahead
// when the node's runs ahead. A message published without a chain (by another writer, or by
// this node in shared mode) takes its stored time as before, so it sorts after a chained
// message stored before it.
//
// When another writer stores messages in the stream, chained messages are refused. The
// node then publishes as before, for sharedFor, in shared mode: messages carry the floor
// header and their cursors come from the stored times its ordered consumer reports. After
// that it reads the stream's last message and chains again if nobody else has written.
const (
	hdrTime       = "Evtctl-Time" // hex Unix nanoseconds: the cursor time a chained message was given
	hdrExpLastID  = "Nats-Expected-Last-Msg-Id"
	hdrExpLastSeq = "Nats-Expected-Last-Sequence"

	errWrongLastMsgID = 10070
	errWrongLastSeq   = 10071

	// clockStale is the age past which a sample of the server's clock is not used.
	clockStale = 10 * time.Second

	// ackEvery is how many chained messages one answer stands for at most.
	ackEvery = 256
)

// sharedFor is how long a node publishes in shared mode after another writer was seen (a
// variable for tests).
var sharedFor = 10 * time.Second

// serverClock bounds the clock of the server that stores the stream from above, from the
// time in its stream info replies (one a second): the server wrote that time after the node
// sent the request, so that time plus the node's elapsed (monotonic) time since it sent
// the request is at least the server's clock. A chained message takes the node's own clock,
// capped by that bound: on one machine, or with clocks kept together by NTP, it is the
// time the node published the message, before the server stored it; a node whose clock
// runs ahead of the server's gives times at most one request's round trip ahead of it.
type serverClock struct {
	mu   sync.Mutex
	ts   time.Time // the server's time in the reply
	sent time.Time // when the node sent the request (with its monotonic reading)
}

func (c *serverClock) note(ts, sent time.Time) {
	if ts.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ts, c.sent = ts, sent
}

// now is the time a message chained now takes, in Unix nanoseconds; false without a
// recent sample.
func (c *serverClock) now() (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ts.IsZero() {
		return 0, false
	}
	now := time.Now()
	d := now.Sub(c.sent)
	if d > clockStale {
		return 0, false
	}
	return min(now.UnixNano(), c.ts.Add(d).UnixNano()), true
}

// chain is this node's view of the end of the stream, for chained publishing.
type chain struct {
	mu       sync.Mutex
	known    bool   // seq, ts and id are the stream's last message (or the last this node chained)
	seq      uint64 // the stream's last message
	ts       int64  // its cursor time
	id       string // its message id; "" when it has none
	synced   bool   // the stream's last message was read once
	own      uint64 // the newest sequence this node stored, or found last when it read the stream's end
	epoch    uint64 // counts the times the chain's end became unknown
	inflight int    // chained messages published and not all answered
	drained  chan struct{}
	shared   time.Time // publish in shared mode until then
}

// noteOwn records a message this node stored.
func (c *chain) noteOwn(seq uint64) {
	c.mu.Lock()
	c.own = max(c.own, seq)
	c.mu.Unlock()
}

// mine reports whether the message at seq, past what this node has seen acknowledged,
// can be one it chained and whose acknowledgement is on its way. (Another writer's message
// there refuses the rest of the chain, and the node finds that writer when it reads the
// stream's end again.)
func (c *chain) mine(seq uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.known && seq <= c.seq
}

// sharedMode reports whether appends are published without a chain now.
func (c *chain) sharedMode() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Before(c.shared)
}

// forget makes the next chained append read the stream's last message first.
func (c *chain) forget() {
	c.mu.Lock()
	c.breakLocked()
	c.mu.Unlock()
}

// errNoChain says an append is to be published in shared mode.
var errNoChain = errors.New("publish without a chain")

// chainable reports whether this node publishes chains at all: it needs message ids
// (duplicate suppression on) and a stream of one replica that takes its messages one by
// one. On a replicated stream JetStream checks a message's expected predecessor only as the
// replicas apply it, and a message refused there was measured to go unanswered (the
// publisher waits out its timeout); a replicated stream stores batches atomically from
// nats-server 2.12, or in shared mode.
func (s *Store) chainable() bool {
	return s.dedupe && !s.atomic.Load() && !s.replicated.Load() && s.writeError() == nil
}

// chained is what became of one message of a chain.
type chained struct {
	ack
	ts      int64 // its cursor time, when stored
	refused bool  // refused for its place in the chain: not stored, to be published again
	err     error // it failed otherwise
}

// publishChained publishes msgs (each with a message id) as the continuation of this
// node's chain, with an answer for every every-th (see publisher.publish), and waits for
// them. errNoChain when they are to be published in shared mode (nothing was published).
// Messages refused for their place are marked refused; the node then reads the stream's
// last message before it chains again.
func (s *Store) publishChained(ctx context.Context, msgs []*nats.Msg, every int) ([]chained, error) {
	c := &s.chain
	c.mu.Lock()
	for {
		if time.Now().Before(c.shared) {
			c.mu.Unlock()
			return nil, errNoChain
		}
		if c.known {
			break
		}
		if c.inflight > 0 {
			// Messages chained before are not all answered: the end is not known yet.
			if c.drained == nil {
				c.drained = make(chan struct{})
			}
			ch := c.drained
			c.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-s.quit:
				return nil, errNoChain
			}
			c.mu.Lock()
			continue
		}
		if err := s.resync(ctx); err != nil {
			c.mu.Unlock()
			s.log.Debug("reading the NATS JetStream stream's last message", "err", err)
			return nil, errNoChain
		}
	}
	sent, ok := s.sendLocked(msgs, every)
	c.mu.Unlock()
	if !ok {
		return nil, errNoChain
	}
	return sent.collect(ctx), nil
}

// chainSend is a run of messages published as part of the chain, being answered.
type chainSend struct {
	s     *Store
	msgs  []*nats.Msg
	run   *pubRun
	every int    // as publisher.publish took it
	after uint64 // the sequence msgs[0] was published to follow: msgs[i] goes to after+i+1
	sent  int    // msgs[:sent] were sent
	ts    []int64
	err   error  // why the messages after those sent were not
	epoch uint64 // the chain's epoch they were sent in
}

// sendLocked publishes msgs as the chain's continuation, with an answer for every every-th
// (c.mu held, the chain known); false without a recent sample of the server's clock
// (nothing sent). It publishes under the lock, so that the connection carries the chain in
// its order.
func (s *Store) sendLocked(msgs []*nats.Msg, every int) (*chainSend, bool) {
	c := &s.chain
	now, ok := s.clock.now()
	if !ok {
		return nil, false
	}
	cs := &chainSend{s: s, msgs: msgs, every: every, after: c.seq, ts: make([]int64, len(msgs)), epoch: c.epoch}
	seq, ts, id := c.seq, c.ts, c.id
	for i, m := range msgs {
		t := max(ts, now)
		m.Header[hdrTime] = []string{formatTS(t)}
		delete(m.Header, hdrFloor)
		delete(m.Header, hdrExpLastSeq)
		delete(m.Header, hdrExpLastID)
		if id != "" {
			m.Header[hdrExpLastID] = []string{id}
		} else {
			m.Header[hdrExpLastSeq] = []string{strconv.FormatUint(seq, 10)}
		}
		cs.ts[i] = t
		seq++
		ts, id = t, m.Header[hdrMsgID][0]
	}
	cs.run, cs.sent, cs.err = s.pubs.publish(msgs, every)
	if cs.sent < len(msgs) {
		c.breakLocked()
	}
	if cs.sent > 0 {
		c.seq, c.ts, c.id = c.seq+uint64(cs.sent), cs.ts[cs.sent-1], msgs[cs.sent-1].Header[hdrMsgID][0]
	}
	c.inflight += cs.sent
	return cs, true
}

// breakLocked marks the chain's end unknown: the next chained publish reads it first.
func (c *chain) breakLocked() {
	if c.known {
		c.known = false
		c.epoch++
	}
}

// collect waits for the answers to a chained publish.
func (cs *chainSend) collect(ctx context.Context) []chained {
	s, c := cs.s, &cs.s.chain
	out := make([]chained, len(cs.msgs))
	var last uint64
	var lastTS int64
	broken := false
	res := s.pubs.wait(ctx, cs.run)
	if cs.every > 0 {
		cs.settle(ctx, res)
	}
	for i := range cs.msgs {
		r := res[i]
		var je *jsError
		switch {
		case i >= cs.sent:
			out[i].err = cs.err
		case errors.Is(r.err, errNotStored), errors.As(r.err, &je) && (je.e.ErrCode == errWrongLastMsgID || je.e.ErrCode == errWrongLastSeq):
			out[i].refused = true
		case r.err != nil:
			out[i].err = r.err
		case r.dup:
			out[i].ack = r.ack
			broken = true // the message after it expects it to be the last
		default:
			out[i].ack, out[i].ts = r.ack, cs.ts[i]
			if r.seq > last {
				last, lastTS = r.seq, cs.ts[i]
			}
		}
		if out[i].err != nil || out[i].refused {
			broken = true
		}
	}

	c.mu.Lock()
	c.inflight -= cs.sent
	if broken && c.epoch == cs.epoch {
		c.breakLocked()
	}
	c.own = max(c.own, last)
	if c.inflight == 0 && c.drained != nil {
		close(c.drained)
		c.drained = nil
	}
	c.mu.Unlock()
	if last > 0 {
		for _, o := range out {
			if o.seq != 0 && !o.dup && o.err == nil && !o.refused && o.seq != last {
				s.tr.note(o.seq, o.ts, false)
			}
		}
		s.tr.note(last, lastTS, true)
	}
	return out
}

// resync reads the stream's last message into the chain (c.mu held). When messages were
// stored since the newest this node stored, another writer is at work: the node publishes
// in shared mode for a while.
func (s *Store) resync(ctx context.Context) error {
	c := &s.chain
	info, err := s.info(ctx)
	if err != nil {
		return err
	}
	last := info.State.LastSeq
	var m smsg
	if last > 0 {
		got, ok, err := s.first(ctx, last)
		if err != nil {
			return err
		}
		if !ok || got.seq != last {
			return unavailable("the stream's last message (%d) was not found", last)
		}
		m = got
	}
	if c.synced && last > c.own {
		c.shared = time.Now().Add(sharedFor)
		s.log.Debug("another writer stores messages in the NATS JetStream stream: publishing in shared mode", "for", sharedFor)
		s.others.Store(time.Now().UnixNano())
		s.wantConsumer()
	}
	c.synced, c.known = true, true
	c.seq, c.ts, c.id = last, m.ts, m.msgID
	c.own = last
	return nil
}

// errNotStored marks a chained message found not stored after an answer for it and the
// messages before it said something went wrong: it is to be published again.
var errNotStored = errors.New("not stored")

// settle gives every message of a sparsely answered run the answer it did not get (see
// publisher.publish). A message answered as stored where the chain's next message belongs
// answers for the messages sent since the one answered before it: they are stored, each at
// the sequence before. After any other answer the node reads the stream from there to see
// which of those messages were stored, and marks the others errNotStored. A message can be
// missing from the middle: a repeat of the stream's last message is dropped without a word,
// and the message after it, naming the same id as the one before, is stored in its place,
// so where the chain's next message belongs is followed as the answers and the reads tell.
// Messages not answered for lack of an answer in time keep that error; messages sent after
// the last that asked for an answer, when the run stopped short, fail with the reason it
// stopped (stored or not, nobody said).
func (cs *chainSend) settle(ctx context.Context, res []pubResult) {
	next := cs.after + 1 // where the chain's next stored message belongs
	lost := false        // an answer did not come: what follows is left as wait left it
	from := 0
	for b := range cs.sent {
		if !asks(b, len(cs.msgs), cs.every) {
			continue
		}
		a := from
		from = b + 1
		r := res[b]
		if lost || !r.answered {
			lost = true
			continue
		}
		stored := r.err == nil && !r.dup
		if stored && r.seq == next+uint64(b-a) {
			for i := a; i < b; i++ {
				res[i] = pubResult{ack: ack{seq: next + uint64(i-a)}, answered: true}
			}
			next = r.seq + 1
			continue
		}
		found, err := cs.readBack(ctx, a, b, next)
		for i := a; i < b; i++ {
			switch seq := found[i-a]; {
			case seq != 0:
				res[i] = pubResult{ack: ack{seq: seq}, answered: true}
				next = seq + 1
			case err != nil:
				res[i] = pubResult{err: err}
			default:
				res[i] = pubResult{err: errNotStored, answered: true}
			}
		}
		if stored {
			next = r.seq + 1
		}
	}
	for i := from; i < cs.sent; i++ {
		res[i] = pubResult{err: cs.err}
	}
}

// readBack reads the stream from sequence seq on, where msgs[a:b] were to be stored, and
// returns the sequence each of them is stored at (0: not stored). The chain stores them one
// right after another, some perhaps missing; the first message that is none of them, or a
// hole, ends them. With an error, what it could tell.
func (cs *chainSend) readBack(ctx context.Context, a, b int, seq uint64) ([]uint64, error) {
	found := make([]uint64, b-a)
	k := a // msgs[k:b] may still be found
	for k < b {
		got, err := cs.s.fetchRange(ctx, seq, seq, b-k)
		if err != nil || len(got) == 0 {
			return found, err
		}
		for _, m := range got {
			if m.seq != seq {
				return found, nil
			}
			j := k
			for j < b && cs.msgs[j].Header[hdrMsgID][0] != m.msgID {
				j++
			}
			if j == b {
				return found, nil
			}
			found[j-a] = m.seq
			k, seq = j+1, seq+1
		}
	}
	return found, nil
}
