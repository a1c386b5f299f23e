package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/evtctl/evtctl/internal/bench"
	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/emit"
	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/wire"
)

// benchOptions are the flags every bench subcommand takes.
type benchOptions struct {
	streams *iostreams.IOStreams
	node    nodeOptions

	IngestToken string
	MetricsURL  string
	Embedded    bool
	EmbeddedDir string
	Memory      bool
	Sync        string
	Output      string
	JQ          jqOption

	// nodeProcess says how to run an evtctl binary for a node in a process of its own
	// (pollers --embedded): this executable by default; tests replace it.
	nodeProcess func() (exe string, env []string, err error)
}

func (o *benchOptions) addFlags(f *pflag.FlagSet) {
	o.node.addFlags(f)
	f.StringVar(&o.IngestToken, "ingest-token", "", "bearer token for sending events (default --token)")
	f.StringVar(&o.MetricsURL, "metrics-url", "", "the node's Prometheus metrics (default NODE/metrics)")
	f.BoolVar(&o.Embedded, "embedded", false, "start a node for the run instead of using --node (pollers: in a process of its own)")
	f.StringVar(&o.EmbeddedDir, "embedded-dir", "", "with --embedded: the node's log directory (default a new temporary directory, removed afterwards)")
	f.BoolVar(&o.Memory, "memory", false, "with --embedded: keep the node's log in memory")
	enumVar(f, &o.Sync, "sync", "always", "with --embedded: when the node acknowledges appends: {values}",
		choice{name: "always", help: "after fsync"}, choice{name: "none", help: "after write"})
	enumVarP(f, &o.Output, "output", "o", "", "{values}; by default table on a terminal, json otherwise", choice{name: "table"}, choice{name: "json"})
	o.JQ.addFlag(f)
}

func (o *benchOptions) validate(cmd *cobra.Command) error {
	if err := o.JQ.implyJSON(&o.Output, cmd.Flags().Changed("output"), "json"); err != nil {
		return err
	}
	if err := o.JQ.compile(cmd.Context()); err != nil {
		return err
	}
	f := cmd.Flags()
	if o.Embedded && (f.Changed("node") || f.Changed("context")) {
		return usagef("--embedded and --node (or --context) choose the node: give one")
	}
	if !o.Embedded {
		for _, name := range []string{"embedded-dir", "memory", "sync"} {
			if f.Changed(name) {
				return usagef("--%s configures the node of --embedded", name)
			}
		}
	}
	if o.Memory && o.EmbeddedDir != "" {
		return usagef("--memory and --embedded-dir cannot be used together")
	}
	return nil
}

func newCmdBench(streams *iostreams.IOStreams) *cobra.Command {
	return newCmdBenchWith(streams, newBenchOptions)
}

// newCmdBenchWith builds the bench commands with options made by newOpts (tests change how
// a node process is started).
func newCmdBenchWith(streams *iostreams.IOStreams, newOpts func(*iostreams.IOStreams) *benchOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a node: ingest, tail latency, replay and idle pollers",
		Long: `Measure a node from outside, the way its clients meet it, and report each figure with
its unit: a table on a terminal, JSON otherwise (or with -o json), with the parameters and
the environment of the run.

  ingest     producers posting events as fast as the node acknowledges them
  latency    a steady rate of appends while a client tails: acknowledgement to delivery
  replay     catch-up of stored events through the client, also with a 1% filter
  emit       evtctl emit --file of a million events, beside raw posts of the same batches
  pollers    thousands of idle long-polls: the node's memory, and how fast an append
             wakes them
  jetstream  a node on NATS JetStream beside the NATS Go client on the same server
  attack     honest producers and a reader while clients try to shut them out
  redis      replay and tail of a Redis stream beside a plain go-redis reader

--node works against any node for replay and pollers (a Tendermint node too); ingest and
latency send events, so they need an evtctl node — except latency against a CometBFT node,
which sends transactions. replay and latency read a CometBFT node as tail and replay do.
--embedded starts a node for the run.
Ctrl-C stops a bench; what was measured so far is reported, marked as partial.`,
		Example: `  evtctl bench ingest --embedded
  evtctl bench latency --embedded --rate 1000 --duration 10s
  evtctl bench replay --embedded --events 1000000
  evtctl bench emit --embedded --runs 3
  evtctl bench pollers --embedded --pollers 10000
  evtctl bench attack --embedded
  evtctl bench replay --node http://tendermint:26657 -o json`,
		Args: noArgs,
	}
	cmd.AddCommand(newCmdBenchIngest(newOpts(streams)), newCmdBenchLatency(newOpts(streams)), newCmdBenchReplay(newOpts(streams)), newCmdBenchPollers(newOpts(streams)),
		newCmdBenchEmit(newOpts(streams)), newCmdBenchJetStream(newOpts(streams)), newCmdBenchAttack(newOpts(streams)),
		newCmdBenchRedis(newOpts(streams)))
	return cmd
}

func newBenchOptions(streams *iostreams.IOStreams) *benchOptions {
	return &benchOptions{streams: streams, nodeProcess: func() (string, []string, error) {
		exe, err := os.Executable()
		return exe, os.Environ(), err
	}}
}

