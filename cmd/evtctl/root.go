package main

import (
	"github.com/spf13/cobra"

	"github.com/evtctl/evtctl/internal/iostreams"
)

func newRootCmd(streams *iostreams.IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "evtctl",
		Short: "Produce, tail and replay events; run an event log node",
		Long: `evtctl follows the head of an event log with long-polling, pages back to recover what
it missed, tells you when events were lost, and prints JSON lines for jq.

It speaks the "events" method of Tendermint's ADR-075, so it works against a Tendermint
node, and ships its own node (evtctl serve): a durable log of CloudEvents.`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetVersionTemplate("evtctl {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	root.AddCommand(
		newCmdVersion(streams),
		newCmdServe(streams),
		newCmdTail(streams),
		newCmdReplay(streams),
		newCmdEmit(streams),
		newCmdLint(streams),
		newCmdForward(streams),
		newCmdBench(streams),
		newCmdDemo(streams),
		newCmdContext(streams),
		newCmdGenMan(streams),
	)
	root.AddCommand(newHelpTopics()...)
	root.SetHelpCommand(newCmdHelp())
	root.InitDefaultCompletionCmd() // now, so that setGroupArgs sees it
	setGroupArgs(root)
	registerCompletions(root)
	return root
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args[0])
	}
	return nil
}
