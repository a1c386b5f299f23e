package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/evtctl/evtctl/internal/emit"
	"github.com/evtctl/evtctl/internal/eventgen"
	"github.com/evtctl/evtctl/internal/lint"
)

// runBatched sends the events in batches, as emit.Run does.
func (e *emitter) runBatched(ctx context.Context) error {
	opts := e.opts
	cfg := emit.Config{
		Sender: e.s, File: opts.File, BatchSize: opts.BatchSize, Rate: opts.Rate, Concurrency: opts.Concurrency,
		Acks: e.acks, Event: opts.fileEvent,
		Stdin: func(ctx context.Context) io.Reader { return stdinData(ctx, opts.streams, "events") },
	}
	if opts.File == "" {
		e.prog.total = opts.total()
		next, err := opts.source(ctx)
		if err != nil {
			return e.conclude(ctx, nil, err)
		}
		cfg.Events = next
	}
	res, _ := emit.Run(ctx, cfg)
	readErr := res.ReadErr
	// A file that cannot be opened, or a line too long, is a mistake in the command line.
	if ue := (*usageError)(nil); !errors.As(readErr, &ue) &&
		(errors.As(readErr, new(*emit.InputError)) || errors.As(readErr, new(*emit.LineTooLongError))) {
		readErr = usagef("%w", readErr)
	}
	return e.conclude(ctx, res.SendErr, readErr)
}

// fileEvent reads the event on line num of --file: nil for a blank line. A line must hold
// one JSON object; missing specversion, id and time are filled in. The receiver checks the
// rest, unless --strict has lint check each event first.
func (o *emitOptions) fileEvent(text []byte, num int) ([]byte, eventgen.Line, error) {
	ev, l, err := emit.CompleteLine(text, num, o.now())
	if err != nil {
		return nil, l, usagef("%w", err)
	}
	if ev != nil && o.Strict {
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
