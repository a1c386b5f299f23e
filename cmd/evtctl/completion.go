package main

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/evtctl/evtctl/pkg/client"
)

// registerCompletions walks the command tree once it is built: enum flags complete to
// their values, --type to the event types a reachable node holds, --context to the
// configured contexts.
func registerCompletions(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		var fn cobra.CompletionFunc
		switch e, ok := fl.Value.(*enumValue); {
		case ok:
			fn = e.complete
		case fl.Name == "type" && cmd.Flags().Lookup("node") != nil:
			fn = completeTypes
		case fl.Name == "node" && cmd.Name() != "add":
			fn = completeNodes
		case fl.Name == "context" && cmd.Flags().Lookup("node") != nil:
			fn = func(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				return completeContextNames(c, nil, toComplete)
			}
		default:
			return
		}
		// An error means the command registered its own completion: keep that.
		_ = cmd.RegisterFlagCompletionFunc(fl.Name, fn)
	})
	for _, sub := range cmd.Commands() {
		registerCompletions(sub)
	}
}

// completeNodes offers the nodes of the configured contexts, and the schemes of the logs
// evtctl reads (http://, https://, kafka://, …) for an address being typed.
func completeNodes(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	var out []string
	if _, f, err := loadConfig(); err == nil {
		for _, n := range f.Names() {
			if node := f.Contexts[n].Node; strings.HasPrefix(node, toComplete) && !slices.Contains(out, node) {
				out = append(out, node)
			}
		}
	}
	for _, s := range append([]string{"http", "https"}, client.Schemes()...) {
		if p := s + "://"; strings.HasPrefix(p, toComplete) {
			out = append(out, p)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// completeTypes offers the types of the newest events of the node the command line names,
// when it answers within a second; otherwise nothing.
func completeTypes(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	no := nodeOptions{flags: cmd.Flags()}
	no.Node, _ = cmd.Flags().GetString("node")
	no.Token, _ = cmd.Flags().GetString("token")
	no.CAFile, _ = cmd.Flags().GetString("ca-file")
	no.Insecure, _ = cmd.Flags().GetBool("insecure")
	no.Context, _ = cmd.Flags().GetString("context")
	c, err := no.client(nil)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), time.Second)
	defer cancel()
	reply, err := c.Page(ctx, client.PageRequest{Max: 1000, Backward: true})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	seen := map[string]bool{}
	for _, it := range reply.Items {
		if strings.HasPrefix(it.Event, toComplete) {
			seen[it.Event] = true
		}
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}
