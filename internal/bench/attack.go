package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/wire"
)

// The attacks Attack can make: each a way for a few clients to shut others out, which a node
// must withstand.
const (
	// AttackBodyless: POSTs to /events that send their headers, say their body is as large
	// as a node takes (8 MiB), and never send it.
	AttackBodyless = "bodyless"
	// AttackTokenless: JSON-RPC POSTs to / from clients with no token (reads are open where
	// producers need a token) that say their body is 1 MiB and never send it.
	AttackTokenless = "tokenless"
	// AttackStreams: readers of the node's stream (GET /events/stream) that take a few bytes
	// now and then, and come back when they are cut off or refused.
	AttackStreams = "streams"
	// AttackScans: clients that loop a costly query the node allows: 87 CONTAINS conditions
	// over a long field that no event holds.
	AttackScans = "scans"
)

// AttackNames are the attacks, in the order Attack makes them.
var AttackNames = []string{AttackBodyless, AttackTokenless, AttackStreams, AttackScans}

// Goals for a node under attack, against the same node unattacked in the same run.
const (
	GoalAttackIngestRatio = 0.8 // an honest producer's events/s during an attack, over before it
	GoalAttackProbeP99Ms  = 50  // a read of five items, while costly scans run
)

// AttackConfig configures Attack.
type AttackConfig struct {
	Common
	Attacks []string      // of AttackNames; default all of them
	Phase   time.Duration // each window before, during and after an attack; default 5s
	// Rounds is how many times each attack is made, each after a window without it: the
	// windows of each phase are measured together, so that a machine whose speed drifts
	// weighs on both alike. Default 1.
	Rounds      int
	Producers   int // honest producers, one request in flight each; default 4
	BatchSize   int // events per honest request; default 100
	EventSize   int
	ProbeEvery  time.Duration // between the probe's reads; default 50ms
	Connections int           // held POSTs of bodyless and tokenless; default 64
	Streams     int           // stalled stream readers; default 256
	Scanners    int           // clients looping the costly query; default 16
	// LongEvents are loaded before the scans attack, each with a field of LongField bytes
	// that its query scans; defaults 2,000 and 8 KiB.
	LongEvents int
	LongField  int
}

// attackSetUp bounds the wait for an attack's attackers to be in place before its window
// is measured without them all.
const attackSetUp = 10 * time.Second

// phaseNames are the phases of an attack.
var phaseNames = [3]string{"before", "during", "after"}

// phase is what the honest clients measured in the windows of one phase of an attack.
type phase struct {
	dur     time.Duration // of its windows, together
	events  atomic.Int64  // acknowledged to the honest producers
	busy    atomic.Int64  // 503 and 429 replies to them
	probe   samples       // latencies of the probe's reads
	failed  atomic.Int64  // probe reads that failed
	rss     float64       // the node's resident memory at the end of its last window, bytes; 0: unknown
	streams float64       // the node's streams then (evtctl_streams); -1: unknown
}

func (p *phase) seconds() float64 { return max(p.dur.Seconds(), 1e-9) }

