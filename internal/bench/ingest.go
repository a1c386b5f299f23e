package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"golang.org/x/sync/errgroup"

	"github.com/evtctl/evtctl/pkg/wire"
)

// Goals the project holds itself to on a 2-core machine.
const (
	GoalIngestEventsPerSecond = 150_000 // batched durable ingest
	GoalTailP99Ms             = 2       // at 1,000 events/s
	GoalReplayEventsPerSecond = 1_000_000
	// GoalReplayClientCPU and GoalReplayNodeCPU are the CPU a replay may cost per event,
	// in µs, in the client and in the node.
	GoalReplayClientCPU = 1.0
	GoalReplayNodeCPU   = 0.7
	// GoalReplayTransportRatio bounds a replay's time against fetching the same bytes from
	// a loopback file server.
	GoalReplayTransportRatio = 2.5
	GoalPollersMemoryMB      = 60 // added by 10,000 idle pollers
	GoalPollersWakeP99Ms     = 250
	// GoalPollersNodeCPUPerWake is the node's CPU, in µs, for waking a poller and taking its
	// next long-poll.
	GoalPollersNodeCPUPerWake = 15
	// GoalReplayPlainRatio is the least share of a plain program's rate a replay keeps, on a
	// log whose source offers one (a chain: a loop of block_results and block calls).
	GoalReplayPlainRatio = 0.8
	// GoalCommitP99MarginMs is what a chain's tail may take beyond a block time, from a
	// block's commit to its transactions written out, at the 99th percentile.
	GoalCommitP99MarginMs = 100
)

// KindError says a bench cannot run against this kind of node.
type KindError struct {
	Bench, Kind, Why string
}

func (e *KindError) Error() string {
	return fmt.Sprintf("bench %s cannot run against a %s node: %s", e.Bench, e.Kind, e.Why)
}

// IngestConfig configures Ingest.
type IngestConfig struct {
	Common
	Producers int    // concurrent keep-alive connections, each with one request in flight
	Mode      string // "batch": BatchSize events per request; "structured": one per request
	BatchSize int
	EventSize int // bytes of each event in JSON format
	// Duration is measured after Warmup, whose requests are not counted. Count, when above
	// zero, sends exactly that many events instead and measures them all.
	Duration time.Duration
	Warmup   time.Duration
	Count    int
}

