package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evtctl/evtctl/internal/retry"
)

// PollersConfig configures Pollers.
type PollersConfig struct {
	Common
	Pollers int // concurrent idle clients, each on its own connection
	Rounds  int // appends (or, on a Tendermint node, events awaited), each waking every poller
	// Warmup is how many rounds go before Rounds, counted in no figure but their own: in
	// the first, the bench's client takes each poller's first reply and the node sends on
	// each connection for the first time, both slower than ever after.
	Warmup int
	Wait   time.Duration // long-poll wait asked for; the node caps it at its maximum
	Query  string        // the pollers' filter (on a Tendermint node, e.g. tm.event = 'NewBlock')
	// Connect is how many pollers may be connecting at once, so that a burst of thousands
	// of connections does not overflow the node's listen queue.
	Connect int
	// Settle bounds the wait for every poller to be waiting, and for every poller to be
	// woken in a round.
	Settle time.Duration
}

// fdMargin is the open files a bench process needs beside its pollers' connections.
const fdMargin = 64

// LimitError says the open-file limit cannot hold the pollers.
type LimitError struct {
	Pollers    int
	Need       uint64
	Soft, Hard uint64
}

func (e *LimitError) Error() string {
	msg := fmt.Sprintf("%d pollers need about %d open files in this process (one per connection, plus %d), but its limit is %d",
		e.Pollers, e.Need, fdMargin, e.Soft)
	if e.Soft < e.Hard {
		msg += fmt.Sprintf(" and it could not be raised to the hard limit of %d", e.Hard)
	} else {
		msg += fmt.Sprintf(" (the hard limit, which only root can raise); %s", strings.ReplaceAll(raiseLimitHelp, "{n}", fmt.Sprint(e.Need)))
	}
	return msg + fmt.Sprintf(", or ask for at most %d pollers with --pollers", max(int(e.Soft)-fdMargin, 0))
}

// CheckOpenFileLimit raises this process's soft limit on open files to the hard limit and
// says whether that holds the connections of so many pollers (twice as many when the node
// runs in this process too). It returns the soft limit; 0 where there is no such limit.
func CheckOpenFileLimit(pollers int, nodeInProcess bool) (uint64, error) {
	soft, hard, err := raiseOpenFileLimit()
	if err != nil || !openFileLimitKnown {
		return 0, err
	}
	need := uint64(pollers) + fdMargin
	if nodeInProcess {
		need += uint64(pollers)
	}
	if soft < need {
		return soft, &LimitError{Pollers: pollers, Need: need, Soft: soft, Hard: hard}
	}
	return soft, nil
}

