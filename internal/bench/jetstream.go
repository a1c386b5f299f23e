package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// GoalJetStreamRatio is what an evtctl node on JetStream aims at beside the Go client on
// the same server: ingest and replay at least this share of the client's rate.
const GoalJetStreamRatio = 0.8

// JetStreamConfig configures JetStream.
type JetStreamConfig struct {
	Version  string
	Progress func(line string)

	URL         string // the NATS servers
	NATSOptions []nats.Option
	Replicas    int // of each stream; default 1
	Events      int // default 100,000
	// Warmup is how many events each side sends and reads back, untimed, before the
	// measured ones (its process, connections and heap warmed up); 0: a tenth of Events, at
	// least one batch; below 0: none.
	Warmup    int
	EventSize int
	BatchSize int // events per ingest request to the node; default 1000
	Producers int // ingest requests in flight to the node; default 1 (as evtctl emit)
	// EmitFile, when set, is how the node's ingest is sent with one producer: evtctl emit
	// --file of the JSON-lines file at path to the node at url, --batch-size batchSize (the
	// ordered batches emit sends). It returns the events the node
	// acknowledged.
	EmitFile func(ctx context.Context, url, path string, batchSize int) (events int, err error)
	Runs     int
	// StartNode starts an evtctl node on stream (created and managed by the node) and
	// returns its URL and how to stop it.
	StartNode func(ctx context.Context, stream string) (url string, stop func() error, err error)

	// Fresh measures each side on a stream nothing else reads: the warm-up events are read
	// back after the measured ones are stored. Otherwise each side is measured as it is
	// used: it reads the warm-up events back before the measured ones are stored, and
	// while they are, a live tail follows the stream and, each time it has received
	// ReplayEvery more, the Recent newest events are read again.
	Fresh       bool
	Recent      int // default 1000
	ReplayEvery int // default 10,000
}

