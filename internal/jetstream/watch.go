package jetstream

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// tracker is what this node knows of the stream's head: the newest message it has seen and
// the cursor times of the most recent ones. It closes the changed channel when the head
// moves, which wakes the node's waiting readers.
type tracker struct {
	mu      sync.Mutex
	last    uint64 // newest sequence seen; 0: none
	lastTS  int64  // its cursor time
	floor   int64  // the newest cursor time ever seen, also in an earlier stream of the name
	ring    []ringEntry
	changed chan struct{}
	closed  bool
	quiet   int    // advances since the last wake
	want    uint64 // the lowest sequence an Append waits for; 0: none
}

type ringEntry struct {
	seq uint64
	ts  int64
}

const ringSize = 1 << 16 // cursor times of the last 64Ki messages: tails and acks need no round trip

func (t *tracker) init() {
	t.ring = make([]ringEntry, ringSize)
	t.changed = make(chan struct{})
}

// reset starts over at the stream's head (at open, and when the stream was recreated).
func (t *tracker) reset(last uint64, ts int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.ring)
	t.last, t.lastTS = last, ts
	t.floor = max(t.floor, ts)
	if last > 0 {
		t.ring[last%ringSize] = ringEntry{last, ts}
	}
	t.wakeLocked()
}

func (t *tracker) head() (uint64, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last, t.lastTS
}

// floorTS is the floor a message published now carries.
func (t *tracker) floorTS() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.floor
}

func (t *tracker) lookup(seq uint64) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.ring[seq%ringSize]
	return e.ts, e.seq == seq && seq != 0
}

// note records message seq with cursor time ts. Readers are woken when the head moves and
// the burst is over (no more pending), every 256 messages during a long one, and at once
// when an Append waits for this message.
func (t *tracker) note(seq uint64, ts int64, burstOver bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring[seq%ringSize] = ringEntry{seq, ts}
	if seq <= t.last {
		return
	}
	t.last, t.lastTS = seq, ts
	t.floor = max(t.floor, ts)
	t.quiet++
	if burstOver || t.quiet >= 256 || t.want != 0 && seq >= t.want {
		t.wakeLocked()
	}
}

// flush wakes readers for advances not yet announced.
func (t *tracker) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.quiet > 0 {
		t.wakeLocked()
	}
}

func (t *tracker) wakeLocked() {
	if t.closed {
		return
	}
	close(t.changed)
	t.changed = make(chan struct{})
	t.quiet, t.want = 0, 0
}

func (t *tracker) changedChan() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// waitFor waits until message seq has been seen, up to d; false if it was not.
func (t *tracker) waitFor(ctx context.Context, seq uint64, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		t.mu.Lock()
		if t.last >= seq {
			t.mu.Unlock()
			return true
		}
		if t.closed {
			t.mu.Unlock()
			return false
		}
		if t.want == 0 || seq < t.want {
			t.want = seq
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func (t *tracker) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		close(t.changed) // later calls get the closed channel: nothing waits on a closed store
		t.closed = true
	}
}

// watch follows the stream with one ordered consumer that delivers headers only: the
// sequence, cursor time and floor of each new message. It runs while the node needs it
// (see consumerWanted): a node that chains its own appends and has no reader waiting
// learns of its own messages from their acknowledgements, and of other writers' from
// the poll. It starts over when the consumer cannot be set up (the stream has no leader
// yet) or the stream was recreated.
func (s *Store) watch() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if !s.consumerWanted() {
			s.consuming.Store(false)
			select {
			case <-s.quit:
				return
			case <-s.wantCons:
			case <-tick.C:
			case <-s.restart:
			}
			continue
		}
		last, _ := s.tr.head()
		cc, err := s.consume(last + 1)
		if err != nil {
			s.consuming.Store(false)
			s.log.Debug("following the NATS JetStream stream", "err", err)
			select {
			case <-s.quit:
				return
			case <-time.After(time.Second):
				continue
			}
		}
		s.consuming.Store(true)
	follow:
		for {
			select {
			case <-s.quit:
				cc.Stop()
				return
			case <-s.restart:
				cc.Stop()
				break follow
			case <-tick.C:
				if !s.consumerWanted() {
					cc.Stop()
					break follow
				}
			}
		}
	}
}

// interestFor is how long the consumer keeps running after a reader last waited, and
// after another writer was last seen.
const interestFor = 30 * time.Second

