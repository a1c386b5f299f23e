package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
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
//   - long ascending scans (catch-up, replay, filtered scans) stream from a consumer of
//     their own (see reader.go), which is kept after the read for the next page while it
//     has messages ahead of it;
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
		sm, err := s.fromConsumer(m)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, sm)
	}
	if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		return nil, s.jsErr(err)
	}
	if info := cons.CachedInfo(); info != nil {
		s.dropConsumer(info.Name)
	}
	return msgs, nil
}

// fromConsumer reads a message delivered by a consumer.
func (s *Store) fromConsumer(m jetstream.Msg) (smsg, error) {
	md, err := m.Metadata()
	if err != nil {
		return smsg{}, fmt.Errorf("NATS JetStream: a consumer delivered a message without metadata: %w", err)
	}
	return s.present(md.Sequence.Stream, m.Subject(), m.Headers(), m.Data(), md.Timestamp), nil
}

// dropConsumer deletes a consumer of the store's in the background (within a second when
// the store is closing); the server would also remove it once inactive.
func (s *Store) dropConsumer(name string) {
	if name == "" {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		d := s.opts.Timeout
		if s.closing.Load() {
			d = min(d, time.Second)
		}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_ = s.js.DeleteConsumer(ctx, s.opts.Stream, name)
	}()
}

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
