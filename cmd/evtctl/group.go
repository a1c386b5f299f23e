package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/pkg/client"
)

// groupOption is --group NAME, on the commands that read a Kafka topic: the positions
// written out (delivered, for forward) are committed to the consumer group NAME as its
// offsets, so that Kafka's tools see how far evtctl read. evtctl's own position stays in
// its checkpoint; the group is told, never asked.
type groupOption struct {
	Name string

	src     groupCommitter
	streams *iostreams.IOStreams
	pending string    // the position to commit next
	done    string    // the position committed last
	last    time.Time // when
}

// groupCommitter is a source whose log has consumer groups (a Kafka topic).
type groupCommitter interface {
	Commit(ctx context.Context, group, pos string) error
}

// groupInterval is how often positions are committed while a command runs; the last one is
// committed on the way out.
const groupInterval = time.Second

func (o *groupOption) addFlag(f *pflag.FlagSet) {
	f.StringVar(&o.Name, "group", "", "Kafka topics: commit the positions written out to this consumer group, for Kafka's tools to see")
}

// check refuses --group where nothing is written out as a stream of positions: in the
// terminal UI (interactive), and newest first (reverse).
func (o *groupOption) check(interactive, reverse bool) error {
	switch {
	case o.Name == "":
	case interactive:
		return usagef("--group commits what is written out; it does not go with -i (the terminal UI)")
	case reverse:
		return usagef("--group commits how far a reader got, oldest first; it does not go with --reverse")
	}
	return nil
}

// open checks --group against the log c reads: only a log with consumer groups takes it.
func (o *groupOption) open(c *client.Client, streams *iostreams.IOStreams) error {
	if o.Name == "" {
		return nil
	}
	gc, ok := c.Source().(groupCommitter)
	if !ok {
		return usagef("--group commits to a Kafka consumer group: it applies to kafka:// nodes, and %s is not one", c.Node())
	}
	o.src, o.streams = gc, streams
	return nil
}

// update is told the position up to which the output is written (flushed); it commits at
// most every groupInterval.
func (o *groupOption) update(ctx context.Context, pos string) error {
	if o.src == nil || pos == "" {
		return nil
	}
	o.pending = pos
	if time.Since(o.last) < groupInterval {
		return nil
	}
	return o.commit(ctx)
}

// finish commits the last position on the way out, whatever ended the command (err, its
// result), and joins a failure to it.
func (o *groupOption) finish(ctx context.Context, err error) error {
	if o.src == nil {
		return err
	}
	// An interrupted command still tells the group how far it wrote.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cerr := o.commit(cctx)
	switch {
	case cerr == nil:
		return err
	case err == nil || errors.Is(err, context.Canceled):
		return cerr
	}
	return errors.Join(err, cerr)
}

// commit commits the pending position. A failure that may pass is said on stderr and left
// for the next commit (which carries a later position); another ends the command.
func (o *groupOption) commit(ctx context.Context) error {
	if o.pending == "" || o.pending == o.done {
		return nil
	}
	if ctx.Err() != nil {
		return nil // the command is ending: finish commits
	}
	o.last = time.Now()
	if err := o.src.Commit(ctx, o.Name, o.pending); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		if client.Retryable(err) {
			fmt.Fprintf(o.streams.ErrOut, "evtctl: warning: consumer group %q: the commit failed (%s); the next one carries the position\n", o.Name, safeText(err.Error()))
			return nil
		}
		return fmt.Errorf("--group: %w", err)
	}
	o.done = o.pending
	return nil
}
