package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/render"
)

// ReplayConfig configures Replay.
type ReplayConfig struct {
	Common
	// Events are loaded into the node first (straight into its log when it runs in this
	// process, else through its ingest endpoint) and then replayed; one in RareEvery is of
	// RareType, which the filtered pass selects. 0 replays whatever the node holds.
	Events    int
	EventSize int
	PageSize  int // events per request, as evtctl replay --page-size; default 1000
	Runs      int // replays of each kind; the median is reported
	// Query is the filter of the filtered pass when Events is 0 (nothing to choose 1% of);
	// without it that pass is skipped.
	Query string
	// NoTransport skips the transport's figure (which keeps the lines of a run in a
	// temporary file).
	NoTransport bool
}

// Replay measures catch-up: a chronological client.Range over the events, each rendered as
// evtctl replay -o jsonl renders it (to nowhere), then the same with a filter that matches
// 1% of them, and checks the counts.
func Replay(ctx context.Context, cfg ReplayConfig) (*Report, error) {
	if cfg.EventSize <= 0 {
		cfg.EventSize = DefaultEventSize
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 1000
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 1
	}
	r, info := begin(ctx, "replay", cfg.Common)
	r.param("events", cfg.Events, "events")
	if cfg.Events > 0 {
		r.param("event_size", cfg.EventSize, "bytes")
	}
	r.param("page_size", cfg.PageSize, "events")
	r.param("runs", cfg.Runs, "runs")
	if info.Kind == KindUnknown {
		return nil, fmt.Errorf("the node at %s cannot be read: %v", cfg.Target.URL, info.Err)
	}
	if cfg.Events > 0 && info.Kind != KindEvtctl {
		return nil, &KindError{"replay", info.Kind, "it cannot be loaded with events; replay what it holds with --events 0"}
	}
	c, closeClient, err := newClient(cfg.Target, cfg.Version)
	if err != nil {
		return nil, err
	}
	defer closeClient()
	// The client finds out what the node is (a node without the events method is taken over
	// by the source that knows it) before the source is asked what it offers.
	if _, err := c.Head(ctx, client.Backoff{GiveUp: 30 * time.Second}, nil); err != nil {
		return nil, err
	}

	var from, to client.Position
	query := cfg.Query
	wantAll, wantRare := -1, -1
	if cfg.Events > 0 {
		maker, err := newEventMaker(cfg.EventSize, newRunID())
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		first, last, err := load(ctx, cfg, maker)
		if err != nil {
			if interrupted(ctx, err) {
				r.finish(ctx)
				r.note("interrupted while loading events: nothing was replayed")
				return r, ctx.Err()
			}
			return nil, fmt.Errorf("loading %d events: %w", cfg.Events, err)
		}
		loadTime := time.Since(t0)
		r.figure("load_events_per_second", float64(cfg.Events)/max(loadTime.Seconds(), 1e-9), "events/s")
		fc, err := cursor.Parse(first)
		if err != nil {
			return nil, fmt.Errorf("the node acknowledged with cursor %q: %w", first, err)
		}
		if p, ok := fc.Prev(); ok {
			from = client.Position{Cursor: p.String()}
		}
		to = client.Position{Cursor: last}
		query = "type = '" + RareType + "'"
		wantAll, wantRare = cfg.Events, cfg.Events/RareEvery
	}
	if query != "" {
		r.param("filter", query, "")
	}
	// A source that offers a plain program's read of its log is set beside it: over the
	// same stretch, the log's start to its head now, in each run.
	plain, _ := c.Source().(plainReader)
	if plain != nil && cfg.Events == 0 {
		if to.IsZero() {
			to = client.Position{Cursor: info.Newest}
		}
		if to.Cursor == "" {
			plain = nil // an empty log
		}
	} else {
		plain = nil
	}
	var plainSecs, plainCPU []float64 // seconds, and CPU µs per item of this process
	var plainCounts map[string]int64
	if plain != nil {
		// Once, untimed: neither side pays for the node's cold caches.
		cfg.progress("replay: a plain read of the same stretch, untimed, to warm the node")
		if _, _, err := plain.PlainRead(ctx, from.Cursor, to.Cursor); err != nil {
			if interrupted(ctx, err) {
				r.finish(ctx)
				return r, ctx.Err()
			}
			return nil, fmt.Errorf("the plain read: %w", err)
		}
	}

	type pass struct {
		name    string
		query   string
		paged   bool
		want    int
		events  []float64 // events/s per run
		mbps    []float64
		secs    []float64
		client  []float64 // CPU µs per event, this process
		node    []float64 // CPU µs per event, the node's process
		count   int
		bytes   int64
		written string // a file of the lines, for the transport's figure
	}
	passes := []*pass{{name: "all", want: wantAll}}
	if query != "" {
		passes = append(passes, &pass{name: "filtered", query: query, want: wantRare})
	}
	if info.Kind == KindEvtctl {
		passes = append(passes, &pass{name: "paged", paged: true, want: wantAll})
	}
	nodeCPU, closeScrapes := nodeCPUReader(ctx, cfg.Target)
	defer closeScrapes()
	defer func() {
		for _, ps := range passes {
			if ps.written != "" {
				os.Remove(ps.written)
			}
		}
	}()
	for run := 1; run <= cfg.Runs && ctx.Err() == nil; run++ {
		for _, ps := range passes {
			cfg.progress("replay: run %d of %d, %s events", run, cfg.Runs, ps.name)
			n0, nodeOK := nodeCPU()
			c0, clientOK := processCPU()
			rc, closeRC := c, func() {}
			if plain != nil {
				// Like for like with the plain read, which keeps nothing between runs: each
				// run reads through a new client, as an evtctl replay does (a source may
				// keep what it read, a chain's heights, for the pages that follow).
				if rc, closeRC, err = runClient(ctx, cfg.Target, cfg.Version); err != nil {
					if interrupted(ctx, err) {
						break
					}
					return nil, err
				}
			}
			n, bytes, d, err := replayOnce(ctx, rc, cfg, ps.query, from, to, ps.paged, nil)
			closeRC()
			c1, _ := processCPU()
			n1, nodeOK1 := nodeCPU()
			if err != nil {
				if interrupted(ctx, err) {
					break
				}
				return nil, err
			}
			if clientOK && n > 0 {
				ps.client = append(ps.client, float64(c1-c0)/float64(time.Microsecond)/float64(n))
			}
			if nodeOK && nodeOK1 && n > 0 && ps.name != "filtered" {
				ps.node = append(ps.node, (n1-n0)*1e6/float64(n))
			}
			if ps.want >= 0 && n != ps.want {
				return nil, fmt.Errorf("replay (%s) delivered %d events, want %d", ps.name, n, ps.want)
			}
			ps.count, ps.bytes = n, bytes
			scanned := n
			if ps.name == "filtered" && wantAll >= 0 {
				scanned = wantAll // the node examined every event to find the 1%
			}
			ps.events = append(ps.events, float64(scanned)/max(d.Seconds(), 1e-9))
			ps.mbps = append(ps.mbps, float64(bytes)/1e6/max(d.Seconds(), 1e-9))
			ps.secs = append(ps.secs, d.Seconds())
			if ps.name != "all" || plain == nil {
				continue
			}
			cfg.progress("replay: run %d of %d, a plain read of the same stretch", run, cfg.Runs)
			pc0, pcOK := processCPU()
			counts, pd, err := plain.PlainRead(ctx, from.Cursor, to.Cursor)
			pc1, _ := processCPU()
			if err != nil {
				if interrupted(ctx, err) {
					break
				}
				return nil, fmt.Errorf("the plain read: %w", err)
			}
			if counts["items"] != int64(n) {
				return nil, fmt.Errorf("the plain read counted %d items where the replay wrote %d: not the same stretch", counts["items"], n)
			}
			plainCounts = counts
			plainSecs = append(plainSecs, pd.Seconds())
			if pcOK && n > 0 {
				plainCPU = append(plainCPU, float64(pc1-pc0)/float64(time.Microsecond)/float64(n))
			}
		}
	}
	// The transport's limit: the same bytes as one file from a loopback server, fetched by a
	// plain HTTP client (curl when there is one), in the same run.
	var transport []float64
	var fetcher string
	if all := passes[0]; !cfg.NoTransport && len(all.secs) > 0 && ctx.Err() == nil {
		cfg.progress("replay: writing the lines to a file")
		if err := keepLines(ctx, c, cfg, from, to, all.bytes, &all.written); err != nil {
			r.note("the transport's figure could not be measured: %v", err)
			all.written = ""
		}
	}
	if all := passes[0]; all.written != "" && ctx.Err() == nil {
		for run := 1; run <= cfg.Runs && ctx.Err() == nil; run++ {
			cfg.progress("replay: the same bytes from a file server, run %d of %d", run, cfg.Runs)
			d, how, err := fetchFile(ctx, all.written, all.bytes)
			if err != nil {
				r.note("the transport's figure could not be measured: %v", err)
				break
			}
			transport, fetcher = append(transport, d.Seconds()), how
		}
	}
	r.finish(ctx)
	all := passes[0]
	if len(all.events) > 0 {
		if info.Kind == KindEvtctl {
			r.goal("events_per_second", median(all.events), "events/s", ">=", GoalReplayEventsPerSecond)
		} else {
			r.figure("events_per_second", median(all.events), "events/s")
		}
		r.figure("megabytes_per_second", median(all.mbps), "MB/s")
		r.figure("seconds", median(all.secs), "s")
		if len(all.events) > 1 {
			r.figure("events_per_second_min", slices.Min(all.events), "events/s")
			r.figure("events_per_second_max", slices.Max(all.events), "events/s")
		}
		if len(plainSecs) > 0 {
			plainFigures(r, plainCounts, median(all.secs), median(plainSecs))
			if len(plainCPU) > 0 {
				r.figure("plain_client_cpu_us_per_event", median(plainCPU), "µs")
			}
		}
		r.figure("events_replayed", float64(all.count), "events")
		r.figure("bytes_written", float64(all.bytes), "bytes")
		// The goals of CPU per event and of the transport's time are for the events method; a
		// log read through another source is held to its plain read (ratio_to_plain).
		figure := func(name string, v float64, unit, op string, goal float64) {
			if info.Events() {
				r.goal(name, v, unit, op, goal)
			} else {
				r.figure(name, v, unit)
			}
		}
		if len(all.client) > 0 {
			figure("client_cpu_us_per_event", median(all.client), "µs", "<=", GoalReplayClientCPU)
		}
		if len(all.node) > 0 {
			figure("node_cpu_us_per_event", median(all.node), "µs", "<=", GoalReplayNodeCPU)
		}
		if len(transport) > 0 {
			ts := median(transport)
			r.figure("transport_seconds", ts, "s")
			r.figure("transport_events_per_second", float64(all.count)/max(ts, 1e-9), "events/s")
			figure("seconds_per_transport_second", median(all.secs)/max(ts, 1e-9), "×", "<=", GoalReplayTransportRatio)
			r.note("transport: the same %d bytes of JSON lines as one file from a loopback HTTP server, fetched by %s", all.bytes, fetcher)
		}
	}
	for _, ps := range passes {
		if ps.name != "paged" || len(ps.events) == 0 {
			continue
		}
		r.figure("paged_events_per_second", median(ps.events), "events/s")
		if len(ps.client) > 0 {
			r.figure("paged_client_cpu_us_per_event", median(ps.client), "µs")
		}
		if len(ps.node) > 0 {
			r.figure("paged_node_cpu_us_per_event", median(ps.node), "µs")
		}
	}
	if len(passes) > 1 && passes[1].name == "filtered" && len(passes[1].events) > 0 {
		f := passes[1]
		if wantAll >= 0 {
			r.figure("filtered_scan_events_per_second", median(f.events), "events/s")
		} else {
			r.figure("filtered_events_per_second", median(f.events), "events/s")
		}
		r.figure("filtered_seconds", median(f.secs), "s")
		r.figure("filtered_events_matched", float64(f.count), "events")
	}
	if cfg.Events == 0 && query == "" {
		r.note("no filtered pass: give --query to run one against the events the node holds")
	}
	if cfg.Events == 0 && len(all.events) > 0 && all.count == 0 {
		r.note("the node holds no events: give --events N to load some first")
	}
	if info.Kind == KindTendermint {
		r.note("a Tendermint node pages newest first only: the client gathers the whole range before writing the first line")
	}
	if len(plainSecs) > 0 {
		r.note("%s; the stretch was read once untimed first, so that neither side pays for the node's cold caches", plain.PlainReadHow())
	}
	return r, ctx.Err()
}

