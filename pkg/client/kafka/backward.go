package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/client"
)

// Backward pages read each partition's records just below the position by offset
// arithmetic: a window of offsets below Before in every partition, fetched directly from
// the partitions' leaders (the forward reader's consumer is left alone, so a terminal can
// scroll back while it tails), merged newest first by timestamp.

// backward serves a backward page.
func (s *Source) backward(ctx context.Context, r client.PageRequest, m *matcher) (*client.Page, error) {
	before, err := ParsePosition(r.Before)
	if err != nil {
		return nil, err
	}
	lower, err := ParsePosition(r.After)
	if err != nil {
		return nil, err
	}
	td, mk, err := s.refreshTopic(ctx)
	if err != nil {
		return nil, err
	}
	n := len(mk.start)
	if len(before) > n || len(lower) > n {
		return nil, &TopicError{Node: s.node, Msg: fmt.Sprintf("the position names more partitions than topic %q has (%d): it is another topic's, or the topic was made again", s.cfg.Topic, n)}
	}
	hi, lo := make([]int64, n), make([]int64, n)
	for p := range n {
		hi[p] = mk.end[p]
		if r.Before != "" {
			hi[p] = before.at(p, mk.start[p])
			if hi[p] > mk.end[p] {
				return nil, &TopicError{Node: s.node, Msg: fmt.Sprintf("the position is past the end of partition %d (offset %d; the log ends at %d): it is another topic's, or the topic was made again", p, hi[p], mk.end[p])}
			}
		}
		lo[p] = max(lower.at(p, mk.start[p]), mk.start[p])
	}
	window := int64(r.Max)
	if !m.all {
		window = int64(min(max(r.Max*4, 256), 8192)) // a filter passes fewer
	}
	queues, from, err := s.fetchBelow(ctx, td, lo, hi, window)
	if err != nil {
		return nil, err
	}

	cur := append([]int64(nil), hi...) // every record from cur[p] on is examined
	dec := newDecoder(s.cfg.Topic)
	items := make([]client.Item, 0, min(r.Max, 1024))
	mem := &arena{reuse: r.Reuse}
	dec.mem = mem
	for len(items) < r.Max {
		p := newestHead(queues)
		if p < 0 {
			break
		}
		q := queues[p]
		rec := q[len(q)-1]
		q[len(q)-1] = nil
		queues[p] = q[:len(q)-1]
		if !rec.Attrs.IsControl() {
			if b, ok := dec.build(rec, m); ok {
				// Its position: every record newer than it in this merge is left out, it
				// and every older one are in.
				cur[p] = rec.Offset + 1
				items = append(items, itemOf(b, mem.text(cur)))
			}
		}
		cur[p] = rec.Offset
		drained := len(queues[p]) == 0
		if drained {
			cur[p] = from[p] // the holes below the lowest record too
		}
		if drained && from[p] > lo[p] {
			// The partition has older records that this page did not fetch: going on
			// would put other partitions' records before them out of order.
			break
		}
	}
	more := false
	for p := range cur {
		if cur[p] > lo[p] {
			more = true
		}
	}
	page := &client.Page{
		Items:  items,
		More:   more,
		Oldest: positionText(mk.start),
		Newest: positionText(mk.end),
		Next:   Position(cur).String(),
	}
	if r.Reuse {
		page.OnRelease(mem.release)
	}
	return page, nil
}

// newestHead picks the partition whose newest unexamined record has the latest
// timestamp (the higher partition on a tie, the reverse of forward pages); -1 when every
// queue is empty.
func newestHead(queues [][]*kgo.Record) int {
	best := -1
	var bestTS time.Time
	for p, q := range queues {
		if len(q) == 0 {
			continue
		}
		ts := q[len(q)-1].Timestamp
		if best < 0 || !ts.Before(bestTS) {
			best, bestTS = p, ts
		}
	}
	return best
}

// refreshTopic is refresh with the topic's metadata (its leaders).
func (s *Source) refreshTopic(ctx context.Context) (kadm.TopicDetail, marks, error) {
	mk, err := s.refresh(ctx)
	if err != nil {
		return kadm.TopicDetail{}, marks{}, err
	}
	td, err := s.topic(ctx)
	if err != nil {
		return kadm.TopicDetail{}, marks{}, err
	}
	if len(td.Partitions) != len(mk.start) {
		// The topic grew between the two: list again.
		if mk, err = s.refresh(ctx); err != nil {
			return kadm.TopicDetail{}, marks{}, err
		}
		if len(td.Partitions) != len(mk.start) {
			return kadm.TopicDetail{}, marks{}, fmt.Errorf("kafka: the partitions of %q are changing", s.cfg.Topic)
		}
	}
	return td, mk, nil
}