// JetStream measures an evtctl node on NATS JetStream beside the NATS Go client on the same
// server, in the same run: the client publishes the events asynchronously (nats.go's
// default bound on acknowledgements in flight) and reads them back with an ordered
// consumer; the node takes the same events over HTTP in batches, as evtctl emit --mode
// batch sends them, and serves them to a chronological replay rendered as evtctl replay
// -o jsonl renders it. Each side first sends and reads back Warmup other events, untimed:
// the node is a new process in each run, the client's process has run before. Unless
// Fresh, each side reads while the measured events are stored (see jsinuse.go). Each run
// uses new streams, deleted afterwards. Reports each rate (median over the runs) and the
// node's rate as a share of the client's.
func JetStream(ctx context.Context, cfg JetStreamConfig) (*Report, error) {
	if cfg.Events <= 0 {
		cfg.Events = 100_000
	}
	if cfg.EventSize <= 0 {
		cfg.EventSize = DefaultEventSize
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	if cfg.Producers <= 0 {
		cfg.Producers = 1
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 1
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.Recent <= 0 {
		cfg.Recent = 1000
	}
	if cfg.ReplayEvery <= 0 {
		cfg.ReplayEvery = 10_000
	}
	switch {
	case cfg.Warmup == 0:
		cfg.Warmup = max(cfg.Events/10, cfg.BatchSize)
	case cfg.Warmup < 0:
		cfg.Warmup = 0
	}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			cfg.Progress(fmt.Sprintf(format, args...))
		}
	}
	r := &Report{Bench: "jetstream", Env: Environment{
		EvtctlVersion: cfg.Version, GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), NodeURL: cfg.URL, NodeKind: "nats",
		Started: time.Now().UTC().Truncate(time.Millisecond), LoadBefore: loadAverage(),
	}}
	nc, err := nats.Connect(cfg.URL, append([]nats.Option{nats.Name("evtctl bench jetstream")}, cfg.NATSOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", cfg.URL, err)
	}
	defer nc.Close()
	r.Env.NodeVersion = "nats-server " + nc.ConnectedServerVersion()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	r.param("events", cfg.Events, "events")
	r.param("event_size", cfg.EventSize, "bytes")
	r.param("warmup", cfg.Warmup, "events")
	r.param("batch_size", cfg.BatchSize, "events")
	r.param("producers", cfg.Producers, "requests in flight")
	r.param("replicas", cfg.Replicas, "replicas")
	r.param("runs", cfg.Runs, "runs")
	if cfg.Fresh {
		r.param("mode", "fresh", "")
	} else {
		r.param("mode", "in-use", "")
		r.param("recent", cfg.Recent, "events")
		r.param("replay_every", cfg.ReplayEvery, "events")
	}

	var rawIn, nodeIn, rawOut, nodeOut, inRatio, outRatio []float64
	for run := 1; run <= cfg.Runs && ctx.Err() == nil; run++ {
		id := newRunID()
		maker, err := newEventMaker(cfg.EventSize, id)
		if err != nil {
			return nil, err
		}
		warm, err := newEventMaker(cfg.EventSize, newRunID())
		if err != nil {
			return nil, err
		}
		rawStream, nodeStream := "EVTCTL_BENCH_RAW_"+id, "EVTCTL_BENCH_NODE_"+id

		progress("jetstream: run %d of %d: Go client, async publish", run, cfg.Runs)
		ri, ro, err := rawRun(ctx, js, rawStream, cfg, maker, warm, func() {
			progress("jetstream: run %d of %d: Go client, ordered consumer", run, cfg.Runs)
		})
		_ = js.DeleteStream(context.WithoutCancel(ctx), rawStream)
		if err != nil {
			return partial(ctx, r, err)
		}
		rawIn, rawOut = append(rawIn, ri), append(rawOut, ro)

		progress("jetstream: run %d of %d: evtctl node, ingest", run, cfg.Runs)
		ni, no, err := nodeRun(ctx, cfg, nodeStream, maker, warm, progress)
		_ = js.DeleteStream(context.WithoutCancel(ctx), nodeStream)
		if err != nil {
			return partial(ctx, r, err)
		}
		nodeIn, nodeOut = append(nodeIn, ni), append(nodeOut, no)
		inRatio, outRatio = append(inRatio, ni/ri), append(outRatio, no/ro)
	}
	r.finish(ctx)
	if len(nodeOut) == 0 {
		return r, ctx.Err()
	}
	r.figure("client_ingest_events_per_second", median(rawIn), "events/s")
	r.figure("node_ingest_events_per_second", median(nodeIn), "events/s")
	r.goal("ingest_ratio", median(inRatio), "×", ">=", GoalJetStreamRatio)
	r.figure("client_replay_events_per_second", median(rawOut), "events/s")
	r.figure("node_replay_events_per_second", median(nodeOut), "events/s")
	r.goal("replay_ratio", median(outRatio), "×", ">=", GoalJetStreamRatio)
	if len(inRatio) > 1 {
		r.figure("ingest_ratio_min", slices.Min(inRatio), "×")
		r.figure("ingest_ratio_max", slices.Max(inRatio), "×")
		r.figure("replay_ratio_min", slices.Min(outRatio), "×")
		r.figure("replay_ratio_max", slices.Max(outRatio), "×")
	}
	r.note("ratios are the median of each run's node rate over the client's rate in that run")
	if !cfg.Fresh {
		r.note("in use: each side read its warm-up events back before the measured ones were stored, and while they were, a live tail followed the stream and, each time it had received %d more, the %d newest were read again (%d replays)", cfg.ReplayEvery, cfg.Recent, cfg.Events/cfg.ReplayEvery)
	}
	return r, ctx.Err()
}

func partial(ctx context.Context, r *Report, err error) (*Report, error) {
	if interrupted(ctx, err) {
		r.finish(ctx)
		return r, ctx.Err()
	}
	return nil, err
}

// streamConfig is the stream a node makes with its default flags: file storage, limits
// retention, a week's max age, 1 GiB, a 10-minute duplicates window, direct gets.
func streamConfig(name string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: name, Subjects: []string{"evtctl." + name}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		Replicas: replicas, MaxAge: 7 * 24 * time.Hour, MaxBytes: 1 << 30, MaxMsgs: -1, Duplicates: 10 * time.Minute,
		Discard: jetstream.DiscardOld, AllowDirect: true,
	}
}