type benchIngestOptions struct {
	*benchOptions
	Producers int
	Mode      string
	BatchSize int
	EventSize int
	Duration  time.Duration
	Warmup    time.Duration
	Count     int
}

func newCmdBenchIngest(bo *benchOptions) *cobra.Command {
	opts := &benchIngestOptions{benchOptions: bo}
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "Producers posting events as fast as the node acknowledges them",
		Long: `Post events from --producers keep-alive connections, each with one request in flight, as
fast as the node acknowledges them: batches of --batch-size events (--mode batch) or one
event per request (--mode structured). Events are OEP-41 enrollment CloudEvents of
--event-size bytes, each with a new id. Reports events/s, MB/s (of events, 10^6 bytes) and
percentiles of the time from sending a request to its acknowledgement. Acknowledgements in
the --warmup are not counted; --count sends exactly that many events and counts them all.`,
		Example: `  evtctl bench ingest --embedded
  evtctl bench ingest --node 127.0.0.1:7480 --producers 16 --mode structured`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			if opts.Producers < 1 || opts.BatchSize < 1 {
				return usagef("--producers and --batch-size must be at least 1")
			}
			if err := checkSizes(opts.EventSize, opts.Count, opts.Duration, opts.Warmup); err != nil {
				return err
			}
			return runBench(cmd.Context(), opts.benchOptions, func(ctx context.Context, c bench.Common) (*bench.Report, error) {
				return bench.Ingest(ctx, bench.IngestConfig{Common: c, Producers: opts.Producers, Mode: opts.Mode, BatchSize: opts.BatchSize,
					EventSize: opts.EventSize, Duration: opts.Duration, Warmup: opts.Warmup, Count: opts.Count})
			})
		},
	}
	f := cmd.Flags()
	opts.addFlags(f)
	f.IntVar(&opts.Producers, "producers", 8, "concurrent keep-alive connections, one request in flight on each")
	enumVar(f, &opts.Mode, "mode", "batch", "{values}",
		choice{name: "batch", help: "--batch-size events per request"}, choice{name: "structured", help: "one event per request"})
	f.IntVar(&opts.BatchSize, "batch-size", 100, "events per request in batch mode")
	f.IntVar(&opts.EventSize, "event-size", bench.DefaultEventSize, "bytes of each event in JSON format")
	f.DurationVar(&opts.Duration, "duration", 10*time.Second, "how long to measure, after the warm-up")
	f.DurationVar(&opts.Warmup, "warmup", time.Second, "how long to send before measuring")
	f.IntVar(&opts.Count, "count", 0, "send exactly this many events and measure them all, instead of --duration")
	return cmd
}

type benchLatencyOptions struct {
	*benchOptions
	Rate        float64
	Duration    time.Duration
	Warmup      time.Duration
	Count       int
	EventSize   int
	Concurrency int
	PageSize    int
	Wait        time.Duration
}

func newCmdBenchLatency(bo *benchOptions) *cobra.Command {
	opts := &benchLatencyOptions{benchOptions: bo}
	cmd := &cobra.Command{
		Use:   "latency",
		Short: "Time from an append's acknowledgement to a tailing client's receipt",
		Long: `Append single events at a steady --rate while a client follows the head as evtctl tail
does (long-polling, each batch rendered as JSON lines and flushed), and report percentiles of
the time from each append's acknowledgement (its 2xx) to the tail's receipt of that event,
matched by id. Events appended in the --warmup are not counted. An event that reaches the
tail before its producer has the acknowledgement counts as 0 ms (and is counted). Needs an
evtctl node (or --embedded), since it appends.

Against a CometBFT node it sends transactions instead (broadcast_tx_sync of
"evtctl-bench-ID=xxx…", which the kvstore application takes; a chain that refuses them is
said to), and times each from its block's commit (the time in the validators' precommit
votes, the node's clock) to its line written out; latency_p99's goal is the block time
measured in the run plus 100 ms. from_send_* times each from its sending.`,
		Example: `  evtctl bench latency --embedded
  evtctl bench latency --node http://127.0.0.1:7480 --rate 1000 --duration 30s`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			if opts.Rate <= 0 {
				return usagef("--rate must be above 0")
			}
			if opts.Concurrency < 1 || opts.PageSize < 1 || opts.Wait <= 0 {
				return usagef("--concurrency and --page-size must be at least 1, --wait above 0")
			}
			if err := checkSizes(opts.EventSize, opts.Count, opts.Duration, opts.Warmup); err != nil {
				return err
			}
			return runBench(cmd.Context(), opts.benchOptions, func(ctx context.Context, c bench.Common) (*bench.Report, error) {
				return bench.Latency(ctx, bench.LatencyConfig{Common: c, Rate: opts.Rate, Duration: opts.Duration, Warmup: opts.Warmup, Count: opts.Count,
					EventSize: opts.EventSize, Concurrency: opts.Concurrency, PageSize: opts.PageSize, Wait: opts.Wait})
			})
		},
	}
	f := cmd.Flags()
	opts.addFlags(f)
	f.Float64Var(&opts.Rate, "rate", 1000, "events appended per second, spread evenly")
	f.DurationVar(&opts.Duration, "duration", 10*time.Second, "how long to measure, after the warm-up")
	f.DurationVar(&opts.Warmup, "warmup", time.Second, "how long to append before measuring")
	f.IntVar(&opts.Count, "count", 0, "measure this many events instead of --duration")
	f.IntVar(&opts.EventSize, "event-size", bench.DefaultEventSize, "bytes of each event in JSON format")
	f.IntVar(&opts.Concurrency, "concurrency", 8, "appends in flight at most, so that a slow one does not hold up the rate")
	f.IntVar(&opts.PageSize, "page-size", 100, "the tail's events per request (as evtctl tail)")
	f.DurationVar(&opts.Wait, "wait", 25*time.Second, "the tail's long-poll wait (as evtctl tail)")
	return cmd
}