// fetchBelow fetches, for each partition, the records of a window of offsets below
// hi[p], not below lo[p]: at least one record where there is one, going further down as far
// as holes (compaction, aborted transactions) need. It returns them in offset order, and
// where each window starts.
func (s *Source) fetchBelow(ctx context.Context, td kadm.TopicDetail, lo, hi []int64, window int64) ([][]*kgo.Record, []int64, error) {
	n := len(lo)
	queues := make([][]*kgo.Record, n)
	from := make([]int64, n)
	top := append([]int64(nil), hi...)
	want := map[int32][2]int64{}
	for p := range n {
		from[p] = max(lo[p], hi[p]-window)
		if from[p] < hi[p] {
			want[int32(p)] = [2]int64{from[p], hi[p]}
		}
	}
	for round := 0; len(want) > 0; round++ {
		got, err := s.fetchRange(ctx, td, want)
		if err != nil {
			return nil, nil, err
		}
		next := map[int32][2]int64{}
		for p, rng := range want {
			recs := got[p]
			queues[p] = append(recs, queues[p]...)
			if len(queues[p]) > 0 || rng[0] <= lo[p] || round >= 16 {
				continue
			}
			// Only holes in the window: look further down.
			top[p] = rng[0]
			from[p] = max(lo[p], top[p]-window*(1<<min(round+1, 10)))
			next[p] = [2]int64{from[p], top[p]}
		}
		want = next
	}
	return queues, from, nil
}

// fetchRange fetches the records of each partition p at offsets rng[0] ≤ o < rng[1],
// directly from the partitions' leaders.
func (s *Source) fetchRange(ctx context.Context, td kadm.TopicDetail, want map[int32][2]int64) (map[int32][]*kgo.Record, error) {
	got := map[int32][]*kgo.Record{}
	at := map[int32]int64{}
	for p, rng := range want {
		at[p] = rng[0]
	}
	for attempt := 0; len(at) > 0; attempt++ {
		if attempt > 0 && attempt%8 == 0 {
			var err error
			if td, err = s.topic(ctx); err != nil { // leaders moved
				return nil, err
			}
		}
		if attempt >= 64 {
			return nil, fmt.Errorf("kafka: cannot fetch the records below the position from partitions %v", keys(at))
		}
		byLeader := map[int32][]int32{}
		for p := range at {
			pd, ok := td.Partitions[p]
			if !ok || pd.Leader < 0 {
				byLeader[-1] = append(byLeader[-1], p)
				continue
			}
			byLeader[pd.Leader] = append(byLeader[pd.Leader], p)
		}
		if _, leaderless := byLeader[-1]; leaderless {
			delete(byLeader, -1)
			if len(byLeader) == 0 {
				if err := retry.Sleep(ctx, 250*time.Millisecond); err != nil {
					return nil, err
				}
				continue
			}
		}
		for leader, parts := range byLeader {
			if err := s.fetchFrom(ctx, leader, td.ID, parts, want, at, got); err != nil {
				return nil, err
			}
		}
	}
	return got, nil
}

// fetchFrom sends one fetch to a leader for parts, from at[p], taking the records below
// want[p][1] into got and moving at[p] on; a partition that is done leaves at.
func (s *Source) fetchFrom(ctx context.Context, leader int32, id kadm.TopicID, parts []int32, want map[int32][2]int64, at map[int32]int64, got map[int32][]*kgo.Record) error {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = fetchMaxBytes
	req.IsolationLevel = 1 // read committed
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = s.cfg.Topic, id
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rp.FetchOffset = at[p]
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = fetchMaxPartitionBytes
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	cl, err := s.directClient()
	if err != nil {
		return err
	}
	kresp, err := cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return s.classify(err)
	}
	s.answered.Store(true)
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return s.classify(err)
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != s.cfg.Topic && t.TopicID != id {
			continue
		}
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			p := rp.Partition
			from, ok := at[p]
			if !ok {
				continue
			}
			end := want[p][1]
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				switch {
				case err == kerr.OffsetOutOfRange && rp.LogStartOffset > from:
					at[p] = rp.LogStartOffset // records went while we looked: start higher
					if at[p] >= end {
						delete(at, p)
					}
				case kerr.IsRetriable(err):
					// a leader moving: asked again (with fresh metadata now and then)
				default:
					return s.classify(err)
				}
				continue
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset: from, IsolationLevel: kgo.ReadCommitted(), Topic: s.cfg.Topic, Partition: p,
			}, rp, s.dec, nil)
			if fp.Err != nil {
				return fmt.Errorf("kafka: partition %d at offset %d: %w", p, from, fp.Err)
			}
			for _, rec := range fp.Records {
				if rec.Offset >= end {
					break
				}
				got[p] = append(got[p], rec)
			}
			switch {
			case next >= end || rp.HighWatermark <= next && len(fp.Records) == 0:
				delete(at, p)
			case next > from:
				at[p] = next
			case len(rp.RecordBatches) == 0 && rp.HighWatermark <= from:
				delete(at, p)
			}
		}
	}
	return nil
}

func keys(m map[int32]int64) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
