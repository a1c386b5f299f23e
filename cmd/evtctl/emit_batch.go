package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/emit"
	"github.com/evtctl/evtctl/internal/eventgen"
	"github.com/evtctl/evtctl/internal/lint"
)

// sizing returns how batches are made: --batch-size events each, or as many as fit in
// 1 MiB (at most 4,096). With --rate, a batch holds at most about 50 ms of events, so that
// they still go evenly.
func (o *emitOptions) sizing() emit.Sizing {
	if o.BatchSize > 0 {
		return emit.Sizing{Events: o.BatchSize}
	}
	s := emit.Sizing{Events: emit.DefaultBatchEvents, Bytes: emit.DefaultBatchBytes}
	if o.Rate > 0 {
		s.Events = min(s.Events, max(1, int(math.Ceil(o.Rate/20))))
	}
	return s
}

// batchPart returns events lo to hi-1 of b and their numbers, for messages.
func batchPart(b *emit.Batch, lo, hi int) batch {
	var p batch
	for i := lo; i < hi; i++ {
		p.events, p.nums = append(p.events, b.Event(i)), append(p.nums, b.Num(i))
	}
	return p
}

// runBatched sends the events in batches: one request in flight (with --concurrency 1),
// while the next batch is made. The events of --file go as they are read: when the input
// stops for a moment (a slow producer on stdin), what was read is sent rather than held for
// a full batch.
func (e *emitter) runBatched(ctx context.Context) error {
	opts := e.opts
	sz := opts.sizing()
	var lim *rate.Limiter
	if opts.Rate > 0 {
		lim = rate.NewLimiter(rate.Limit(opts.Rate), sz.Events)
	}
	pool := make(emit.Pool, opts.Concurrency+3)
	// Unbuffered: a batch is handed over once a sender is free, so that with one sender one
	// request is in flight and the next batch is being made.
	out := make(chan *emit.Batch)
	g, gctx := errgroup.WithContext(ctx)
	// The events a sender delivered are reported by a goroutine of their own, so that the
	// sender goes on with the next batch at once. The reporter takes every delivered batch,
	// also after a failure elsewhere, so that the count of delivered events is right.
	r := &reporter{e: e, in: make(chan delivered, opts.Concurrency), done: make(chan struct{}), pool: pool}
	var senders sync.WaitGroup
	for range opts.Concurrency {
		senders.Add(1)
		g.Go(func() error {
			defer senders.Done()
			if opts.Concurrency == 1 {
				return e.sendOrdered(gctx, out, lim, r)
			}
			return e.sendBatches(gctx, out, lim, r)
		})
	}
	g.Go(r.run)
	go func() {
		senders.Wait()
		close(r.in)
	}()
	b := &batcher{e: e, sz: sz, out: out, pool: pool, cur: pool.Get()}
	readerDone := make(chan error, 1)
	go func() {
		defer close(out)
		if opts.File == "" {
			e.prog.total = opts.total()
			readerDone <- b.generated(gctx)
			return
		}
		var r io.Reader
		if opts.File == "-" {
			r = stdinData(gctx, opts.streams, "events")
		} else {
			f, err := os.Open(opts.File)
			if err != nil {
				readerDone <- usagef("--file: %v", err)
				return
			}
			defer f.Close()
			r = f
		}
		b.lingers = !regularFile(r)
		readerDone <- b.lines(gctx, r)
	}()
	sendErr := g.Wait()
	return e.conclude(ctx, sendErr, <-readerDone)
}

// batcher makes the batches of a run.
type batcher struct {
	e    *emitter
	sz   emit.Sizing
	out  chan<- *emit.Batch
	pool emit.Pool
	cur  *emit.Batch
	// With lingers, linger runs from the moment the first event joins cur; when it fires
	// and no input is ready, cur is sent as it is.
	lingers  bool
	linger   *time.Timer
	lingered bool
}

// regularFile reports whether r is a regular file, whose reads never wait for a writer.
func regularFile(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode().IsRegular()
}

// add adds an event to the current batch, first handing that over when the event does not
// fit, and after when it is full.
func (b *batcher) add(ctx context.Context, ev []byte, l eventgen.Line, num int) error {
	if !b.cur.Fits(b.sz, len(ev)) {
		if err := b.handOver(ctx); err != nil {
			return err
		}
	}
	b.cur.Add(ev, l, num)
	if b.cur.N() == 1 {
		b.startLinger()
	}
	if b.cur.Full(b.sz) {
		return b.handOver(ctx)
	}
	return nil
}