// rawRun is the Go client's side of a run: it publishes cfg.Warmup events of warm, then
// (timed) the events of m, with its asynchronous publish, each with a message id (as the
// node sends them, for duplicate suppression), and reads them back; it returns both rates
// in events/s. reading is called as the measured read starts.
func rawRun(ctx context.Context, js jetstream.JetStream, stream string, cfg JetStreamConfig, m, warm *eventMaker, reading func()) (in, out float64, err error) {
	sc := streamConfig(stream, cfg.Replicas)
	if _, err := js.CreateStream(ctx, sc); err != nil {
		return 0, 0, fmt.Errorf("creating stream %s: %w", stream, err)
	}
	if _, err := rawPublishAll(ctx, js, sc.Subjects[0], warm, cfg.Warmup); err != nil {
		return 0, 0, err
	}
	readWarm := func() error {
		if cfg.Warmup > 0 {
			_, err := rawRead(ctx, js, stream, 1, cfg.Warmup)
			return err
		}
		return nil
	}
	var act *activity
	if !cfg.Fresh {
		if err := readWarm(); err != nil {
			return 0, 0, err
		}
		if act, err = rawActivity(ctx, js, stream, uint64(cfg.Warmup), cfg); err != nil {
			return 0, 0, err
		}
	}
	d, err := rawPublishAll(ctx, js, sc.Subjects[0], m, cfg.Events)
	if act != nil {
		err = errors.Join(err, act.stop(ctx, cfg.Events, cfg.Events/cfg.ReplayEvery))
	}
	if err != nil {
		return 0, 0, err
	}
	info, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, 0, err
	}
	if got := info.CachedInfo().State.Msgs; got != uint64(cfg.Warmup+cfg.Events) {
		return 0, 0, fmt.Errorf("the Go client stored %d events of %d", got, cfg.Warmup+cfg.Events)
	}
	in = float64(cfg.Events) / max(d.Seconds(), 1e-9)
	if cfg.Fresh {
		if err := readWarm(); err != nil {
			return 0, 0, err
		}
	}
	reading()
	out, err = rawRead(ctx, js, stream, uint64(cfg.Warmup)+1, cfg.Events)
	return in, out, err
}

// rawPublishAll publishes n events of m and waits for their acknowledgements; how long
// that took.
func rawPublishAll(ctx context.Context, js jetstream.JetStream, subject string, m *eventMaker, n int) (time.Duration, error) {
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = m.appendEvent(make([]byte, 0, m.size), uint64(i+1))
	}
	start := time.Now()
	for i, b := range bodies {
		msg := &nats.Msg{Subject: subject, Data: b, Header: nats.Header{"Nats-Msg-Id": []string{"k:" + eventSource + " " + m.id(uint64(i+1))}}}
		// A publish that waits for room among the acknowledgements in flight waits as long
		// as they take (nats.go gives up after 200 ms by default, which a loaded machine
		// exceeds without anything being wrong).
		if _, err := js.PublishMsgAsync(msg, jetstream.WithStallWait(time.Minute)); err != nil {
			return 0, err
		}
		if i%4096 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(time.Minute):
		return 0, errors.New("the Go client's publishes were not all acknowledged within a minute")
	}
	return time.Since(start), nil
}

// rawRead reads n messages of the stream from sequence from on with an ordered consumer
// of the client's default settings.
func rawRead(ctx context.Context, js jetstream.JetStream, stream string, from uint64, n int) (float64, error) {
	start := time.Now()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return 0, err
	}
	it, err := cons.Messages()
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	for i := 0; i < n; i++ {
		m, err := it.Next()
		if err != nil {
			return 0, err
		}
		if len(m.Data()) == 0 {
			return 0, errors.New("an empty message")
		}
		if i%4096 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	return float64(n) / max(time.Since(start).Seconds(), 1e-9), nil
}

