package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// ack is where one published message landed.
type ack struct {
	seq uint64
	dup bool // an earlier message with the same id holds seq
}

// errFallback says an atomic batch was refused for a reason that publishing its messages
// one by one does not have (a message id already stored, batches disabled, too large).
var errFallback = errors.New("publish the batch message by message")

// trackWait is how long an Append waits for the ordered consumer to report the stored
// times of its messages before reading them from the stream itself.
const trackWait = 500 * time.Millisecond

// Append implements eventlog.Store.
//
// A single event is one publish. Up to 1000 events are one atomic batch when the stream
// takes them (nats-server 2.12 or later): all are stored or none, in one run of sequences.
// Larger slices go as several batches, one after another, each all-or-nothing. Events go
// one by one, pipelined, when the stream takes no batches, and when a batch repeats an
// event already stored (JetStream refuses such a batch whole): then each repeat is
// answered as a duplicate and the others are stored. When some of a slice was stored and
// the rest failed, the error says how many; a retry with the same events stores the rest
// and answers the stored ones as duplicates.
//
// An event is acknowledged once JetStream has stored it: on a replicated stream, once a
// majority of the replicas has it. Whether that is on disk depends on the NATS servers'
// sync_interval (fsync every two minutes by default; "always" for every write).
func (s *Store) Append(ctx context.Context, entries []eventlog.Entry) ([]eventlog.AppendResult, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	if !s.enter() {
		return nil, eventlog.ErrClosed
	}
	defer s.leave()
	j, err := s.prepare(entries)
	if err != nil {
		return nil, err
	}
	cs, acks, err := s.store(ctx, j.msgs)
	if err != nil {
		return nil, err
	}
	return j.results(cs, acks), nil
}

// appendJob is one append's events as messages.
type appendJob struct {
	s       *Store
	entries []eventlog.Entry
	firstOf []int // the index of each entry's first occurrence in the slice
	uniq    []int // the entries published: the first occurrence of each
	msgs    []*nats.Msg
}

// prepare makes the messages of entries, or says why the node takes no events now.
func (s *Store) prepare(entries []eventlog.Entry) (*appendJob, error) {
	if err := s.refusal(); err != nil {
		return nil, err
	}
	if err := s.writeError(); err != nil {
		return nil, err
	}
	// A repeat within the slice is answered with the cursor of its first occurrence, as
	// the embedded log does; JetStream would refuse an atomic batch holding both.
	j := &appendJob{s: s, entries: entries, firstOf: make([]int, len(entries))}
	var seen map[string]int
	keys := make([]string, len(entries))
	for i, e := range entries {
		j.firstOf[i] = i
		if s.dedupe {
			keys[i] = msgID(e.Source, e.ID)
			if len(entries) > 1 {
				if seen == nil {
					seen = make(map[string]int, len(entries))
				}
				if k, ok := seen[keys[i]]; ok {
					j.firstOf[i] = k
					continue
				}
				seen[keys[i]] = i
			}
		}
		j.uniq = append(j.uniq, i)
	}
	j.msgs = make([]*nats.Msg, len(j.uniq))
	for k, i := range j.uniq {
		h := nats.Header{hdrType: []string{entries[i].Type}}
		if s.dedupe {
			h[hdrMsgID] = []string{keys[i]}
		}
		j.msgs[k] = &nats.Msg{Subject: s.subject, Header: h, Data: entries[i].JSON}
	}
	return j, nil
}

// results answers the job's entries from where its messages landed, and counts them.
func (j *appendJob) results(cs []cursor.Cursor, acks []ack) []eventlog.AppendResult {
	res := make([]eventlog.AppendResult, len(j.entries))
	var added, bytes, dups uint64
	for k, i := range j.uniq {
		res[i] = eventlog.AppendResult{Cursor: cs[k], Duplicate: acks[k].dup}
		if acks[k].dup {
			dups++
		} else {
			added++
			bytes += uint64(len(j.entries[i].JSON))
		}
	}
	for i := range j.entries {
		if f := j.firstOf[i]; f != i {
			res[i] = eventlog.AppendResult{Cursor: res[f].Cursor, Duplicate: true}
			dups++
		}
	}
	j.s.appended.Add(added)
	j.s.appendedBytes.Add(bytes)
	j.s.duplicates.Add(dups)
	return res
}

// store stores msgs in order and returns where each landed and its cursor: as a chain when
// the node can (see chain.go), else (and for messages a chain had refused) in shared mode.
func (s *Store) store(ctx context.Context, msgs []*nats.Msg) ([]cursor.Cursor, []ack, error) {
	return s.storeFrom(ctx, msgs, nil)
}

