package emit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/eventgen"
	"github.com/evtctl/evtctl/pkg/client"
)

// Target is where the events of a run go, and how.
type Target struct {
	URL  string // the receiver's URL: a node's events endpoint, or any CloudEvents receiver
	Node bool   // the receiver is an evtctl node
	// Client makes the requests (see HTTPClient); nil: deliver's default.
	Client         *http.Client
	Token          string
	Headers        http.Header
	Mode           deliver.Mode
	HeaderEncoding deliver.HeaderEncoding
	MaxAttempts    int           // attempts per request, the first included; 0: the policy's
	Timeout        time.Duration // for one attempt
	UserAgent      string
	// OnRetry, when set, is told of each failed attempt that will be retried.
	OnRetry func(attempt int, delay time.Duration, err error)
}

// HTTPClient returns the client for a target with this CA file (none: the system's) or
// without checking its certificate; nil when deliver's default will do.
func HTTPClient(caFile string, insecure bool) (*http.Client, error) {
	tlsCfg, err := client.TLSConfig(caFile, insecure)
	if err != nil || tlsCfg == nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	return &http.Client{Transport: tr}, nil
}

// NewSender returns the sender of a run to t.
func NewSender(t Target) (*deliver.Sender, error) {
	// A node and any other receiver are CloudEvents webhooks: see deliver.WebhookPolicy.
	policy := deliver.WebhookPolicy()
	if t.MaxAttempts > 0 {
		policy.Backoff.MaxAttempts = t.MaxAttempts
	}
	// A target that has never answered is not waited for: nothing listening, a wrong host
	// or TLS that does not fit need a person. Once it has answered, it is retried as any
	// failure is (a restart); with a spool, nothing is lost either way.
	policy.FirstContactFinal = true
	return deliver.New(deliver.Options{
		URL: t.URL, Mode: t.Mode, HeaderEncoding: t.HeaderEncoding, Node: t.Node, Headers: t.Headers, Token: t.Token,
		Timeout: t.Timeout, Client: t.Client, Policy: &policy, UserAgent: t.UserAgent, OnRetry: t.OnRetry,
	})
}

// Config is a run of emit over HTTP: where its events come from, how they are grouped
// into requests, and where the lines of accepted events go.
type Config struct {
	// Sender delivers the requests: see NewSender.
	Sender *deliver.Sender
	// File is the JSON-lines file whose events are sent ("-": Stdin's); with none, the
	// events are Events'.
	File string
	// Stdin returns standard input, whose reads end with ctx.
	Stdin func(ctx context.Context) io.Reader
	// Events yields the events made from templates, each with its number, as validated
	// CloudEvents JSON; its error is io.EOF when there are no more.
	Events func() (ev []byte, n int, err error)
	// Event makes the event on line num of File (nil for a blank line); nil: CompleteLine
	// with the time now.
	Event func(text []byte, num int) ([]byte, eventgen.Line, error)
	// BatchSize is how many events go in one request; 0: as many as fit in
	// DefaultBatchBytes, at most DefaultBatchEvents (with Rate, about 50 ms of them).
	BatchSize int
	Rate      float64 // events per second; 0: as fast as the receiver takes them
	// Concurrency is how many requests are in flight; 1 (or 0) keeps the events' order.
	Concurrency int
	// Unbatched sends each event in a request of its own (structured or binary mode), as
	// Events makes them; File is not read.
	Unbatched bool
	// Acks writes the lines of accepted events and counts them; nil: JSON lines, discarded.
	Acks *Acks
}

// Result is what a run did.
type Result struct {
	Sent, Duplicates int // events the receiver accepted; of them, those it already had
	Requests         int // batches delivered
	// SendErr is why the sending stopped early (a *SendFailure for a request that
	// failed); ReadErr, why the reading of the events did (an *InputError for a bad line).
	SendErr, ReadErr error
}