type benchReplayOptions struct {
	*benchOptions
	query     queryOptions
	Events    int
	EventSize int
	PageSize  int
	Runs      int
}

func newCmdBenchReplay(bo *benchOptions) *cobra.Command {
	opts := &benchReplayOptions{benchOptions: bo}
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Catch-up of stored events through the client, also with a 1% filter",
		Long: `Load --events events into the node (straight into its log with --embedded, else through its
ingest endpoint), then replay them oldest first as evtctl replay -o jsonl does (pages of
--page-size, the next fetched while the current one is written; the lines go nowhere) and
report events/s and MB/s of JSON lines, and the CPU used per event by this process and (from
its /metrics, when it runs in a process of its own) by the node. Then replay them with a filter
that exactly 1% of them match, and check both counts; on an evtctl node, also paged as from a
node without its stream. --runs repeats each; the median is reported. Last, the same bytes are
served as one file by a loopback server of the bench's own and fetched by curl (or Go's HTTP
client without curl): the transport's limit, and the replay's time as a multiple of it.

With --node nothing is loaded unless --events says how many (a node of someone else's should
not get a million test events by surprise): what the node holds is replayed, and the
filtered pass runs only with --query or --type. A Tendermint node cannot be loaded.

Against a CometBFT node the heights it holds are replayed, and read again by a plain Go loop
of block_results and block calls with as many in flight, in each run (once untimed first, to
warm the node): heights and ABCI events a second both ways, and the replay's rate as a share
of the loop's (ratio_to_plain).`,
		Example: `  evtctl bench replay --embedded --events 1000000 --runs 3
  evtctl bench replay --node http://127.0.0.1:7480 --events 100000
  evtctl bench replay --node http://tendermint:26657 -q "tm.event = 'Tx'"
  evtctl bench replay --node http://127.0.0.1:26657 --runs 3`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			q, err := opts.query.build()
			if err != nil {
				return err
			}
			if opts.Events < 0 || opts.PageSize < 1 || opts.Runs < 1 {
				return usagef("--events must not be negative; --page-size and --runs must be at least 1")
			}
			events := opts.Events
			if !cmd.Flags().Changed("events") && !opts.Embedded {
				events = 0 // a node of --node is not loaded unless asked to be
			}
			if q != "" && events > 0 {
				return usagef("--query and --type filter the events the node holds; they do not go with --events (loaded events get their own 1%% filter)")
			}
			if err := checkSizes(opts.EventSize, 0, 0, 0); err != nil {
				return err
			}
			return runBench(cmd.Context(), opts.benchOptions, func(ctx context.Context, c bench.Common) (*bench.Report, error) {
				return bench.Replay(ctx, bench.ReplayConfig{Common: c, Events: events, EventSize: opts.EventSize, PageSize: opts.PageSize, Runs: opts.Runs, Query: q})
			})
		},
	}
	f := cmd.Flags()
	opts.addFlags(f)
	opts.query.addFlags(f)
	f.IntVar(&opts.Events, "events", defaultReplayEvents, "events to load and replay (0: replay what the node holds; the default with --node)")
	f.IntVar(&opts.EventSize, "event-size", bench.DefaultEventSize, "bytes of each loaded event in JSON format")
	f.IntVar(&opts.PageSize, "page-size", 1000, "events per request (as evtctl replay)")
	f.IntVar(&opts.Runs, "runs", 1, "replays of each kind; the median is reported")
	return cmd
}

const defaultReplayEvents = 1_000_000

type benchEmitOptions struct {
	*benchOptions
	Events    int
	EventSize int
	Runs      int
}

