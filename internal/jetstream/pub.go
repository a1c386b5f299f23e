package jetstream

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/evtctl/evtctl/internal/eventlog"
)

// publisher publishes messages to the stream with many acknowledgements in flight, for
// the node's appends. It is hand-written where nats.go's jetstream.PublishMsgAsync does the
// same job, because that one was measured to cost the node a fifth of its CPU per event
// at ingest (a future, two channels and a map entry per message, and encoding/json for
// every acknowledgement): here a run of messages shares one wait, and an acknowledgement is parsed by hand (anything but a
// plain one — an error, a 503 — goes through the usual parsing).
//
// Messages are published on the connection in the order publish is called, and publish
// is called under the chain's lock for a chain: the order of the stream.
//
// A chain's messages may be published with sparse acknowledgements (see chain.go): only
// every so many carries a reply subject, and its answer stands for the messages sent
// since the one before that did. JetStream answers nothing for a message without one.
type publisher struct {
	s      *Store
	prefix string // of the reply subjects: "_INBOX.<unique>."
	sub    *nats.Subscription
	room   chan struct{} // a token per message in flight

	mu      sync.Mutex
	next    uint64             // the number of the last message's reply subject
	waiting map[uint64]pubSlot // by reply subject number: the messages not answered yet
}

type pubSlot struct {
	run  *pubRun
	i    int
	span int // the messages it holds room for: its own and those sent without a reply just before it
}

// pubRun is a run of messages published together and waited for together.
type pubRun struct {
	mu   sync.Mutex
	acks []pubResult
	ns   []uint64 // the reply subject numbers of the messages sent
	left atomic.Int32
	done chan struct{}
}

// pubResult is the answer to one message: where it was stored, or the error.
type pubResult struct {
	ack
	err      error
	answered bool
}

func newPublisher(s *Store) (*publisher, error) {
	p := &publisher{s: s, prefix: s.nc.NewInbox() + ".", room: make(chan struct{}, maxInFlight), waiting: map[uint64]pubSlot{}}
	sub, err := s.nc.Subscribe(p.prefix+"*", p.deliver)
	if err != nil {
		return nil, err
	}
	if err := sub.SetPendingLimits(-1, 256<<20); err != nil {
		return nil, err
	}
	p.sub = sub
	return p, nil
}

// publish sends msgs in order, stopping at the first that cannot be sent (its error is
// returned with how many were), and returns the run to wait on. With every > 0 only every
// every-th message and the last ask for an answer (asks reports which); the others are
// left unanswered in the run.
func (p *publisher) publish(msgs []*nats.Msg, every int) (*pubRun, int, error) {
	r := &pubRun{acks: make([]pubResult, len(msgs)), done: make(chan struct{})}
	total := len(msgs)
	if every > 0 {
		total = (len(msgs) + every - 1) / every
	}
	r.ns = make([]uint64, 0, total)
	r.left.Store(int32(total))
	var stall *time.Timer
	defer func() {
		if stall != nil {
			stall.Stop()
		}
	}()
	held := 0 // room taken by messages sent without a reply since the last that had one
	stop := func(err error) error {
		for range held {
			<-p.room
		}
		p.unsent(r, total-len(r.ns))
		return err
	}
	for i, m := range msgs {
		select {
		case p.room <- struct{}{}:
		default:
			if stall == nil {
				stall = time.NewTimer(p.s.opts.Timeout)
			}
			select {
			case p.room <- struct{}{}:
			case <-stall.C:
				return r, i, stop(unavailable("NATS JetStream acknowledges more slowly than events arrive (%d in flight)", maxInFlight))
			case <-p.s.quit:
				return r, i, stop(eventlog.ErrClosed)
			}
		}
		if !asks(i, len(msgs), every) {
			held++
			m.Reply = ""
			if err := p.s.nc.PublishMsg(m); err != nil {
				return r, i, stop(p.s.pubErr(err))
			}
			continue
		}
		p.mu.Lock()
		p.next++
		n := p.next
		p.waiting[n] = pubSlot{run: r, i: i, span: held + 1}
		p.mu.Unlock()
		held = 0
		r.ns = append(r.ns, n)
		m.Reply = p.prefix + strconv.FormatUint(n, 10)
		if err := p.s.nc.PublishMsg(m); err != nil {
			p.release(n)
			r.ns = r.ns[:len(r.ns)-1]
			return r, i, stop(p.s.pubErr(err))
		}
	}
	return r, len(msgs), nil
}