// consumerWanted reports whether the node needs its ordered consumer now: it publishes in
// shared mode (or cannot chain at all, as on a stream that takes atomic batches), or a
// reader waited for new events in the last interestFor while another writer stored some.
// A node that is the stream's only writer knows every message from its acknowledgements.
func (s *Store) consumerWanted() bool {
	if !s.chainable() || s.chain.sharedMode() {
		return true
	}
	return time.Since(time.Unix(0, s.interest.Load())) < interestFor &&
		time.Since(time.Unix(0, s.others.Load())) < interestFor
}

// takeHead notes the stream's last message, last, as the head: another writer stored it
// (or the consumer is starting over).
func (s *Store) takeHead(ctx context.Context, last uint64) {
	if h, _ := s.tr.head(); last <= h {
		return
	}
	m, ok, err := s.first(ctx, last)
	if err == nil && ok && m.seq == last {
		s.tr.note(m.seq, m.ts, true)
		if !s.chain.mine(last) {
			s.others.Store(time.Now().UnixNano())
			s.wantConsumer()
		}
	}
}

// headFresh is how old the head may be for a read while the consumer does not run.
const headFresh = 50 * time.Millisecond

// freshHead makes sure, for a read, that the head includes what other writers stored up
// to a moment ago: while the consumer does not run, it looks at the stream (at most once
// per headFresh).
func (s *Store) freshHead(ctx context.Context) {
	if s.consuming.Load() || !s.chainable() {
		return
	}
	now := time.Now().UnixNano()
	prev := s.headLook.Load()
	if time.Duration(now-prev) < headFresh || !s.headLook.CompareAndSwap(prev, now) {
		return
	}
	info, err := s.info(ctx)
	if err != nil {
		return // the read says what is wrong
	}
	s.takeHead(ctx, info.State.LastSeq)
}

// wantConsumer asks watch to look at once whether the consumer is needed.
func (s *Store) wantConsumer() {
	select {
	case s.wantCons <- struct{}{}:
	default:
	}
}

func (s *Store) consume(start uint64) (jetstream.ConsumeContext, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	cons, err := s.js.OrderedConsumer(ctx, s.opts.Stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   start,
		HeadersOnly:   true,
	})
	if err != nil {
		return nil, err
	}
	return cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		ts := cursorTS(m.Headers(), md.Timestamp.UnixNano())
		s.tr.note(md.Sequence.Stream, ts, md.NumPending == 0)
	},
		// Missing heartbeats make the consumer start over on another server: after about
		// 2 × 2 s when the server it lived on is gone.
		jetstream.PullHeartbeat(2*time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !s.closing.Load() && !errors.Is(err, jetstream.ErrConsumerDeleted) {
				s.log.Debug("NATS JetStream ordered consumer", "err", err)
			}
		}))
}

// poll looks at the stream every second: it keeps the counts for metrics and the status
// for /healthz, notices retention moving the oldest message, catches up the head when the
// ordered consumer is stalled, and recreates a managed stream that was deleted.
func (s *Store) poll() {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	var seen uint64 // the head at the previous look
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		case <-s.lookNow:
		}
		s.tr.flush()
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		s.look(ctx, &seen)
		cancel()
	}
}

func (s *Store) look(ctx context.Context, seen *uint64) {
	s.reapReaders(false)
	if s.recheck.Swap(false) {
		s.checkVersion()
	}
	if s.refusal() != nil {
		return // a server too old is not touched: no stream is created or followed on it
	}
	info, err := s.info(ctx)
	if err != nil {
		s.setStatus(err)
		var me *missingError
		if errors.As(err, &me) && s.opts.Manage {
			if err := s.ensureStream(ctx); err == nil {
				s.log.Warn("the NATS JetStream stream was missing; created it again", "stream", s.opts.Stream)
				s.startOver(ctx)
			}
		}
		return
	}
	s.setStatus(nil)
	st := info.State
	s.mu.Lock()
	recreated := !info.Created.Equal(s.created)
	s.mu.Unlock()
	if recreated {
		// The stream was deleted and created again (sequences restart): follow the new one.
		s.log.Warn("the NATS JetStream stream was created anew; following the new one", "stream", s.opts.Stream, "created", info.Created)
		s.startOver(ctx)
		return
	}
	s.setState(st)
	last, _ := s.tr.head()
	switch {
	case st.LastSeq > last && (last == *seen || !s.consuming.Load()):
		// The ordered consumer has not moved for a whole poll while the stream did (it is
		// starting over on another server), or is not running while another writer stored
		// messages: take the head from the stream.
		s.takeHead(ctx, st.LastSeq)
	}
	*seen, _ = s.tr.head()
	s.mu.Lock()
	stale := s.oldest.seq != st.FirstSeq || s.oldest.empty != (st.Msgs == 0)
	s.mu.Unlock()
	if stale {
		_, _, _ = s.refreshOldest(ctx)
	}
	// Reads are what the node is for: try one, so that /healthz fails when they do.
	var readErr error
	if st.LastSeq > 0 && s.refusal() == nil {
		_, _, readErr = s.first(ctx, st.LastSeq)
		s.noteRead(ctx, readErr)
	}
	if readErr == nil && s.refusal() == nil {
		s.checked.Store(true)
	}
}