// storeFrom is store after a first chained publish of all msgs answered first (nil for
// none).
func (s *Store) storeFrom(ctx context.Context, msgs []*nats.Msg, first []chained) ([]cursor.Cursor, []ack, error) {
	cs := make([]cursor.Cursor, len(msgs))
	acks := make([]ack, len(msgs))
	rest := make([]int, len(msgs)) // indexes of msgs not yet stored
	for i := range rest {
		rest[i] = i
	}
	stored := 0
	for attempt := 0; attempt < 3 && len(rest) > 0 && (first != nil || s.chainable()); attempt++ {
		var out []chained
		if first != nil {
			out, first = first, nil
		} else {
			batch := make([]*nats.Msg, len(rest))
			for k, i := range rest {
				batch[k] = msgs[i]
			}
			var err error
			every := 0 // a publish again: an answer for each message, to learn its fate
			if attempt == 0 {
				every = ackEvery
			}
			out, err = s.publishChained(ctx, batch, every)
			if errors.Is(err, errNoChain) {
				break
			}
			if err != nil {
				return nil, nil, partial(err, stored, len(msgs))
			}
		}
		var dups []int
		var refused []int
		var firstErr error
		for k, o := range out {
			i := rest[k]
			switch {
			case o.refused:
				refused = append(refused, i)
			case o.err != nil:
				if firstErr == nil {
					firstErr = o.err
				}
			default:
				acks[i] = o.ack
				stored++
				if o.dup {
					dups = append(dups, i)
				} else {
					cs[i] = cursor.New(o.ts, o.seq, cursor.NodeWidth)
				}
			}
		}
		if len(dups) > 0 {
			seqs := make([]uint64, len(dups))
			for k, i := range dups {
				seqs[k] = acks[i].seq
			}
			dcs, err := s.cursorsOf(ctx, seqs, true)
			if err != nil {
				return nil, nil, fmt.Errorf("the events were stored, but reading back their cursors failed: %w", err)
			}
			for k, i := range dups {
				cs[i] = dcs[k]
			}
		}
		if firstErr != nil {
			return nil, nil, partial(firstErr, stored, len(msgs))
		}
		rest = refused
	}
	if len(rest) == 0 {
		return cs, acks, nil
	}

	// Shared mode: the stored times, from the ordered consumer or read back.
	before, _ := s.tr.head()
	floor := s.tr.floorTS()
	batch := make([]*nats.Msg, len(rest))
	for k, i := range rest {
		m := msgs[i]
		delete(m.Header, hdrTime)
		delete(m.Header, hdrExpLastID)
		delete(m.Header, hdrExpLastSeq)
		if floor > 0 {
			m.Header[hdrFloor] = []string{formatTS(floor)}
		}
		batch[k] = m
	}
	a, n, err := s.publish(ctx, batch)
	if err != nil {
		return nil, nil, partial(err, stored+n, len(msgs))
	}
	seqs := make([]uint64, len(a))
	trusted := true
	for k, x := range a {
		seqs[k] = x.seq
		if !x.dup {
			s.chain.noteOwn(x.seq)
			if x.seq <= before {
				// A new message cannot have a sequence this node saw before it was sent: the
				// stream was recreated and numbers from 1 again. Read cursors from the stream.
				trusted = false
			}
		}
	}
	if !trusted {
		s.chain.forget()
		select {
		case s.lookNow <- struct{}{}:
		default:
		}
	}
	scs, err := s.cursorsOf(ctx, seqs, trusted)
	if err != nil {
		return nil, nil, fmt.Errorf("the events were stored, but reading back their cursors failed: %w", err)
	}
	for k, i := range rest {
		cs[i], acks[i] = scs[k], a[k]
	}
	return cs, acks, nil
}

// queued is an append EnqueueAfter gave its place.
type queued struct {
	done    chan struct{}
	res     []eventlog.AppendResult
	err     error
	chained bool   // its messages were sent on the chain as it stood, in epoch
	epoch   uint64 // (chain.epoch)
}

func (q *queued) Done() <-chan struct{}                    { return q.done }
func (q *queued) Result() ([]eventlog.AppendResult, error) { return q.res, q.err }

func (q *queued) finished() bool {
	select {
	case <-q.done:
		return true
	default:
		return false
	}
}

