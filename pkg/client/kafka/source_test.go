package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/wire"
)

// walk reads forward from after in pages of max until a page says no more, and returns
// the items and the last Next.
func walk(t *testing.T, s *Source, after string, max int, query string) ([]client.Item, string) {
	t.Helper()
	var items []client.Item
	for i := 0; ; i++ {
		if i > 100000 {
			t.Fatal("the walk does not end")
		}
		p := page(t, s, client.PageRequest{After: after, Max: max, Query: query})
		if p.Gap != nil {
			t.Fatalf("unexpected gap after %q: %s", after, p.Gap)
		}
		if len(p.Items) > max {
			t.Fatalf("page of %d items for max %d", len(p.Items), max)
		}
		items = append(items, p.Items...)
		after = p.Next
		if !p.More {
			return items, after
		}
	}
}

// checkExactlyOnce checks that items hold offsets 0..per-1 of every partition once, each
// partition in offset order.
func checkExactlyOnce(t *testing.T, items []client.Item, parts int, per int64) {
	t.Helper()
	next := make([]int64, parts)
	for _, it := range items {
		p, o, err := ParseCursor(it.Cursor)
		if err != nil {
			t.Fatal(err)
		}
		if o != next[p] {
			t.Fatalf("partition %d: item %s after offset %d: out of order, repeated or skipped", p, it.Cursor, next[p]-1)
		}
		next[p]++
	}
	for p, n := range next {
		if n != per {
			t.Errorf("partition %d: %d items, want %d", p, n, per)
		}
	}
}

func TestForwardEveryRecordOnce(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.cl = k.client(manualPartitioner())
	k.topic("walk", 3)
	const per = 50
	var recs []*kgo.Record
	for i := range per * 3 {
		recs = append(recs, oedxRecord("walk", int32(i%3), i))
	}
	if err := k.cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	s := k.source("walk")
	for _, max := range []int{1, 7, 1000} {
		items, next := walk(t, s, "", max, "")
		checkExactlyOnce(t, items, 3, per)
		if next != "50,50,50" {
			t.Errorf("max %d: Next after the walk = %q, want 50,50,50", max, next)
		}
		// Each item's Pos is where to go on from: resuming from one in the middle
		// yields exactly the rest.
		mid := items[len(items)/3]
		rest, _ := walk(t, s, mid.Pos, max, "")
		if want := items[len(items)/3+1:]; len(rest) != len(want) {
			t.Fatalf("max %d: resuming at %s gave %d items, want %d", max, mid.Pos, len(rest), len(want))
		}
		seen := map[string]bool{}
		for _, it := range items[:len(items)/3+1] {
			seen[it.Cursor] = true
		}
		for _, it := range rest {
			if seen[it.Cursor] {
				t.Fatalf("max %d: resuming at %s repeated %s", max, mid.Pos, it.Cursor)
			}
			seen[it.Cursor] = true
		}
		if len(seen) != per*3 {
			t.Fatalf("max %d: %d distinct items before and after the resume, want %d", max, len(seen), per*3)
		}
	}
	// The item: the CloudEvent of the headers, data as sent.
	it := page(t, s, client.PageRequest{After: "", Max: 1}).Items[0]
	ev := eventOf(t, it)
	if it.Event != "org.openedx.learning.course.enrollment.created.v1" || ev["sourcehost"] != "lms-1.example.com" ||
		ev["datacontenttype"] != "application/json" || ev["specversion"] != "1.0" || ev["source"] != "openedx/lms/web" {
		t.Errorf("item %s", it.Raw)
	}
}

