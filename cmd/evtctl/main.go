// Command evtctl produces, tails and replays events, and runs an event log node.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/evtctl/evtctl/internal/iostreams"
	// Sources of logs that do not speak the events method register themselves.
	_ "github.com/evtctl/evtctl/pkg/client/cometbft"
	_ "github.com/evtctl/evtctl/pkg/client/kafka"
	_ "github.com/evtctl/evtctl/pkg/client/redisstream"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes one command line and returns its exit status.
func run(args []string) int {
	// A closed pipe then makes writes fail with EPIPE, which ends a command quietly.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return execute(ctx, iostreams.System(), os.Stdout, args)
}

// keepsGoing are the commands whose work does not end with their output's reader.
var keepsGoing = map[string]bool{"evtctl serve": true, "evtctl emit": true}

// execute runs one command line on streams and returns its exit status. stdout, when not
// nil, is the file behind streams.Out, watched for a reader that goes away.
func execute(ctx context.Context, streams *iostreams.IOStreams, stdout *os.File, args []string) int {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watch := watchStreams(streams, cancel)
	root := newRootCmd(streams)
	root.SetArgs(args)
	// A client command ends when its output can go nowhere; a node keeps serving whatever
	// becomes of its log's reader, and a producer sends every event it was asked to whatever
	// becomes of the reader of its acknowledgements (emit | head -1).
	if target, _, err := root.Find(args); err == nil && !keepsGoing[target.CommandPath()] {
		watch.arm()
		if stdout != nil && !streams.IsStdoutTTY() {
			defer watchReader(stdout, func() { cancel(errStdoutGone) })()
		}
	}
	cmd, err := root.ExecuteContextC(ctx)
	return exitCode(streams, pointUsage(err, cmd), ctx)
}