// EnqueueAfter gives entries their place after every append queued before it and returns
// without waiting for them to be stored (as eventlog.Log.EnqueueAfter does for the node's
// ordered batches); they are stored only if prev (queued by this store, or nil) is. When
// prev went out on the chain as it stands, or is done, entries are published at once as
// its continuation, so that a client's next batch travels while this one is stored: a
// chain never leaves a gap, so they are stored only after prev's last message. Otherwise
// they are published once prev is done.
func (s *Store) EnqueueAfter(ctx context.Context, entries []eventlog.Entry, prev *eventlog.Pending) (*eventlog.Pending, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	if !s.enter() {
		return nil, eventlog.ErrClosed
	}
	j, err := s.prepare(entries)
	if err != nil {
		s.leave()
		return nil, err
	}
	var pq *queued
	if prev != nil {
		pq, _ = prev.Queued().(*queued)
	}
	q := &queued{done: make(chan struct{})}
	var sent *chainSend
	if s.chainable() {
		c := &s.chain
		c.mu.Lock()
		if c.known && !time.Now().Before(c.shared) && (pq == nil || pq.finished() || pq.chained && pq.epoch == c.epoch) {
			sent, _ = s.sendLocked(j.msgs, ackEvery)
		}
		c.mu.Unlock()
		if sent != nil {
			q.chained, q.epoch = true, sent.epoch
		}
	}
	go func() {
		defer s.leave()
		defer close(q.done)
		// The append goes on when the request that made it is gone, as the log's does.
		wctx := context.WithoutCancel(ctx)
		var first []chained
		if sent != nil {
			first = sent.collect(wctx)
		}
		if pq != nil {
			select {
			case <-pq.done:
			case <-s.quit:
				q.err = eventlog.ErrClosed
				return
			}
			if pq.err != nil && !allStored(first, len(j.msgs)) {
				// A chain is refused whole behind a message that was not stored; what was
				// stored of this one followed prev's last message (its acknowledgement was
				// what failed).
				stored := 0
				for _, o := range first {
					if !o.refused && o.err == nil {
						stored++
					}
				}
				q.err = partial(eventlog.ErrPredecessorNotStored, stored, len(j.msgs))
				return
			}
		}
		cs, acks, err := s.storeFrom(wctx, j.msgs, first)
		if err != nil {
			q.err = err
			return
		}
		q.res = j.results(cs, acks)
	}()
	return eventlog.NewPending(q), nil
}

// allStored reports whether a chained publish of n messages stored (or found) them all.
func allStored(out []chained, n int) bool {
	if len(out) != n {
		return false
	}
	for _, o := range out {
		if o.refused || o.err != nil {
			return false
		}
	}
	return true
}

// partial is err for an append of n messages of which stored were stored.
func partial(err error, stored, n int) error {
	if stored == 0 {
		return err
	}
	return fmt.Errorf("%w (%d of %d events were stored; a retry with the same events stores the rest and answers those as duplicates)", err, stored, n)
}

// publish stores msgs in order and returns where each landed; on an error, how many were
// stored (the first ones) too.
func (s *Store) publish(ctx context.Context, msgs []*nats.Msg) ([]ack, int, error) {
	if len(msgs) == 1 || !s.atomic.Load() {
		return s.publishEach(ctx, msgs)
	}
	acks := make([]ack, 0, len(msgs))
	for off := 0; off < len(msgs); off += maxAtomicBatch {
		chunk := msgs[off:min(off+maxAtomicBatch, len(msgs))]
		var a []ack
		var stored int
		var err error
		if len(chunk) == 1 {
			a, stored, err = s.publishEach(ctx, chunk)
		} else if a, err = s.publishAtomic(ctx, chunk); errors.Is(err, errFallback) {
			a, stored, err = s.publishEach(ctx, chunk)
		}
		if err != nil {
			return nil, off + stored, err
		}
		acks = append(acks, a...)
	}
	return acks, len(msgs), nil
}