// Attack runs honest producers and a probe (a read of five items) against the node, and
// makes each attack in turn: for each, it measures the producers' events/s and the probe's
// latency before the attack, while it lasts and after it, and reports them with the ratios
// of during to before. The attackers run in this process.
func Attack(ctx context.Context, cfg AttackConfig) (*Report, error) {
	cfg.defaults()
	r, info := begin(ctx, "attack", cfg.Common)
	r.param("attacks", strings.Join(cfg.Attacks, ","), "")
	r.param("phase", cfg.Phase, "s")
	r.param("rounds", cfg.Rounds, "rounds")
	r.param("producers", cfg.Producers, "connections")
	r.param("batch_size", cfg.BatchSize, "events")
	r.param("event_size", cfg.EventSize, "bytes")
	r.param("probe_every", cfg.ProbeEvery, "s")
	r.param("connections", cfg.Connections, "connections")
	r.param("streams", cfg.Streams, "connections")
	r.param("scanners", cfg.Scanners, "clients")
	if info.Kind != KindEvtctl {
		return nil, &KindError{"attack", info.Kind, "its honest producers send events, which only an evtctl node takes; run it against one or with --embedded"}
	}
	u, err := url.Parse(cfg.Target.URL)
	if err != nil || u.Scheme != "http" {
		return nil, fmt.Errorf("bench attack makes its attacks over plain HTTP connections: give an http:// node, got %s", cfg.Target.URL)
	}
	a := &attacker{cfg: cfg, addr: u.Host}
	if a.maker, err = newEventMaker(cfg.EventSize, newRunID()); err != nil {
		return nil, err
	}
	if a.p, err = newPoster(cfg.Target, cfg.Version, cfg.Producers+1); err != nil {
		return nil, err
	}
	defer a.p.close()
	a.cur.Store(&phase{}) // the warm-up: in no figure

	runCtx, stop := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(runCtx)
	for range cfg.Producers {
		g.Go(func() error { return a.produce(gctx) })
	}
	g.Go(func() error { return a.probe(gctx) })

	measured := map[string]*[3]*phase{}
	var runErr error
	for _, name := range cfg.Attacks {
		if runErr = a.run(gctx, name, measured, r); runErr != nil {
			break
		}
	}
	stop()
	if err := g.Wait(); err != nil && !interrupted(runCtx, err) && runErr == nil {
		runErr = err
	}
	if runErr != nil && !interrupted(ctx, runErr) {
		return nil, runErr
	}
	r.finish(ctx)
	for _, name := range cfg.Attacks {
		if ph, ok := measured[name]; ok {
			a.report(r, name, ph)
		}
	}
	if cfg.Target.Embedded == "in-process" {
		r.note("the node runs in this process: its memory figures include the bench's")
	}
	r.note("each attack's figures: before it, while it lasts (after its attackers are in place), and after they have gone; ratios are during over before, in one run")
	return r, ctx.Err()
}

func (cfg *AttackConfig) defaults() {
	if len(cfg.Attacks) == 0 {
		cfg.Attacks = AttackNames
	}
	if cfg.Phase <= 0 {
		cfg.Phase = 5 * time.Second
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 1
	}
	if cfg.Producers <= 0 {
		cfg.Producers = 4
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 100
	}
	if cfg.EventSize <= 0 {
		cfg.EventSize = DefaultEventSize
	}
	if cfg.ProbeEvery <= 0 {
		cfg.ProbeEvery = 50 * time.Millisecond
	}
	if cfg.Connections <= 0 {
		cfg.Connections = 64
	}
	if cfg.Streams <= 0 {
		cfg.Streams = 256
	}
	if cfg.Scanners <= 0 {
		cfg.Scanners = 16
	}
	if cfg.LongEvents <= 0 {
		cfg.LongEvents = 2000
	}
	if cfg.LongField <= 0 {
		cfg.LongField = 8 << 10
	}
}

// attacker is the state of an Attack run.
type attacker struct {
	cfg   AttackConfig
	addr  string // host:port of the node
	maker *eventMaker
	p     *poster
	next  atomic.Uint64         // honest events handed out
	long  string                // the cursor of the first long event (scans), once loaded
	cur   atomic.Pointer[phase] // the phase being measured
	held  atomic.Int64          // attackers' connections in place now
	tries atomic.Int64          // attackers' connections made
}

