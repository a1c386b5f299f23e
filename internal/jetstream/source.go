package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/evtctl/evtctl/internal/eventlog"
)

// How the store reads messages, by what a read needs and what the servers offer (figures
// from `evtctl bench jetstream` and the Go client alone, 100,000 messages of 562 bytes,
// 2 cores): an ordered consumer streams a stream at 150k–340k messages/s, batched direct
// gets (2.11+) at about 125k/s, single direct gets one round trip each (70–140 µs); setting
// up a consumer costs about 1 ms. So:
//
//   - long ascending scans (catch-up, replay, filtered scans) stream from an ordered
//     consumer, which is kept after the read for the next page of the same reader;
//   - short reads (a tail's few new events, a newest-first window) and point lookups use
//     direct gets: one batched get where the server takes them, else single gets sent all
//     at once;
//   - a stream that does not allow direct gets is read from consumers, and looked up
//     through the leader's message-get API.

// maxGetBytes bounds the payload of one batched direct get; the server stops after the
// message that crosses it and tells how many remain.
const maxGetBytes = 4 << 20

// maxSingles is the most single direct gets sent at once (servers before 2.11).
const maxSingles = 64

// directGet asks the stream's replicas for up to n messages from sequence start on (the
// first ones that exist). It asks for a batch when the connected server takes batched gets;
// an answer from an older replica (a cluster of mixed versions) is one message, without
// the headers of a batch, and is returned as it is: callers go on from the last message.
// pending is how many more messages the answering replica holds after the last one
// returned, when it said (batched gets only).
func (s *Store) directGet(ctx context.Context, start uint64, n int) (msgs []smsg, pending uint64, err error) {
	batch := n > 1 && s.caps().batchGet
	if !batch {
		n = 1
	}
	reply, ch, done := s.mux.open(n + 2)
	defer done()
	// next_by_subj ">" makes a single get answer the first message at or after seq on every
	// server line (a get by sequence alone answers 404 for a deleted one).
	var body []byte
	if batch {
		body = fmt.Appendf(nil, `{"seq":%d,"batch":%d,"max_bytes":%d,"next_by_subj":">"}`, start, n, maxGetBytes)
	} else {
		body = fmt.Appendf(nil, `{"seq":%d,"next_by_subj":">"}`, start)
	}
	if err := s.nc.PublishRequest(s.getSubj, reply, body); err != nil {
		return nil, 0, s.connErr(err)
	}
	t := time.NewTimer(s.opts.Timeout)
	defer t.Stop()
	msgs = make([]smsg, 0, n)
	for {
		m, err := s.await(ctx, ch, t)
		if err != nil {
			return nil, 0, err
		}
		switch st := m.Header.Get(hdrStatus); st {
		case "":
			sm, err := s.parseDirect(m)
			if err != nil {
				return nil, 0, err
			}
			msgs = append(msgs, sm)
			if !batch || len(m.Header[hdrNumPending]) == 0 {
				return msgs, 0, nil // a single get, or a replica that does not batch
			}
		case "204": // end of batch
			pending, _ = strconv.ParseUint(m.Header.Get(hdrNumPending), 10, 64)
			return msgs, pending, nil
		case "404": // nothing at or after start
			return msgs, 0, nil
		case "408":
			// A server that knows batched gets but not this request (a field it refuses).
			return nil, 0, fmt.Errorf("NATS direct get on stream %q: status 408 %s", s.opts.Stream, m.Header.Get("Description"))
		case "503":
			return nil, 0, s.noResponders("reads")
		default:
			return nil, 0, fmt.Errorf("NATS direct get on stream %q: status %s %s", s.opts.Stream, st, m.Header.Get("Description"))
		}
	}
}