// handOver waits for a sender to take the current batch.
func (b *batcher) handOver(ctx context.Context) error {
	if b.cur.N() == 0 {
		return nil
	}
	select {
	case b.out <- b.cur:
		b.cur = b.pool.Get()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *batcher) startLinger() {
	b.lingered = false
	if !b.lingers {
		return
	}
	if b.linger == nil {
		b.linger = time.NewTimer(emit.Linger)
	} else {
		b.linger.Reset(emit.Linger)
	}
}

// generated batches the events made from the flags.
func (b *batcher) generated(ctx context.Context) error {
	next, err := b.e.opts.source(ctx)
	if err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err // Ctrl-C: not after the rest of the batch is made
		}
		ev, n, err := next()
		if err == io.EOF {
			return b.handOver(ctx)
		}
		if err == nil {
			var l eventgen.Line
			if l, err = eventgen.Inspect(ev); err == nil {
				if err = b.add(ctx, ev, l, n); err == nil {
					continue
				}
				return err // ctx ended while the batch waited for a sender
			}
		}
		// The events before the one that failed are still sent.
		if herr := b.handOver(ctx); herr != nil {
			return herr
		}
		return err
	}
}

// lines batches the JSON lines of r.
func (b *batcher) lines(ctx context.Context, r io.Reader) error {
	blocks := make(chan emit.Block, 2)
	free := make(chan []byte, 4)
	for range cap(free) {
		free <- make([]byte, emit.ReadBlockSize)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go emit.ReadBlocks(rctx, r, blocks, free)

	var (
		carry []byte // a line that runs on into the next block
		num   int    // the number of the last line read
	)
	// line handles one line of input; with an error, the events before it are still sent.
	line := func(text []byte) error {
		num++
		err := b.line(ctx, text, num)
		if err != nil && ctx.Err() == nil {
			if herr := b.handOver(ctx); herr != nil {
				return herr
			}
		}
		return err
	}
	for {
		// Wait for input; meanwhile, send what waited emit.Linger. Input that is ready
		// comes first, so that a file fills its batches.
		var blk emit.Block
		for got := false; !got; {
			select {
			case blk = <-blocks:
				got = true
				continue
			default:
			}
			var send chan<- *emit.Batch
			var timer <-chan time.Time
			if b.cur.N() > 0 && b.lingers {
				if b.lingered {
					send = b.out
				} else {
					timer = b.linger.C
				}
			}
			select {
			case blk = <-blocks:
				got = true
			case <-timer:
				b.lingered = true
			case send <- b.cur:
				b.cur = b.pool.Get()
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		rest := blk.B
		for len(rest) > 0 {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				if len(carry)+len(rest) > emit.MaxLine {
					return usagef("--file line %d is longer than %d bytes", num+1, emit.MaxLine)
				}
				carry = append(carry, rest...)
				break
			}
			text := rest[:i]
			if len(carry) > 0 {
				if len(carry)+i > emit.MaxLine {
					return usagef("--file line %d is longer than %d bytes", num+1, emit.MaxLine)
				}
				carry = append(carry, text...)
				text = carry
			}
			rest = rest[i+1:]
			if err := line(text); err != nil {
				return err
			}
			carry = carry[:0]
		}
		free <- blk.B // its bytes were copied into the batch, or into carry
		switch {
		case blk.Err == io.EOF:
			if len(carry) > 0 {
				if err := line(carry); err != nil {
					return err
				}
			}
			return b.handOver(ctx)
		case blk.Err != nil:
			if herr := b.handOver(ctx); herr != nil {
				return herr
			}
			return fmt.Errorf("--file: %w", blk.Err)
		}
	}
}

// line adds the event on line num of --file, completed with the defaults, to the batch.
func (b *batcher) line(ctx context.Context, text []byte, num int) error {
	ev, l, err := b.e.opts.fileEvent(text, num)
	if err != nil || ev == nil {
		return err
	}
	return b.add(ctx, ev, l, num)
}

// fileEvent reads the event on line num of --file: nil for a blank line. A line must hold
// one JSON object; missing specversion, id and time are filled in. The receiver checks the
// rest, unless --strict has lint check each event first.
func (o *emitOptions) fileEvent(text []byte, num int) ([]byte, eventgen.Line, error) {
	text = emit.TrimJSONSpace(text)
	if len(text) == 0 {
		return nil, eventgen.Line{}, nil
	}
	ev, l, err := eventgen.Complete(text, o.now())
	if err != nil {
		return nil, l, usagef("--file line %d: %v", num, err)
	}
	if o.Strict {
		if err := o.lintEvent(ev, num); err != nil {
			return nil, l, err
		}
	}
	return ev, l, nil
}

// lintEvent runs lint on event number n (--strict): it prints the findings, and fails when
// any is an error.
func (o *emitOptions) lintEvent(ev []byte, n int) error {
	fs := lint.Check(ev, lint.Options{})
	for _, f := range fs {
		fmt.Fprintf(o.streams.ErrOut, "event %d: %s\n", n, f)
	}
	if lint.HasErrors(fs) {
		return &strictError{n: n}
	}
	return nil
}

// delivered is a batch whose first n events the receiver accepted, with their results.
type delivered struct {
	b   *emit.Batch
	n   int
	res []deliver.Result
}

// reporter writes the lines of delivered events, in the order the batches are handed to it.
type reporter struct {
	e    *emitter
	in   chan delivered
	done chan struct{} // closed when run returns
	pool emit.Pool
	err  error // why run stopped early
}

func (r *reporter) run() error {
	defer close(r.done)
	for d := range r.in {
		if r.err = r.e.reportBatch(d.b, 0, d.res); r.err != nil {
			return r.err
		}
		if d.n == d.b.N() {
			r.pool.Put(d.b)
		}
	}
	return nil
}

// report hands over a delivered batch; it fails when the reporter has stopped.
func (r *reporter) report(d delivered) error {
	select {
	case r.in <- d:
		return nil
	case <-r.done:
		return r.err
	}
}

// sendBatches delivers the batches from in and hands them to r.
func (e *emitter) sendBatches(ctx context.Context, in <-chan *emit.Batch, lim *rate.Limiter, r *reporter) error {
	for b := range in {
		if lim != nil {
			if err := lim.WaitN(ctx, b.N()); err != nil {
				return err
			}
		}
		res, err := e.s.SendBatch(ctx, b.Request(0, b.N()), b.N())
		if err != nil {
			return e.batchFailed(ctx, b, err, r)
		}
		if err := r.report(delivered{b: b, n: b.N(), res: res}); err != nil {
			return err
		}
	}
	return nil
}

// sendOrdered is sendBatches for one sender (--concurrency 1, the default), keeping the
// order of the batches: they go as one sequence of ordered batches (wire.HeaderOrder).
// Once the node has answered that it stores them in their place, the next batches are sent
// before the reply to the one before them (orderedInFlight in flight), so that the node
// decodes one while it writes and syncs the others; before that (another receiver, which
// ignores the header), one request is in flight. A batch is reported only after the one before it. When a batch is not
// delivered, the one sent after it is stopped (the node stores nothing after a batch it did
// not store); a batch the node refused for its place alone (its predecessor came too late,
// or the node restarted and forgot the sequence) is sent again on its own once the one
// before it is settled, and a new sequence begins.
func (e *emitter) sendOrdered(ctx context.Context, in <-chan *emit.Batch, lim *rate.Limiter, r *reporter) error {
	type flight struct {
		b       *emit.Batch
		done    chan struct{}
		cancel  context.CancelFunc
		res     []deliver.Result
		ordered bool
		err     error
	}
	token, seq := newOrderToken(), uint64(0)
	pipelined := false
	start := func(b *emit.Batch) *flight {
		seq++
		fctx, cancel := context.WithCancel(ctx)
		f := &flight{b: b, done: make(chan struct{}), cancel: cancel}
		body := b.Request(0, b.N())
		go func(token string, seq uint64) {
			defer close(f.done)
			f.res, f.ordered, f.err = e.s.SendOrderedBatch(fctx, body, b.N(), token, seq)
		}(token, seq)
		return f
	}
	restarted := false // settle began a new sequence
	settle := func(f *flight) error {
		<-f.done
		f.cancel()
		if f.err != nil && deliver.OrderRefused(f.err) {
			// Nothing of it was stored, nor will be of any later batch of the sequence, and
			// everything before it is settled: it goes again on its own, and a new sequence
			// begins after it.
			token, seq, pipelined, restarted = newOrderToken(), 0, false, true
			res, err := e.s.SendBatch(ctx, f.b.Request(0, f.b.N()), f.b.N())
			if err != nil {
				return e.batchFailed(ctx, f.b, err, r)
			}
			return r.report(delivered{b: f.b, n: f.b.N(), res: res})
		}
		if f.err != nil {
			return e.batchFailed(ctx, f.b, f.err, r)
		}
		pipelined = f.ordered
		return r.report(delivered{b: f.b, n: f.b.N(), res: f.res})
	}
	// q is the batches in flight, oldest first. drain settles them until at most keep are
	// left; the batches sent after one that was not stored in its place stored nothing, and
	// are stopped (and, when it was refused for its place alone, sent again one by one).
	var q []*flight
	drain := func(keep int) error {
		for len(q) > keep {
			restarted = false
			err := settle(q[0])
			q = q[1:]
			if err == nil && !restarted {
				continue
			}
			rest := q
			q = nil
			for _, f := range rest {
				f.cancel()
				<-f.done
			}
			if err != nil {
				return err
			}
			for _, f := range rest {
				if err := settle(start(f.b)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for b := range in {
		if lim != nil {
			if err := lim.WaitN(ctx, b.N()); err != nil {
				// Interrupted with batches in flight: they are reported, delivered or not.
				if serr := drain(0); serr != nil {
					return serr
				}
				return err
			}
		}
		depth := 1
		if pipelined {
			depth = orderedInFlight
		}
		if err := drain(depth - 1); err != nil {
			return err
		}
		q = append(q, start(b))
	}
	return drain(0)
}

// orderedInFlight is how many batches of a sequence are in flight at once once the node has
// said it keeps their order: the node decodes the next while it stores the ones before it.
// Against a node on NATS JetStream three kept the server busier than two (ingest ratio
// 0.732–0.741 against 0.691–0.714 in the same minutes); against the embedded log they were
// no slower.
const orderedInFlight = 3

// newOrderToken names a sequence of ordered batches.
func newOrderToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// batchFailed handles a batch that was not delivered. When an evtctl node refused it for
// one event (it stores nothing of a batch it refuses), the events before that one are sent
// again without it; the failure then names that event alone.
func (e *emitter) batchFailed(ctx context.Context, b *emit.Batch, err error, r *reporter) error {
	var se *deliver.StatusError
	if !errors.As(err, &se) || !refusal(se.Status) || se.Index < 0 || se.Index >= b.N() {
		return &sendFailure{err: err, batch: batchPart(b, 0, b.N())}
	}
	i := se.Index
	if i > 0 {
		res, perr := e.s.SendBatch(ctx, b.Request(0, i), i)
		if perr != nil {
			return &sendFailure{err: perr, batch: batchPart(b, 0, i)}
		}
		if rerr := r.report(delivered{b: b, n: i, res: res}); rerr != nil {
			return rerr
		}
	}
	return &sendFailure{err: err, batch: batchPart(b, i, i+1)}
}

// reportBatch writes a line for each event of b from the first that the receiver
// accepted, as report does.
func (e *emitter) reportBatch(b *emit.Batch, first int, res []deliver.Result) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.prog.add(len(res))
	e.requests++
	buf := e.line[:0]
	for k, r := range res {
		i := first + k
		e.sent++
		if r.Duplicate {
			e.dups++
		}
		if e.outGone {
			continue
		}
		id := b.ID(i)
		if e.jsonOut {
			buf = emit.AppendAckJSON(buf, id, r)
		} else {
			buf = append(buf, "sent "...)
			buf = append(buf, safeText(emit.IDString(id))...)
			buf = append(buf, " ("...)
			buf = strconv.AppendInt(buf, int64(r.Status), 10)
			buf = append(buf, ')')
			if r.Cursor != "" {
				buf = append(buf, " at "...)
				buf = append(buf, r.Cursor...)
			}
			if r.Duplicate {
				buf = append(buf, ", a duplicate of an event already there"...)
			}
			buf = append(buf, '\n')
		}
		if len(buf) >= 32<<10 {
			if err := e.writeAcks(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	e.line = buf[:0]
	return e.writeAcks(buf)
}