func newCmdBenchEmit(bo *benchOptions) *cobra.Command {
	opts := &benchEmitOptions{benchOptions: bo}
	cmd := &cobra.Command{
		Use:   "emit",
		Short: "evtctl emit --file of a million events, beside raw posts of the same batches",
		Long: `Write --events events of --event-size bytes to a JSON-lines file and send it as
evtctl emit --file does with its defaults (in this process, its output going nowhere), then
post the same batches (as many events, of the same size, with other ids) as they are with a
plain HTTP client, one request in flight and the next made meanwhile: what the node and the
transport allow any client. Reports events/s, the CPU per event of this process and (from its
/metrics, when it runs in a process of its own) of the node, and emit's time as a multiple of
the raw posts'. --runs repeats both; medians are reported.

With --embedded the node runs as a process of its own (this executable: serve), durable in a
temporary directory unless --memory, acknowledging after fsync unless --sync none.`,
		Example: `  evtctl bench emit --embedded --runs 3
  evtctl bench emit --node http://127.0.0.1:7480 --events 100000 -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			if opts.Events < 1 || opts.Runs < 1 {
				return usagef("--events and --runs must be at least 1")
			}
			if err := checkSizes(opts.EventSize, 0, 0, 0); err != nil {
				return err
			}
			return runBench(cmd.Context(), opts.benchOptions, func(ctx context.Context, c bench.Common) (*bench.Report, error) {
				return bench.Emit(ctx, bench.EmitConfig{Common: c, Events: opts.Events, EventSize: opts.EventSize, Runs: opts.Runs,
					BatchBytes: emit.DefaultBatchBytes, BatchEvents: emit.DefaultBatchEvents, Emit: emitFile(c.Target, 0)})
			}, withNodeProcess())
		},
	}
	f := cmd.Flags()
	opts.addFlags(f)
	f.IntVar(&opts.Events, "events", 1_000_000, "events in the file")
	f.IntVar(&opts.EventSize, "event-size", bench.DefaultEventSize, "bytes of each event in JSON format")
	f.IntVar(&opts.Runs, "runs", 1, "runs of each kind; the median is reported")
	return cmd
}

// emitFile returns what bench emit measures: evtctl emit --file PATH to the target with
// emit's defaults (batchSize 0) or batches of batchSize, its lines (JSON, as when piped)
// going nowhere.
func emitFile(t bench.Target, batchSize int) func(ctx context.Context, path string) (int, int, error) {
	return func(ctx context.Context, path string) (int, int, error) {
		base, err := client.NormalizeNode(t.URL)
		if err != nil {
			return 0, 0, err
		}
		hc, err := emit.HTTPClient(t.CAFile, t.Insecure)
		if err != nil {
			return 0, 0, err
		}
		s, err := emit.NewSender(emit.Target{
			URL: base + wire.PathEvents, Node: true, Client: hc, Token: firstNonEmpty(t.IngestToken, t.Token),
			Headers: http.Header{}, Mode: deliver.Batch, MaxAttempts: emitMaxAttempts, Timeout: emitTimeout, UserAgent: "evtctl/" + versionString(),
		})
		if err != nil {
			return 0, 0, err
		}
		res, err := emit.Run(ctx, emit.Config{Sender: s, File: path, BatchSize: batchSize, Concurrency: 1,
			Acks: emit.NewAcks(io.Discard, emit.AckOptions{JSON: true})})
		return res.Sent, res.Requests, err
	}
}

type benchPollersOptions struct {
	*benchOptions
	query   queryOptions
	Pollers int
	Rounds  int
	Warmup  int
	Wait    time.Duration
	Connect int
	Settle  time.Duration
}

func newCmdBenchPollers(bo *benchOptions) *cobra.Command {
	opts := &benchPollersOptions{benchOptions: bo}
	cmd := &cobra.Command{
		Use:   "pollers",
		Short: "Idle long-polling clients: the node's memory, and how fast an append wakes them",
		Long: `Hold --pollers idle clients on the node, each on its own connection, long-polling after the
newest event (--wait, capped by the node) and polling again when a wait ends. Reports the
node's memory from its /metrics before they connect and once all are waiting, then appends
--rounds events, one at a time, and reports the time from each append's acknowledgement to
each poller's reply (p50/p99/max), the spread of the wake-ups, and the node's CPU per wake.
--warmup-rounds appends go first and count in no figure but warmup_node_cpu_per_wake: in
the first round the bench takes each poller's first reply, and the node sends on each
connection for the first time, both slower than ever after.
On Linux a reply is timed to its arrival at the poller's socket (the kernel's receive time),
so that the bench's own queue of replies to read is not counted as the node's; wake_read_*
times them to when the bench read them.

With --embedded the node runs as a process of its own (this executable: serve --memory), so
that its /metrics count the node's memory alone and its connections have their own open-file
limit. Against a Tendermint node nothing is appended: each round waits for the node's next
event (narrow it with --query, e.g. "tm.event = 'NewBlock'"), only the spread is measured,
and memory needs --metrics-url (Tendermint's Prometheus endpoint).

Each poller takes an open file in this process: the soft limit is raised to the hard limit,
and the bench says which limit stops it and how to raise it when the pollers do not fit.`,
		Example: `  evtctl bench pollers --embedded
  evtctl bench pollers --node http://127.0.0.1:7480 --pollers 5000 --rounds 10
  evtctl bench pollers --node http://tendermint:26657 \
      --metrics-url http://tendermint:26660/metrics -q "tm.event = 'NewBlock'"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			if opts.Embedded && (cmd.Flags().Changed("embedded-dir") || cmd.Flags().Changed("sync") || cmd.Flags().Changed("memory")) {
				return usagef("pollers --embedded runs a node in memory in a process of its own; --embedded-dir, --memory and --sync do not apply")
			}
			q, err := opts.query.build()
			if err != nil {
				return err
			}
			if opts.Pollers < 1 || opts.Rounds < 1 || opts.Connect < 1 || opts.Warmup < 0 || opts.Wait <= 0 || opts.Settle <= 0 {
				return usagef("--pollers, --rounds and --connect must be at least 1, --warmup-rounds at least 0; --wait and --settle above 0")
			}
			return runBench(cmd.Context(), opts.benchOptions, func(ctx context.Context, c bench.Common) (*bench.Report, error) {
				return bench.Pollers(ctx, bench.PollersConfig{Common: c, Pollers: opts.Pollers, Rounds: opts.Rounds, Warmup: opts.Warmup, Wait: opts.Wait, Query: q,
					Connect: opts.Connect, Settle: opts.Settle})
			}, withChildNode(opts.Pollers))
		},
	}
	f := cmd.Flags()
	opts.addFlags(f)
	opts.query.addFlags(f)
	f.IntVar(&opts.Pollers, "pollers", 10_000, "idle long-polling clients, one connection each")
	f.IntVar(&opts.Rounds, "rounds", 5, "appends, each waking every poller")
	f.IntVar(&opts.Warmup, "warmup-rounds", 1, "appends before --rounds, in no figure but their own")
	f.DurationVar(&opts.Wait, "wait", 30*time.Second, "long-poll wait each poller asks for (the node caps it)")
	f.IntVar(&opts.Connect, "connect", 100, "pollers connecting at once")
	f.DurationVar(&opts.Settle, "settle", 2*time.Minute, "give up when the pollers are not all waiting, or not all woken, within this long")
	return cmd
}