// run makes one attack, Rounds times: a window before it, the attack in place, a window
// while it lasts, the attackers gone; then a window after.
func (a *attacker) run(ctx context.Context, name string, measured map[string]*[3]*phase, r *Report) error {
	if name == AttackScans {
		a.cfg.progress("attack %s: loading %d events of %d bytes for the query to scan", name, a.cfg.LongEvents, a.cfg.LongField)
		if err := a.loadLong(ctx); err != nil {
			return err
		}
	}
	var ph [3]*phase
	for i := range ph {
		ph[i] = &phase{streams: -1}
	}
	window := func(i, round int) error {
		p := ph[i]
		a.cur.Store(p)
		a.cfg.progress("attack %s: %s (round %d of %d)", name, phaseNames[i], round+1, a.cfg.Rounds)
		if i == 1 {
			// Once in place, the attack's streams are counted; the node may cut stalled
			// ones before the window ends.
			a.nodeFigures(ctx, p)
		}
		start := time.Now()
		err := retry.Sleep(ctx, a.cfg.Phase)
		p.dur += time.Since(start)
		a.cur.Store(&phase{}) // between windows: in no figure
		a.nodeFigures(ctx, p)
		return err
	}
	var inPlace, attempts int64
	for round := range a.cfg.Rounds {
		if err := window(0, round); err != nil {
			return err
		}
		actx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		a.held.Store(0)
		a.tries.Store(0)
		want, err := a.start(actx, &wg, name)
		if err != nil {
			stop()
			return err
		}
		// Measured once the attackers are in place (or after a while without them all: a
		// busy machine can take seconds to set up hundreds of connections).
		began := time.Now()
		for a.held.Load() < int64(want) && time.Since(began) < max(a.cfg.Phase, attackSetUp) && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		inPlace += a.held.Load()
		err = window(1, round)
		attempts += a.tries.Load()
		stop()
		wg.Wait()
		if err != nil {
			return err
		}
	}
	if err := window(2, a.cfg.Rounds-1); err != nil {
		return err
	}
	measured[name] = &ph
	r.figure(name+"_attackers_in_place", float64(inPlace)/float64(a.cfg.Rounds), "connections")
	r.figure(name+"_attackers_connections_made", float64(attempts), "connections")
	return nil
}

// report writes an attack's figures.
func (a *attacker) report(r *Report, name string, ph *[3]*phase) {
	rate := func(p *phase) float64 { return float64(p.events.Load()) / p.seconds() }
	for i, p := range ph {
		r.figure(fmt.Sprintf("%s_ingest_%s", name, phaseNames[i]), rate(p), "events/s")
	}
	ratio := rate(ph[1]) / max(rate(ph[0]), 1e-9)
	if name == AttackScans {
		r.figure(name+"_ingest_ratio", ratio, "×")
	} else {
		r.goal(name+"_ingest_ratio", ratio, "×", ">=", GoalAttackIngestRatio)
	}
	r.figure(name+"_ingest_ratio_after", rate(ph[2])/max(rate(ph[0]), 1e-9), "×")
	r.figure(name+"_busy_replies_during", float64(ph[1].busy.Load()), "replies")
	for i, p := range ph {
		prefix := fmt.Sprintf("%s_probe_%s", name, phaseNames[i])
		if i == 1 && name == AttackScans {
			r.goal(prefix+"_p99", ms(p.probe.percentile(99)), "ms", "<=", GoalAttackProbeP99Ms)
		} else {
			r.figure(prefix+"_p99", ms(p.probe.percentile(99)), "ms")
		}
		r.figure(prefix+"_p50", ms(p.probe.percentile(50)), "ms")
		if i == 1 {
			r.figure(prefix+"_max", ms(p.probe.max()), "ms")
			r.figure(prefix+"_reads", float64(p.probe.len()), "reads")
			r.figure(prefix+"_failed", float64(p.failed.Load()), "reads")
		}
	}
	for i, p := range ph {
		if p.rss > 0 {
			r.figure(fmt.Sprintf("%s_node_rss_%s", name, phaseNames[i]), p.rss/(1<<20), "MiB")
		}
	}
	if name == AttackStreams && ph[1].streams >= 0 {
		r.figure(name+"_node_streams_during", ph[1].streams, "streams")
	}
}

// nodeFigures reads the node's memory and streams from its metrics, when it has them: its
// memory now, and the most streams it was seen holding in the window.
func (a *attacker) nodeFigures(ctx context.Context, p *phase) {
	m, err := scrapeMetrics(ctx, a.p.hc, a.cfg.Target)
	if err != nil {
		return
	}
	if v, ok := m.value("process_resident_memory_bytes"); ok {
		p.rss = v
	}
	if v, ok := m.value("evtctl_streams"); ok {
		p.streams = max(p.streams, v) // the most seen in the window
	}
}