// TestForwardWhileProducing tails with long-polls while three producers write: every record
// exactly once, each partition in order.
func TestForwardWhileProducing(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("live", 3)
	s := k.source("live")
	_, pos, err := s.Bounds(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if pos != "0,0,0" {
		t.Fatalf("head of an empty topic = %q", pos)
	}
	const per = 150
	prod := k.client(manualPartitioner(), kgo.ProducerLinger(0))
	var wg sync.WaitGroup
	for p := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if err := prod.ProduceSync(context.Background(), oedxRecord("live", int32(p), p*per+i)).FirstErr(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var items []client.Item
	testwait.Until(t, "every record", func() bool {
		pg := page(t, s, client.PageRequest{After: pos, Max: 50, Wait: 2 * time.Second})
		items = append(items, pg.Items...)
		pos = pg.Next
		return len(items) >= per*3
	})
	wg.Wait()
	pg := page(t, s, client.PageRequest{After: pos, Max: 50})
	items = append(items, pg.Items...)
	checkExactlyOnce(t, items, 3, per)
}

// TestForwardInterleavesByTimestamp: partitions interleave by record time. A partition
// known to hold more records (here, from the listing when the reader starts) is waited for
// when a fetch brought none of it, so the order is exact whatever the fetches bring.
func TestForwardInterleavesByTimestamp(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.cl = k.client(manualPartitioner())
	k.topic("ts", 3)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	// Partition 0 gets times 0, 3, 6, …; 1 gets 1, 4, …; 2 gets 2, 5, …
	for i := range 30 {
		r := oedxRecord("ts", int32(i%3), i)
		r.Timestamp = base.Add(time.Duration(i) * time.Second)
		k.produce(r) // one batch each, so that fetches can bring a partition's records apart
	}
	s := k.source("ts")
	p := page(t, s, client.PageRequest{Max: 100})
	if len(p.Items) != 30 {
		t.Fatalf("%d items", len(p.Items))
	}
	for i, it := range p.Items {
		if want := fmt.Sprintf("%d/%d", i%3, i/3); it.Cursor != want {
			t.Fatalf("item %d is %s, want %s (timestamp order)", i, it.Cursor, want)
		}
	}
}

// fillTopic writes n records to each of parts partitions, in order p0, p1, p2, p0, …
func fillTopic(t *testing.T, k *cluster, topic string, parts, n int) {
	t.Helper()
	cl := k.client(manualPartitioner())
	var recs []*kgo.Record
	base := time.Now().Add(-time.Hour)
	for i := range parts * n {
		r := oedxRecord(topic, int32(i%parts), i)
		r.Timestamp = base.Add(time.Duration(i) * time.Millisecond) // round robin by time
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// deleteBelow moves partition p's log start to offset o.
func (k *cluster) deleteBelow(topic string, p int32, o int64) {
	k.t.Helper()
	var os kadmOffsets
	os.add(topic, p, o)
	resp, err := k.adm.DeleteRecords(context.Background(), os.o)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		k.t.Fatal(err)
	}
}

// TestGapAfterDeleteRecords: records deleted while the reader is stopped are reported
// with their offsets, exactly; a made-up position (NoGap) reports none.
func TestGapAfterDeleteRecords(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("gap", 3)
	fillTopic(t, k, "gap", 3, 20)
	// A reader stopped at 5,5,5 (one that goes on has the records it fetched before they
	// went; TestGapWhileReading is that case).
	p := &client.Page{Next: "5,5,5"}
	k.deleteBelow("gap", 1, 12)
	k.deleteBelow("gap", 2, 6)
	s2 := k.source("gap")
	for _, src := range []*Source{s2} {
		g := page(t, src, client.PageRequest{After: p.Next, Max: 100})
		if g.Gap == nil {
			t.Fatal("no gap reported")
		}
		if g.Gap.Lost != 8 || g.Gap.Kind != client.GapLost {
			t.Fatalf("gap %+v", g.Gap)
		}
		if g.Gap.After != "5,5,5" || g.Gap.Oldest != "0,12,6" || g.Gap.Newest != "20,20,20" {
			t.Errorf("gap bounds %+v", g.Gap)
		}
		if d := g.Gap.Detail; d != "partition 1: offsets 5–11 (7 records) are gone, below the partition's log start, 12 (retention or deleted records); partition 2: offset 5 (1 record) is gone, below the partition's log start, 6 (retention or deleted records)" {
			t.Errorf("description %q", d)
		}
		if len(g.Items) != 15+8+14 || g.Next != "20,20,20" {
			t.Errorf("after the gap: %d items, Next %q", len(g.Items), g.Next)
		}
	}
	// NoGap: the position was made up.
	g := page(t, s2, client.PageRequest{After: "5,5,5", NoGap: true, Max: 100})
	if g.Gap != nil {
		t.Errorf("gap reported after a made-up position: %+v", g.Gap)
	}
}

// TestGapWhileReading: the log start passes a reader between two of its pages (the
// consumer's fetch falls out of range).
func TestGapWhileReading(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("gap2", 1)
	fillTopic(t, k, "gap2", 1, 10)
	// Fetches from offset 10 on wait until the records they would get are gone.
	release := make(chan struct{})
	k.c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.c.KeepControl()
		for _, t := range req.(*kmsg.FetchRequest).Topics {
			for _, p := range t.Partitions {
				if p.FetchOffset >= 10 {
					k.c.SleepControl(func() { <-release })
					return nil, nil, false
				}
			}
		}
		return nil, nil, false
	})
	s := k.source("gap2")
	p := page(t, s, client.PageRequest{Max: 10})
	if p.Next != "10" {
		t.Fatalf("Next %q", p.Next)
	}
	fillTopic(t, k, "gap2", 1, 10) // offsets 10..19
	k.deleteBelow("gap2", 0, 15)
	close(release)
	var items []client.Item
	var gap *client.Gap
	pos := p.Next
	for len(items) < 5 {
		g := page(t, s, client.PageRequest{After: pos, Max: 100, Wait: 5 * time.Second})
		if g.Gap != nil {
			gap = g.Gap
		}
		items = append(items, g.Items...)
		pos = g.Next
	}
	if gap == nil || gap.Lost != 5 || gap.Detail != "partition 0: offsets 10–14 (5 records) are gone, below the partition's log start, 15 (retention or deleted records)" {
		t.Fatalf("gap %+v", gap)
	}
	if len(items) != 5 || items[0].Cursor != "0/15" || pos != "20" {
		t.Fatalf("%d items from %s, Next %s", len(items), items[0].Cursor, pos)
	}
}

// TestCompactionHolesAreNoGap: a compacted topic's missing offsets are no loss.
func TestCompactionHolesAreNoGap(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("compact", 1, "cleanup.policy", "compact", "min.cleanable.dirty.ratio", "0", "delete.retention.ms", "0")
	// offset 0: key a (kept); 1..8: key b (all but the last superseded); 9: key c (last batch)
	recs := []*kgo.Record{{Topic: "compact", Key: []byte("a"), Value: []byte(`{"v":0}`)}}
	for i := 1; i <= 8; i++ {
		recs = append(recs, &kgo.Record{Topic: "compact", Key: []byte("b"), Value: fmt.Appendf(nil, `{"v":%d}`, i)})
	}
	recs = append(recs, &kgo.Record{Topic: "compact", Key: []byte("c"), Value: []byte(`{"v":9}`)})
	k.produce(recs...)
	s := k.source("compact")
	first := page(t, s, client.PageRequest{Max: 3}) // 0, 1, 2
	if first.Next != "3" {
		t.Fatalf("Next %q", first.Next)
	}
	k.c.Compact()
	start, _, err := s.Bounds(ctxT(t))
	if err != nil || start != "0" {
		t.Fatalf("log start after compaction %q, %v: the test needs it unmoved", start, err)
	}
	// A reader that fetched before the compaction has the records it fetched; one that
	// fetches after it meets the holes. Neither has a gap.
	if g := page(t, s, client.PageRequest{After: first.Next, Max: 100}); g.Gap != nil || g.Next != "10" {
		t.Fatalf("the reader that fetched ahead: gap %v, Next %s", g.Gap, g.Next)
	}
	for _, src := range []*Source{k.source("compact")} {
		g := page(t, src, client.PageRequest{After: first.Next, Max: 100})
		if g.Gap != nil {
			t.Fatalf("compaction reported as a gap: %s", g.Gap)
		}
		var got []string
		for _, it := range g.Items {
			got = append(got, it.Cursor)
		}
		if fmt.Sprint(got) != "[0/8 0/9]" || g.Next != "10" {
			t.Errorf("after compaction: %v, Next %s", got, g.Next)
		}
	}
	all, _ := walk(t, k.source("compact"), "", 2, "")
	if len(all) != 3 {
		t.Errorf("a walk of the compacted topic: %d items, want 3", len(all))
	}
}

func TestStartingPoints(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.cl = k.client(manualPartitioner())
	k.topic("start", 2)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := range 10 {
		r := oedxRecord("start", int32(i%2), i)
		r.Timestamp = base.Add(time.Duration(i) * time.Minute)
		k.produce(r)
	}
	k.deleteBelow("start", 0, 1)
	s := k.source("start")
	ctx := ctxT(t)
	if oldest, newest, err := s.Bounds(ctx); oldest != "1,0" || newest != "5,5" || err != nil {
		t.Errorf("Bounds = %q, %q, %v; want 1,0 and 5,5", oldest, newest, err)
	}
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{base.Add(5 * time.Minute), "3,2"}, // records 6 (p0 offset 3) and 5 (p1 offset 2)
		{base.Add(4*time.Minute + time.Second), "3,2"},
		{base.Add(4 * time.Minute), "2,2"},
		{base.Add(4*time.Minute + time.Nanosecond), "3,2"}, // the record at 4m is before it
		{base.Add(4*time.Minute - time.Nanosecond), "2,2"},
		{base.Add(-time.Hour), "1,0"},
		{base.Add(time.Hour), "5,5"},
	} {
		got, err := s.At(ctx, c.at)
		if err != nil || got != c.want {
			t.Errorf("At(%v) = %q, %v; want %q", c.at, got, err, c.want)
		}
	}
	pos, _ := s.At(ctx, base.Add(5*time.Minute))
	p := page(t, s, client.PageRequest{After: pos, NoGap: true, Max: 100})
	var got []string
	for _, it := range p.Items {
		got = append(got, it.Cursor)
	}
	if fmt.Sprint(got) != "[1/2 0/3 1/3 0/4 1/4]" {
		t.Errorf("from the time: %v", got)
	}
}

