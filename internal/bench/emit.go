package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Goals of evtctl emit --file with its defaults, on a 2-core machine.
const (
	GoalEmitEventsPerSecond = 200_000
	// GoalEmitClientCPU is the CPU emit may spend per event, in µs.
	GoalEmitClientCPU = 3.0
)

// EmitConfig configures Emit.
type EmitConfig struct {
	Common
	Events    int // events in the file; default 1,000,000
	EventSize int
	Runs      int // runs of each kind; the median is reported
	// BatchBytes and BatchEvents are how emit sizes its batches by default: the raw posts
	// send batches of the same size.
	BatchBytes, BatchEvents int
	// Emit sends the JSON-lines file at path to the target as `evtctl emit --file` does, in
	// this process, and returns the events the node acknowledged and the requests it took.
	Emit func(ctx context.Context, path string) (events, requests int, err error)
}

// Emit measures evtctl emit --file: it writes a file of events, sends it with cfg.Emit, and
// reports events/s and the CPU per event of this process and (from its /metrics, when it
// runs in a process of its own) of the node. Beside it, the same batches (events of the same
// size, with other ids) are posted as they are by a plain HTTP client, one request in
// flight: what the node and the transport allow any client, and emit's time as a multiple
// of it.
func Emit(ctx context.Context, cfg EmitConfig) (*Report, error) {
	if cfg.Events <= 0 {
		cfg.Events = 1_000_000
	}
	if cfg.EventSize <= 0 {
		cfg.EventSize = DefaultEventSize
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 1
	}
	r, info := begin(ctx, "emit", cfg.Common)
	r.param("events", cfg.Events, "events")
	r.param("event_size", cfg.EventSize, "bytes")
	r.param("runs", cfg.Runs, "runs")
	r.param("batch_bytes", cfg.BatchBytes, "bytes")
	r.param("batch_events", cfg.BatchEvents, "events")
	switch {
	case info.Kind == KindTendermint, !info.Events():
		return nil, &KindError{"emit", info.Kind, "it takes no events over HTTP; run it against an evtctl node or with --embedded"}
	case info.Kind == KindUnknown:
		r.note("the node's kind is unknown (%v); sending to %s/events anyway", info.Err, cfg.Target.URL)
	}
	perBatch := cfg.BatchEvents
	if cfg.BatchBytes > 0 {
		// As emit fills a batch: '[', the events separated by ',', ']'.
		perBatch = min(perBatch, max(1, (cfg.BatchBytes-1)/(cfg.EventSize+1)))
	}
	p, err := newPoster(cfg.Target, cfg.Version, 1)
	if err != nil {
		return nil, err
	}
	defer p.close()
	nodeCPU, closeScrapes := nodeCPUReader(ctx, cfg.Target)
	defer closeScrapes()
	dir, err := os.MkdirTemp("", "evtctl-bench-emit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	type pass struct {
		events, secs, client, node []float64
		requests                   int
	}
	var emit, raw pass
	var ratios []float64
	measure := func(ps *pass, n int, run func() (int, error)) (float64, error) {
		n0, nodeOK := nodeCPU()
		c0, clientOK := processCPU()
		start := time.Now()
		reqs, err := run()
		d := time.Since(start)
		c1, _ := processCPU()
		n1, nodeOK1 := nodeCPU()
		if err != nil {
			return 0, err
		}
		ps.requests = reqs
		ps.events = append(ps.events, float64(n)/max(d.Seconds(), 1e-9))
		ps.secs = append(ps.secs, d.Seconds())
		if clientOK {
			ps.client = append(ps.client, float64(c1-c0)/float64(time.Microsecond)/float64(n))
		}
		if nodeOK && nodeOK1 {
			ps.node = append(ps.node, (n1-n0)*1e6/float64(n))
		}
		return d.Seconds(), nil
	}
	for run := 1; run <= cfg.Runs && ctx.Err() == nil; run++ {
		cfg.progress("emit: run %d of %d, writing %d events to a file", run, cfg.Runs, cfg.Events)
		m, err := newEventMaker(cfg.EventSize, newRunID())
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, "events.jsonl")
		if err := writeEvents(path, m, cfg.Events); err != nil {
			return nil, err
		}
		cfg.progress("emit: run %d of %d, evtctl emit --file", run, cfg.Runs)
		es, err := measure(&emit, cfg.Events, func() (int, error) {
			n, reqs, err := cfg.Emit(ctx, path)
			if err == nil && n != cfg.Events {
				err = fmt.Errorf("emit delivered %d events of %d", n, cfg.Events)
			}
			return reqs, err
		})
		os.Remove(path)
		if err != nil {
			if interrupted(ctx, err) {
				break
			}
			return nil, fmt.Errorf("emit --file: %w", err)
		}
		cfg.progress("emit: run %d of %d, the same batches posted raw", run, cfg.Runs)
		m, err = newEventMaker(cfg.EventSize, newRunID())
		if err != nil {
			return nil, err
		}
		rs, err := measure(&raw, cfg.Events, func() (int, error) { return postBatches(ctx, p, m, cfg.Events, perBatch) })
		if err != nil {
			if interrupted(ctx, err) {
				break
			}
			return nil, fmt.Errorf("raw posts: %w", err)
		}
		ratios = append(ratios, es/max(rs, 1e-9))
	}
	r.finish(ctx)
	if len(emit.events) > 0 {
		r.goal("events_per_second", median(emit.events), "events/s", ">=", GoalEmitEventsPerSecond)
		r.figure("megabytes_per_second", median(emit.events)*float64(cfg.EventSize)/1e6, "MB/s")
		r.figure("seconds", median(emit.secs), "s")
		if len(emit.events) > 1 {
			r.figure("events_per_second_min", slices.Min(emit.events), "events/s")
			r.figure("events_per_second_max", slices.Max(emit.events), "events/s")
		}
		r.figure("requests", float64(emit.requests), "requests")
		if len(emit.client) > 0 {
			r.goal("client_cpu_us_per_event", median(emit.client), "µs", "<=", GoalEmitClientCPU)
		}
		if len(emit.node) > 0 {
			r.figure("node_cpu_us_per_event", median(emit.node), "µs")
		}
	}
	if len(raw.events) > 0 {
		r.figure("raw_post_events_per_second", median(raw.events), "events/s")
		r.figure("raw_post_seconds", median(raw.secs), "s")
		r.figure("raw_post_requests", float64(raw.requests), "requests")
		if len(raw.client) > 0 {
			r.figure("raw_post_client_cpu_us_per_event", median(raw.client), "µs")
		}
		if len(raw.node) > 0 {
			r.figure("raw_post_node_cpu_us_per_event", median(raw.node), "µs")
		}
		r.figure("seconds_per_raw_post_second", median(ratios), "×")
		r.note("raw posts: the same batches (%d events of %d bytes each, new ids) made from a template and posted as they are by Go's HTTP client, one request in flight and the next made meanwhile: what the node and the transport allow a client", perBatch, cfg.EventSize)
		if emit.requests != raw.requests {
			r.note("emit made %d requests and the raw posts %d: the batches differ", emit.requests, raw.requests)
		}
	}
	return r, ctx.Err()
}

// writeEvents writes n events of m to a JSON-lines file.
func writeEvents(path string, m *eventMaker, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	line := make([]byte, 0, m.size+1)
	for seq := uint64(1); seq <= uint64(n); seq++ {
		line = append(m.appendEvent(line[:0], seq), '\n')
		if _, err := w.Write(line); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// postBatches posts n events of m in batches of perBatch, one request in flight while the
// next body is made, and returns the requests made.
func postBatches(ctx context.Context, p *poster, m *eventMaker, n, perBatch int) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bodies := make(chan []byte)
	free := make(chan []byte, 2)
	free <- nil
	free <- nil
	go func() {
		defer close(bodies)
		for first := 1; first <= n; first += perBatch {
			var b []byte
			select {
			case b = <-free:
			case <-ctx.Done():
				return
			}
			b = m.appendBatch(b[:0], uint64(first), min(perBatch, n-first+1))
			select {
			case bodies <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	reqs := 0
	for b := range bodies {
		if _, err := p.postRetry(ctx, ctBatch, b, nil); err != nil {
			return reqs, err
		}
		reqs++
		free <- b
	}
	return reqs, ctx.Err()
}