// nodeRun starts a node on stream, sends it the events and replays them; it returns both
// rates in events/s.
func nodeRun(ctx context.Context, cfg JetStreamConfig, stream string, m, warm *eventMaker, progress func(string, ...any)) (in, out float64, err error) {
	url, stop, err := cfg.StartNode(ctx, stream)
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	t := Target{URL: url}
	c, closeClient, err := newClient(t, cfg.Version)
	if err != nil {
		return 0, 0, err
	}
	defer closeClient()
	ordered := cfg.EmitFile != nil && cfg.Producers == 1
	var from, to, warmFrom, warmTo client.Position
	if cfg.Warmup > 0 {
		if ordered {
			if _, err := emitRun(ctx, cfg, url, warm, cfg.Warmup); err != nil {
				return 0, 0, err
			}
			head, err := c.Events(ctx, client.Request{MaxItems: 1})
			if err != nil {
				return 0, 0, err
			}
			// The measured replay reads from the end of the warm-up to the stream's end.
			from, warmTo = client.Position{Cursor: head.Newest}, client.Position{Cursor: head.Newest}
		} else {
			wcfg := cfg
			wcfg.Events = cfg.Warmup
			if _, warmFrom, warmTo, err = postRun(ctx, wcfg, t, warm); err != nil {
				return 0, 0, err
			}
		}
	}
	// The warm-up events are replayed before the measured ones are read, as the client
	// reads them back; in use, before the measured ones are sent.
	replayWarm := func() error {
		if cfg.Warmup <= 0 {
			return nil
		}
		n, _, _, err := replayOnce(ctx, c, ReplayConfig{PageSize: 1000}, "", warmFrom, warmTo, false, nil)
		if err == nil && n != cfg.Warmup {
			err = fmt.Errorf("the node replayed %d warm-up events of %d", n, cfg.Warmup)
		}
		return err
	}
	var act *activity
	if !cfg.Fresh {
		if err := replayWarm(); err != nil {
			return 0, 0, err
		}
		if act, err = nodeActivity(ctx, c, warmTo.Cursor, cfg); err != nil {
			return 0, 0, err
		}
	}
	if ordered {
		in, err = emitRun(ctx, cfg, url, m, cfg.Events)
	} else {
		in, from, to, err = postRun(ctx, cfg, t, m)
	}
	if act != nil {
		err = errors.Join(err, act.stop(ctx, cfg.Events, cfg.Events/cfg.ReplayEvery))
	}
	if err != nil {
		return 0, 0, err
	}
	if cfg.Fresh {
		if err := replayWarm(); err != nil {
			return 0, 0, err
		}
	}
	progress("jetstream: evtctl node, replay")
	n, _, d, err := replayOnce(ctx, c, ReplayConfig{PageSize: 1000}, "", from, to, false, nil)
	if err != nil {
		return 0, 0, err
	}
	if n != cfg.Events {
		return 0, 0, fmt.Errorf("the node replayed %d events of %d", n, cfg.Events)
	}
	return in, float64(n) / max(d.Seconds(), 1e-9), nil
}

// emitRun sends n events of m to the node with cfg.EmitFile and returns events/s.
func emitRun(ctx context.Context, cfg JetStreamConfig, url string, m *eventMaker, n int) (float64, error) {
	dir, err := os.MkdirTemp("", "evtctl-bench-jetstream-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "events.jsonl")
	if err := writeEvents(path, m, n); err != nil {
		return 0, err
	}
	start := time.Now()
	got, err := cfg.EmitFile(ctx, url, path, cfg.BatchSize)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if got != n {
		return 0, fmt.Errorf("the node acknowledged %d events of %d", got, n)
	}
	return float64(n) / max(d.Seconds(), 1e-9), nil
}

// postRun posts the events to the node in batches, cfg.Producers requests in flight, and
// returns events/s and the range of cursors they were given.
func postRun(ctx context.Context, cfg JetStreamConfig, t Target, m *eventMaker) (in float64, from, to client.Position, err error) {
	p, err := newPoster(t, cfg.Version, cfg.Producers)
	if err != nil {
		return 0, from, to, err
	}
	defer p.close()
	batches := make([][]byte, 0, cfg.Events/cfg.BatchSize+1)
	for f := 1; f <= cfg.Events; f += cfg.BatchSize {
		n := min(cfg.BatchSize, cfg.Events-f+1)
		batches = append(batches, m.appendBatch(nil, uint64(f), n))
	}
	var first, last string
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	next := make(chan int, len(batches))
	for i := range batches {
		next <- i
	}
	close(next)
	cursors := make([][2]string, len(batches))
	for range cfg.Producers {
		g.Go(func() error {
			for i := range next {
				reply, err := p.postRetry(gctx, ctBatch, batches[i], nil)
				if err != nil {
					return err
				}
				cs := ackedCursors(reply)
				if len(cs) == 0 {
					return fmt.Errorf("the node acknowledged a batch without cursors: %s", truncate(reply, 120))
				}
				cursors[i] = [2]string{slices.Min(cs), slices.Max(cs)}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, from, to, err
	}
	in = float64(cfg.Events) / max(time.Since(start).Seconds(), 1e-9)
	for _, c := range cursors {
		if first == "" || c[0] < first {
			first = c[0]
		}
		last = max(last, c[1])
	}
	if fc, err := cursor.Parse(first); err == nil {
		if pc, ok := fc.Prev(); ok {
			from = client.Position{Cursor: pc.String()}
		}
	}
	return in, from, client.Position{Cursor: last}, nil
}