// TestBackward pages newest first from the head: every record once, newest first by
// timestamp (which fillTopic makes round robin), and Pos resumes.
func TestBackward(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("back", 3)
	fillTopic(t, k, "back", 3, 20)
	k.deleteBelow("back", 2, 5)
	s := k.source("back")
	var fwd []client.Item // in timestamp order: partition i%3, offset i/3
	for i := range 60 {
		if i%3 == 2 && i/3 < 5 {
			continue // deleted
		}
		fwd = append(fwd, client.Item{Item: wire.Item{Cursor: fmt.Sprintf("%d/%d", i%3, i/3)}})
	}
	page(t, s, client.PageRequest{Max: 1000, Wait: time.Second}) // a forward reader long-polls meanwhile
	for _, max := range []int{1, 7, 500} {
		var back []client.Item
		before := ""
		for i := 0; ; i++ {
			p := page(t, s, client.PageRequest{Backward: true, Before: before, Max: max})
			back = append(back, p.Items...)
			before = p.Next
			if !p.More {
				break
			}
			if i > 1000 {
				t.Fatal("the backward walk does not end")
			}
		}
		if len(back) != len(fwd) {
			t.Fatalf("max %d: %d items backward, %d forward", max, len(back), len(fwd))
		}
		for i := range back {
			if back[i].Cursor != fwd[len(fwd)-1-i].Cursor {
				t.Fatalf("max %d: backward item %d is %s, want %s", max, i, back[i].Cursor, fwd[len(fwd)-1-i].Cursor)
			}
		}
		if before != "0,0,5" {
			t.Errorf("max %d: the backward walk ends at %q, want the log start 0,0,5", max, before)
		}
		// Pos of a backward item is the position right after it, as forward; the
		// position before it is where to go on backward from.
		mid := back[len(back)/2]
		rest := page(t, s, client.PageRequest{Backward: true, Before: s.PosBefore(mid), Max: 1})
		if len(rest.Items) != 1 || rest.Items[0].Cursor != back[len(back)/2+1].Cursor {
			t.Errorf("max %d: backward from %s (before it %s): %v", max, mid.Cursor, s.PosBefore(mid), rest.Items)
		}
		again := page(t, s, client.PageRequest{Backward: true, Before: mid.Pos, Max: 1})
		if len(again.Items) != 1 || again.Items[0].Cursor != mid.Cursor {
			t.Errorf("max %d: backward from after %s (Pos %s): %v", max, mid.Cursor, mid.Pos, again.Items)
		}
	}
	// Bounded below by After.
	p := page(t, s, client.PageRequest{Backward: true, Before: "20,20,20", After: "18,19,20", Max: 100})
	var got []string
	for _, it := range p.Items {
		got = append(got, it.Cursor)
	}
	if fmt.Sprint(got) != "[1/19 0/19 0/18]" || p.More {
		t.Errorf("bounded backward page %v, more %v", got, p.More)
	}
}