// produce is an honest producer: batches as fast as the node acknowledges them, waiting out
// busy replies as a client does.
func (a *attacker) produce(ctx context.Context) error {
	var body []byte
	n := a.cfg.BatchSize
	for ctx.Err() == nil {
		first := a.next.Add(uint64(n)) - uint64(n) + 1
		body = a.maker.appendBatch(body[:0], first, n)
		_, err := a.p.postRetry(ctx, ctBatch, body, func() { a.cur.Load().busy.Add(1) })
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("an honest producer: %w", err)
		}
		a.cur.Load().events.Add(int64(n))
	}
	return nil
}

// headBound is a cursor after every real one: as before, a bound that makes the node answer
// at once.
const headBound = "7fffffffffffffff-0000000000000000"

// probe reads the five newest items now and then, on a connection of its own, and times
// each read.
func (a *attacker) probe(ctx context.Context) error {
	tr, err := newTransport(a.cfg.Target, 1)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	u := a.cfg.Target.URL + wire.PathEvents + "?" + wire.ParamMaxItems + "=5&" + wire.ParamBefore + "=" + headBound
	tick := time.NewTicker(a.cfg.ProbeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		p := a.cur.Load()
		t0 := time.Now()
		body, status, err := get(ctx, hc, u, a.cfg.Target.Token)
		d := time.Since(t0)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil || status != http.StatusOK || !strings.HasPrefix(string(body), `{"`+wire.KeyItems+`":[`) {
			p.failed.Add(1)
			continue
		}
		p.probe.add(d)
	}
}

// loadLong sends the events the scans attack's query scans.
func (a *attacker) loadLong(ctx context.Context) error {
	text := strings.Repeat("the quick brown fox jumps over the lazy dog ", a.cfg.LongField/44+1)[:a.cfg.LongField]
	run := newRunID()
	var body []byte
	for i := 0; i < a.cfg.LongEvents; i += 50 {
		body = append(body[:0], '[')
		for j := i; j < min(i+50, a.cfg.LongEvents); j++ {
			if j > i {
				body = append(body, ',')
			}
			body = fmt.Appendf(body, `{"specversion":"1.0","id":"%s-long-%d","source":"/bench/attack","type":"bench.attack.long","datacontenttype":"application/json","data":{"text":%q}}`, run, j, text)
		}
		body = append(body, ']')
		reply, err := a.p.postRetry(ctx, ctBatch, body, nil)
		if err != nil {
			return fmt.Errorf("loading the events to scan: %w", err)
		}
		if cs := ackedCursors(reply); a.long == "" && len(cs) > 0 {
			a.long = cs[0]
		}
	}
	return nil
}

// costlyQuery is an allowed query that scans the long field of every event and matches
// none: 87 CONTAINS conditions.
func costlyQuery() string {
	conds := make([]string, 87)
	for i := range conds {
		conds[i] = fmt.Sprintf("data.text CONTAINS 'needle-%02d'", i)
	}
	return strings.Join(conds, " OR ")
}

// start sets an attack's attackers going, and says how many connections it holds in place.
func (a *attacker) start(ctx context.Context, wg *sync.WaitGroup, name string) (int, error) {
	auth := func(token string) string {
		if token == "" {
			return ""
		}
		return "Authorization: Bearer " + token + "\r\n"
	}
	switch name {
	case AttackBodyless:
		req := "POST " + wire.PathEvents + " HTTP/1.1\r\nHost: " + a.addr + "\r\nContent-Type: " + ctBatch + "\r\n" +
			auth(a.cfg.Target.ingestToken()) + "Content-Length: 8388608\r\n\r\n"
		for range a.cfg.Connections {
			wg.Go(func() { a.holdRequest(ctx, req) })
		}
		return a.cfg.Connections, nil
	case AttackTokenless:
		req := "POST " + wire.PathRPC + " HTTP/1.1\r\nHost: " + a.addr + "\r\nContent-Type: " + wire.MediaJSON + "\r\nContent-Length: 1048576\r\n\r\n"
		for range a.cfg.Connections {
			wg.Go(func() { a.holdRequest(ctx, req) })
		}
		return a.cfg.Connections, nil
	case AttackStreams:
		req := "GET " + wire.PathStream + " HTTP/1.1\r\nHost: " + a.addr + "\r\n" + auth(a.cfg.Target.Token) + "\r\n"
		for range a.cfg.Streams {
			wg.Go(func() { a.stallStream(ctx, req) })
		}
		return a.cfg.Streams, nil
	case AttackScans:
		tr, err := newTransport(a.cfg.Target, a.cfg.Scanners)
		if err != nil {
			return 0, err
		}
		hc := &http.Client{Transport: tr}
		// Oldest first from the long events, and never waiting: before is set.
		u := a.cfg.Target.URL + wire.PathEvents + "?" + wire.ParamMaxItems + "=10&" + wire.ParamOrder + "=" + wire.OrderAsc +
			"&" + wire.ParamAfter + "=" + url.QueryEscape(a.long) + "&" + wire.ParamBefore + "=" + headBound +
			"&" + wire.ParamQuery + "=" + url.QueryEscape(costlyQuery())
		for range a.cfg.Scanners {
			wg.Go(func() { a.scan(ctx, hc, u) })
		}
		wg.Go(func() { <-ctx.Done(); tr.CloseIdleConnections() })
		return a.cfg.Scanners, nil
	}
	return 0, fmt.Errorf("no attack named %q (want one of %s)", name, strings.Join(AttackNames, ", "))
}