// Pollers holds many idle long-polling clients on a node and reports the node's memory
// without and with them (from its /metrics) and how long an append takes to wake them all.
//
// Each poller has its own connection and asks for the first item after the newest cursor,
// waiting up to Wait; when the wait ends it asks again. Once every poller is waiting (the
// node's evtctl_waiting_readers says so on an evtctl node), one event is appended and the
// time from its acknowledgement to each poller's reply is recorded; then every poller polls
// again after that event, and the next round begins. A Tendermint node takes no appends: a
// round there waits for the node's next event, and only the spread of the wake-ups (from
// the first poller's reply to each other's) is measured.
func Pollers(ctx context.Context, cfg PollersConfig) (*Report, error) {
	if cfg.Pollers <= 0 {
		cfg.Pollers = 10_000
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 5
	}
	cfg.Warmup = max(cfg.Warmup, 0)
	if cfg.Wait <= 0 {
		cfg.Wait = 30 * time.Second
	}
	if cfg.Connect <= 0 {
		cfg.Connect = 100
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 2 * time.Minute
	}
	K := cfg.Pollers
	r, info := begin(ctx, "pollers", cfg.Common)
	r.param("pollers", K, "connections")
	r.param("rounds", cfg.Rounds, "rounds")
	r.param("warmup_rounds", cfg.Warmup, "rounds")
	r.param("wait", cfg.Wait, "s")
	if cfg.Query != "" {
		r.param("query", cfg.Query, "")
	}
	if info.Kind == KindUnknown {
		return nil, fmt.Errorf("the node at %s does not answer the events method: %v", cfg.Target.URL, info.Err)
	}
	if !info.Events() {
		return nil, &KindError{"pollers", info.Kind, "it holds idle long-polls of the events method, which the node does not serve"}
	}
	soft, err := CheckOpenFileLimit(K, cfg.Target.Embedded == "in-process")
	if err != nil {
		return nil, err
	}
	if soft > 0 {
		r.param("open_file_limit", float64(soft), "files")
	}
	if cfg.Target.Embedded == "in-process" {
		r.note("the node runs in this process: its memory figures include the pollers' side")
	}

	mhc := &http.Client{Timeout: 30 * time.Second}
	if mtr, err := newTransport(cfg.Target, 1); err == nil {
		mhc.Transport = mtr
		defer mtr.CloseIdleConnections()
	}
	m0, merr := scrapeMetrics(ctx, mhc, cfg.Target)
	if merr != nil {
		r.note("the node's memory is not available (%v); point --metrics-url at its Prometheus endpoint", merr)
	}
	waiting0, _ := m0.value("evtctl_waiting_readers")
	var client0 runtime.MemStats
	runtime.ReadMemStats(&client0)

	ep, err := newPollEndpoint(cfg.Target, cfg.Version, cfg.Query, cfg.Wait)
	if err != nil {
		return nil, err
	}

	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stop()
		wg.Wait()
	}()
	st := &pollState{
		ep:      ep,
		cfg:     cfg,
		pollers: make([]poller, K),
		connect: make(chan struct{}, cfg.Connect),
		fatal:   make(chan error, 1),
	}
	start := time.Now()
	for i := range st.pollers {
		st.pollers[i].got = make([]receipt, cfg.Warmup+cfg.Rounds)
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.run(pctx, &st.pollers[i], info.Newest)
		}()
	}
	// All waiting: on the client, every request written; on an evtctl node, its count of
	// waiting readers. The evtctl count is the authority: a request written is not yet
	// one the node is waiting on.
	allWaiting := func(phase string) error {
		deadline := time.Now().Add(cfg.Settle)
		for {
			w := st.waiting.Load()
			server := int64(-1)
			if w >= int64(K) {
				if info.Kind != KindEvtctl || merr != nil {
					return nil
				}
				if m, err := scrapeMetrics(pctx, mhc, cfg.Target); err == nil {
					v, _ := m.value("evtctl_waiting_readers")
					server = int64(v - waiting0)
					if server >= int64(K) {
						return nil
					}
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: only %d of %d pollers were waiting after %s (the node counted %d)", phase, w, K, cfg.Settle, server)
			}
			cfg.progress("pollers: %s: %d of %d waiting", phase, w, K)
			select {
			case err := <-st.fatal:
				return err
			case <-pctx.Done():
				return pctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	var wf wakeSamples
	early, rounds := 0, 0
	appended := info.Kind == KindEvtctl
	// partial ends a run that could not complete: an interruption gives what was measured.
	partial := func(err error) (*Report, error) {
		if ctx.Err() == nil {
			return nil, err
		}
		stop()
		wg.Wait()
		r.finish(ctx)
		wf.figures(r, appended, early, rounds, K)
		return r, ctx.Err()
	}
	if err := allWaiting("connecting"); err != nil {
		return partial(err)
	}
	connected := time.Since(start)
	r.figure("connect_seconds", connected.Seconds(), "s")

	var m1 metrics
	if merr == nil {
		if m1, err = scrapeMetrics(pctx, mhc, cfg.Target); err != nil {
			r.note("reading the node's memory with the pollers waiting failed: %v", err)
		}
	}
	var client1 runtime.MemStats
	runtime.ReadMemStats(&client1)
	memFigures(r, K, m0, m1)
	r.figure("client_memory_added", float64(int64(client1.HeapInuse+client1.StackInuse)-int64(client0.HeapInuse+client0.StackInuse))/1e6, "MB")

	var poster *poster
	if appended {
		if poster, err = newPoster(cfg.Target, cfg.Version, 1); err != nil {
			return nil, err
		}
		defer poster.close()
	}
	maker, err := newEventMaker(DefaultEventSize, newRunID())
	if err != nil {
		return nil, err
	}
	// CPU used by the node and by this process while the rounds run, to tell where the
	// time of a wake goes when both share the machine.
	var nodeCPU0 float64
	var clientCPU0 time.Duration
	var nodeCPUOK, clientCPUOK bool
	for round := -cfg.Warmup; round < cfg.Rounds; round++ {
		if round > -cfg.Warmup {
			if err := allWaiting(roundName(round)); err != nil {
				return partial(err)
			}
		}
		if round == -cfg.Warmup || round == 0 {
			// One reading ends the warm-up and starts the measured rounds.
			c, ok := cpuSeconds(pctx, mhc, cfg.Target, merr)
			if round == 0 && cfg.Warmup > 0 && ok && nodeCPUOK {
				r.figure("warmup_node_cpu_per_wake", (c-nodeCPU0)/float64(cfg.Warmup*K)*1e6, "µs")
			}
			nodeCPU0, nodeCPUOK = c, ok
		}
		if round == 0 {
			clientCPU0, clientCPUOK = processCPU()
		}
		got := round + cfg.Warmup // the receipt of this round, in each poller's got
		var sendAt, ackAt time.Time
		var cur string
		if poster != nil {
			sendAt = time.Now()
			reply, err := poster.post(pctx, ctStructured, maker.appendEvent(nil, uint64(got+1)))
			ackAt = time.Now()
			if err != nil {
				return partial(fmt.Errorf("appending the event of %s: %w", roundName(round), err))
			}
			if cs := ackedCursors(reply); len(cs) == 1 {
				cur = cs[0]
			}
		} else {
			cfg.progress("pollers: %s: waiting for the node's next event", roundName(round))
		}
		// Every poller's reply for this round.
		deadline := time.Now().Add(cfg.Settle)
		for !st.woken(got) {
			if time.Now().After(deadline) {
				return partial(fmt.Errorf("%s: only %d of %d pollers woke within %s", roundName(round), st.countWoken(got), K, cfg.Settle))
			}
			select {
			case err := <-st.fatal:
				return partial(err)
			case <-pctx.Done():
				return partial(pctx.Err())
			case <-time.After(2 * time.Millisecond):
			}
		}
		if round < 0 {
			cfg.progress("pollers: %s: all %d woke", roundName(round), K)
			continue
		}
		first := int64(0)
		for i := range st.pollers {
			g := st.pollers[i].got[got]
			if first == 0 || g.at < first {
				first = g.at
			}
		}
		differ := 0
		for i := range st.pollers {
			g := st.pollers[i].got[got]
			if cur != "" && g.cursor != cur {
				return partial(fmt.Errorf("round %d: a poller was woken by %s, not by the event appended (%s): someone else is appending to this node; run pollers on a node of its own (--embedded)", round+1, g.cursor, cur))
			}
			if g.cursor != st.pollers[0].got[got].cursor {
				differ++
			}
			wf.spread.add(time.Duration(g.at - first))
			if g.arrived {
				wf.arrivals++
			}
			if poster != nil {
				wf.fromSend.add(time.Duration(g.at - sendAt.UnixNano()))
				d := time.Duration(g.at - ackAt.UnixNano())
				if d < 0 {
					early++
					d = 0
				}
				wf.wake.add(d)
				wf.read.add(max(time.Duration(g.read-ackAt.UnixNano()), 0))
			}
		}
		if differ > 0 {
			r.note("round %d: %d pollers were woken by another event than the first poller", round+1, differ)
		}
		rounds++
		cfg.progress("pollers: round %d of %d: all %d woke", round+1, cfg.Rounds, K)
	}
	// Every poller's next long-poll read and parked, as before each round: the node's CPU
	// per round is then that of a wake and the long-poll after it, the last round's too.
	if rounds > 0 {
		if err := allWaiting("after the last round"); err != nil {
			return partial(err)
		}
	}
	if nodeCPU1, ok := cpuSeconds(pctx, mhc, cfg.Target, merr); ok && nodeCPUOK && rounds > 0 {
		perRound := (nodeCPU1 - nodeCPU0) / float64(rounds)
		r.figure("node_cpu_per_round", perRound, "s")
		// A round is a wake and a new long-poll for every poller.
		if appended && K >= 10_000 {
			r.goal("node_cpu_per_wake", perRound/float64(K)*1e6, "µs", "<=", GoalPollersNodeCPUPerWake)
		} else {
			r.figure("node_cpu_per_wake", perRound/float64(K)*1e6, "µs")
		}
	}
	if clientCPU1, ok := processCPU(); ok && clientCPUOK && rounds > 0 {
		r.figure("client_cpu_per_round", (clientCPU1-clientCPU0).Seconds()/float64(rounds), "s")
	}
	stop()
	wg.Wait()
	r.finish(ctx)
	wf.figures(r, appended, early, rounds, K)
	r.figure("poller_errors", float64(st.errors.Load()), "errors")
	return r, ctx.Err()
}

// nodeCPUReader returns a function that reads the node's CPU seconds from its /metrics,
// reporting false for a node in this process (its CPU is this process's) or when they cannot
// be read, and a function that closes the scrapes' connections.
func nodeCPUReader(ctx context.Context, t Target) (read func() (float64, bool), closeIdle func()) {
	scrapes := &http.Transport{Proxy: nil}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: scrapes}
	return func() (float64, bool) {
		if t.Embedded == "in-process" {
			return 0, false
		}
		return cpuSeconds(ctx, hc, t, nil)
	}, scrapes.CloseIdleConnections
}

// cpuSeconds reads the node's process_cpu_seconds_total.
func cpuSeconds(ctx context.Context, hc *http.Client, t Target, merr error) (float64, bool) {
	if merr != nil {
		return 0, false
	}
	m, err := scrapeMetrics(ctx, hc, t)
	if err != nil {
		return 0, false
	}
	return m.value("process_cpu_seconds_total")
}

func memFigures(r *Report, K int, m0, m1 metrics) {
	if m0 == nil || m1 == nil {
		return
	}
	delta := func(series string) (before, with float64, ok bool) {
		b, ok1 := m0.value(series)
		w, ok2 := m1.value(series)
		return b, w, ok1 && ok2
	}
	if b, w, ok := delta("process_resident_memory_bytes"); ok {
		r.figure("node_rss_before", b/1e6, "MB")
		r.figure("node_rss_with_pollers", w/1e6, "MB")
		if K >= 10_000 {
			r.goal("node_rss_added", (w-b)/1e6, "MB", "<=", GoalPollersMemoryMB*float64(K)/10_000)
		} else {
			r.figure("node_rss_added", (w-b)/1e6, "MB")
		}
		r.figure("node_rss_per_poller", (w-b)/float64(K)/1e3, "kB")
	}
	if b, w, ok := delta("go_memstats_heap_inuse_bytes"); ok {
		r.figure("node_heap_added", (w-b)/1e6, "MB")
	}
	if b, w, ok := delta("go_memstats_stack_inuse_bytes"); ok {
		r.figure("node_stacks_added", (w-b)/1e6, "MB")
	}
	if b, w, ok := delta("go_goroutines"); ok {
		r.figure("node_goroutines_added", w-b, "goroutines")
	}
	if b, w, ok := delta("evtctl_waiting_readers"); ok {
		r.figure("node_waiting_readers", w-b, "readers")
	}
}

// roundName names a round for messages: round 1 is the first measured, warm-up rounds go
// before it.
func roundName(round int) string {
	if round < 0 {
		return fmt.Sprintf("warm-up round %d", -round)
	}
	return fmt.Sprintf("round %d", round+1)
}

// wakeSamples are the times of the rounds' replies.
type wakeSamples struct {
	wake     samples // from the append's ack to the reply's arrival
	read     samples // from the append's ack to the bench's reading the reply
	fromSend samples // from the start of the append to the reply's arrival
	spread   samples // from the round's first reply to each
	arrivals int     // replies whose arrival the kernel stamped
}

func (w *wakeSamples) figures(r *Report, appended bool, early, rounds, K int) {
	r.figure("rounds_completed", float64(rounds), "rounds")
	r.figure("wakes", float64(w.spread.len()), "replies")
	if appended {
		r.figure("wake_p50", ms(w.wake.percentile(50)), "ms")
		r.figure("wake_p90", ms(w.wake.percentile(90)), "ms")
		r.goal("wake_p99", ms(w.wake.percentile(99)), "ms", "<=", GoalPollersWakeP99Ms)
		r.figure("wake_max", ms(w.wake.max()), "ms")
		r.latencies("wake_read", &w.read)
		r.latencies("wake_from_send", &w.fromSend)
		if early > 0 {
			r.note("%d replies reached pollers before the append was acknowledged; they count as 0 ms (wake_from_send_* times from the start of the append instead)", early)
		}
	}
	if w.arrivals > 0 {
		r.note("wake_* time %d of %d replies to their arrival at the poller's socket (the kernel's receive time, SO_TIMESTAMPNS); wake_read_* to when the bench's client, one process for every poller, came to read them", w.arrivals, w.spread.len())
	} else {
		r.note("wake_* and wake_read_* time replies to when the bench's client, one process for every poller, read them")
	}
	r.figure("wake_spread_p50", ms(w.spread.percentile(50)), "ms")
	r.figure("wake_spread_p99", ms(w.spread.percentile(99)), "ms")
	r.figure("wake_spread_max", ms(w.spread.max()), "ms")
	if rounds > 0 && w.spread.len() != rounds*K {
		r.note("%d wake-ups recorded for %d rounds of %d pollers", w.spread.len(), rounds, K)
	}
}

type receipt struct {
	cursor  string
	at      int64 // Unix nanoseconds: the reply's arrival at the socket, when known, else read
	read    int64 // when the bench read the reply
	arrived bool  // at is the kernel's receive time
}

type poller struct {
	got []receipt    // one per round, written only by the poller's goroutine
	n   atomic.Int32 // receipts in got
}

type pollState struct {
	ep      *pollEndpoint
	cfg     PollersConfig
	pollers []poller
	connect chan struct{} // semaphore of connection attempts
	waiting atomic.Int64  // requests written and not yet answered
	errors  atomic.Int64  // failed requests, retried
	fatal   chan error
}

// run is one poller: long-poll after the newest cursor, record each reply with an item,
// poll again after it. Its first request holds a place among cfg.Connect.
func (st *pollState) run(ctx context.Context, p *poller, after string) {
	first, failures := true, 0
	var pc *pollConn
	defer func() {
		if pc != nil {
			pc.close()
		}
	}()
	for ctx.Err() == nil {
		if first {
			select {
			case st.connect <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
		var err error
		if pc == nil {
			pc, err = st.ep.dial(ctx)
		}
		if err == nil {
			err = pc.send(after)
		}
		var newest string
		keep := false
		if err == nil {
			st.waiting.Add(1)
			if first {
				<-st.connect
				first = false
			}
			newest, keep, err = pc.receive()
			st.waiting.Add(-1)
		} else if first {
			<-st.connect
		}
		read := time.Now().UnixNano()
		at := pc.arrived()
		if !keep && pc != nil {
			pc.close()
			pc = nil
		}
		if err != nil {
			if ctx.Err() != nil || !st.failed(ctx, err, &failures) {
				return
			}
			continue
		}
		failures = 0
		if newest != "" { // else the wait ended: poll again
			after = newest
			st.record(p, newest, at, read)
		}
	}
}

// failed counts a failed request of a poller; false when the poller is to stop: the node
// refused it, or it failed too often in a row. It waits before the poller tries again.
func (st *pollState) failed(ctx context.Context, err error, failures *int) bool {
	var re *errRefused
	if errors.As(err, &re) {
		st.fail(fmt.Errorf("the node refused a poller: %v; start it with --max-waiters above %d", err, st.cfg.Pollers))
		return false
	}
	st.errors.Add(1)
	*failures++
	if *failures > 5 {
		st.fail(fmt.Errorf("a poller failed %d times in a row: %w", *failures, err))
		return false
	}
	return retry.Sleep(ctx, time.Duration(*failures)*100*time.Millisecond) == nil
}

// record keeps a reply with an item: when it arrived at the socket (at, Unix nanoseconds;
// 0 when not known) and when the bench read it.
func (st *pollState) record(p *poller, cursor string, at, read int64) {
	arrived := at > 0 && at <= read
	if !arrived {
		at = read
	}
	if n := int(p.n.Load()); n < len(p.got) {
		p.got[n] = receipt{cursor: cursor, at: at, read: read, arrived: arrived}
		p.n.Store(int32(n + 1))
	}
}

// woken reports whether every poller has its reply of round r.
func (st *pollState) woken(r int) bool {
	for i := range st.pollers {
		if int(st.pollers[i].n.Load()) <= r {
			return false
		}
	}
	return true
}

func (st *pollState) countWoken(r int) int {
	n := 0
	for i := range st.pollers {
		if int(st.pollers[i].n.Load()) > r {
			n++
		}
	}
	return n
}

func (st *pollState) fail(err error) {
	select {
	case st.fatal <- err:
	default:
	}
}
