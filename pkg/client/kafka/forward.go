package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/evtctl/evtctl/pkg/client"
)

// forward is the state of the forward reader: the consumer and what it fetched ahead.
type forward struct {
	dec      *decoder
	active   bool
	pos      []int64         // the next offset to examine, by partition (all the topic's)
	queues   [][]*kgo.Record // fetched, not examined, by partition, in offset order
	jump     []int64         // where a partition goes on once its queue is examined (0: none)
	end      []int64         // the partitions' ends as last seen
	queued   int             // bytes in the queues
	assigned int             // partitions 0..assigned-1 are added to the consumer
	checked  time.Time       // when the partition count was last looked at
	batch    batch           // the records of a page whose items are built after they are taken
	decs     []*decoder      // more decoders, for building on several cores
}

// forwardPage serves a forward page.
func (s *Source) forwardPage(ctx context.Context, r client.PageRequest, m *matcher) (*client.Page, error) {
	after, err := ParsePosition(r.After)
	if err != nil {
		return nil, err
	}
	var through Position
	if r.Through != "" {
		if IsCursor(r.Through) {
			return nil, &CursorError{Text: r.Through, Msg: fmt.Sprintf("range end %q: a Kafka range ends at a position (one next offset per partition), not at one partition's record", clip(r.Through))}
		}
		if through, err = ParsePosition(r.Through); err != nil {
			return nil, err
		}
	}
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f := &s.fw
	var gap *lost
	switch {
	case !f.active || r.After == "" || !samePosition(after, f.pos):
		if gap, err = s.seek(ctx, after, r.After, r.NoGap); err != nil {
			f.active = false
			return nil, err
		}
	case time.Since(f.checked) > growthCheck:
		if err := s.grow(ctx); err != nil {
			return nil, err
		}
	}
	inRange := func(p int) bool { return through == nil || f.pos[p] < through.at(p, 0) }

	// Wait: the caller's, or for records the partitions are known to hold.
	wait := r.Wait
	if wait <= 0 {
		if !f.behind(inRange) {
			return s.forwardResult(nil, gap, inRange, nil), nil
		}
		wait = catchUpWait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()

	// Records are examined in timestamp order across partitions. A partition that is
	// known to hold more records but has none fetched (starved) is waited for, so that
	// its records take their place in that order: until wctx ends, after which what is
	// fetched is merged as it is.
	items := newItems(min(r.Max, 1024), r.Reuse)
	mem := &arena{reuse: r.Reuse}
	f.dec.mem = mem
	// Without a filter every record is an item: the records are taken first, and their
	// items built after, on several cores when there are many (see build).
	var later *batch
	if m.all {
		later = &f.batch
		later.reset()
	}
	n := 0 // the items of the page
	starved, waitedOut := f.starved(inRange), false
	for n < r.Max {
		p := f.next(through)
		if f.queued > maxQueued {
			// Partitions far apart in time: waiting for one would keep the others' records
			// without bound. Merge what is here (and fetch no more until it is taken).
			waitedOut = true
		}
		if p < 0 || starved && !waitedOut {
			behind := f.behind(inRange)
			blocking := wctx.Err() == nil && (starved || n == 0 && (r.Wait > 0 || behind))
			got, err := s.poll(ctx, wctx, blocking, &gap, r.After)
			if err != nil {
				return nil, err
			}
			starved = f.starved(inRange)
			switch {
			case got:
				continue
			case blocking && wctx.Err() == nil:
				continue // only errors came, and were handled
			case p >= 0:
				waitedOut = true
				continue
			case n == 0 && r.Wait <= 0 && behind && ctx.Err() == nil:
				return nil, errStuck
			}
			break
		}
		rec := f.queues[p][0]
		f.queues[p][0] = nil
		f.queues[p] = f.queues[p][1:]
		f.queued -= recordSize(rec)
		if rec.Offset < f.pos[p] {
			continue // fetched again after a seek
		}
		f.pos[p] = rec.Offset + 1
		if len(f.queues[p]) == 0 {
			if f.jump[p] > f.pos[p] {
				f.pos[p] = f.jump[p] // the records after the queued ones are gone
			}
			starved = f.pos[p] < f.end[p] && inRange(p)
		}
		if rec.Attrs.IsControl() {
			continue
		}
		if later != nil {
			later.add(rec, mem.text(f.pos))
			n++
			continue
		}
		b, ok := f.dec.build(rec, m)
		if !ok {
			continue
		}
		items = append(items, itemOf(b, mem.text(f.pos)))
		n++
	}
	var more []*arena
	if later != nil {
		items, more = f.build(later, m, items, r.Reuse)
	}
	p := s.forwardResult(items, gap, inRange, mem)
	if r.Reuse {
		p.OnRelease(func() {
			mem.release()
			for _, a := range more {
				a.release()
			}
			releaseItems(items)
		})
	}
	return p, nil
}

// maxQueued bounds the bytes of fetched records a reader holds while it waits for a
// partition to merge them with.
const maxQueued = 64 << 20

// recordSize is about the memory a fetched record holds.
func recordSize(r *kgo.Record) int {
	n := 128 + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 32 + len(h.Key) + len(h.Value)
	}
	return n
}