// asks reports whether message i of n published with every asks for an answer.
func asks(i, n, every int) bool {
	return every <= 0 || (i+1)%every == 0 || i == n-1
}

// unsent counts n answers r will not get as received.
func (p *publisher) unsent(r *pubRun, n int) {
	if r.left.Add(-int32(n)) == 0 {
		close(r.done)
	}
}

// release frees the slot of reply n, if it still holds it; the run and index it held.
func (p *publisher) release(n uint64) (*pubRun, int) {
	p.mu.Lock()
	sl, ok := p.waiting[n]
	if !ok {
		p.mu.Unlock()
		return nil, 0 // answered already, or given up
	}
	delete(p.waiting, n)
	p.mu.Unlock()
	for range sl.span {
		<-p.room
	}
	return sl.run, sl.i
}

// deliver takes an acknowledgement.
func (p *publisher) deliver(m *nats.Msg) {
	n, err := strconv.ParseUint(m.Subject[len(p.prefix):], 10, 64)
	if err != nil {
		return
	}
	r, i := p.release(n)
	if r == nil {
		return // a late answer to a message given up on
	}
	var res pubResult
	if seq, dup, ok := plainAck(m.Data); ok {
		res.ack = ack{seq: seq, dup: dup}
	} else if a, err := p.s.readAck(m); err != nil {
		res.err = err
	} else {
		res.ack = ack{seq: a.Seq, dup: a.Duplicate}
	}
	if res.err == nil && res.seq == 0 {
		res.err = unavailable("NATS JetStream acknowledged a message without a sequence")
	}
	res.answered = true
	r.mu.Lock()
	r.acks[i] = res
	r.mu.Unlock()
	if r.left.Add(-1) == 0 {
		close(r.done)
	}
}

// wait waits for every answer r asked for, up to the store's timeout, and returns the
// answers; a message not answered in time has errAckTimeout, and is given up, as does every
// message without an answer then.
func (p *publisher) wait(ctx context.Context, r *pubRun) []pubResult {
	t := time.NewTimer(p.s.opts.Timeout)
	defer t.Stop()
	var err error
	select {
	case <-r.done:
	case <-t.C:
		err = errAckTimeout
	case <-ctx.Done():
		err = ctx.Err()
	case <-p.s.quit:
		err = eventlog.ErrClosed
	}
	if err != nil {
		for _, n := range r.ns {
			p.release(n) // no answer is taken for it from now on
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]pubResult, len(r.acks))
	copy(out, r.acks)
	if err != nil {
		for i := range out {
			if !out[i].answered {
				out[i].err = err
			}
		}
	}
	return out
}

// plainAck parses an acknowledgement of a stored message, {"stream":"S","seq":N} with
// perhaps "domain" and "duplicate": true; ok false for anything else.
func plainAck(b []byte) (seq uint64, dup, ok bool) {
	if !bytes.HasPrefix(b, []byte(`{"stream":`)) || bytes.Contains(b, []byte(`"error"`)) {
		return 0, false, false
	}
	k := bytes.Index(b, []byte(`"seq":`))
	if k < 0 {
		return 0, false, false
	}
	k += len(`"seq":`)
	for k < len(b) && b[k] == ' ' {
		k++
	}
	start := k
	for k < len(b) && b[k] >= '0' && b[k] <= '9' {
		k++
	}
	if k == start || k-start > 20 {
		return 0, false, false
	}
	seq, err := strconv.ParseUint(string(b[start:k]), 10, 64)
	if err != nil {
		return 0, false, false
	}
	if d := bytes.Index(b, []byte(`"duplicate":`)); d >= 0 {
		v := bytes.TrimLeft(b[d+len(`"duplicate":`):], " ")
		switch {
		case bytes.HasPrefix(v, []byte("true")):
			dup = true
		case !bytes.HasPrefix(v, []byte("false")):
			return 0, false, false
		}
	}
	return seq, dup, true
}
