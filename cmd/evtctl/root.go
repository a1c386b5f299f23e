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

It speaks the "events" method of Tendermint's ADR-075, and reads CometBFT chains, Kafka
topics and Redis streams with the same cursors, gap reports and filters. It ships its own
node (evtctl serve): a durable log of CloudEvents, on disk or on NATS JetStream.`,
		Example: `  evtctl demo
  evtctl tail --type 'org.openedx.#' -o jsonl | jq -c .data
  evtctl replay --since 1h -o ce > last-hour.jsonl
  evtctl tail --node kafka://localhost:9092/openedx-learning --from-start
  evtctl emit --source https://shop.example.com/ \
      --type org.example.shop.order.purchased.v1 --data '{"total": 12.5}'
  evtctl forward --to http://localhost:8080/hook --checkpoint hook.json
  evtctl serve --window 72h --ingest-token "$TOKEN"`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetVersionTemplate("evtctl {{.Version}}\n")
	setHelpWidth(root, streams)
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
	groupCommands(root)
	root.SetHelpCommand(newCmdHelp())
	root.InitDefaultCompletionCmd() // now, so that setGroupArgs sees it
	setGroupArgs(root)
	registerCompletions(root)
	return root
}

// commandGroups are the groups the root's help shows its commands in, by what a user
// wants to do; each names its commands.
var commandGroups = []struct {
	group    cobra.Group
	commands []string
}{
	{cobra.Group{ID: "read", Title: "Reading events:"}, []string{"tail", "replay"}},
	{cobra.Group{ID: "write", Title: "Writing events:"}, []string{"emit", "lint"}},
	{cobra.Group{ID: "deliver", Title: "Delivering events:"}, []string{"forward"}},
	{cobra.Group{ID: "node", Title: "Running a node:"}, []string{"serve", "demo", "bench"}},
	{cobra.Group{ID: "config", Title: "Configuration:"}, []string{"context", "completion"}},
}

// groupCommands puts the root's commands in their groups; help and version are left for
// the root's help to list after them.
func groupCommands(root *cobra.Command) {
	for _, g := range commandGroups {
		root.AddGroup(&g.group)
		for _, name := range g.commands {
			if name == "completion" {
				root.SetCompletionCommandGroupID(g.group.ID)
				continue
			}
			cmd, _, err := root.Find([]string{name})
			if err != nil || cmd == root {
				panic("no command " + name + " to group")
			}
			cmd.GroupID = g.group.ID
		}
	}
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args[0])
	}
	return nil
}
