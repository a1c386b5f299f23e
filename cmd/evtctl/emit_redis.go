package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/time/rate"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/client/redisstream"
)

// emit --to redis://HOST/DB/STREAM adds the events to a Redis stream as entries, as the
// Open edX event bus writes them (see redisstream.EntryFields): the events that emit makes
// from its flags or reads from --file, --batch-size of them (default 100) in one transaction.

// redisEntriesPerSend is how many entries one transaction adds by default.
const redisEntriesPerSend = 100

// redisTarget reports whether --to names a Redis stream.
func redisTarget(to string) bool {
	scheme, _, ok := strings.Cut(strings.TrimSpace(to), "://")
	scheme = strings.ToLower(scheme)
	return ok && (scheme == "redis" || scheme == "rediss")
}

// checkRedisFlags refuses the flags that do not apply to a Redis stream.
func (o *emitOptions) checkRedisFlags(cmd *cobra.Command) error {
	for _, f := range []string{"mode", "header", "header-encoding", "spool", "flush", "signal", "concurrency"} {
		if cmd.Flags().Changed(f) {
			return usagef("--to %s adds entries to a Redis stream; --%s does not apply", client.Redact(o.To), f)
		}
	}
	return nil
}

// runEmitRedis adds the events to the stream, in order, and reports each added one.
func runEmitRedis(ctx context.Context, opts *emitOptions) (*emitter, error) {
	p, err := redisstream.NewProducer(opts.To, client.Options{Token: opts.node.Token, CAFile: opts.node.CAFile, Insecure: opts.node.Insecure})
	if err != nil {
		return nil, usagef("--to: %v", err)
	}
	defer p.Close()
	next, err := opts.source(ctx)
	if err != nil {
		return nil, err
	}
	e := newEmitter(opts, nil)
	defer e.closeOutput()
	if opts.File == "" {
		e.prog.total = opts.total()
	}
	group := redisEntriesPerSend
	if opts.BatchSize > 0 {
		group = opts.BatchSize
	}
	var lim *rate.Limiter
	if opts.Rate > 0 {
		// Spread evenly: one entry a transaction.
		lim, group = rate.NewLimiter(rate.Limit(opts.Rate), 1), 1
	}
	var sendErr, readErr error
	for done := false; !done && sendErr == nil; {
		var b batch
		for len(b.Events) < group {
			ev, n, err := next()
			if err == io.EOF {
				done = true
				break
			}
			if err != nil {
				readErr, done = err, true
				break
			}
			b.Events, b.Nums = append(b.Events, ev), append(b.Nums, n)
		}
		if len(b.Events) == 0 {
			break
		}
		if lim != nil {
			if err := lim.Wait(ctx); err != nil {
				sendErr = err
				break
			}
		}
		ids, err := sendRedis(ctx, p, b.Events, opts)
		res := make([]deliver.Result, 0, len(ids))
		for _, id := range ids {
			if id == "" {
				break
			}
			res = append(res, deliver.Result{Cursor: id})
		}
		if rerr := e.report(b.Events, res); err == nil && rerr != nil {
			err = rerr
		}
		if err != nil {
			var ee *redisstream.EventError
			if errors.As(err, &ee) {
				err = usagef("event %s (%s) cannot be a stream entry: %v", safeText(eventID(b.Events[ee.Index])), describeNum(opts, b.Nums[ee.Index]), ee.Err)
			}
			sendErr = err
		}
	}
	return e, e.conclude(ctx, sendErr, readErr)
}

// sendRedis adds events in one transaction, trying again, up to --max-attempts in all,
// while the failure is one that waiting may mend. A transaction that failed added nothing;
// one whose answer was lost may have, and is sent again: the entries then hold the events
// twice, with the same ids.
func sendRedis(ctx context.Context, p *redisstream.Producer, events [][]byte, opts *emitOptions) ([]string, error) {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, opts.Timeout)
		ids, err := p.Send(actx, events)
		cancel()
		if err == nil || ctx.Err() != nil || !client.Retryable(err) || attempt >= opts.MaxAttempts {
			return ids, err
		}
		d := retry.Delay(attempt-1, 200*time.Millisecond, 15*time.Second)
		opts.reportRetry(attempt, d, err)
		if err := retry.Sleep(ctx, d); err != nil {
			return ids, err
		}
	}
}

// describeNum names an event by its number: its line of --file, or its place.
func describeNum(opts *emitOptions, n int) string {
	if opts.File != "" {
		return fmt.Sprintf("--file line %d", n)
	}
	if opts.total() == 0 {
		return fmt.Sprintf("number %d", n)
	}
	return fmt.Sprintf("number %d of %d", n, opts.total())
}