func TestFilters(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("filt", 2)
	cl := k.client(manualPartitioner())
	types := []string{"org.openedx.learning.course.enrollment.created.v1", "org.openedx.content_authoring.xblock.published.v1"}
	for i := range 40 {
		r := oedxRecord("filt", int32(i%2), i)
		r.Headers[0].Value = []byte(types[i%3%2])
		if i%5 == 0 {
			r.Headers = nil // no CloudEvent: made from the record, type "filt"
		}
		if err := cl.ProduceSync(ctxT(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	s := k.source("filt")
	all, _ := walk(t, s, "", 1000, "")
	for _, q := range []string{
		"type MATCHES 'org.openedx.learning.#'",
		"type = 'filt'",
		"NOT type = 'filt'",
		"data.n > 30",
		"notcloudevent EXISTS",
		"kafkapartition = '1' OR sourcehost = 'lms-1.example.com'",
		"id = '0/0' OR id = 'id-3'",
	} {
		want := 0
		m, err := compileQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range all {
			if m.q.MatchJSON(it.Data) {
				want++
			}
		}
		got, _ := walk(t, s, "", 3, q)
		if len(got) != want || want == 0 {
			t.Errorf("query %q: %d items, want %d (of %d)", q, len(got), want, len(all))
		}
		for _, it := range got {
			if !m.q.MatchJSON(it.Data) {
				t.Errorf("query %q: item %s does not match", q, it.Data)
			}
		}
	}
	var qe *client.QueryError
	if _, err := s.Page(ctxT(t), client.PageRequest{Max: 1, Query: "type = "}); !errors.As(err, &qe) {
		t.Errorf("a broken query: %v", err)
	}
}

func TestPartitionsAdded(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("grow", 1)
	fillTopic(t, k, "grow", 1, 3)
	s := k.source("grow")
	p := page(t, s, client.PageRequest{Max: 10})
	if p.Next != "3" {
		t.Fatalf("Next %q", p.Next)
	}
	if _, err := k.adm.CreatePartitions(ctxT(t), 1, "grow"); err != nil {
		t.Fatal(err)
	}
	cl := k.client(manualPartitioner())
	if err := cl.ProduceSync(ctxT(t), oedxRecord("grow", 1, 100), oedxRecord("grow", 1, 101)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	k.deleteBelow("grow", 1, 1)
	// A reader from an old position reads the new partition from its log start.
	p2 := page(t, k.source("grow"), client.PageRequest{After: "3", Max: 10})
	if len(p2.Items) != 1 || p2.Items[0].Cursor != "1/1" || p2.Next != "3,2" || p2.Gap != nil {
		t.Errorf("a reader started again: %v, Next %s, gap %v", p2.Items, p2.Next, p2.Gap)
	}
	// A reader that goes on finds it too, once it looks (and its client's metadata,
	// which it keeps for a second, shows the new partition).
	var p3 *client.Page
	testwait.Until(t, "the new partition's record", func() bool {
		s.fmu.Lock()
		s.fw.checked = time.Time{}
		s.fmu.Unlock()
		p3 = page(t, s, client.PageRequest{After: "3", Max: 10, Wait: 100 * time.Millisecond})
		return len(p3.Items) > 0
	})
	if len(p3.Items) != 1 || p3.Items[0].Cursor != "1/1" || p3.Next != "3,2" {
		t.Errorf("the reader that went on: %v, Next %s", p3.Items, p3.Next)
	}
}

// TestIdentityAndRecreatedTopic: a checkpoint's identity names the topic and its id; a
// topic deleted and made again, or another topic, is refused, for good.
func TestIdentityAndRecreatedTopic(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("ident", 2)
	k.topic("other", 2)
	fillTopic(t, k, "ident", 2, 5)
	s := k.source("ident")
	ctx := ctxT(t)
	p := page(t, s, client.PageRequest{Max: 100})
	id, err := s.Identity(ctx, p.Next)
	var saved struct {
		Topic string `json:"kafka_topic"`
		ID    string `json:"kafka_topic_id"`
	}
	if err != nil || json.Unmarshal(id, &saved) != nil || saved.Topic != "ident" || len(saved.ID) != 22 {
		t.Fatalf("Identity = %s, %v", id, err)
	}
	if err := s.CheckIdentity(ctx, id); err != nil {
		t.Errorf("the topic's own identity refused: %v", err)
	}
	if err := k.source("other").CheckIdentity(ctx, id); err == nil || !strings.Contains(err.Error(), `it was read from topic "ident", not "other"`) {
		t.Errorf("another topic: %v", err)
	}
	if _, err := k.adm.DeleteTopics(ctx, "ident"); err != nil {
		t.Fatal(err)
	}
	k.topic("ident", 1)
	// The source's client keeps metadata for a moment.
	testwait.Until(t, "the topic made again", func() bool {
		err = s.CheckIdentity(ctx, id)
		return err != nil
	})
	if !strings.Contains(err.Error(), `topic "ident" was deleted and made again since`) {
		t.Errorf("the topic made again: %v", err)
	}
	_, err = k.source("ident").Page(ctx, client.PageRequest{After: p.Next, Max: 10})
	var te *TopicError
	if !errors.As(err, &te) || client.Retryable(err) {
		t.Fatalf("a position of the old topic: %v (retryable %v)", err, client.Retryable(err))
	}
	if _, err := k.source("nosuch").Page(ctx, client.PageRequest{Max: 10}); !errors.As(err, &te) || client.Retryable(err) || !strings.Contains(err.Error(), `topic "nosuch" does not exist`) {
		t.Errorf("a topic that does not exist: %v", err)
	}
}

func TestNoBroker(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg, err := ParseURL("kafka://" + addr + "/t")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Page(ctxT(t), client.PageRequest{Max: 1})
	var ce *ContactError
	if !errors.As(err, &ce) || client.Retryable(err) {
		t.Fatalf("no broker: %v (%T), retryable %v", err, err, client.Retryable(err))
	}
}

func TestCommitToGroup(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("grp", 3)
	fillTopic(t, k, "grp", 3, 4)
	s := k.source("grp")
	ctx := ctxT(t)
	if _, ok, err := s.Committed(ctx, "evtctl-test"); ok || err != nil {
		t.Fatalf("Committed before any commit: %v %v", ok, err)
	}
	p := page(t, s, client.PageRequest{Max: 5})
	if err := s.Commit(ctx, "evtctl-test", p.Next); err != nil {
		t.Fatal(err)
	}
	// What Kafka's tools read: the group's committed offsets.
	offs, err := k.adm.FetchOffsetsForTopics(ctx, "evtctl-test", "grp")
	if err != nil {
		t.Fatal(err)
	}
	for part, want := range []int64{2, 2, 1} {
		if o, ok := offs.Lookup("grp", int32(part)); !ok || o.At != want {
			t.Errorf("partition %d: committed %+v, want %d", part, o, want)
		}
	}
	if pos, ok, err := s.Committed(ctx, "evtctl-test"); !ok || err != nil || pos != p.Next {
		t.Errorf("Committed = %q %v %v, want %q", pos, ok, err, p.Next)
	}
	// kcat, consuming in the group, goes on from there: the 12 - 5 records after it.
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Log("kcat is not installed: the group's offsets are not checked with it")
		return
	}
	out := runKcat(t, nil, "-b", k.addr(), "-G", "evtctl-test", "-e", "-q", "-f", "%p/%o\n",
		"-X", "session.timeout.ms=10000", "grp")
	lines := strings.Fields(string(out))
	slices.Sort(lines)
	if fmt.Sprint(lines) != "[0/2 0/3 1/2 1/3 2/1 2/2 2/3]" {
		t.Errorf("kcat in the group read %v", lines)
	}
}

// TestNextByTimestamp: the merge takes the oldest first record, the lower partition on a
// tie, and keeps each partition's order (even against its timestamps).
func TestNextByTimestamp(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	rec := func(p int32, o int64, sec int) *kgo.Record {
		return &kgo.Record{Partition: p, Offset: o, Timestamp: t0.Add(time.Duration(sec) * time.Second)}
	}
	f := &forward{queues: [][]*kgo.Record{
		{rec(0, 0, 5), rec(0, 1, 1), rec(0, 2, 9)},
		{rec(1, 0, 2), rec(1, 1, 5)},
		nil,
		{rec(3, 7, 5)},
	}}
	var got []string
	for {
		p := f.next(nil)
		if p < 0 {
			break
		}
		r := f.queues[p][0]
		f.queues[p] = f.queues[p][1:]
		got = append(got, FormatCursor(r.Partition, r.Offset))
	}
	if want := "[1/0 0/0 0/1 1/1 3/7 0/2]"; fmt.Sprint(got) != want {
		t.Errorf("merged %v, want %s", got, want)
	}
	f.queues = [][]*kgo.Record{{rec(0, 4, 1)}, {rec(1, 9, 0)}}
	if p := f.next(Position{5, 9}); p != 0 {
		t.Errorf("next with partition 1 at its range end = %d", p)
	}
}

// TestReusedPages: with Reuse, pages released once written out hold the same items as
// pages that are not.
func TestReusedPages(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("reuse", 3)
	fillTopic(t, k, "reuse", 3, 30)
	want, _ := walk(t, k.source("reuse"), "", 1000, "")
	s := k.source("reuse")
	var got []string
	after := ""
	for {
		p := page(t, s, client.PageRequest{After: after, Max: 7, Reuse: true})
		for _, it := range p.Items {
			got = append(got, string(it.Raw)+" "+it.Pos) // written out
		}
		after = p.Next
		more := p.More
		p.Release()
		if !more {
			break
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d items, want %d", len(got), len(want))
	}
	for i := range got {
		if w := string(want[i].Raw) + " " + want[i].Pos; got[i] != w {
			t.Fatalf("item %d: %s, want %s", i, got[i], w)
		}
	}
}

// TestBackwardWhileTailing: a terminal scrolls back while its tail long-polls; neither
// waits for the other, and the tail then gets what is written.
func TestBackwardWhileTailing(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("both", 2)
	fillTopic(t, k, "both", 2, 10)
	s := k.source("both")
	_, head, err := s.Bounds(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	tail := make(chan *client.Page, 1)
	go func() {
		p, err := s.Page(ctxT(t), client.PageRequest{After: head, Max: 10, Wait: time.Minute})
		if err != nil {
			t.Error(err)
		}
		tail <- p
	}()
	before := ""
	n := 0
	for {
		p := page(t, s, client.PageRequest{Backward: true, Before: before, Max: 3})
		n += len(p.Items)
		before = p.Next
		if !p.More {
			break
		}
	}
	if n != 20 {
		t.Errorf("scrolled back over %d items, want 20", n)
	}
	if err := k.client(manualPartitioner()).ProduceSync(ctxT(t), oedxRecord("both", 1, 99)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if p := <-tail; p == nil || len(p.Items) != 1 || p.Items[0].Cursor != "1/10" || p.Next != "10,11" {
		t.Errorf("the tail's page: %+v", p)
	}
}

// TestLargePages: pages of many items hold what pages of fewer hold, in the same order
// and with the same positions, filtered or not, with their memory reused.
func TestLargePages(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("large", 3)
	fillTopic(t, k, "large", 3, 150)
	for _, q := range []string{"", "data.n > 100 AND NOT data.n = 300"} {
		small, _ := walk(t, k.source("large"), "", 40, q)
		s := k.source("large")
		var large []client.Item
		after := ""
		for {
			p := page(t, s, client.PageRequest{After: after, Max: 300, Query: q, Reuse: true})
			for _, it := range p.Items {
				large = append(large, client.Item{Item: wire.Item{Cursor: strings.Clone(it.Cursor)}, Raw: slices.Clone(it.Raw), Pos: strings.Clone(it.Pos)})
			}
			after = p.Next
			p.Release()
			if !p.More {
				break
			}
		}
		if len(large) != len(small) {
			t.Fatalf("query %q: %d items in pages of 300, %d in pages of 40", q, len(large), len(small))
		}
		for i := range large {
			if large[i].Cursor != small[i].Cursor || string(large[i].Raw) != string(small[i].Raw) || large[i].Pos != small[i].Pos {
				t.Fatalf("query %q: item %d: %s (Pos %s) in pages of 300, %s (Pos %s) in pages of 40", q, i, large[i].Cursor, large[i].Pos, small[i].Cursor, small[i].Pos)
			}
		}
		if after != "150,150,150" {
			t.Errorf("query %q: ends at %q", q, after)
		}
	}
}

// TestBackwardBesideAFollowingTail: a terminal scrolls back again and again while its
// tail follows records as they are written, on one source; every record reaches the
// tail once (run with -race: the two share what the source knows of the log's bounds).
func TestBackwardBesideAFollowingTail(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("busy", 2)
	fillTopic(t, k, "busy", 2, 5)
	s := k.source("busy")
	_, head, err := s.Bounds(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	const more = 40
	done := make(chan int, 1)
	go func() {
		got, after := 0, head
		for got < more {
			p, err := s.Page(ctxT(t), client.PageRequest{After: after, Max: 10, Wait: 5 * time.Second})
			if err != nil {
				t.Error(err)
				break
			}
			got += len(p.Items)
			after = p.Next
		}
		done <- got
	}()
	go func() {
		pr := k.client(manualPartitioner())
		for i := range more {
			if err := pr.ProduceSync(ctxT(t), oedxRecord("busy", int32(i%2), 100+i)).FirstErr(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for {
		select {
		case got := <-done:
			if got != more {
				t.Errorf("the tail got %d records, want %d", got, more)
			}
			return
		default:
		}
		page(t, s, client.PageRequest{Backward: true, Max: 3})
	}
}