// checkVersion looks at the version of the server the connection is made to (again).
func (s *Store) checkVersion() {
	c, err := capsOf(s.nc.ConnectedServerVersion())
	if err != nil {
		err = unavailable("%s: %v", Redact(s.nc.ConnectedUrlRedacted()), err)
		c = caps{version: c.version}
	}
	s.capsV.Store(&c)
	s.mu.Lock()
	prev := s.refused
	s.refused = err
	s.mu.Unlock()
	switch {
	case err != nil && prev == nil:
		s.log.Error("the NATS server connected to is too old: the node refuses reads and events until it is connected to a newer one", "err", err)
	case err == nil:
		s.log.Info("connected to NATS", "version", c.version, "batched_gets", c.batchGet, "atomic_batches", c.atomic)
	}
}

// startOver follows a stream that was recreated: its sequences begin again at 1.
func (s *Store) startOver(ctx context.Context) {
	s.chain.forget()
	s.reapReaders(true) // they read the old stream
	if err := s.loadHead(ctx); err != nil {
		return // the next look tries again
	}
	select {
	case s.restart <- struct{}{}:
	default:
	}
}

func (s *Store) setStatus(err error) {
	s.mu.Lock()
	prev := s.status
	s.status = err
	s.mu.Unlock()
	switch {
	case err != nil && prev == nil:
		s.log.Warn("the NATS JetStream stream cannot serve", "err", err)
	case err == nil && prev != nil:
		s.log.Info("the NATS JetStream stream serves again", "stream", s.opts.Stream)
	}
}

// oldestCache is the oldest message the stream holds, as last looked up.
type oldestCache struct {
	seq   uint64 // 0: not known
	ts    int64
	empty bool   // the stream held no message
	head  uint64 // this node's head when it was looked up
	at    time.Time
}

// oldest returns the stream's first sequence and its cursor, looking it up again when the
// cached one may have been removed by retention since. first > last (and a zero cursor)
// when retention has emptied the stream.
func (s *Store) oldestFor(ctx context.Context, last uint64) (uint64, cursor.Cursor, error) {
	s.mu.Lock()
	o := s.oldest
	s.mu.Unlock()
	fresh := o.seq != 0 && time.Since(o.at) < pollEvery
	switch {
	case !fresh:
	case o.empty:
		fresh = last == o.head // anything appended since is the new oldest
	case s.opts.MaxItems > 0 && last >= o.seq+s.opts.MaxItems:
		fresh = false // the cap has removed it
	case s.opts.MaxBytes > 0 && last != o.head:
		fresh = time.Since(o.at) < 100*time.Millisecond // appends may have pushed it out
	case s.opts.Window > 0 && time.Since(time.Unix(0, o.ts)) > s.opts.Window:
		fresh = false // it has aged out
	}
	if fresh {
		if o.empty {
			return last + 1, cursor.Cursor{}, nil
		}
		return o.seq, cursor.New(o.ts, o.seq, cursor.NodeWidth), nil
	}
	return s.refreshOldest(ctx)
}

// refreshOldest looks the oldest message up: the first at or after sequence 1.
func (s *Store) refreshOldest(ctx context.Context) (uint64, cursor.Cursor, error) {
	head, _ := s.tr.head()
	m, ok, err := s.first(ctx, 1)
	if err != nil {
		return 0, cursor.Cursor{}, err
	}
	o := oldestCache{head: head, at: time.Now()}
	if !ok {
		o.seq, o.empty = head+1, true
	} else {
		o.seq, o.ts = m.seq, m.ts
	}
	s.mu.Lock()
	s.oldest = o
	s.mu.Unlock()
	if o.empty {
		return o.seq, cursor.Cursor{}, nil
	}
	return o.seq, cursor.New(o.ts, o.seq, cursor.NodeWidth), nil
}
