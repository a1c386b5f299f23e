package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/evtctl/evtctl/internal/emit"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/client/redisstream"
)

// emit --to redis://HOST/DB/STREAM adds the events to a Redis stream as entries, as the
// Open edX event bus writes them (see redisstream.EntryFields): the events that emit makes
// from its flags or reads from --file, --batch-size of them (default 100) in one transaction.

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
	res, _ := emit.RunRedis(ctx, emit.RedisConfig{
		Producer: p, Events: next, BatchSize: opts.BatchSize, Rate: opts.Rate,
		Timeout: opts.Timeout, MaxAttempts: opts.MaxAttempts, OnRetry: opts.reportRetry, Acks: e.acks,
	})
	sendErr := res.SendErr
	if ee := (*emit.EntryError)(nil); errors.As(sendErr, &ee) {
		sendErr = usagef("event %s (%s) cannot be a stream entry: %v", safeText(eventID(ee.Event)), describeNum(opts, ee.Num), ee.Err)
	}
	return e, e.conclude(ctx, sendErr, res.ReadErr)
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