// checkSizes checks the flags of size and length most benches share.
func checkSizes(eventSize, count int, duration, warmup time.Duration) error {
	if least := bench.MinEventSize(); eventSize < least {
		return usagef("--event-size must be at least %d bytes (an enrollment event with no padding)", least)
	}
	if eventSize > 64<<10 {
		return usagef("--event-size must be at most 65536 bytes, a node's limit for one event")
	}
	if count < 0 || duration < 0 || warmup < 0 {
		return usagef("--count, --duration and --warmup must not be negative")
	}
	return nil
}

// benchRun is the part of a bench that differs by subcommand.
type benchRun func(ctx context.Context, c bench.Common) (*bench.Report, error)

type benchNode struct {
	child int  // > 0: --embedded runs a node process in memory for this many pollers
	serve bool // --embedded runs a node process with the log --memory, --embedded-dir and --sync say
	// ingestToken, with serve: the node process requires it for ingest (its reads stay open).
	ingestToken string
	serveArgs   []string // with serve: more flags for the node process
	target      bench.Target
	close       func() error
}

func withChildNode(pollers int) func(*benchNode) { return func(n *benchNode) { n.child = pollers } }

// withNodeProcess runs the node of --embedded in a process of its own.
func withNodeProcess() func(*benchNode) { return func(n *benchNode) { n.serve = true } }

// withIngestToken has the node process of --embedded require token for ingest.
func withIngestToken(token string) func(*benchNode) {
	return func(n *benchNode) { n.ingestToken = token }
}

// withServeArgs gives the node process of --embedded more flags.
func withServeArgs(args ...string) func(*benchNode) {
	return func(n *benchNode) { n.serveArgs = append(n.serveArgs, args...) }
}

// runBench finds or starts the node, runs the bench and writes its report.
func runBench(ctx context.Context, opts *benchOptions, run benchRun, mods ...func(*benchNode)) error {
	var bn benchNode
	for _, m := range mods {
		m(&bn)
	}
	if err := opts.startNode(&bn); err != nil {
		return err
	}
	var closeErr error
	closed := false
	closeNode := func() {
		if !closed && bn.close != nil {
			closed = true
			closeErr = bn.close()
		}
	}
	defer closeNode()

	common := bench.Common{Target: bn.target, Version: versionString()}
	p := &benchProgress{s: opts.streams}
	if opts.streams.IsStderrTTY() {
		common.Progress = p.show
	}
	report, err := run(ctx, common)
	p.clear()
	closeNode()
	var ke *bench.KindError
	if errors.As(err, &ke) {
		return usagef("%v", err)
	}
	if report != nil {
		if werr := opts.write(report); werr != nil && !closedPipe(werr) {
			return werr
		}
	}
	if err != nil {
		return err // when interrupted, after the partial report: exit 130
	}
	if closeErr != nil {
		fmt.Fprintf(opts.streams.ErrOut, "evtctl: warning: stopping the bench's node: %s\n", safeText(closeErr.Error()))
	}
	return nil
}

func (o *benchOptions) write(r *bench.Report) error {
	format := o.Output
	if format == "" {
		format = "json"
		if o.streams.IsStdoutTTY() {
			format = "table"
		}
	}
	if format == "json" {
		return r.WriteJSON(o.JQ.writer(o.streams.Out))
	}
	return r.WriteTable(o.streams.Out)
}

