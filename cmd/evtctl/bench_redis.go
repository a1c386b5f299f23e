package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/evtctl/evtctl/internal/bench"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/client/redisstream"
)

type benchRedisOptions struct {
	*benchOptions
	Stream    string
	Entries   int
	EntrySize int
	Keep      bool
	PageSize  int
	Runs      int
	Rate      float64
	Duration  time.Duration
}

func newCmdBenchRedis(bo *benchOptions) *cobra.Command {
	opts := &benchRedisOptions{benchOptions: bo}
	cmd := &cobra.Command{
		Use:   "redis",
		Short: "Replay and tail of a Redis stream beside a plain go-redis reader",
		Long: `Measure, in one run against the Redis server of --redis, evtctl's reader of a stream beside a
plain go-redis client:

  replay   a go-redis XRANGE pager writing each entry's id and fields unformatted, and
           evtctl's replay (each entry a CloudEvent, as JSON lines, as evtctl replay -o jsonl
           writes them), both to the null device, alternating, --runs times; evtctl's rate
           as a share of the pager's
  latency  --rate entries a second added with XADD for --duration while evtctl's tail path
           follows the stream (XREAD BLOCK at the head): from each XADD to its entry written

--entries fills the stream first with entries as the Open edX event bus writes them (its
key must not exist; it is deleted afterwards unless --keep); --entries 0 replays the stream
as it is. The latency stream is KEY:latency, new and deleted afterwards.`,
		Example: `  redis-server --port 6379 --save '' --appendonly no &
  evtctl bench redis --redis redis://127.0.0.1:6379/0/bench \
      --entries 1000000 --runs 3`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.JQ.implyJSON(&opts.Output, cmd.Flags().Changed("output"), "json"); err != nil {
				return err
			}
			if err := opts.JQ.compile(cmd.Context()); err != nil {
				return err
			}
			if opts.Stream == "" {
				return usagef("--redis is required: the stream to measure on, e.g. redis://127.0.0.1:6379/0/bench")
			}
			if _, err := redisstream.ParseAddress(opts.Stream); err != nil {
				return usagef("--redis: %v", err)
			}
			if opts.Entries < 0 || opts.PageSize < 1 || opts.Runs < 1 || opts.Rate <= 0 || opts.Duration < 0 {
				return usagef("--entries and --duration must not be negative; --page-size, --runs and --rate must be above 0")
			}
			if opts.EntrySize <= bench.MinRedisEntrySize {
				return usagef("--entry-size must be above %d: the Open edX fields of an entry take that before its payload", bench.MinRedisEntrySize)
			}
			return runBenchRedis(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	enumVarP(f, &opts.Output, "output", "o", "", "{values}; by default table on a terminal, json otherwise", choice{name: "table"}, choice{name: "json"})
	opts.JQ.addFlag(f)
	f.StringVar(&opts.Stream, "redis", "", "the stream, redis://[USER:PASSWORD@]HOST:PORT/DB/KEY (rediss:// for TLS)")
	f.StringVar(&opts.node.Token, "token", "", "the server's password, when the address has none")
	f.StringVar(&opts.node.CAFile, "ca-file", "", "PEM file of certificate authorities to trust for rediss://")
	f.BoolVar(&opts.node.Insecure, "insecure", false, "do not verify the server's TLS certificate")
	f.IntVar(&opts.Entries, "entries", 1_000_000, "entries to add to the stream first (0: replay it as it is)")
	f.IntVar(&opts.EntrySize, "entry-size", bench.DefaultRedisEntrySize, "bytes of each entry's field names and values")
	f.BoolVar(&opts.Keep, "keep", false, "keep the entries added (the stream is deleted afterwards by default)")
	f.IntVar(&opts.PageSize, "page-size", 1000, "entries per XRANGE, both sides")
	f.IntVar(&opts.Runs, "runs", 3, "replays of each side; the medians are reported")
	f.Float64Var(&opts.Rate, "rate", 1000, "entries added per second while the tail follows")
	f.DurationVar(&opts.Duration, "duration", 10*time.Second, "how long entries are added for the latency (0: skip it)")
	return cmd
}

func runBenchRedis(ctx context.Context, opts *benchRedisOptions) error {
	p := &benchProgress{s: opts.streams}
	cfg := bench.RedisConfig{
		Version: versionString(), Stream: opts.Stream,
		Options: client.Options{Token: opts.node.Token, CAFile: opts.node.CAFile, Insecure: opts.node.Insecure},
		Entries: opts.Entries, EntrySize: opts.EntrySize, Keep: opts.Keep, PageSize: opts.PageSize, Runs: opts.Runs,
		Rate: opts.Rate, Duration: opts.Duration,
	}
	if opts.streams.IsStderrTTY() {
		cfg.Progress = p.show
	}
	report, err := bench.Redis(ctx, cfg)
	p.clear()
	if report != nil {
		if werr := opts.write(report); werr != nil && !closedPipe(werr) {
			return werr
		}
	}
	return err
}
