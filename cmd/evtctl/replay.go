package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/evtctl/evtctl/internal/english"
	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/pkg/client"
)

type replayOptions struct {
	streams *iostreams.IOStreams
	node    nodeOptions
	query   queryOptions
	output  outputOptions
	ui      interactiveOptions
	start   startOptions
	group   groupOption

	Reverse bool
	Count   int
	// countFlag is the name --count was given by (--limit, its old name, still works).
	countFlag string
	OnGap     string
	PageSize  int
	RetryFor  time.Duration
}

func newCmdReplay(streams *iostreams.IOStreams) *cobra.Command {
	opts := &replayOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Write out the events a node holds between two points",
		Long: `Write out the events between --from and --to, oldest first (newest first with --reverse), then
exit. It does not wait for new events; use tail for that.

--from and --to each take a cursor, @FILE (the cursor in a checkpoint file, as tail --checkpoint
writes it), a time (RFC 3339, or local: '2026-11-27 14:00', or 14:00 today), or a duration back
from now (10m, 2d). --from is exclusive: a cursor there was already seen. --to is inclusive and
defaults to the head when the replay starts. --since is --from with a time or a duration.
--count N stops after N events (--limit N, its old name, still works).

When the node no longer holds events the range covers (they aged out, were pruned or were
lost to damage in the node's log) — after a --from cursor or checkpoint, or within the range —
evtctl says so, naming the cursors; --on-gap decides what happens then, as for tail. So it
does when the node restarted since the --from cursor, or that cursor is not of its log.`,
		Example: `  evtctl replay --since 1h -o jsonl | jq -c '.data | {type, id}'
  evtctl replay --from @consumer.cursor --to 2026-11-22T12:00:00Z
  evtctl replay --reverse --count 10 --type 'org.openedx.ecommerce.#'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.countFlag = "--count"
			if f := cmd.Flags(); f.Changed("limit") {
				if f.Changed("count") {
					return usagef("--limit is the old name of --count: give one")
				}
				opts.countFlag = "--limit"
			}
			if opts.Count < 0 {
				return usagef("%s must not be negative", opts.countFlag)
			}
			if err := opts.output.check(cmd.Context(), opts.ui.on(&opts.output)); err != nil {
				return err
			}
			if err := opts.group.check(opts.ui.on(&opts.output), opts.Reverse); err != nil {
				return err
			}
			return runReplay(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	opts.node.addFlags(f)
	opts.query.addFlags(f)
	opts.output.addFlags(f, uiFormat)
	opts.ui.addFlags(f)
	opts.start.addFlags(f, "replay")
	opts.group.addFlag(f)
	f.BoolVar(&opts.Reverse, "reverse", false, "newest first")
	f.IntVar(&opts.Count, "count", 0, "stop after this many events (0: no limit)")
	f.IntVar(&opts.Count, "limit", 0, "the old name of --count")
	_ = f.MarkHidden("limit")
	enumVar(f, &opts.OnGap, "on-gap", "warn", "when events after --from were lost: {values}", onGapChoices...)
	f.IntVar(&opts.PageSize, "page-size", 1000, "events per request (the node may cap it)")
	f.DurationVar(&opts.RetryFor, "retry-for", time.Minute, "give up when the node has failed for this long (0: keep retrying)")
	return cmd
}

// resolve turns the flags into the query, the range's ends and a client of the node.
func (opts *replayOptions) resolve(ctx context.Context) (query string, from, to client.Position, c *client.Client, err error) {
	if query, err = opts.query.build(); err != nil {
		return
	}
	start, end, c, err := opts.start.resolve(ctx, &opts.node, opts.streams, opts.backoff())
	return query, start.Position, end.Position, c, err
}

func (opts *replayOptions) backoff() client.Backoff { return client.Backoff{GiveUp: opts.RetryFor} }

func runReplay(ctx context.Context, opts *replayOptions) error {
	if opts.ui.on(&opts.output) {
		return runReplayInteractive(ctx, opts)
	}
	query, from, to, c, err := opts.resolve(ctx)
	if err != nil {
		return opts.node.explain(streamResult(ctx, err))
	}
	defer bulkGC()()
	r, err := opts.output.renderer(ctx, opts.streams)
	if err != nil {
		return err
	}
	if err := opts.group.open(c, opts.streams); err != nil {
		return err
	}
	prog := newProgress(opts.streams, "replayed", "event")
	err = c.Range(ctx, client.RangeOptions{
		Query: query, From: from, To: to, Reverse: opts.Reverse, Limit: opts.Count,
		PageSize: opts.PageSize, OnRetry: retryReporter(opts.streams), ReuseMemory: true,
		Backoff: opts.backoff(),
		OnGap:   func(g client.Gap) error { return onGap(opts.streams, opts.OnGap, &g) },
	}, func(items []client.Item) error {
		if err := writeItems(r, items); err != nil {
			return err
		}
		prog.add(len(items))
		return opts.group.update(ctx, strings.Clone(client.PosOf(items[len(items)-1])))
	})
	prog.done()
	return opts.group.finish(ctx, opts.node.explain(streamResult(ctx, opts.query.refused(err))))
}

// bulkGCPercent is the garbage collector's target for a replay: a bulk reader allocates
// fast (every event read is memory made and dropped) and keeps little (the pages being
// read and written, the records fetched ahead), so collecting when the heap has grown by
// twice what is live, not once, halves the collector's work for a heap at most half as
// large again, still bounded by what is live.
const bulkGCPercent = 200

// bulkGC sets the collector's target for a bulk read, unless GOGC says otherwise, and
// returns what sets it back.
func bulkGC() func() {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	old := debug.SetGCPercent(bulkGCPercent)
	return func() { debug.SetGCPercent(old) }
}

// progress shows a running count of things (a singular noun: "event") on stderr, only when stderr is a terminal, and a last
// line with the total and the rate when it has shown anything.
type progress struct {
	s           *iostreams.IOStreams
	verb, thing string
	on          bool
	n, total    int // total > 0 draws a bar
	start       time.Time
	shown       time.Time
}

func newProgress(s *iostreams.IOStreams, verb, thing string) *progress {
	return &progress{s: s, verb: verb, thing: thing, on: s.IsStderrTTY(), start: time.Now()}
}

func (p *progress) add(n int) {
	p.n += n
	if p.on && time.Since(p.shown) > 200*time.Millisecond {
		p.shown = time.Now()
		rate := float64(p.n) / time.Since(p.start).Seconds()
		if p.total > 0 {
			const width = 30
			done := min(width*p.n/p.total, width)
			fmt.Fprintf(p.s.ErrOut, "\r\x1b[K[%s%s] %3d%% %d/%s (%.0f/s)", strings.Repeat("#", done), strings.Repeat(".", width-done),
				100*p.n/p.total, p.n, english.Plural(p.total, p.thing), rate)
			return
		}
		fmt.Fprintf(p.s.ErrOut, "\r\x1b[K%s %s (%.0f/s)", p.verb, english.Plural(p.n, p.thing), rate)
	}
}

func (p *progress) done() {
	if p.on && !p.shown.IsZero() {
		el := time.Since(p.start)
		fmt.Fprintf(p.s.ErrOut, "\r\x1b[K%s %s in %s (%.0f/s)\n", p.verb, english.Plural(p.n, p.thing), el.Round(time.Millisecond), float64(p.n)/max(el.Seconds(), 1e-9))
	}
}