// publishAtomic publishes msgs as one atomic batch: the server stages them and stores all
// at the commit, which it acknowledges with the last sequence and the count.
func (s *Store) publishAtomic(ctx context.Context, msgs []*nats.Msg) ([]ack, error) {
	for attempt := 0; ; attempt++ {
		a, err := s.tryAtomic(ctx, msgs)
		var je *batchBusy
		if !errors.As(err, &je) || attempt == 3 {
			return a, err
		}
		// Too many batches in flight at the stream (from all nodes): wait a little.
		if err := retry.Sleep(ctx, time.Duration(10<<attempt)*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// batchBusy is the stream refusing a batch because too many are in flight.
type batchBusy struct{ error }

func (e *batchBusy) Unwrap() error { return e.error }

func (s *Store) tryAtomic(ctx context.Context, msgs []*nats.Msg) ([]ack, error) {
	select {
	case s.batches <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.batches }()
	reply, ch, done := s.mux.open(1)
	defer done()
	defer func() {
		// The messages may be published again one by one.
		for _, m := range msgs {
			delete(m.Header, hdrBatchID)
			delete(m.Header, hdrBatchSeq)
			delete(m.Header, hdrBatchCommit)
			m.Reply = ""
		}
	}()
	id := nuid.Next()
	for i, m := range msgs {
		m.Header[hdrBatchID] = []string{id}
		m.Header[hdrBatchSeq] = []string{strconv.Itoa(i + 1)}
		if i == len(msgs)-1 {
			m.Header[hdrBatchCommit] = []string{"1"}
			m.Reply = reply
		}
		if err := s.nc.PublishMsg(m); err != nil {
			return nil, s.connErr(err)
		}
	}
	t := time.NewTimer(s.opts.Timeout)
	defer t.Stop()
	m, err := s.await(ctx, ch, t)
	if err != nil {
		return nil, fmt.Errorf("%w (the batch may or may not have been stored; a retry with the same events is answered from the duplicates window)", err)
	}
	a, err := s.readAck(m)
	if err != nil {
		var je *jsError
		if errors.As(err, &je) {
			switch je.e.ErrCode {
			case errAtomicDuplicate, errAtomicDisabled, errAtomicTooLarge, errAtomicBadHeader:
				if je.e.ErrCode == errAtomicDisabled {
					s.atomic.Store(false)
				}
				return nil, errFallback
			}
		}
		if a.Error != nil && a.Error.ErrCode == errAtomicTooInflight {
			return nil, &batchBusy{err}
		}
		return nil, err
	}
	n := len(msgs)
	if a.Count != n || a.Seq < uint64(n) {
		return nil, fmt.Errorf("NATS JetStream acknowledged a batch of %d events with count %d at sequence %d", n, a.Count, a.Seq)
	}
	acks := make([]ack, n)
	for i := range acks {
		acks[i] = ack{seq: a.Seq - uint64(n-1-i)}
	}
	return acks, nil
}

// maxInFlight bounds the messages this node has published and not yet seen acknowledged,
// all appends together: a publish waits for room (up to the store's timeout).
const maxInFlight = 4096

// publishEach publishes msgs one by one, pipelined with the publishes of other appends
// (see publisher, within maxInFlight), and waits for every acknowledgement; on an error,
// how many were stored too. The connection keeps their order, so the stream does too.
func (s *Store) publishEach(ctx context.Context, msgs []*nats.Msg) ([]ack, int, error) {
	r, sent, sendErr := s.pubs.publish(msgs, 0)
	if sent == 0 {
		return nil, 0, sendErr
	}
	res := s.pubs.wait(ctx, r)
	acks := make([]ack, len(msgs))
	var firstErr error
	stored := 0
	for i := range sent {
		if err := res[i].err; err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		acks[i] = res[i].ack
		stored++
	}
	if firstErr == nil && sent < len(msgs) {
		firstErr = sendErr
	}
	if firstErr != nil {
		return nil, stored, firstErr
	}
	return acks, len(msgs), nil
}

var errAckTimeout = unavailable("no acknowledgement from NATS in time")

// pubErr classifies an error of a publish.
func (s *Store) pubErr(err error) error {
	switch {
	case err == nil:
		return unavailable("the connection to NATS failed while publishing")
	case errors.Is(err, nats.ErrDisconnected):
		return unavailable("disconnected from NATS while publishing")
	}
	return s.jsErr(err)
}

// cursorsOf returns the cursors of the messages at seqs: from the ordered consumer's
// reports when it has seen them (it normally has within a millisecond or two), else read
// from the stream. A duplicate whose original retention has removed gets the cursor time
// of the next message: its cursor still sorts where the original did.
func (s *Store) cursorsOf(ctx context.Context, seqs []uint64, trusted bool) ([]cursor.Cursor, error) {
	var top uint64
	for _, q := range seqs {
		top = max(top, q)
	}
	if trusted {
		s.tr.waitFor(ctx, top, trackWait)
	}
	cs := make([]cursor.Cursor, len(seqs))
	lk := s.newLookup(ctx, max(top, s.headSeq()))
	lk.untracked = !trusted
	for i, q := range seqs {
		if ts, ok := s.tr.lookup(q); ok && trusted {
			cs[i] = cursor.New(ts, q, cursor.NodeWidth)
			continue
		}
		c, err := lk.at(q)
		if err != nil {
			return nil, err
		}
		cs[i] = cursor.New(c.TS, q, cursor.NodeWidth)
		if c.Seq == q && q > s.headSeq() && trusted {
			// The ordered consumer is behind (starting over elsewhere): what this node
			// stored is the head, for its own reads and its waiting readers.
			s.tr.note(q, c.TS, true)
		}
	}
	return cs, nil
}

func (s *Store) headSeq() uint64 {
	last, _ := s.tr.head()
	return last
}