// InputError is input that cannot be sent: a file that cannot be opened, a line that is
// not an event.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// BatchSizing returns how batches are made: batchSize events each, or as many as fit in
// DefaultBatchBytes (at most DefaultBatchEvents). With a rate, a batch holds at most about
// 50 ms of events, so that they still go evenly.
func BatchSizing(batchSize int, rate float64) Sizing {
	if batchSize > 0 {
		return Sizing{Events: batchSize}
	}
	s := Sizing{Events: DefaultBatchEvents, Bytes: DefaultBatchBytes}
	if rate > 0 {
		s.Events = min(s.Events, max(1, int(math.Ceil(rate/20))))
	}
	return s
}

// CompleteLine reads the event on line num of a JSON-lines file: nil for a blank line. A
// line must hold one JSON object; missing specversion, id and time are filled in (time
// with now). The receiver checks the rest.
func CompleteLine(text []byte, num int, now time.Time) ([]byte, eventgen.Line, error) {
	text = TrimJSONSpace(text)
	if len(text) == 0 {
		return nil, eventgen.Line{}, nil
	}
	ev, l, err := eventgen.Complete(text, now)
	if err != nil {
		return nil, l, &InputError{fmt.Errorf("--file line %d: %v", num, err)}
	}
	return ev, l, nil
}

// Run sends the events of cfg: in batches, one request in flight (with Concurrency 1)
// while the next batch is made, or each in a request of its own (Unbatched). The events of
// a file go as they are read: when the input stops for a moment (a slow producer on
// stdin), what was read is sent rather than held for a full batch. Its error is the
// result's SendErr, else its ReadErr.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := run(ctx, cfg)
	return res, cmp.Or(res.SendErr, res.ReadErr)
}