// forwardResult finishes a forward page.
func (s *Source) forwardResult(items []client.Item, gap *lost, inRange func(int) bool, mem *arena) *client.Page {
	mk := s.known()
	f := &s.fw
	p := &client.Page{
		Items:  items,
		More:   f.behind(inRange),
		Oldest: positionText(mk.start),
		Newest: positionText(mk.end),
		Next:   Position(f.pos).String(),
		Gap:    gap.gap(),
	}
	if mem != nil && mem.reuse {
		p.OnRelease(mem.release)
	}
	return p
}

// behind reports whether records are known to wait after the reader's position in a
// partition that is in range.
func (f *forward) behind(inRange func(int) bool) bool {
	for p := range f.pos {
		if inRange(p) && (len(f.queues[p]) > 0 || f.pos[p] < f.end[p]) {
			return true
		}
	}
	return false
}

// starved reports whether a partition in range is known to hold records after the
// reader's position of which none are fetched.
func (f *forward) starved(inRange func(int) bool) bool {
	for p := range f.pos {
		if inRange(p) && len(f.queues[p]) == 0 && f.pos[p] < f.end[p] {
			return true
		}
	}
	return false
}

// next picks the partition whose first queued record is the oldest by timestamp (the
// lower partition on a tie), among those whose first record is within the range; -1 when
// there is none.
func (f *forward) next(through Position) int {
	best := -1
	var bestTS time.Time
	for p, q := range f.queues {
		if len(q) == 0 {
			continue
		}
		if through != nil && q[0].Offset >= through.at(p, 0) {
			continue
		}
		if best < 0 || q[0].Timestamp.Before(bestTS) {
			best, bestTS = p, q[0].Timestamp
		}
	}
	return best
}

// samePosition reports whether a and b name the same offsets.
func samePosition(a Position, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// seek points the consumer at after (the log start where after names no partition),
// reporting a gap where a partition's log start moved past it.
func (s *Source) seek(ctx context.Context, after Position, afterText string, noGap bool) (*lost, error) {
	mk, err := s.refresh(ctx)
	if err != nil {
		return nil, err
	}
	n := len(mk.start)
	if len(after) > n {
		return nil, &TopicError{Node: s.node, Msg: fmt.Sprintf("the position names %d partitions, but topic %q has %d: it is another topic's, or the topic was made again", len(after), s.cfg.Topic, n)}
	}
	var gap *lost
	target := make([]int64, n)
	for p := range n {
		a := after.at(p, -1)
		switch {
		case a < 0:
			target[p] = mk.start[p] // a partition the position does not know: from its start
		case a > mk.end[p]:
			return nil, &TopicError{Node: s.node, Msg: fmt.Sprintf("the position is past the end of partition %d (offset %d; the log ends at %d): it is another topic's, or the topic was made again", p, a, mk.end[p])}
		case a < mk.start[p]:
			target[p] = mk.start[p]
			if !noGap {
				if gap == nil {
					gap = &lost{after: afterText}
				}
				gap.add(partLoss{partition: int32(p), from: a, to: mk.start[p], why: belowStart(mk.start[p])})
			}
		default:
			target[p] = a
		}
	}
	if gap != nil {
		gap.oldest, gap.newest = positionText(mk.start), positionText(mk.end)
	}
	s.assign(target)
	s.fw.end = append([]int64(nil), mk.end...)
	return gap, nil
}

// assign points the consumer at target, adding the partitions it does not consume yet.
func (s *Source) assign(target []int64) {
	f := &s.fw
	set := map[int32]kgo.EpochOffset{}
	add := map[int32]kgo.Offset{}
	for p, o := range target {
		if p < f.assigned {
			set[int32(p)] = kgo.EpochOffset{Epoch: -1, Offset: o}
		} else {
			add[int32(p)] = kgo.NewOffset().At(o)
		}
	}
	if len(set) > 0 {
		s.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{s.cfg.Topic: set})
	}
	if len(add) > 0 {
		s.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{s.cfg.Topic: add})
		f.assigned = len(target)
	}
	f.pos = target
	f.queues = make([][]*kgo.Record, len(target))
	f.queued = 0
	f.jump = make([]int64, len(target))
	f.active = true
	f.checked = time.Now()
}

