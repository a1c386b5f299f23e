package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/demo"
	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/pkg/wire"
)

type demoOptions struct {
	streams *iostreams.IOStreams
	query   queryOptions
	output  outputOptions

	Listen     string
	Count      int
	Rate       float64
	BurstEvery time.Duration
	Seed       uint64
}

func newCmdDemo(streams *iostreams.IOStreams) *cobra.Command {
	opts := &demoOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a node with sample traffic and tail it",
		Long: `Start a node in memory on a free loopback port, send it OEP-41-style events from a small
online-learning business (courses created and updated in a catalog, learners enrolling,
orders purchased) at a steady pace with a burst now and then, and tail them.

On a terminal the events are shown in the interactive view (tail -i; press ? for its keys)
unless -o or --count asks for lines; piped, they are written as JSON lines. The node's
address and commands to try against it from another terminal are on the interactive
view's help screen (?), and otherwise printed on stderr. Nothing is kept when the demo
stops.`,
		Example: `  evtctl demo
  evtctl demo --count 5 | jq -c '.data | {type, subject}'
  evtctl demo --type 'org.openedx.ecommerce.#' -o pretty`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Count < 0 {
				return usagef("--count must not be negative")
			}
			if opts.Rate <= 0 || opts.Rate > 10000 {
				return usagef("--rate must be above 0 and at most 10000 events per second, got %g", opts.Rate)
			}
			if opts.BurstEvery < 0 {
				return usagef("--burst-every must not be negative")
			}
			if !cmd.Flags().Changed("seed") {
				opts.Seed = rand.Uint64()
			}
			return runDemo(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	opts.query.addFlags(f)
	opts.output.addFlags(f)
	f.StringVar(&opts.Listen, "listen", "127.0.0.1:0", "address of the demo node (port 0 picks a free one)")
	f.IntVar(&opts.Count, "count", 0, "exit after this many events (0: run until interrupted)")
	f.Float64Var(&opts.Rate, "rate", 5, "steady events per second")
	f.DurationVar(&opts.BurstEvery, "burst-every", 20*time.Second, "about how often a course launch brings a burst of enrollments (0: never)")
	f.Uint64Var(&opts.Seed, "seed", 0, "seed of the story's random choices, to repeat a run (default: random)")
	return cmd
}

func runDemo(ctx context.Context, opts *demoOptions) error {
	if _, err := opts.query.build(); err != nil {
		return err
	}
	node, err := startEmbedded(embeddedOptions{Listen: opts.Listen})
	if err != nil {
		return err
	}
	defer node.Close()

	interactive := opts.interactive()
	// The terminal UI shows the commands to try on its help screen, where they can be read
	// while the node runs; printed on the terminal it covers, they would show only once
	// the demo, and its node, had ended.
	if !interactive || !opts.streams.IsStderrTTY() {
		fmt.Fprintf(opts.streams.ErrOut, "evtctl demo: a node is running in memory at %s (gone when the demo stops).\nTry from another terminal:\n", node.URL)
		for _, l := range demoCommands(node.URL) {
			fmt.Fprintln(opts.streams.ErrOut, l)
		}
	}

	sender, err := deliver.New(deliver.Options{URL: node.URL + wire.PathEvents, Mode: deliver.Batch, Node: true})
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	produceCtx, stopProducing := context.WithCancel(gctx)
	defer stopProducing()
	g.Go(func() error {
		err := produceDemo(produceCtx, opts, sender)
		if errors.Is(err, context.Canceled) && produceCtx.Err() != nil {
			return nil
		}
		return err
	})
	g.Go(func() error {
		defer stopProducing()
		if interactive {
			query, _ := opts.query.build() // checked above
			c, err := (&nodeOptions{Node: node.URL, exact: true}).client(opts.streams)
			if err != nil {
				return err
			}
			notes := append([]string{
				"This demo's node runs in memory at " + node.URL + " until the demo stops.",
				"Try from another terminal:",
				"",
			}, demoCommands(node.URL)...)
			return runInteractive(gctx, opts.streams, c, interactiveConfig{
				Query: query, Follow: true,
				Notes: notes, Message: "press ? for commands to try against this node from another terminal",
			})
		}
		return runTail(gctx, &tailOptions{
			streams: opts.streams, node: nodeOptions{Node: node.URL, exact: true}, query: opts.query, output: opts.output,
			start: startOptions{FromStart: true}, Count: opts.Count, OnGap: "warn", PageSize: 100, Wait: 25 * time.Second,
		})
	})
	return g.Wait()
}

// demoCommands are commands to try against the demo's node at url, indented, each line
// short enough for an 80-column terminal, long ones continued with a backslash so that
// they can be copied from the screen as they are.
func demoCommands(url string) []string {
	return []string{
		"  evtctl tail --node " + url + " \\",
		"    --type 'org.openedx.ecommerce.#' -o pretty",
		"  evtctl replay --node " + url + " | jq -r .event | sort | uniq -c",
		"  evtctl emit --node " + url + " \\",
		"    --source https://lms.example.com/events/ \\",
		"    --type " + demo.TypeEnrolled + " \\",
		`    --data '{"user":{"id":1}}'`,
	}
}

// interactive reports whether the demo shows the terminal UI: on a terminal, unless an
// output format or --count asks for lines.
func (o *demoOptions) interactive() bool {
	return o.streams.IsStdoutTTY() && o.Count == 0 && !o.output.given()
}

// produceDemo sends the demo's story to the node: opts.Rate events a second, with a burst
// every opts.BurstEvery or so, until ctx ends.
func produceDemo(ctx context.Context, opts *demoOptions, s *deliver.Sender) error {
	gen := demo.New(opts.Seed, nil)
	rng := rand.New(rand.NewPCG(opts.Seed, 1))
	tick := time.NewTicker(time.Duration(float64(time.Second) / opts.Rate))
	defer tick.Stop()
	nextBurst := func() <-chan time.Time {
		if opts.BurstEvery == 0 {
			return nil
		}
		// Half to one and a half times the interval, so bursts do not come like clockwork.
		d := opts.BurstEvery/2 + time.Duration(rng.Int64N(int64(opts.BurstEvery)+1))
		return time.After(d)
	}
	burst := nextBurst()
	// Open with a small catalog, so there is something to look at at once.
	opening := [][]byte{gen.Next(), gen.Next(), gen.Next()}
	if _, err := s.Send(ctx, opening); err != nil {
		return fmt.Errorf("sending demo events: %w", err)
	}
	for {
		var events [][]byte
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			events = [][]byte{gen.Next()}
		case <-burst:
			events = gen.Burst(15 + rng.IntN(30))
			burst = nextBurst()
		}
		if _, err := s.Send(ctx, events); err != nil {
			return fmt.Errorf("sending demo events: %w", err)
		}
	}
}