// singles sends one single direct get for each sequence in [from, from+n) at once and
// returns the distinct messages found, in order. A get of a removed sequence answers the
// next message, so holes cost nothing but repeats.
func (s *Store) singles(ctx context.Context, from uint64, n int) ([]smsg, error) {
	n = max(min(n, maxSingles), 1)
	type pending struct {
		ch   chan *nats.Msg
		done func()
	}
	ps := make([]pending, n)
	for i := range ps {
		reply, ch, done := s.mux.open(1)
		ps[i] = pending{ch, done}
		body := fmt.Appendf(nil, `{"seq":%d,"next_by_subj":">"}`, from+uint64(i))
		if err := s.nc.PublishRequest(s.getSubj, reply, body); err != nil {
			for _, p := range ps[:i+1] {
				p.done()
			}
			return nil, s.connErr(err)
		}
	}
	defer func() {
		for _, p := range ps {
			p.done()
		}
	}()
	t := time.NewTimer(s.opts.Timeout)
	defer t.Stop()
	var msgs []smsg
	for _, p := range ps {
		m, err := s.await(ctx, p.ch, t)
		if err != nil {
			return nil, err
		}
		switch st := m.Header.Get(hdrStatus); st {
		case "":
			sm, err := s.parseDirect(m)
			if err != nil {
				return nil, err
			}
			if len(msgs) == 0 || sm.seq > msgs[len(msgs)-1].seq {
				msgs = append(msgs, sm)
			} else if !slices.ContainsFunc(msgs, func(x smsg) bool { return x.seq == sm.seq }) {
				msgs = append(msgs, sm)
				slices.SortFunc(msgs, func(a, b smsg) int { return cmpSeq(a.seq, b.seq) })
			}
		case "404":
		case "503":
			return nil, s.noResponders("reads")
		default:
			return nil, fmt.Errorf("NATS direct get on stream %q: status %s %s", s.opts.Stream, st, m.Header.Get("Description"))
		}
	}
	return msgs, nil
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseDirect reads a message answered by a direct get.
func (s *Store) parseDirect(m *nats.Msg) (smsg, error) {
	seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
	if err != nil {
		return smsg{}, fmt.Errorf("NATS direct get: a reply without a valid %s header", hdrSequence)
	}
	t, err := time.Parse(time.RFC3339Nano, m.Header.Get(hdrTimeStamp))
	if err != nil {
		return smsg{}, fmt.Errorf("NATS direct get: message %d has no valid %s header", seq, hdrTimeStamp)
	}
	return s.present(seq, m.Header.Get(hdrSubject), m.Header, m.Data, t), nil
}

// first returns the first message at or after seq, if there is one: a direct get, or the
// leader's message-get API on a stream that does not allow direct gets.
func (s *Store) first(ctx context.Context, seq uint64) (smsg, bool, error) {
	if s.direct() {
		msgs, _, err := s.directGet(ctx, seq, 1)
		if err != nil || len(msgs) == 0 {
			return smsg{}, false, err
		}
		return msgs[0], true, nil
	}
	str := s.streamHandle()
	if str == nil {
		return smsg{}, false, unavailable("NATS JetStream stream %q not looked up yet", s.opts.Stream)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	rm, err := str.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return smsg{}, false, nil
	}
	if err != nil {
		return smsg{}, false, s.jsErr(err)
	}
	return s.present(rm.Sequence, rm.Subject, rm.Header, rm.Data, rm.Time), true, nil
}

// lagWait bounds how long a read waits for the replica answering it to catch up with a
// message this node knows is stored (replication is normally a millisecond behind).
const lagWait = 500 * time.Millisecond

// fetchRange returns up to n messages from sequence from on, in order (possibly a few
// past to); to (>= from) is a sequence this node knows was stored. A replica that does not
// hold to yet is asked again, for up to lagWait, unless the stream's leader says the
// messages up to to were removed: then what there is is returned, perhaps nothing.
func (s *Store) fetchRange(ctx context.Context, from, to uint64, n int) ([]smsg, error) {
	n = max(n, 1)
	wait := time.Millisecond
	deadline := time.Now().Add(lagWait)
	asked := false
	for {
		var msgs []smsg
		var pending uint64
		var err error
		c := s.caps()
		switch {
		case !s.direct(), !c.batchGet && n > maxSingles:
			msgs, err = s.consumerFetch(ctx, from, n)
		case c.batchGet && n > 1:
			msgs, pending, err = s.directGet(ctx, from, n)
		case n > 1:
			msgs, err = s.singles(ctx, from, min(n, int(to-from+1)))
		default:
			msgs, _, err = s.directGet(ctx, from, 1)
		}
		if err != nil {
			return nil, err
		}
		got := from - 1 // the answering replica holds everything up to got
		if len(msgs) > 0 {
			got = msgs[len(msgs)-1].seq
		}
		if len(msgs) > 0 && (len(msgs) >= n || pending > 0 || got >= to || !s.direct()) {
			return msgs, nil
		}
		if len(msgs) > 0 && !c.batchGet {
			return msgs, nil // single gets: the caller goes on from the last
		}
		if !asked {
			// Short of to: a replica behind, or messages removed. Only the leader knows.
			asked = true
			next, ok, err := s.leaderFirst(ctx, got+1)
			if err != nil {
				return nil, err
			}
			if !ok || next > to {
				return msgs, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, unavailable("the replica of stream %q answering reads holds messages up to sequence %d, not yet %d", s.opts.Stream, got, to)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.quit:
			return nil, eventlog.ErrClosed
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// consumerFetch reads up to n messages from sequence from on with a short-lived ordered
// consumer (streams without direct gets).
func (s *Store) consumerFetch(ctx context.Context, from uint64, n int) ([]smsg, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	cons, err := s.js.OrderedConsumer(ctx, s.opts.Stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from, InactiveThreshold: 10 * time.Second,
	})
	if err != nil {
		return nil, s.jsErr(err)
	}
	b, err := cons.FetchNoWait(n)
	if err != nil {
		return nil, s.jsErr(err)
	}
	var msgs []smsg
	for m := range b.Messages() {
		sm, _, err := s.fromConsumer(m)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, sm)
	}
	if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		return nil, s.jsErr(err)
	}
	s.dropConsumer(cons)
	return msgs, nil
}

// fromConsumer reads a message delivered by a consumer, and how many messages the stream
// held after it when it was delivered.
func (s *Store) fromConsumer(m jetstream.Msg) (smsg, uint64, error) {
	md, err := m.Metadata()
	if err != nil {
		return smsg{}, 0, fmt.Errorf("NATS JetStream: a consumer delivered a message without metadata: %w", err)
	}
	return s.present(md.Sequence.Stream, m.Subject(), m.Headers(), m.Data(), md.Timestamp), md.NumPending, nil
}

// dropConsumer deletes a consumer of the store's in the background; the server would
// also remove it once inactive.
func (s *Store) dropConsumer(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil || info.Name == "" || s.closing.Load() {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		defer cancel()
		_ = s.js.DeleteConsumer(ctx, s.opts.Stream, info.Name)
	}()
}

// A reader streams the stream in order from an ordered consumer, which reads ahead with
// flow control (a bounded buffer of pulled messages). After a read it is parked, where it
// stands, for the reader's next page; parked readers unused for readerIdle are closed.
type reader struct {
	cons jetstream.Consumer
	it   jetstream.MessagesContext
	next uint64 // the position: the reader holds no message below it
	q    []smsg // read and not taken, in order
	// drained: the last message read had nothing after it in the stream when delivered.
	drained bool
	used    time.Time
}

const (
	readerIdle = 5 * time.Second
	maxParked  = 8

	readerSlack  = 4096    // a parked reader this far behind a read still serves it
	readerBuffer = 4 << 20 // bytes a reader pulls ahead, at most (and at least twice the largest message)
	maxUnread    = 4096    // messages a read gives back to its reader for the next read, at most
)

// readerMin is how many messages a scan must be expected to examine to stream from a
// consumer rather than use direct gets: where a consumer's setup (about 1 ms) costs less
// than the difference in rate, measured as 250k–290k messages/s for a consumer, 105k–125k/s
// for batched gets (2.11+) and 45k–55k/s for single gets sent 64 at once (2.10).
func (s *Store) readerMin() uint64 {
	switch {
	case readerMinOverride > 0:
		return readerMinOverride
	case s.caps().batchGet:
		return 256
	}
	return 64
}

// readerMinOverride replaces readerMin in tests, which run the suite through each path.
var readerMinOverride uint64

// readers holds the parked readers.
type readers struct {
	mu     sync.Mutex
	parked []*reader
}

// takeReader returns a parked reader that can serve a scan from sequence lo, if any.
func (s *Store) takeReader(lo uint64) *reader {
	s.rd.mu.Lock()
	defer s.rd.mu.Unlock()
	for i, r := range s.rd.parked {
		if r.next <= lo && (lo-r.next <= readerSlack || len(r.q) > 0 && r.q[len(r.q)-1].seq >= lo) {
			s.rd.parked = slices.Delete(s.rd.parked, i, i+1)
			return r
		}
	}
	return nil
}

// park keeps r for the next read; the oldest parked reader goes when there are too many.
func (s *Store) park(r *reader) {
	r.used = time.Now()
	s.rd.mu.Lock()
	if s.closing.Load() {
		s.rd.mu.Unlock()
		s.closeReader(r)
		return
	}
	s.rd.parked = append(s.rd.parked, r)
	var drop *reader
	if len(s.rd.parked) > maxParked {
		drop = s.rd.parked[0]
		s.rd.parked = s.rd.parked[1:]
	}
	s.rd.mu.Unlock()
	if drop != nil {
		s.closeReader(drop)
	}
}

// reapReaders closes parked readers unused for readerIdle, or all of them.
func (s *Store) reapReaders(all bool) {
	s.rd.mu.Lock()
	var drop []*reader
	keep := s.rd.parked[:0]
	for _, r := range s.rd.parked {
		if all || time.Since(r.used) > readerIdle {
			drop = append(drop, r)
		} else {
			keep = append(keep, r)
		}
	}
	clear(s.rd.parked[len(keep):])
	s.rd.parked = keep
	s.rd.mu.Unlock()
	for _, r := range drop {
		s.closeReader(r)
	}
}

func (s *Store) closeReader(r *reader) {
	r.it.Stop()
	s.dropConsumer(r.cons)
}

// newReader starts a reader at sequence from.
func (s *Store) newReader(ctx context.Context, from uint64) (*reader, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	cons, err := s.js.OrderedConsumer(ctx, s.opts.Stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
		InactiveThreshold: 30 * time.Second, MaxResetAttempts: 3,
	})
	if err != nil {
		return nil, s.jsErr(err)
	}
	buf := max(readerBuffer, 2*int(s.nc.MaxPayload()))
	it, err := cons.Messages(jetstream.PullMaxBytes(buf), jetstream.PullHeartbeat(2*time.Second))
	if err != nil {
		return nil, s.jsErr(err)
	}
	// drained: the first message is normally there at once; if it is not, the leader says
	// whether the messages the node knows of were removed.
	return &reader{cons: cons, it: it, next: from, drained: true}, nil
}

// peek returns the next message at or after the reader's position without taking it; nil
// when the stream holds none below end (the reader would have to wait for a new one).
func (s *Store) peek(ctx context.Context, r *reader, end uint64) (*smsg, error) {
	for {
		if len(r.q) > 0 {
			return &r.q[0], nil
		}
		if r.next >= end {
			return nil, nil
		}
		opt := jetstream.NextContext(ctx) // the pull consumer's heartbeats end a wait sooner when the server goes away
		if r.drained {
			// Nothing followed the last message when it was delivered. The node knows of
			// messages up to end, which normally arrive at once; if none does, they were
			// removed, which only the stream's leader can say for sure.
			opt = jetstream.NextMaxWait(drainWait)
		}
		m, err := r.it.Next(opt)
		if r.drained && errors.Is(err, nats.ErrTimeout) {
			seq, ok, err := s.leaderFirst(ctx, r.next)
			if err != nil {
				return nil, err
			}
			if !ok || seq >= end {
				return nil, nil
			}
			r.drained = false
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, unavailable("reading NATS JetStream stream %q: %v", s.opts.Stream, err)
		}
		sm, pending, err := s.fromConsumer(m)
		if err != nil {
			return nil, err
		}
		r.drained = pending == 0
		if sm.seq >= r.next {
			r.q = append(r.q, sm)
		}
	}
}

// drainWait is how long a reader that has read all the stream held waits for a message the
// node knows of before it asks the leader whether the message is still there.
const drainWait = 100 * time.Millisecond

// leaderFirst asks the stream's leader for the sequence of the first message at or after
// seq. Hand-written: nats.go's GetMsg uses direct gets on a stream that allows them, which
// any replica answers, one that may be behind; only the leader can say a message is gone.
func (s *Store) leaderFirst(ctx context.Context, seq uint64) (uint64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	m, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+s.opts.Stream, fmt.Appendf(nil, `{"seq":%d,"next_by_subj":">"}`, seq))
	if err != nil {
		return 0, false, s.connErr(err)
	}
	var resp struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return 0, false, fmt.Errorf("NATS JetStream: a message-get reply that is not JSON: %q", m.Data)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == errNoMessageFound:
		return 0, false, nil
	case resp.Error != nil:
		return 0, false, s.apiErr(resp.Error)
	case resp.Message == nil:
		return 0, false, fmt.Errorf("NATS JetStream: a message-get reply without a message: %q", m.Data)
	}
	return resp.Message.Seq, true, nil
}

// seek moves the reader to sequence lo (not before where it is).
func (r *reader) seek(lo uint64) {
	i := 0
	for i < len(r.q) && r.q[i].seq < lo {
		i++
	}
	r.q = r.q[i:]
	r.next = max(r.next, lo)
}

// take takes the next message.
func (r *reader) take() {
	r.next = r.q[0].seq + 1
	r.q[0] = smsg{}
	r.q = r.q[1:]
}

// unread gives back messages taken (in order, just before the reader's position).
func (r *reader) unread(ms []smsg) {
	if len(ms) == 0 {
		return
	}
	r.q = append(slices.Clone(ms), r.q...)
	r.next = ms[0].seq
}
