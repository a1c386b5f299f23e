// Command evtctl produces, tails and replays events, and runs an event log node.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/evtctl/evtctl/pkg/iostreams"
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
	return execute(ctx, iostreams.System(), args)
}

// execute runs one command line on streams and returns its exit status.
func execute(ctx context.Context, streams *iostreams.IOStreams, args []string) int {
	root := newRootCmd(streams)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return exitCode(streams, pointUsage(err, cmd), ctx)
}