// Ingest posts events from several producers to the node's ingest endpoint as fast as it
// acknowledges them, and reports events/s, MB/s and the latency of acknowledgements.
func Ingest(ctx context.Context, cfg IngestConfig) (*Report, error) {
	if cfg.Producers <= 0 {
		cfg.Producers = 8
	}
	if cfg.Mode == "" {
		cfg.Mode = "batch"
	}
	if cfg.Mode != "batch" && cfg.Mode != "structured" {
		return nil, fmt.Errorf("mode must be batch or structured, got %q", cfg.Mode)
	}
	perReq := 1
	if cfg.Mode == "batch" {
		perReq = max(cfg.BatchSize, 1)
	}
	if cfg.EventSize <= 0 {
		cfg.EventSize = DefaultEventSize
	}
	if cfg.Count <= 0 && cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Count > 0 {
		cfg.Duration, cfg.Warmup = 0, 0
	}
	r, info := begin(ctx, "ingest", cfg.Common)
	r.param("producers", cfg.Producers, "connections")
	r.param("mode", cfg.Mode, "")
	r.param("batch_size", perReq, "events")
	r.param("event_size", cfg.EventSize, "bytes")
	if cfg.Count > 0 {
		r.param("count", cfg.Count, "events")
	} else {
		r.param("duration", cfg.Duration, "s")
		r.param("warmup", cfg.Warmup, "s")
	}
	if info.Kind == KindTendermint || !info.Events() {
		return nil, &KindError{"ingest", info.Kind, "it takes no events over HTTP; run it against an evtctl node or with --embedded"}
	}
	if info.Kind == KindUnknown && info.Err != nil {
		r.note("the node's kind is unknown (%v); sending to %s/events anyway", info.Err, cfg.Target.URL)
	}
	maker, err := newEventMaker(cfg.EventSize, newRunID())
	if err != nil {
		return nil, err
	}
	p, err := newPoster(cfg.Target, cfg.Version, cfg.Producers)
	if err != nil {
		return nil, err
	}
	defer p.close()
	before := appendedCount(ctx, p, cfg.Target)

	var (
		next                 atomic.Uint64 // events handed out
		acked, counted, reqs atomic.Int64
		busy                 atomic.Int64
		lat                  samples
		lastDone             atomic.Int64 // count mode: ns after start of the last acknowledgement
		start                = time.Now()
		winStart             = start.Add(cfg.Warmup)
		winEnd               = winStart.Add(cfg.Duration)
		contentType          = ctBatch
		total                = uint64(cfg.Count)
		checkCount           = info.Kind == KindEvtctl && cfg.Mode == "batch"
		ctxRun, stopProgress = context.WithCancel(ctx)
		progressDone         = make(chan struct{})
	)
	if cfg.Mode == "structured" {
		contentType = ctStructured
	}
	go func() {
		defer close(progressDone)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		var last int64
		lastT := time.Now()
		for {
			select {
			case <-ctxRun.Done():
				return
			case now := <-tick.C:
				a := acked.Load()
				rate := float64(a-last) / now.Sub(lastT).Seconds()
				last, lastT = a, now
				if total > 0 {
					cfg.progress("ingest: %d of %d events, %.0f events/s", a, total, rate)
				} else {
					cfg.progress("ingest: %.0f events/s, %s of %s", rate, now.Sub(start).Round(time.Second), cfg.Warmup+cfg.Duration)
				}
			}
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	for range cfg.Producers {
		g.Go(func() error {
			var body []byte
			for {
				n := perReq
				if total > 0 {
					first := next.Add(uint64(n)) - uint64(n) + 1
					if first > total {
						return nil
					}
					n = int(min(uint64(n), total-first+1))
					body = buildBody(maker, body[:0], cfg.Mode, first, n)
				} else {
					if !time.Now().Before(winEnd) {
						return nil
					}
					first := next.Add(uint64(n)) - uint64(n) + 1
					body = buildBody(maker, body[:0], cfg.Mode, first, n)
				}
				t0 := time.Now()
				reply, err := p.postRetry(gctx, contentType, body, func() { busy.Add(1) })
				t1 := time.Now()
				if err != nil {
					if gctx.Err() != nil {
						return gctx.Err()
					}
					return err
				}
				if checkCount {
					if got := gjson.GetBytes(reply, wire.KeyCount); !got.Exists() || int(got.Int()) != n {
						return fmt.Errorf("the node acknowledged a batch of %d events with %q", n, truncate(reply, 120))
					}
				}
				acked.Add(int64(n))
				if total > 0 || (!t1.Before(winStart) && !t1.After(winEnd)) {
					counted.Add(int64(n))
					reqs.Add(1)
					lat.add(t1.Sub(t0))
					lastDone.Store(int64(t1.Sub(start)))
				}
			}
		})
	}
	err = g.Wait()
	stopProgress()
	<-progressDone
	if err != nil && !interrupted(ctx, err) {
		return nil, err
	}
	var elapsed time.Duration
	if total > 0 {
		elapsed = time.Duration(lastDone.Load())
	} else {
		elapsed = min(time.Since(winStart), cfg.Duration)
	}
	r.finish(ctx)
	secs := max(elapsed.Seconds(), 1e-9)
	events := float64(counted.Load())
	if cfg.Mode == "batch" && info.Kind == KindEvtctl {
		r.goal("events_per_second", events/secs, "events/s", ">=", GoalIngestEventsPerSecond)
	} else {
		r.figure("events_per_second", events/secs, "events/s")
	}
	r.figure("megabytes_per_second", events*float64(cfg.EventSize)/1e6/secs, "MB/s")
	r.figure("requests_per_second", float64(reqs.Load())/secs, "requests/s")
	r.latencies("ack", &lat)
	r.figure("events_acknowledged", events, "events")
	r.figure("events_acknowledged_total", float64(acked.Load()), "events")
	r.figure("requests", float64(reqs.Load()), "requests")
	r.figure("busy_replies", float64(busy.Load()), "replies")
	r.figure("measured", elapsed.Seconds(), "s")
	if before >= 0 {
		if after := appendedCount(context.WithoutCancel(ctx), p, cfg.Target); after >= 0 {
			r.figure("node_appended_events", after-before, "events")
			if int64(after-before) != acked.Load() {
				r.note("the node appended %.0f events while %d were acknowledged: other clients are writing to it, or it dropped duplicates", after-before, acked.Load())
			}
		}
	}
	if cfg.Count == 0 && cfg.Warmup > 0 {
		r.note("acknowledgements in the first %s (warm-up) and after the measured %s are not counted", cfg.Warmup, cfg.Duration)
	}
	return r, ctx.Err()
}

func buildBody(m *eventMaker, dst []byte, mode string, first uint64, n int) []byte {
	if mode == "structured" {
		return m.appendEvent(dst, first)
	}
	return m.appendBatch(dst, first, n)
}

// appendedCount reads evtctl_log_appended_events_total; -1 when the node has no such metric.
func appendedCount(ctx context.Context, p *poster, t Target) float64 {
	m, err := scrapeMetrics(ctx, p.hc, t)
	if err != nil {
		return -1
	}
	v, ok := m.value("evtctl_log_appended_events_total")
	if !ok {
		return -1
	}
	return v
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
