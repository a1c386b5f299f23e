package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/render"
)

// LatencyConfig configures Latency.
type LatencyConfig struct {
	Common
	Rate      float64       // events appended per second, spread evenly
	Duration  time.Duration // measured, after Warmup
	Warmup    time.Duration
	Count     int // when above zero: measure this many events (after the warm-up) instead of Duration
	EventSize int
	// Concurrency is how many appends may be in flight at once, so that a slow
	// acknowledgement does not hold up the steady rate.
	Concurrency int
	PageSize    int           // items per request of the tail; default 100, as evtctl tail
	Wait        time.Duration // the tail's long-poll wait; default 25s, as evtctl tail
	// Drain bounds the wait, after the last append, for the tail to receive every event.
	Drain time.Duration
}

// Latency appends single events at a steady rate while a client follows the head, and
// reports the time from each append's acknowledgement (its 2xx) to the tail's receipt of
// that event, matched by id. The tail is evtctl tail's path: client.Stream, each batch
// rendered as JSON lines (to nowhere) and flushed before its events count as received.
func Latency(ctx context.Context, cfg LatencyConfig) (*Report, error) {
	if cfg.Rate <= 0 {
		cfg.Rate = 1000
	}
	if cfg.Count <= 0 && cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.EventSize <= 0 {
		cfg.EventSize = DefaultEventSize
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 100
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 25 * time.Second
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 10 * time.Second
	}
	warm := int(cfg.Rate * cfg.Warmup.Seconds())
	measured := cfg.Count
	if measured <= 0 {
		measured = max(int(cfg.Rate*cfg.Duration.Seconds()), 1)
	}
	total := warm + measured

	r, info := begin(ctx, "latency", cfg.Common)
	r.param("rate", cfg.Rate, "events/s")
	if cfg.Count > 0 {
		r.param("count", cfg.Count, "events")
	} else {
		r.param("duration", cfg.Duration, "s")
	}
	r.param("warmup", cfg.Warmup, "s")
	r.param("event_size", cfg.EventSize, "bytes")
	r.param("concurrency", cfg.Concurrency, "requests")
	r.param("page_size", cfg.PageSize, "events")
	if info.Kind == KindUnknown {
		return nil, fmt.Errorf("the node at %s cannot be read: %v", cfg.Target.URL, info.Err)
	}
	refused := &KindError{"latency", info.Kind, "it appends events, which only an evtctl node takes; run it against one or with --embedded"}
	if info.Kind != KindEvtctl && info.Events() {
		return nil, refused
	}
	maker, err := newEventMaker(cfg.EventSize, newRunID())
	if err != nil {
		return nil, err
	}
	c, closeClient, err := newClient(cfg.Target, cfg.Version)
	if err != nil {
		return nil, err
	}
	defer closeClient()
	// A log read through another source is written through it, when it can be (a chain's
	// transactions), and timed from when it committed each item.
	var com committer
	if !info.Events() {
		if _, err := c.Head(ctx, client.Backoff{GiveUp: 30 * time.Second}, nil); err != nil {
			return nil, err
		}
		if com, _ = c.Source().(committer); com == nil {
			refused.Why = "it sends items to the log, and evtctl cannot write to this one"
			return nil, refused
		}
	}
	var p *poster
	if com == nil {
		if p, err = newPoster(cfg.Target, cfg.Version, cfg.Concurrency); err != nil {
			return nil, err
		}
		defer p.close()
	}

	tr := newTracker(total)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	tailCtx, stopTail := context.WithCancel(runCtx)
	defer stopTail()
	// The first failure of the tail or of an append ends the run.
	var runErr error
	var errOnce sync.Once
	fail := func(err error) {
		errOnce.Do(func() { runErr = err; cancel() })
	}
	tailDone := make(chan struct{})
	go func() {
		defer close(tailDone)
		// tail returns only with a reason to stop (never nil).
		if err := tail(tailCtx, c, cfg, info.Newest, maker, tr, com); !interrupted(tailCtx, err) {
			fail(fmt.Errorf("the tail failed: %w", err))
		}
	}()
	defer func() { stopTail(); <-tailDone }()

	// The producer: a steady schedule (event i is due at start + i/rate; one that falls
	// behind is sent at once, so the average rate holds), and workers that send what it
	// hands out.
	jobs := make(chan uint64)
	var busy atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body []byte
			for seq := range jobs {
				t0 := time.Now()
				var err error
				if com != nil {
					err = com.Submit(runCtx, maker.id(seq), cfg.EventSize)
				} else {
					body = maker.appendEvent(body[:0], seq)
					t0 = time.Now()
					_, err = p.postRetry(runCtx, ctStructured, body, func() { busy.Add(1) })
				}
				if err != nil {
					if runCtx.Err() == nil {
						fail(err)
					}
					continue
				}
				tr.acked(seq, t0, time.Now())
			}
		}()
	}
	sent := 0
	lastShown := time.Now()
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	for seq := uint64(1); seq <= uint64(total) && runCtx.Err() == nil; seq++ {
		if wait := time.Until(start.Add(time.Duration(seq-1) * interval)); wait > 0 && retry.Sleep(runCtx, wait) != nil {
			break
		}
		select {
		case jobs <- seq:
			sent++
		case <-runCtx.Done():
		}
		if time.Since(lastShown) > 500*time.Millisecond {
			lastShown = time.Now()
			cfg.progress("latency: %d of %d events appended, %d received", sent, total, tr.received.Load())
		}
	}
	close(jobs)
	wg.Wait()
	sendElapsed := time.Since(start)
	// Wait for the tail to receive every acknowledged event.
	drain := time.NewTimer(cfg.Drain)
	defer drain.Stop()
