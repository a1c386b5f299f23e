package jetstream

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/evtctl/evtctl/internal/eventlog"
)

// A reader streams the stream in order, for long ascending scans, from a consumer of its
// own: an ephemeral pull consumer (no acknowledgements, in memory, one replica) delivering
// on a subscription of the reader's. The reader asks for messages itself, while a scan uses
// it, and only for messages the node knows the stream holds (up to the newest it has seen),
// in requests that do not wait at the end of the stream (no_wait). So no request of a
// reader is left waiting at the server: a reader kept between the pages of a replay is
// delivered none of the stream's new messages and costs nothing while it waits, and a
// reader that has read all the node knows of is not kept at all (see park). Parked readers
// unused for readerIdle are closed.
type reader struct {
	name string // of the consumer
	sub  *nats.Subscription
	ch   chan *nats.Msg
	next uint64 // the position: the reader holds no message below it
	q    []smsg // read and not taken, in order

	last  uint64 // the stream sequence of the last message the consumer delivered
	dseq  uint64 // the consumer's sequence of that delivery (one more for each)
	asked int    // messages asked for and not delivered yet, as far as the reader can tell
	bytes int    // the most bytes one request asks for
	// eos: a request ended short, the consumer having delivered all the stream held then
	eos   bool
	since int // messages delivered since the last status
	stall *time.Timer
	used  time.Time
}

const (
	readerIdle = 2 * time.Second
	maxParked  = 8

	// readerSlack is how far behind a read a parked reader may stand and still serve it:
	// skipping that many messages costs less than setting up a consumer (about 1 ms).
	readerSlack = 256
	maxUnread   = 4096 // messages a read gives back to its reader for the next read, at most

	pullMsgs     = 1024    // messages one request asks for, at most
	pullBytes    = 2 << 20 // bytes one request asks for (at least a message's worth more than the largest)
	maxPullBytes = 64 << 20

	// stallWait is how long a reader waits for messages it asked for before it takes its
	// requests for lost (a reconnection drops them) and starts over with a new consumer,
	// at most maxResets times in a row.
	stallWait = time.Second
	maxResets = 3
	// readerInactive is how long the server keeps a reader's consumer without a request: it
	// removes those of a node that went away without deleting them.
	readerInactive = 10 * time.Second
)

// readerMin is how many messages a scan must be expected to examine to stream from a
// consumer rather than use direct gets: where a consumer's setup (about 1 ms) costs less
// than the difference in rate, measured as 250k–290k messages/s for a consumer, 105k–125k/s
// for batched gets (2.11+) and 45k–55k/s for single gets sent 64 at once (2.10).
func (s *Store) readerMin() uint64 {
	switch {
	case s.readerMinFor.Load() > 0:
		return s.readerMinFor.Load()
	case readerMinOverride > 0:
		return readerMinOverride
	case s.caps().batchGet:
		return 256
	}
	return 64
}

// readerMinOverride replaces readerMin in tests, which run the suite through each path;
// Store.readerMinFor replaces it for one store, so that tests of each path can run at once.
var readerMinOverride uint64

// readers holds the parked readers.
type readers struct {
	mu     sync.Mutex
	parked []*reader
}