// runClient is a new client of the target that has found out what the node is (untimed).
func runClient(ctx context.Context, t Target, version string) (*client.Client, func(), error) {
	c, closeIdle, err := newClient(t, version)
	if err != nil {
		return nil, nil, err
	}
	if _, err := c.Head(ctx, client.Backoff{GiveUp: 30 * time.Second}, nil); err != nil {
		closeIdle()
		return nil, nil, err
	}
	return c, closeIdle, nil
}

// A plainReader is a source that can read a stretch of its log as a plain program of the
// log's own API would, with as many calls in flight as the source's own reading makes (a
// chain: a loop of block_results and block calls): bench replay sets the replay beside it.
type plainReader interface {
	// PlainRead reads the positions after `after` ("": the log's start) through `through`
	// and counts what it read: "items" as the source gives them, and units of the log's own
	// ("heights", "abci_events").
	PlainRead(ctx context.Context, after, through string) (counts map[string]int64, elapsed time.Duration, err error)
	// PlainReadHow says what PlainRead does, for a note.
	PlainReadHow() string
}

// plainFigures reports the replay beside the plain read of the same stretch: each of the
// log's own units a second, both ways (the replay read what the plain read counted: the
// items are checked to be as many), and the replay's rate as a share of the plain read's.
func plainFigures(r *Report, counts map[string]int64, secs, plainSecs float64) {
	units := slices.Sorted(maps.Keys(counts))
	for _, u := range units {
		if u != "items" {
			r.figure(u+"_per_second", float64(counts[u])/max(secs, 1e-9), u+"/s")
		}
	}
	r.figure("plain_seconds", plainSecs, "s")
	r.figure("plain_events_per_second", float64(counts["items"])/max(plainSecs, 1e-9), "events/s")
	for _, u := range units {
		if u != "items" {
			r.figure("plain_"+u+"_per_second", float64(counts[u])/max(plainSecs, 1e-9), u+"/s")
		}
	}
	r.goal("ratio_to_plain", plainSecs/max(secs, 1e-9), "×", ">=", GoalReplayPlainRatio)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// replayOnce runs one chronological range and returns the events and bytes written.
func replayOnce(ctx context.Context, c *client.Client, cfg ReplayConfig, query string, from, to client.Position, paged bool, keep io.Writer) (int, int64, time.Duration, error) {
	w := countingWriter{w: keep}
	rd, err := render.New(&w, render.Options{Format: "jsonl"})
	if err != nil {
		return 0, 0, 0, err
	}
	n := 0
	start := time.Now()
	err = c.Range(ctx, client.RangeOptions{Query: query, From: from, To: to, PageSize: cfg.PageSize, ReuseMemory: true, Paged: paged}, func(items []client.Item) error {
		if err := rd.Items(items); err != nil {
			return err
		}
		n += len(items)
		return rd.Flush()
	})
	d := time.Since(start)
	return n, w.n, d, err
}

// countingWriter counts what is written, and passes it on to w when set.
type countingWriter struct {
	n int64
	w io.Writer
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	if w.w != nil {
		return w.w.Write(p)
	}
	return len(p), nil
}

var _ io.Writer = (*countingWriter)(nil)

const loadBatch = 1000

// load appends cfg.Events events and returns the cursors of the first and the last.
func load(ctx context.Context, cfg ReplayConfig, m *eventMaker) (first, last string, err error) {
	total := uint64(cfg.Events)
	var next atomic.Uint64
	var mu sync.Mutex
	var done atomic.Int64
	keep := func(cs []string) {
		if len(cs) == 0 {
			return
		}
		lo, hi := slices.Min(cs), slices.Max(cs)
		mu.Lock()
		if first == "" || lo < first {
			first = lo
		}
		if hi > last {
			last = hi
		}
		mu.Unlock()
	}
	take := func() (uint64, int, bool) {
		f := next.Add(loadBatch) - loadBatch + 1
		if f > total {
			return 0, 0, false
		}
		return f, int(min(loadBatch, total-f+1)), true
	}
	show := func(n int) {
		if d := done.Add(int64(n)); d%(50*loadBatch) < int64(n) {
			cfg.progress("replay: loaded %d of %d events", d, total)
		}
	}
	if st := cfg.Target.Store; st != nil {
		for {
			f, n, ok := take()
			if !ok {
				break
			}
			if ctx.Err() != nil {
				return "", "", ctx.Err()
			}
			buf := make([]byte, 0, n*(m.size+1))
			entries := make([]eventlog.Entry, n)
			for i := range n {
				start := len(buf)
				seq := f + uint64(i)
				buf = m.appendEvent(buf, seq)
				typ := CommonType
				if rare(seq) {
					typ = RareType
				}
				entries[i] = eventlog.Entry{Type: typ, Source: eventSource, ID: m.id(seq), JSON: buf[start:len(buf):len(buf)]}
			}
			res, err := st.Append(ctx, entries)
			if err != nil {
				return "", "", err
			}
			cs := make([]string, 0, 2)
			cs = append(cs, res[0].Cursor.String(), res[len(res)-1].Cursor.String())
			keep(cs)
			show(n)
		}
	} else {
		p, err := newPoster(cfg.Target, cfg.Version, 2)
		if err != nil {
			return "", "", err
		}
		defer p.close()
		g, gctx := errgroup.WithContext(ctx)
		for range 2 {
			g.Go(func() error {
				var body []byte
				for {
					f, n, ok := take()
					if !ok {
						return nil
					}
					body = m.appendBatch(body[:0], f, n)
					reply, err := p.postRetry(gctx, ctBatch, body, nil)
					if err != nil {
						return err
					}
					cs := ackedCursors(reply)
					if len(cs) != n {
						return fmt.Errorf("the node acknowledged a batch of %d events with %d cursors", n, len(cs))
					}
					keep(cs)
					show(n)
				}
			})
		}
		if err := g.Wait(); err != nil {
			return "", "", err
		}
	}
	if first == "" {
		return "", "", fmt.Errorf("no cursors acknowledged")
	}
	return first, last, nil
}

// keepLines replays the range once more into a temporary file, named in *path, and checks
// that it holds the bytes the timed runs wrote.
func keepLines(ctx context.Context, c *client.Client, cfg ReplayConfig, from, to client.Position, want int64, path *string) error {
	f, err := os.CreateTemp("", "evtctl-bench-replay-*.jsonl")
	if err != nil {
		return err
	}
	*path = f.Name()
	_, n, _, err := replayOnce(ctx, c, cfg, "", from, to, false, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != want {
		err = fmt.Errorf("a replay wrote %d bytes, the timed ones %d", n, want)
	}
	return err
}