wait:
	for tr.missing() > 0 {
		cfg.progress("latency: waiting for %d events to reach the tail", tr.missing())
		select {
		case <-tr.changed():
		case <-drain.C:
			break wait
		case <-runCtx.Done():
			break wait
		}
	}
	stopTail()
	<-tailDone
	if runErr != nil {
		return nil, runErr
	}
	if com != nil {
		return committedFigures(ctx, r, cfg, com, tr, warm, total, sent, sendElapsed)
	}
	r.finish(ctx)

	var lat, ack, fromSend samples
	early := 0
	missing := 0
	for seq := warm + 1; seq <= total; seq++ {
		a, rcv, sendAt := tr.ack[seq].Load(), tr.recv[seq].Load(), tr.sent[seq].Load()
		if a == 0 {
			continue // not acknowledged (interrupted before)
		}
		ack.add(time.Duration(a - sendAt))
		if rcv == 0 {
			missing++
			continue
		}
		fromSend.add(time.Duration(rcv - sendAt))
		d := time.Duration(rcv - a)
		if d < 0 {
			early++
			d = 0
		}
		lat.add(d)
	}
	n := lat.len()
	r.figure("events_measured", float64(n), "events")
	r.figure("rate_achieved", float64(sent)/max(sendElapsed.Seconds(), 1e-9), "events/s")
	for _, q := range []struct {
		name string
		p    float64
	}{{"p50", 50}, {"p90", 90}} {
		r.figure("latency_"+q.name, ms(lat.percentile(q.p)), "ms")
	}
	r.goal("latency_p99", ms(lat.percentile(99)), "ms", "<=", GoalTailP99Ms)
	r.figure("latency_max", ms(lat.max()), "ms")
	r.figure("delivered_before_ack", float64(early), "events")
	r.latencies("from_send", &fromSend)
	r.latencies("ack", &ack)
	r.figure("duplicates_received", float64(tr.dups.Load()), "events")
	r.figure("missing", float64(missing), "events")
	r.figure("busy_replies", float64(busy.Load()), "replies")
	if achieved := float64(sent) / max(sendElapsed.Seconds(), 1e-9); ctx.Err() == nil && achieved < 0.95*cfg.Rate {
		r.note("appends fell behind the rate asked for (%.0f of %.0f events/s): slow acknowledgements held all %d requests in flight; raise --concurrency", achieved, cfg.Rate, cfg.Concurrency)
	}
	if early > 0 {
		r.note("%d events reached the tail before their producer had its acknowledgement; they count as 0 ms (from_send_* times from the start of the append instead)", early)
	}
	if missing > 0 && ctx.Err() == nil {
		return r, fmt.Errorf("%d acknowledged events never reached the tail within %s of the last append", missing, cfg.Drain)
	}
	if d := tr.dups.Load(); d > 0 {
		return r, fmt.Errorf("the tail received %d events more than once", d)
	}
	return r, ctx.Err()
}