func run(ctx context.Context, cfg Config) Result {
	conc := max(cfg.Concurrency, 1)
	acks := cfg.Acks
	if acks == nil {
		acks = NewAcks(io.Discard, AckOptions{JSON: true})
	}
	if cfg.Unbatched {
		var res Result
		res.SendErr, res.ReadErr = runDirect(ctx, cfg, acks)
		res.Sent, res.Duplicates, res.Requests = acks.Counts()
		return res
	}
	event := cfg.Event
	if event == nil {
		event = func(text []byte, num int) ([]byte, eventgen.Line, error) { return CompleteLine(text, num, time.Now()) }
	}
	sz := BatchSizing(cfg.BatchSize, cfg.Rate)
	var lim *rate.Limiter
	if cfg.Rate > 0 {
		lim = rate.NewLimiter(rate.Limit(cfg.Rate), sz.Events)
	}
	pool := make(Pool, conc+3)
	// Unbuffered: a batch is handed over once a sender is free, so that with one sender one
	// request is in flight and the next batch is being made.
	out := make(chan *Batch)
	g, gctx := errgroup.WithContext(ctx)
	// The events a sender delivered are reported by a goroutine of their own, so that the
	// sender goes on with the next batch at once. The reporter takes every delivered batch,
	// also after a failure elsewhere, so that the count of delivered events is right.
	r := &reporter{acks: acks, in: make(chan Delivered, conc), done: make(chan struct{}), pool: pool}
	snd := &Sending{Sender: cfg.Sender, Limiter: lim, Report: r.report,
		Failed: func(ctx context.Context, b *Batch, err error) error { return batchFailed(ctx, cfg.Sender, b, err, r) }}
	var senders sync.WaitGroup
	for range conc {
		senders.Add(1)
		g.Go(func() error {
			defer senders.Done()
			if conc == 1 {
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
	b := NewBatcher(sz, out, pool)
	readerDone := make(chan error, 1)
	go func() {
		defer close(out)
		if cfg.File == "" {
			readerDone <- generated(gctx, b, cfg.Events)
			return
		}
		var r io.Reader
		if cfg.File == "-" {
			r = cfg.Stdin(gctx)
		} else {
			f, err := os.Open(cfg.File)
			if err != nil {
				readerDone <- &InputError{fmt.Errorf("--file: %v", err)}
				return
			}
			defer f.Close()
			r = f
		}
		b.Lingers = !RegularFile(r)
		readerDone <- b.Lines(gctx, r, event)
	}()
	var res Result
	res.SendErr = g.Wait()
	res.ReadErr = <-readerDone
	res.Sent, res.Duplicates, res.Requests = acks.Counts()
	return res
}

// runDirect sends the events as they are made, each in a request of its own; with
// Concurrency 1, in order. A failure that stops the run leaves the rest unsent.
func runDirect(ctx context.Context, cfg Config, acks *Acks) (sendErr, readErr error) {
	conc, group := max(cfg.Concurrency, 1), 1
	var lim *rate.Limiter
	if cfg.Rate > 0 {
		lim = rate.NewLimiter(rate.Limit(cfg.Rate), group)
	}
	// The reader makes groups of events; Concurrency senders deliver them. With one
	// sender, events arrive in order.
	jobs := make(chan Group, conc)
	g, gctx := errgroup.WithContext(ctx)
	for range conc {
		g.Go(func() error {
			for b := range jobs {
				res, err := cfg.Sender.Send(gctx, b.Events)
				if rerr := acks.Report(b.Events, res); err == nil && rerr != nil {
					return rerr
				}
				if err != nil {
					// One request per event: the first not delivered failed.
					i := min(len(res), len(b.Events)-1)
					return &SendFailure{Err: err, Group: Group{Events: b.Events[i : i+1], Nums: b.Nums[i : i+1]}}
				}
			}
			return nil
		})
	}
	// The reader runs beside the senders: a bad event it finds stops it, while the groups
	// already handed over are still delivered (a failed delivery stops the reader).
	readerDone := make(chan error, 1)
	go func() {
		readerDone <- func() error {
			defer close(jobs)
			for done := false; !done; {
				var b Group
				for len(b.Events) < group {
					ev, n, err := cfg.Events()
					if err == io.EOF {
						done = true
						break
					}
					if err != nil {
						return err
					}
					b.Events, b.Nums = append(b.Events, ev), append(b.Nums, n)
				}
				if len(b.Events) == 0 {
					return nil
				}
				if lim != nil {
					if err := lim.WaitN(gctx, len(b.Events)); err != nil {
						return err
					}
				}
				select {
				case jobs <- b:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return nil
		}()
	}()
	sendErr = g.Wait()
	return sendErr, <-readerDone
}

// RegularFile reports whether r is a regular file, whose reads never wait for a writer.
func RegularFile(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode().IsRegular()
}

// generated batches the events made from templates.
func generated(ctx context.Context, b *Batcher, next func() ([]byte, int, error)) error {
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

// reporter writes the lines of delivered events, in the order the batches are handed to it.
type reporter struct {
	acks *Acks
	in   chan Delivered
	done chan struct{} // closed when run returns
	pool Pool
	err  error // why run stopped early
}

func (r *reporter) run() error {
	defer close(r.done)
	for d := range r.in {
		if r.err = r.acks.ReportBatch(d.Batch, 0, d.Results); r.err != nil {
			return r.err
		}
		if d.N == d.Batch.N() {
			r.pool.Put(d.Batch)
		}
	}
	return nil
}

// report hands over a delivered batch; it fails when the reporter has stopped.
func (r *reporter) report(d Delivered) error {
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
func batchFailed(ctx context.Context, s *deliver.Sender, b *Batch, err error, r *reporter) error {
	var se *deliver.StatusError
	if !errors.As(err, &se) || !Refusal(se.Status) || se.Index < 0 || se.Index >= b.N() {
		return &SendFailure{Err: err, Group: b.Part(0, b.N())}
	}
	i := se.Index
	if i > 0 {
		res, perr := s.SendBatch(ctx, b.Request(0, i), i)
		if perr != nil {
			return &SendFailure{Err: perr, Group: b.Part(0, i)}
		}
		if rerr := r.report(Delivered{Batch: b, N: i, Results: res}); rerr != nil {
			return rerr
		}
	}
	return &SendFailure{Err: err, Group: b.Part(i, i+1)}
}