// startNode resolves --node, or starts the node of --embedded.
func (o *benchOptions) startNode(bn *benchNode) error {
	if !o.Embedded {
		s, err := o.node.settings()
		if err != nil {
			return err
		}
		url, err := client.NormalizeNode(s.Node)
		if err != nil {
			return usagef("--node: %v", err)
		}
		bn.target = bench.Target{URL: url, Token: s.Token, IngestToken: firstNonEmpty(o.IngestToken, s.IngestToken, s.Token),
			CAFile: s.CAFile, Insecure: s.Insecure, MetricsURL: o.MetricsURL}
		return nil
	}
	if bn.child > 0 {
		// Before starting a node: the pollers must fit in this process's open-file limit.
		if _, err := bench.CheckOpenFileLimit(bn.child, false); err != nil {
			return err
		}
		exe, env, err := o.nodeProcess()
		if err != nil {
			return fmt.Errorf("finding this executable to run a node process: %w", err)
		}
		n, err := bench.StartChildNode(exe, childEnv(env), "--max-waiters", strconv.Itoa(bn.child+1000))
		if err != nil {
			return err
		}
		bn.target = bench.Target{URL: n.URL, MetricsURL: o.MetricsURL, Embedded: "child process", Durability: "memory"}
		bn.close = n.Close
		return nil
	}
	if bn.serve {
		return o.startNodeProcess(bn)
	}
	eo := embeddedOptions{PageMax: 1000, MaxWaiters: 20_000}
	durability := "memory"
	var cleanup func() error
	if !o.Memory {
		eo.Dir = o.EmbeddedDir
		if eo.Dir == "" {
			dir, err := os.MkdirTemp("", "evtctl-bench-")
			if err != nil {
				return err
			}
			eo.Dir = dir
			cleanup = func() error { return os.RemoveAll(dir) }
		}
		durability = "durable, fsync before acknowledging"
		if o.Sync == "none" {
			eo.Sync = eventlog.SyncNone
			durability = "durable, acknowledged after write (no fsync)"
		}
	}
	n, err := startEmbedded(eo)
	if err != nil {
		if cleanup != nil {
			cleanup()
		}
		return err
	}
	bn.target = bench.Target{URL: n.URL, MetricsURL: o.MetricsURL, Embedded: "in-process", Durability: durability, Store: n.Store}
	bn.close = func() error {
		err := n.Close()
		if cleanup != nil {
			err = errors.Join(err, cleanup())
		}
		return err
	}
	return nil
}

// startNodeProcess starts the node of --embedded as "evtctl serve" in a process of its own:
// durable in a new temporary directory (or --embedded-dir), or --memory.
func (o *benchOptions) startNodeProcess(bn *benchNode) error {
	exe, env, err := o.nodeProcess()
	if err != nil {
		return fmt.Errorf("finding this executable to run a node process: %w", err)
	}
	var args []string
	durability := "memory"
	var cleanup func() error
	if o.Memory {
		args = append(args, "--memory")
	} else {
		dir := o.EmbeddedDir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "evtctl-bench-"); err != nil {
				return err
			}
			cleanup = func() error { return os.RemoveAll(dir) }
		}
		args = append(args, "--data-dir", dir, "--sync", o.Sync)
		durability = "durable, fsync before acknowledging"
		if o.Sync == "none" {
			durability = "durable, acknowledged after write (no fsync)"
		}
	}
	if bn.ingestToken != "" {
		args = append(args, "--ingest-token", bn.ingestToken)
	}
	args = append(args, bn.serveArgs...)
	n, err := bench.StartChildServe(exe, childEnv(env), args...)
	if err != nil {
		if cleanup != nil {
			cleanup()
		}
		return err
	}
	bn.target = bench.Target{URL: n.URL, IngestToken: bn.ingestToken, MetricsURL: o.MetricsURL, Embedded: "child process", Durability: durability}
	bn.close = func() error {
		err := n.Close()
		if cleanup != nil {
			err = errors.Join(err, cleanup())
		}
		return err
	}
	return nil
}

// childEnv is the environment of a node process: this one's, without the node tokens,
// which would make it refuse the bench's requests.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if strings.HasPrefix(kv, "EVTCTL_READ_TOKEN=") || strings.HasPrefix(kv, "EVTCTL_INGEST_TOKEN=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// benchProgress shows one line of progress on stderr (a terminal), at most five times a second.
type benchProgress struct {
	s     *iostreams.IOStreams
	mu    sync.Mutex
	last  time.Time
	shown bool
}

func (p *benchProgress) show(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	p.shown = true
	fmt.Fprintf(p.s.ErrOut, "\r\x1b[K%s", safeText(line))
}

func (p *benchProgress) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.s.ErrOut, "\r\x1b[K")
		p.shown = false
	}
}

type benchJetStreamOptions struct {
	*benchOptions
	NATS      string
	Events    int
	EventSize int
	BatchSize int
	Producers int
	Runs      int
	Replicas  int
	Warmup    int
	NodeArgs  []string

	Mode        string
	Recent      int
	ReplayEvery int
}