// grow adds partitions the topic gained since the reader started, from their log start.
func (s *Source) grow(ctx context.Context) error {
	f := &s.fw
	mk, err := s.refresh(ctx)
	if err != nil {
		return err
	}
	f.checked = time.Now()
	if len(mk.start) <= len(f.pos) {
		return nil
	}
	add := map[int32]kgo.Offset{}
	for p := len(f.pos); p < len(mk.start); p++ {
		add[int32(p)] = kgo.NewOffset().At(mk.start[p])
		f.pos = append(f.pos, mk.start[p])
		f.queues = append(f.queues, nil)
		f.jump = append(f.jump, 0)
		f.end = append(f.end, mk.end[p])
	}
	s.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{s.cfg.Topic: add})
	f.assigned = len(f.pos)
	return nil
}

// poll takes fetched records into the queues. blocking waits for them until wctx ends;
// otherwise only what is fetched already is taken. It reports whether any record came.
// A partition whose log start passed the reader is reported in *gap and read on from its
// log start.
func (s *Source) poll(ctx, wctx context.Context, blocking bool, gap **lost, afterText string) (bool, error) {
	f := &s.fw
	var fs kgo.Fetches
	if blocking {
		fs = s.cl.PollRecords(wctx, 0)
	} else {
		//lint:ignore SA1012 a nil context takes what is fetched already, without waiting
		fs = s.cl.PollRecords(nil, 0)
	}
	got := false
	var outOfRange []int32
	for _, ft := range fs {
		for _, t := range ft.Topics {
			for i := range t.Partitions {
				fp := &t.Partitions[i]
				if fp.Err != nil {
					if t.Topic == "" && (errors.Is(fp.Err, context.DeadlineExceeded) || errors.Is(fp.Err, context.Canceled)) {
						if ctx.Err() != nil {
							return false, ctx.Err()
						}
						continue // the wait ended
					}
					if errors.Is(fp.Err, kerr.OffsetOutOfRange) && t.Topic == s.cfg.Topic {
						outOfRange = append(outOfRange, fp.Partition)
						continue
					}
					var dl *kgo.ErrDataLoss
					if errors.As(fp.Err, &dl) && t.Topic == s.cfg.Topic {
						if *gap == nil {
							*gap = &lost{after: afterText}
						}
						(*gap).add(partLoss{partition: fp.Partition, from: dl.ConsumedTo, to: -1,
							why: fmt.Sprintf("the log was truncated at offset %d (records from there on may be lost or replaced); reading goes on at offset %d", dl.ConsumedTo, dl.ResetTo)})
						continue
					}
					if t.Topic == "" || t.Topic == s.cfg.Topic {
						return false, s.classify(fp.Err)
					}
					continue
				}
				if t.Topic != s.cfg.Topic || int(fp.Partition) >= len(f.queues) {
					continue
				}
				end := lastStable(fp)
				s.note(fp.Partition, fp.LogStartOffset, end)
				if end >= 0 {
					f.end[fp.Partition] = end
				}
				if len(fp.Records) > 0 {
					f.queues[fp.Partition] = append(f.queues[fp.Partition], fp.Records...)
					for _, r := range fp.Records {
						f.queued += recordSize(r)
					}
					got = true
				}
			}
		}
	}
	if len(outOfRange) > 0 {
		if err := s.lostStart(ctx, outOfRange, gap, afterText); err != nil {
			return false, err
		}
	}
	return got, nil
}

// lastStable is the end of a fetched partition a read-committed reader sees.
func lastStable(fp *kgo.FetchPartition) int64 {
	if fp.LastStableOffset >= 0 {
		return fp.LastStableOffset
	}
	return fp.HighWatermark
}

// lostStart handles partitions whose fetch offset fell below the log start: the records
// from the reader's next offset up to the new start are reported lost, and the partition
// is read on from there.
func (s *Source) lostStart(ctx context.Context, parts []int32, gap **lost, afterText string) error {
	f := &s.fw
	mk, err := s.refresh(ctx)
	if err != nil {
		return err
	}
	set := map[int32]kgo.EpochOffset{}
	for _, p := range parts {
		if int(p) >= len(f.pos) || int(p) >= len(mk.start) {
			continue
		}
		// The consumer fetched at the offset after what is queued.
		from := f.pos[p]
		if q := f.queues[p]; len(q) > 0 {
			from = q[len(q)-1].Offset + 1
		}
		start := mk.start[p]
		if start > from {
			if *gap == nil {
				*gap = &lost{after: afterText}
			}
			(*gap).add(partLoss{partition: p, from: from, to: start, why: belowStart(start)})
			if len(f.queues[p]) == 0 {
				f.pos[p] = start
			} else {
				f.jump[p] = start
			}
		} else {
			start = from
		}
		set[p] = kgo.EpochOffset{Epoch: -1, Offset: start}
	}
	if *gap != nil {
		(*gap).oldest, (*gap).newest = positionText(mk.start), positionText(mk.end)
	}
	s.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{s.cfg.Topic: set})
	return nil
}