// takeReader returns the parked reader that can serve a scan from sequence lo, if any: of
// those at or a little behind lo, or holding lo already, the one that stands nearest to it.
func (s *Store) takeReader(lo uint64) *reader {
	s.rd.mu.Lock()
	defer s.rd.mu.Unlock()
	best := -1
	for i, r := range s.rd.parked {
		if r.next <= lo && (lo-r.next <= readerSlack || len(r.q) > 0 && r.q[len(r.q)-1].seq >= lo) &&
			(best < 0 || r.next > s.rd.parked[best].next) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	r := s.rd.parked[best]
	s.rd.parked = slices.Delete(s.rd.parked, best, best+1)
	return r
}

// park keeps r for the next read while it has messages ahead of it that the node knows of;
// a reader that has read them all is closed (only new messages could serve it). The oldest
// parked reader goes when there are too many.
func (s *Store) park(r *reader) {
	if head, _ := s.tr.head(); len(r.q) == 0 && r.asked == 0 && r.pos() > head {
		s.closeReader(r)
		return
	}
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

// closeReader ends r's subscription and deletes its consumer.
func (s *Store) closeReader(r *reader) {
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
		r.sub = nil
	}
	if r.stall != nil {
		r.stall.Stop()
	}
	s.dropConsumer(r.name)
	r.name = ""
}

// newReader starts a reader at sequence from.
func (s *Store) newReader(ctx context.Context, from uint64) (*reader, error) {
	r := &reader{next: from, bytes: max(pullBytes, int(s.nc.MaxPayload())+64<<10)}
	if err := s.startConsumer(ctx, r, from); err != nil {
		return nil, err
	}
	return r, nil
}

// startConsumer gives r a new consumer (and subscription) delivering from sequence from on.
func (s *Store) startConsumer(ctx context.Context, r *reader, from uint64) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	cons, err := s.js.CreateConsumer(ctx, s.opts.Stream, jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
		AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: readerInactive,
		Replicas: 1, MemoryStorage: true,
	})
	if err != nil {
		return s.jsErr(err)
	}
	name := cons.CachedInfo().Name
	// Room for every message and status the requests in flight can bring (see ask), and as
	// many again: a delivery dropped for want of room is seen as a gap, and starts over.
	ch := make(chan *nats.Msg, 4*pullMsgs)
	sub, err := s.nc.ChanSubscribe(s.nc.NewInbox(), ch)
	if err != nil {
		s.dropConsumer(name)
		return s.connErr(err)
	}
	r.name, r.sub, r.ch = name, sub, ch
	r.last, r.dseq, r.asked, r.eos, r.since = from-1, 0, 0, false, 0
	return nil
}

// restartReader replaces r's consumer by a new one delivering from where the old one stopped.
func (s *Store) restartReader(ctx context.Context, r *reader) error {
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
		r.sub = nil
	}
	s.dropConsumer(r.name)
	r.name = ""
	return s.startConsumer(ctx, r, r.pos())
}

// pos is the sequence the reader reads next from its consumer: the messages below it were
// delivered, or are below its position.
func (r *reader) pos() uint64 { return max(r.next, r.last+1) }

// ask asks r's consumer for the next messages when few are on their way: up to pullMsgs,
// never past the newest message the node knows of, and without waiting at the end of the
// stream. So requests end as soon as they are answered.
func (s *Store) ask(r *reader) error {
	if r.eos || r.asked > pullMsgs/2 {
		return nil
	}
	head, _ := s.tr.head()
	reach := r.last + uint64(r.asked) // about as far as the messages asked for go
	if head <= reach {
		return nil
	}
	n := int(min(head-reach, pullMsgs))
	body := fmt.Appendf(nil, `{"batch":%d,"max_bytes":%d,"no_wait":true}`, n, r.bytes)
	if err := s.nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+s.opts.Stream+"."+r.name, r.sub.Subject, body); err != nil {
		return s.connErr(err)
	}
	r.asked += n
	return nil
}

// peek returns the next message at or after the reader's position without taking it; nil
// when the stream holds none below end.
func (s *Store) peek(ctx context.Context, r *reader, end uint64) (*smsg, error) {
	resets, wait := 0, time.Millisecond
	for {
		if len(r.q) > 0 {
			return &r.q[0], nil
		}
		if r.next >= end || r.last+1 >= end {
			return nil, nil // every message below end was delivered
		}
		if err := s.ask(r); err != nil {
			return nil, err
		}
		if r.asked == 0 {
			if !r.eos {
				return nil, nil // the node knows of nothing more to ask for
			}
			// The consumer had nothing more when last asked, and the node knows of messages
			// below end: they were removed, or the consumer had not seen them yet. Only the
			// stream's leader can say.
			seq, ok, err := s.leaderFirst(ctx, r.pos())
			if err != nil {
				return nil, err
			}
			if !ok || seq >= end {
				return nil, nil
			}
			if err := s.pause(ctx, wait); err != nil {
				return nil, err
			}
			wait = min(2*wait, 20*time.Millisecond)
			r.eos = false
			continue
		}
		var m *nats.Msg
		select {
		case m = <-r.ch:
		default:
			if r.stall == nil {
				r.stall = time.NewTimer(stallWait)
			} else {
				r.stall.Reset(stallWait)
			}
			select {
			case m = <-r.ch:
			case <-r.stall.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-s.quit:
				return nil, eventlog.ErrClosed
			}
		}
		again := m == nil // messages were asked for and none came
		if m != nil {
			var err error
			if again, err = s.receive(r, m); err != nil {
				return nil, err
			}
		}
		if again {
			if resets++; resets > maxResets {
				return nil, unavailable("reading NATS JetStream stream %q: its consumer stopped delivering", s.opts.Stream)
			}
			if err := s.restartReader(ctx, r); err != nil {
				return nil, err
			}
		}
	}
}

