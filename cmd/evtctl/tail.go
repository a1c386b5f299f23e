package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/render"
)

type tailOptions struct {
	streams *iostreams.IOStreams
	node    nodeOptions
	query   queryOptions
	output  outputOptions
	ui      interactiveOptions
	start   startOptions

	Count         int
	IdleTimeout   time.Duration
	UntilCaughtUp bool
	OnGap         string
	PageSize      int
	Wait          time.Duration
	RetryFor      time.Duration
}

func newCmdTail(streams *iostreams.IOStreams) *cobra.Command {
	opts := &tailOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Follow a node's events as they are appended",
		Long: `Follow the head of a node's event log with long-polling, oldest first, each matching event
exactly once. A backlog (from --after, --since, --from-start or a checkpoint) is fetched first;
the node's ascending-order extension keeps that in bounded memory where it is available.

When the node's log no longer holds events the client had not seen (they aged out or were
pruned), evtctl says so, naming both cursors; --on-gap decides what happens then. So it does
when the node restarted and its log starts again (a Tendermint node), and when the cursor to
start from is not of the node's log, or the log went back: such a cursor is never passed over
silently, even with --on-gap ignore.

--after takes a cursor, or @FILE: the position in a checkpoint file, as replay --from @FILE
reads it. --since takes a time (RFC 3339, or local: '2026-11-27 14:00', or 14:00 today) or a
duration back from now (10m, 2d).

With --checkpoint, the cursor of the last event written out is kept in FILE (updated only after
the output is flushed) and tail resumes from it when it exists, so a restart loses nothing. A
first run records where it starts before it reads anything, so that one stopped before its
first event resumes there too.
Connection failures are retried with backoff, honouring Retry-After.`,
		Example: `  evtctl tail
  evtctl tail --type 'org.openedx.learning.#' -o jsonl | jq .data.data
  evtctl tail -q "data.total > 100" --since 10m --count 20
  evtctl tail --after @consumer.cursor --until-caught-up -o jsonl
  evtctl tail --since 2d --type 'org.openedx.ecommerce.#'
  evtctl tail --checkpoint consumer.cursor --on-gap fail -o ce >> events.jsonl`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Count < 0 {
				return usagef("--count must not be negative")
			}
			if err := opts.output.check(cmd.Context(), opts.ui.on(&opts.output)); err != nil {
				return err
			}
			return runTail(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	opts.node.addFlags(f)
	opts.query.addFlags(f)
	opts.output.addFlags(f, uiFormat)
	opts.ui.addFlags(f)
	opts.start.addFlags(f, "tail")
	f.IntVar(&opts.Count, "count", 0, "exit after this many events (0: no limit)")
	f.DurationVar(&opts.IdleTimeout, "idle-timeout", 0, "exit when no event arrives for this long (0: never)")
	f.BoolVar(&opts.UntilCaughtUp, "until-caught-up", false, "exit 0 once every event up to the head has been written")
	enumVar(f, &opts.OnGap, "on-gap", "warn", "when events were lost: {values}", onGapChoices...)
	f.IntVar(&opts.PageSize, "page-size", 100, "events per request")
	f.DurationVar(&opts.Wait, "wait", 25*time.Second, "long-poll wait per request (the node may cap it)")
	f.DurationVar(&opts.RetryFor, "retry-for", 0, "give up when the node has failed for this long (0: keep retrying)")
	return cmd
}

func countSet(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// errStop ends a stream early and successfully: --count, --until-caught-up, --idle-timeout.
var errStop = errors.New("stop")

func retryReporter(s *iostreams.IOStreams) client.RetryFunc {
	return func(err error, attempt int, delay time.Duration) {
		fmt.Fprintf(s.ErrOut, "evtctl: %s; retrying in %s (attempt %d)\n", safeText(err.Error()), delay.Round(100*time.Millisecond), attempt)
	}
}

// resolve turns the flags into the query, where following starts (zero: the head) and a
// client of the node. tail and tail -i both start from it.
func (opts *tailOptions) resolve(ctx context.Context) (query string, from position, c *client.Client, err error) {
	if query, err = opts.query.build(); err != nil {
		return
	}
	from, _, c, err = opts.start.resolve(ctx, &opts.node, opts.streams, opts.backoff())
	return
}

func (opts *tailOptions) backoff() client.Backoff { return client.Backoff{GiveUp: opts.RetryFor} }

func runTail(ctx context.Context, opts *tailOptions) error {
	if opts.ui.on(&opts.output) {
		return runTailInteractive(ctx, opts)
	}
	query, from, c, err := opts.resolve(ctx)
	if err != nil {
		return opts.node.explain(streamResult(ctx, err))
	}
	r, err := opts.output.renderer(ctx, opts.streams)
	if err != nil {
		return err
	}
	wait := opts.Wait
	if opts.UntilCaughtUp {
		wait = time.Millisecond // the head is the goal: do not wait there for new events
	}
	so := client.StreamOptions{
		Query: query, PageSize: opts.PageSize, Wait: wait, OnRetry: retryReporter(opts.streams), ReuseMemory: true,
		Backoff: opts.backoff(),
	}
	from.startStream(&so)
	ck := &checkpointer{path: opts.start.Checkpoint, node: c.Node(), query: query}
	resuming := false
	if ck.path != "" {
		cp, ok, err := loadCheckpoint(ctx, c, ck.path, so.Backoff, so.OnRetry)
		if err != nil {
			return opts.node.explain(streamResult(ctx, err))
		}
		ck.log = newLogNamer(ctx, c, cp.Log)
		if resuming = ok; ok {
			resumeAt(&so, cp)
			ck.saved = cp.Cursor
			nodeMoved(opts.streams, ck.path, cp, c.Node())
		}
	}
	if opts.streams.IsStderrTTY() {
		from := "the head"
		switch {
		case so.After != "":
			from = "cursor " + so.After
		case !so.Since.IsZero():
			from = so.Since.Format(time.RFC3339)
		case so.FromStart:
			from = "the oldest event"
		}
		fmt.Fprintf(opts.streams.ErrOut, "following %s from %s; Ctrl-C to stop\n", c.Node(), from)
	}
	if ck.path != "" && !resuming {
		// Where this run starts is recorded before anything is read: a run stopped before
		// its first event resumes there, and loses nothing that arrives meanwhile.
		if err := fixHead(ctx, c, &so); err != nil {
			return opts.node.explain(streamResult(ctx, err))
		}
		if err := ck.start(so); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := newIdleTimer(opts.IdleTimeout, func() { cancel(errStop) })
	defer idle.stop()

	written := 0
	err = c.Stream(ctx, so, func(b client.Batch) error {
		if err := onGap(opts.streams, opts.OnGap, b.Gap); err != nil {
			return err
		}
		items := b.Items
		if opts.Count > 0 && written+len(items) > opts.Count {
			items = items[:opts.Count-written]
		}
		if len(items) > 0 {
			idle.reset()
		}
		if err := writeItems(r, items); err != nil {
			return err
		}
		written += len(items)
		cur := b.Cursor
		if len(items) < len(b.Items) {
			cur = strings.Clone(client.PosOf(items[len(items)-1])) // --count cut the batch (a copy: items die with fn)
		}
		if err := ck.update(cur, false); err != nil {
			return err
		}
		if (opts.Count > 0 && written >= opts.Count) || (opts.UntilCaughtUp && b.CaughtUp) {
			return errStop
		}
		return nil
	})
	return ck.finish(opts.node.explain(streamResult(ctx, opts.query.refused(err))))
}

// streamResult maps how a stream ended to the command's result.
func streamResult(ctx context.Context, err error) error {
	switch {
	case err == nil, errors.Is(err, errStop), closedPipe(err):
		return nil
	case errors.Is(context.Cause(ctx), errStop):
		return nil
	}
	return err
}

// writeItems renders items and flushes them: one write per delivered batch.
func writeItems(r *render.Renderer, items []client.Item) error {
	if err := r.Items(items); err != nil {
		return err
	}
	return r.Flush()
}

// checkpointer keeps a checkpoint file up to date, at most every interval, and always on
// the way out. It is updated only after the output it describes has been flushed.
type checkpointer struct {
	path, node, query string
	saved, pending    string
	last              time.Time
	log               *logNamer // names the log at the cursor saved
}

const checkpointInterval = 200 * time.Millisecond

// start records where a consumer that has read nothing yet starts.
func (c *checkpointer) start(so client.StreamOptions) error {
	if err := cursor.SaveCheckpoint(c.path, startCheckpoint(so, c.node, c.query, c.log)); err != nil {
		return err
	}
	c.saved = so.After // the first events read are recorded at once, as without it
	return nil
}

func (c *checkpointer) update(cur string, final bool) error {
	if c.path == "" {
		return nil
	}
	if cur != "" {
		c.pending = cur
	}
	if c.pending == "" || c.pending == c.saved || (!final && time.Since(c.last) < checkpointInterval) {
		return nil
	}
	err := cursor.SaveCheckpoint(c.path, cursor.Checkpoint{Cursor: c.pending, Node: c.node, Query: c.query, Log: c.log.at(c.pending), Updated: time.Now().UTC()})
	if err != nil {
		return err
	}
	c.saved, c.last = c.pending, time.Now()
	return nil
}

// finish records the last cursor on the way out, whatever ended the stream (err: its result,
// nil for a successful end). A checkpoint that cannot be written is reported even after an
// interruption: the output went further than the checkpoint says.
func (c *checkpointer) finish(err error) error {
	ferr := c.update("", true)
	switch {
	case ferr == nil:
		return err
	case err == nil || errors.Is(err, context.Canceled):
		return ferr
	}
	return errors.Join(err, ferr)
}

// idleTimer calls fire when reset has not been called for d; d = 0 never fires.
type idleTimer struct {
	mu sync.Mutex
	t  *time.Timer
	d  time.Duration
}

func newIdleTimer(d time.Duration, fire func()) *idleTimer {
	it := &idleTimer{d: d}
	if d > 0 {
		it.t = time.AfterFunc(d, fire)
	}
	return it
}

func (it *idleTimer) reset() {
	if it.t != nil {
		it.mu.Lock()
		it.t.Reset(it.d)
		it.mu.Unlock()
	}
}

func (it *idleTimer) stop() {
	if it.t != nil {
		it.t.Stop()
	}
}
