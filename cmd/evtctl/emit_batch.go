package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"

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
	r := &reporter{e: e, in: make(chan emit.Delivered, opts.Concurrency), done: make(chan struct{}), pool: pool}
	snd := &emit.Sending{Sender: e.s, Limiter: lim, Report: r.report,
		Failed: func(ctx context.Context, b *emit.Batch, err error) error { return e.batchFailed(ctx, b, err, r) }}
	var senders sync.WaitGroup
	for range opts.Concurrency {
		senders.Add(1)
		g.Go(func() error {
			defer senders.Done()
			if opts.Concurrency == 1 {
				return snd.Ordered(gctx, out)
			}
			return snd.Unordered(gctx, out)
		})
	}
	g.Go(r.run)
	go func() {
		senders.Wait()
		close(r.in)
	}()
	b := &batcher{e: e, Batcher: emit.NewBatcher(sz, out, pool)}
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
		b.Lingers = !regularFile(r)
		err := b.Lines(gctx, r, opts.fileEvent)
		if le := (*emit.LineTooLongError)(nil); errors.As(err, &le) {
			err = usagef("%w", err)
		}
		readerDone <- err
	}()
	sendErr := g.Wait()
	return e.conclude(ctx, sendErr, <-readerDone)
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

// batcher makes the batches of a run.
type batcher struct {
	*emit.Batcher
	e *emitter
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
			return b.HandOver(ctx)
		}
		if err == nil {
			var l eventgen.Line
			if l, err = eventgen.Inspect(ev); err == nil {
				if err = b.Add(ctx, ev, l, n); err == nil {
					continue
				}
				return err // ctx ended while the batch waited for a sender
			}
		}
		// The events before the one that failed are still sent.
		if herr := b.HandOver(ctx); herr != nil {
			return herr
		}
		return err
	}
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

// reporter writes the lines of delivered events, in the order the batches are handed to it.
type reporter struct {
	e    *emitter
	in   chan emit.Delivered
	done chan struct{} // closed when run returns
	pool emit.Pool
	err  error // why run stopped early
}

func (r *reporter) run() error {
	defer close(r.done)
	for d := range r.in {
		if r.err = r.e.acks.ReportBatch(d.Batch, 0, d.Results); r.err != nil {
			return r.err
		}
		if d.N == d.Batch.N() {
			r.pool.Put(d.Batch)
		}
	}
	return nil
}

// report hands over a delivered batch; it fails when the reporter has stopped.
func (r *reporter) report(d emit.Delivered) error {
	select {
	case r.in <- d:
		return nil
	case <-r.done:
		return r.err
	}
}

// batchFailed handles a batch that was not delivered. When an evtctl node refused it for
// one event (it stores nothing of a batch it refuses), the events before that one are sent
// again without it; the failure then names that event alone.
func (e *emitter) batchFailed(ctx context.Context, b *emit.Batch, err error, r *reporter) error {
	var se *deliver.StatusError
	if !errors.As(err, &se) || !emit.Refusal(se.Status) || se.Index < 0 || se.Index >= b.N() {
		return &emit.SendFailure{Err: err, Group: b.Part(0, b.N())}
	}
	i := se.Index
	if i > 0 {
		res, perr := e.s.SendBatch(ctx, b.Request(0, i), i)
		if perr != nil {
			return &emit.SendFailure{Err: perr, Group: b.Part(0, i)}
		}
		if rerr := r.report(emit.Delivered{Batch: b, N: i, Results: res}); rerr != nil {
			return rerr
		}
	}
	return &emit.SendFailure{Err: err, Group: b.Part(i, i+1)}
}