// pause waits d, unless ctx ends or the store closes.
func (s *Store) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return eventlog.ErrClosed
	}
}

// receive takes one message of r's subscription: a delivered message, or the status that
// ends a request. again: the reader must start over with a new consumer (a delivery was
// lost, or the consumer is gone).
func (s *Store) receive(r *reader, m *nats.Msg) (again bool, err error) {
	if !strings.HasPrefix(m.Reply, ackPrefix) {
		return s.pullStatus(r, m)
	}
	sseq, dseq, ts, ok := ackInfo(m.Reply)
	if !ok {
		return false, fmt.Errorf("NATS JetStream: a consumer delivered a message with the reply subject %q", m.Reply)
	}
	if dseq != r.dseq+1 {
		return true, nil
	}
	r.dseq, r.last = dseq, sseq
	r.asked = max(r.asked-1, 0)
	r.since++
	if sseq >= r.next {
		r.q = append(r.q, s.present(sseq, m.Subject, m.Header, m.Data, time.Unix(0, ts).UTC()))
	}
	return false, nil
}

// pullStatus takes a status message on r's subscription: how a request ended.
func (s *Store) pullStatus(r *reader, m *nats.Msg) (again bool, err error) {
	code, desc := m.Header.Get(hdrStatus), m.Header.Get("Description")
	left, counted := -1, false
	if v := m.Header.Get("Nats-Pending-Messages"); v != "" {
		n, err := strconv.Atoi(v)
		left, counted = n, err == nil
	}
	since := r.since
	r.since = 0
	switch code {
	case "100": // an idle heartbeat
	case "404": // 2.11 and later: the request reached the end of the stream
		r.asked, r.eos = 0, true
	case "408":
		// 2.10: the request reached the end of the stream (with how many it did not
		// deliver); or it was refused, earlier requests asking for all the stream holds.
		r.eos = true
		if counted {
			r.asked = max(r.asked-left, 0)
		} else {
			r.asked = 0
		}
	case "409":
		switch {
		case desc == "Batch Completed":
			r.asked = max(r.asked-max(left, 0), 0)
		case strings.HasPrefix(desc, "Message Size Exceeds MaxBytes"):
			r.asked = max(r.asked-max(left, 0), 0)
			if since == 0 {
				// A message larger than a request takes: ask for more bytes.
				r.bytes = min(2*r.bytes, maxPullBytes)
			}
		case desc == "Consumer Deleted", desc == "Leadership Change":
			return true, nil
		default:
			return false, fmt.Errorf("NATS JetStream consumer of stream %q: status 409 %s", s.opts.Stream, desc)
		}
	case "503": // no responders: the consumer is gone
		return true, nil
	default:
		return false, fmt.Errorf("NATS JetStream consumer of stream %q: status %s %s", s.opts.Stream, code, desc)
	}
	return false, nil
}

// ackPrefix begins the reply subject of a message a consumer delivers.
const ackPrefix = "$JS.ACK."

// ackInfo reads the reply subject of a delivered message:
// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>, or
// with a domain and an account hash before the stream and a token after pending.
func ackInfo(reply string) (sseq, dseq uint64, ts int64, ok bool) {
	var tok [12]string
	n, rest := 0, reply[len(ackPrefix):]
	for n < len(tok) {
		i := strings.IndexByte(rest, '.')
		if i < 0 || n == len(tok)-1 {
			tok[n] = rest
			n++
			break
		}
		tok[n], rest = rest[:i], rest[i+1:]
		n++
	}
	at := 0
	switch {
	case n == 7:
	case n >= 9:
		at = 2
	default:
		return 0, 0, 0, false
	}
	sseq, ok1 := decimal(tok[at+3])
	dseq, ok2 := decimal(tok[at+4])
	t, ok3 := decimal(tok[at+5])
	if !ok1 || !ok2 || !ok3 || t > math.MaxInt64 {
		return 0, 0, 0, false
	}
	return sseq, dseq, int64(t), true
}

// decimal reads a number of decimal digits, and nothing else.
func decimal(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d := uint64(s[i] - '0')
		if d > 9 || v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = 10*v + d
	}
	return v, true
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