// dial connects to the node, counting the connection.
func (a *attacker) dial(ctx context.Context) (net.Conn, error) {
	a.tries.Add(1)
	var d net.Dialer
	return d.DialContext(ctx, "tcp", a.addr)
}

// closeOnDone closes c when ctx ends, so that a read blocked on it returns.
func closeOnDone(ctx context.Context, c net.Conn) (stop func() bool) {
	return context.AfterFunc(ctx, func() { c.Close() })
}

// holdRequest sends req's headers and never its body, holding the connection until the node
// answers or closes it; then it does it again.
func (a *attacker) holdRequest(ctx context.Context, req string) {
	for ctx.Err() == nil {
		c, err := a.dial(ctx)
		if err != nil {
			_ = retry.Sleep(ctx, 100*time.Millisecond)
			continue
		}
		stop := closeOnDone(ctx, c)
		if _, err := io.WriteString(c, req); err == nil {
			a.held.Add(1)
			_, _ = c.Read(make([]byte, 1)) // until the node answers or closes it
			a.held.Add(-1)
		}
		stop()
		c.Close()
		_ = retry.Sleep(ctx, 20*time.Millisecond) // not a flood of connections: a few held ones
	}
}

// stallStream reads the node's stream, taking a few bytes every 25 s; refused or cut off,
// it comes back a second later.
func (a *attacker) stallStream(ctx context.Context, req string) {
	for ctx.Err() == nil {
		c, err := a.dial(ctx)
		if err != nil {
			_ = retry.Sleep(ctx, time.Second)
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4 << 10)
		}
		stop := closeOnDone(ctx, c)
		if _, err := io.WriteString(c, req); err == nil {
			br := bufio.NewReaderSize(c, 16)
			status, err := br.ReadString('\n')
			if err == nil && strings.Contains(status, " 200 ") {
				a.held.Add(1)
				buf := make([]byte, 16)
				for {
					if _, err := br.Read(buf); err != nil {
						break
					}
					if retry.Sleep(ctx, 25*time.Second) != nil {
						break
					}
				}
				a.held.Add(-1)
			}
		}
		stop()
		c.Close()
		_ = retry.Sleep(ctx, time.Second)
	}
}

// scan loops the costly query, as fast as the node answers it.
func (a *attacker) scan(ctx context.Context, hc *http.Client, u string) {
	a.held.Add(1)
	defer a.held.Add(-1)
	for ctx.Err() == nil {
		a.tries.Add(1)
		_, _, err := get(ctx, hc, u, a.cfg.Target.Token)
		if err != nil && !errors.Is(err, context.Canceled) {
			_ = retry.Sleep(ctx, 100*time.Millisecond)
		}
	}
}

// ParseAttacks reads a comma-separated list of attack names.
func ParseAttacks(s string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		known := false
		for _, n := range AttackNames {
			known = known || n == name
		}
		if !known {
			return nil, fmt.Errorf("no attack named %q (want some of %s)", name, strings.Join(AttackNames, ", "))
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil, errors.New("no attack named")
	}
	return out, nil
}