func newCmdBenchJetStream(bo *benchOptions) *cobra.Command {
	opts := &benchJetStreamOptions{benchOptions: bo}
	cmd := &cobra.Command{
		Use:   "jetstream",
		Short: "A node on NATS JetStream beside the NATS Go client on the same server",
		Long: `Measure, in one run against the NATS server of --nats, the NATS Go client and an evtctl node
on a stream of that server, and report the node's rates as a share of the client's:

  ingest  the client publishes --events events asynchronously (nats.go's default bound on
          acknowledgements in flight); the node takes them from evtctl emit --file, run in
          this process, in batches of --batch-size (ordered batches, as emit sends a file);
          with --producers N above 1, from N requests in flight of unordered batches
  replay  the client reads them with an ordered consumer; the node serves them to a
          chronological replay rendered as evtctl replay -o jsonl renders it

The node is this executable, "serve --store NATS" in a process of its own (--node-arg adds
flags). Before the measured events each side sends and reads back --warmup-events others,
untimed: the node is a new process in each run, while the client's has run before.

--mode in-use (the default) measures each side as it is used: it reads the warm-up events
back before the measured ones are sent, and while they are, a live tail follows the stream
(evtctl tail's path on the node; an ordered consumer for the client) and, each time it has
received --replay-every more, the --recent newest events are read again (evtctl replay's
path; an ordered consumer that fetches them and is deleted): both sides do the same reads.
--mode fresh reads nothing while they are sent, and reads the warm-up events back after them.

Each run creates new streams named EVTCTL_BENCH_*, deleted afterwards. --runs repeats
everything; medians are reported.`,
		Example: `  nats-server --jetstream --store_dir "$(mktemp -d)" &
  evtctl bench jetstream --nats nats://127.0.0.1:4222 --runs 3`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.JQ.implyJSON(&opts.Output, cmd.Flags().Changed("output"), "json"); err != nil {
				return err
			}
			if err := opts.JQ.compile(cmd.Context()); err != nil {
				return err
			}
			if opts.NATS == "" {
				return usagef("--nats is required: the NATS server to measure on, e.g. nats://127.0.0.1:4222")
			}
			if opts.Events < 1 || opts.BatchSize < 1 || opts.Producers < 1 || opts.Runs < 1 || opts.Replicas < 1 || opts.Replicas > 5 {
				return usagef("--events, --batch-size, --producers and --runs must be at least 1; --nats-replicas 1 to 5")
			}
			if opts.Warmup < -1 {
				return usagef("--warmup-events must be at least -1 (-1: none; 0: a tenth of --events)")
			}
			if opts.Recent < 1 || opts.ReplayEvery < 1 {
				return usagef("--recent and --replay-every must be at least 1")
			}
			if err := checkSizes(opts.EventSize, 0, 0, 0); err != nil {
				return err
			}
			return runBenchJetStream(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	enumVarP(f, &opts.Output, "output", "o", "", "{values}; by default table on a terminal, json otherwise", choice{name: "table"}, choice{name: "json"})
	opts.JQ.addFlag(f)
	f.StringVar(&opts.NATS, "nats", "", "NATS server URL (nats://HOST:PORT)")
	f.IntVar(&opts.Events, "events", 100_000, "events to publish and read back, by each of the client and the node")
	f.IntVar(&opts.EventSize, "event-size", bench.DefaultEventSize, "bytes of each event in JSON format")
	f.IntVar(&opts.BatchSize, "batch-size", 1000, "events per ingest request to the node")
	f.IntVar(&opts.Producers, "producers", 1, "ingest requests in flight to the node (1: evtctl emit --file's ordered batches)")
	f.IntVar(&opts.Runs, "runs", 1, "runs; the medians are reported")
	f.IntVar(&opts.Warmup, "warmup-events", 0, "events each side sends and reads back, untimed, before the measured ones (0: a tenth of --events, at least one batch; -1: none)")
	f.IntVar(&opts.Replicas, "nats-replicas", 1, "replicas of each stream")
	f.StringArrayVar(&opts.NodeArgs, "node-arg", nil, "a flag for the node's serve command (repeatable), e.g. --node-arg=--nats-atomic-batches=false")
	enumVar(f, &opts.Mode, "mode", "in-use", "{values}",
		choice{name: "in-use", help: "a live tail and recent replays while the events are sent"},
		choice{name: "fresh", help: "nothing else reads"})
	f.IntVar(&opts.Recent, "recent", 1000, "with --mode in-use: how many of the newest events each recent replay reads")
	f.IntVar(&opts.ReplayEvery, "replay-every", 10_000, "with --mode in-use: replay the newest events each time the live tail has received this many more")
	return cmd
}

func runBenchJetStream(ctx context.Context, opts *benchJetStreamOptions) error {
	exe, env, err := opts.nodeProcess()
	if err != nil {
		return fmt.Errorf("finding this executable to run a node process: %w", err)
	}
	p := &benchProgress{s: opts.streams}
	cfg := bench.JetStreamConfig{
		Version: versionString(), URL: opts.NATS, Replicas: opts.Replicas, Events: opts.Events, EventSize: opts.EventSize,
		BatchSize: opts.BatchSize, Producers: opts.Producers, Runs: opts.Runs, Warmup: opts.Warmup,
		Fresh: opts.Mode == "fresh", Recent: opts.Recent, ReplayEvery: opts.ReplayEvery,
		EmitFile: func(ctx context.Context, url, path string, batchSize int) (int, error) {
			n, _, err := emitFile(bench.Target{URL: url}, batchSize)(ctx, path)
			return n, err
		},
		StartNode: func(ctx context.Context, stream string) (string, func() error, error) {
			args := append([]string{"--store", opts.NATS, "--nats-stream", stream, "--nats-replicas", strconv.Itoa(opts.Replicas)}, opts.NodeArgs...)
			n, err := bench.StartChildServe(exe, childEnv(env), args...)
			if err != nil {
				return "", nil, err
			}
			return n.URL, n.Close, nil
		},
	}
	if opts.streams.IsStderrTTY() {
		cfg.Progress = p.show
	}
	report, err := bench.JetStream(ctx, cfg)
	p.clear()
	if report != nil {
		if werr := opts.write(report); werr != nil && !closedPipe(werr) {
			return werr
		}
	}
	return err
}

type benchAttackOptions struct {
	*benchOptions
	Attacks     string
	Phase       time.Duration
	Rounds      int
	Producers   int
	BatchSize   int
	EventSize   int
	Connections int
	Streams     int
	Scanners    int
}

func newCmdBenchAttack(bo *benchOptions) *cobra.Command {
	opts := &benchAttackOptions{benchOptions: bo}
	cmd := &cobra.Command{
		Use:   "attack",
		Short: "Honest producers and a reader while clients try to shut them out",
		Long: `Run --producers honest producers (batches of --batch-size events, one request in flight
each, waiting out busy replies) and a probe (a read of the five newest items every 50 ms), and
make each attack of --attacks in turn, from this process:

  bodyless   --connections POSTs to /events that say their body is 8 MiB and never send it
  tokenless  --connections JSON-RPC POSTs to / from clients with no token (1 MiB said, none sent)
  streams    --streams readers of GET /events/stream that take a few bytes every 25 s
  scans      --scanners clients looping an allowed query of 87 CONTAINS conditions over an 8 KiB
             field that no event holds (2,000 such events are loaded first)

Attackers that are refused or cut off come back. For each attack the producers' events/s, the
probe's latency and (from /metrics) the node's memory are measured for --phase before it, for
--phase while it lasts (once its attackers are in place) and for --phase after, and reported
with the ratio of during to before; --rounds makes each attack that many times, each after a
window without it, and measures each phase's windows together (a busy machine's drift then
weighs on both alike). The goals are 0.8 of the unattacked rate for bodyless,
tokenless and streams, and a probe under 50 ms (p99) during scans.

With --embedded the node runs as a process of its own ("serve", durable in a temporary
directory unless --memory, keeping the newest 256 MiB of events) that requires an ingest
token, chosen for the run, and keeps reads open, as the tokenless attack needs. With --node give --ingest-token if the node wants one.`,
		Example: `  evtctl bench attack --embedded
  evtctl bench attack --embedded --memory --attacks scans --phase 10s
  evtctl bench attack --node 127.0.0.1:7480 --ingest-token "$TOKEN" -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			attacks, err := bench.ParseAttacks(opts.Attacks)
			if err != nil {
				return usagef("--attacks: %v", err)
			}
			if opts.Phase <= 0 || opts.Rounds < 1 || opts.Producers < 1 || opts.BatchSize < 1 || opts.Connections < 1 || opts.Streams < 1 || opts.Scanners < 1 {
				return usagef("--phase must be above 0; --rounds, --producers, --batch-size, --connections, --streams and --scanners at least 1")
			}
			if err := checkSizes(opts.EventSize, 0, 0, 0); err != nil {
				return err
			}
			return runBench(cmd.Context(), opts.benchOptions, func(ctx context.Context, c bench.Common) (*bench.Report, error) {
				return bench.Attack(ctx, bench.AttackConfig{Common: c, Attacks: attacks, Phase: opts.Phase, Rounds: opts.Rounds, Producers: opts.Producers,
					BatchSize: opts.BatchSize, EventSize: opts.EventSize, Connections: opts.Connections, Streams: opts.Streams, Scanners: opts.Scanners})
			}, withNodeProcess(), withIngestToken("bench-"+newBenchToken()),
				// The producers send flat out for minutes: the log keeps the newest 256 MiB.
				withServeArgs("--max-bytes", "256MiB"))
		},
	}
	f := cmd.Flags()
	opts.addFlags(f)
	f.StringVar(&opts.Attacks, "attacks", strings.Join(bench.AttackNames, ","), "the attacks to make, comma separated: "+strings.Join(bench.AttackNames, ", "))
	f.DurationVar(&opts.Phase, "phase", 5*time.Second, "how long each window before, during and after an attack is measured")
	f.IntVar(&opts.Rounds, "rounds", 1, "times each attack is made, each after a window without it; each phase's windows are measured together")
	f.IntVar(&opts.Producers, "producers", 4, "honest producers, one request in flight each")
	f.IntVar(&opts.BatchSize, "batch-size", 100, "events per honest request")
	f.IntVar(&opts.EventSize, "event-size", bench.DefaultEventSize, "bytes of each honest event in JSON format")
	f.IntVar(&opts.Connections, "connections", 64, "held POSTs of the bodyless and tokenless attacks")
	f.IntVar(&opts.Streams, "streams", 256, "stalled readers of the streams attack")
	f.IntVar(&opts.Scanners, "scanners", 16, "clients looping the costly query of the scans attack")
	return cmd
}

// newBenchToken is a random token for a bench's node.
func newBenchToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