// tail follows the head from after the cursor newest and marks each event of this run as
// received once its batch has been rendered and flushed: a CloudEvent by its id, an item
// com sent by its mark.
func tail(ctx context.Context, c *client.Client, cfg LatencyConfig, newest string, maker *eventMaker, tr *tracker, com committer) error {
	rd, err := render.New(io.Discard, render.Options{Format: "jsonl"})
	if err != nil {
		return err
	}
	so := client.StreamOptions{After: newest, FromStart: newest == "", PageSize: cfg.PageSize, Wait: cfg.Wait, ReuseMemory: true}
	seqs := make([]uint64, 0, cfg.PageSize)
	var cursors []string
	return c.Stream(ctx, so, func(b client.Batch) error {
		seqs, cursors = seqs[:0], cursors[:0]
		for _, it := range b.Items {
			if err := rd.Item(it); err != nil {
				return err
			}
			var mark string
			if com != nil {
				mark = com.Mark(it)
			} else {
				mark = gjson.GetBytes(it.Data, "id").Str
			}
			if seq, ok := maker.seqOf(mark); ok {
				seqs = append(seqs, seq)
				cursors = append(cursors, it.Cursor)
			}
		}
		if err := rd.Flush(); err != nil {
			return err
		}
		now := time.Now()
		for i, s := range seqs {
			if tr.received1(s, now) && com != nil {
				tr.cursor[s] = strings.Clone(cursors[i]) // the item's memory is the page's
			}
		}
		return nil
	})
}

// tracker matches appends with receipts by sequence number.
type tracker struct {
	sent, ack, recv []atomic.Int64 // Unix nanoseconds; 0: not yet
	// cursor is the cursor each item of a log that stamps its items (a chain) was received
	// at: written by the tail alone, read once it has stopped.
	cursor         []string
	acks, received atomic.Int64
	dups           atomic.Int64
	notifier       // signalled as appends are acknowledged and items received
}

func newTracker(n int) *tracker {
	return &tracker{sent: make([]atomic.Int64, n+1), ack: make([]atomic.Int64, n+1), recv: make([]atomic.Int64, n+1), cursor: make([]string, n+1)}
}

func (t *tracker) acked(seq uint64, sent, at time.Time) {
	if seq >= uint64(len(t.ack)) {
		return
	}
	t.sent[seq].Store(sent.UnixNano())
	t.ack[seq].Store(at.UnixNano())
	t.acks.Add(1)
	t.signal()
}

// received1 marks seq received at at; false when it is not of the run, or came before.
func (t *tracker) received1(seq uint64, at time.Time) bool {
	if seq == 0 || seq >= uint64(len(t.recv)) {
		return false
	}
	if !t.recv[seq].CompareAndSwap(0, at.UnixNano()) {
		t.dups.Add(1)
		return false
	}
	t.received.Add(1)
	t.signal()
	return true
}

// missing is how many acknowledged events the tail has not received.
func (t *tracker) missing() int64 {
	return t.acks.Load() - t.received.Load()
}
