package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/evtctl/evtctl/internal/config"
	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/pkg/client"
)

func newCmdContext(streams *iostreams.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Manage named nodes (contexts) in the configuration file",
		Long: `A context names a node with the tokens and TLS settings needed to reach it. The current
context is used by tail, replay, emit and the other commands that talk to a node when
neither a flag nor the environment says otherwise; --context NAME (or $EVTCTL_CONTEXT)
picks another one for a single command.

Each setting is taken from its flag, else its environment variable (EVTCTL_NODE,
EVTCTL_TOKEN, EVTCTL_INGEST_TOKEN, EVTCTL_CA_FILE, EVTCTL_INSECURE), else the context, else
the default. A context's tokens are sent only to its own node: with --node or $EVTCTL_NODE
naming another node, the context is not used at all.

A context for a Kafka topic (--node kafka://…) keeps the topic's options instead (evtctl
context add --option NAME=VALUE); a context's options are used only for its own node too.

Contexts are kept in ` + configPathHelp() + `, readable by its owner
only. Tokens and passwords are never printed back.`,
		Example: `  evtctl context add prod --node https://events.example.com --use \
      --token-stdin < prod.token
  evtctl context add local --node 127.0.0.1:7480
  evtctl context list
  evtctl tail --context local`,
		Args: groupArgs, // an argument can only be one of its subcommands
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdContextAdd(streams), newCmdContextUse(streams), newCmdContextList(streams),
		newCmdContextRemove(streams), newCmdContextCurrent(streams))
	return cmd
}

func configPathHelp() string {
	if p, err := config.Path(); err == nil && os.Getenv("XDG_CONFIG_HOME") == "" {
		return p
	}
	return "$XDG_CONFIG_HOME/evtctl/config.yaml"
}

// loadConfig reads the configuration file for a command that manages it.
func loadConfig() (string, *config.File, error) {
	path, err := config.Path()
	if err != nil {
		return "", nil, fmt.Errorf("finding the configuration file: %w", err)
	}
	f, err := config.Load(path)
	if err != nil {
		return "", nil, configErrorf("configuration: %v", err)
	}
	return path, f, nil
}

// editContext loads the configuration, checks that context name exists, applies edit
// and saves the file; it returns the file as saved.
func editContext(name string, edit func(f *config.File)) (*config.File, error) {
	path, f, err := loadConfig()
	if err != nil {
		return nil, err
	}
	if f.Contexts[name] == nil {
		return nil, usagef("no context %q (see evtctl context list)", name)
	}
	edit(f)
	if err := f.Save(path); err != nil {
		return nil, fmt.Errorf("saving %s: %w", path, err)
	}
	return f, nil
}

type contextAddOptions struct {
	streams *iostreams.IOStreams

	Name        string
	Node        string
	Token       string
	TokenStdin  bool
	IngestToken string
	CAFile      string
	Insecure    bool
	Options     []string
	OptionStdin string
	Use         bool
	Force       bool
}

func newCmdContextAdd(streams *iostreams.IOStreams) *cobra.Command {
	opts := &contextAddOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "add NAME --node URL",
		Short: "Add a context",
		Long: `Add a context named NAME for the node at --node. The first context added becomes the
current one; --use makes any new one current. --token-stdin reads the token from the first
line of standard input, which keeps it out of the shell's history and process listings.

A Kafka topic (--node kafka://BROKER[,BROKER…]/TOPIC) takes its options by the names the
Kafka tools give them: --option security.protocol=SASL_SSL --option sasl.mechanism=SCRAM-SHA-512
--option sasl.username=NAME, and --option-stdin sasl.password reads the password from the first
line of standard input. Options written in a --node address win over the context's.`,
		Example: `  evtctl context add prod --node https://events.example.com \
      --token-stdin < prod.token
  evtctl context add bus --node kafka://k1:9092,k2:9092/openedx-learning \
      --option security.protocol=SASL_SSL \
      --option sasl.mechanism=SCRAM-SHA-512 --option sasl.username=evtctl \
      --option-stdin sasl.password < kafka.password`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("context add takes one name, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if err := config.ValidName(opts.Name); err != nil {
				return usagef("%v", err)
			}
			if opts.Node == "" {
				return usagef("context add needs --node")
			}
			if opts.TokenStdin && opts.Token != "" {
				return usagef("--token and --token-stdin cannot be used together")
			}
			if opts.TokenStdin && opts.OptionStdin != "" {
				return usagef("--token-stdin and --option-stdin both read standard input: give one")
			}
			return runContextAdd(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Node, "node", "", "the node's URL or host:port")
	f.StringVar(&opts.Token, "token", "", "bearer token for reading")
	f.BoolVar(&opts.TokenStdin, "token-stdin", false, "read the token from the first line of standard input")
	f.StringVar(&opts.IngestToken, "ingest-token", "", "bearer token for sending events (default: the token)")
	f.StringVar(&opts.CAFile, "ca-file", "", "PEM file of certificate authorities to trust for https")
	f.BoolVar(&opts.Insecure, "insecure", false, "do not verify the node's TLS certificate")
	f.StringArrayVar(&opts.Options, "option", nil, "an option of a Kafka topic's node, NAME=VALUE by the Kafka tools' names, e.g. security.protocol=SASL_SSL (repeatable)")
	f.StringVar(&opts.OptionStdin, "option-stdin", "", "read the value of this option (e.g. sasl.password) from the first line of standard input")
	f.BoolVar(&opts.Use, "use", false, "make it the current context")
	f.BoolVar(&opts.Force, "force", false, "replace a context of the same name")
	return cmd
}

func runContextAdd(ctx context.Context, opts *contextAddOptions) error {
	node, err := client.NormalizeNode(opts.Node)
	if err != nil {
		return usagef("--node: %v", err)
	}
	if opts.TokenStdin {
		if opts.Token, err = firstLine(ctx, opts.streams, "--token-stdin", "token"); err != nil {
			return err
		}
	}
	options, err := contextOptions(ctx, opts)
	if err != nil {
		return err
	}
	if node, err = optionsFromAddress(node, options); err != nil {
		return err
	}
	if opts.CAFile != "" {
		abs, err := filepath.Abs(opts.CAFile)
		if err != nil {
			return usagef("--ca-file: %v", err)
		}
		if _, err := client.TLSConfig(abs, false); err != nil {
			return usagef("%v", err)
		}
		opts.CAFile = abs // the context is used from any directory
	}
	path, f, err := loadConfig()
	if err != nil {
		return err
	}
	if f.Contexts[opts.Name] != nil && !opts.Force {
		return usagef("context %q exists; give --force to replace it", opts.Name)
	}
	c := &config.Context{
		Node: node, Token: opts.Token, IngestToken: opts.IngestToken, CAFile: opts.CAFile, Insecure: opts.Insecure,
	}
	if err := c.SetOptions(options); err != nil {
		return usagef("--option: %v", err)
	}
	// The node's source checks what it will be given, without reaching the node.
	if _, err := client.New(client.Options{Node: node, Token: c.Token, CAFile: c.CAFile, Insecure: c.Insecure, Settings: c.Options()}); err != nil {
		return usagef("%v", err)
	}
	f.Contexts[opts.Name] = c
	if opts.Use || f.CurrentContext == "" {
		f.CurrentContext = opts.Name
	}
	if err := f.Save(path); err != nil {
		return fmt.Errorf("saving %s: %w", path, err)
	}
	cur := ""
	if f.CurrentContext == opts.Name {
		cur = " (current)"
	}
	fmt.Fprintf(opts.streams.ErrOut, "added context %q for %s%s to %s\n", opts.Name, client.Redact(node), cur, path)
	return nil
}

// firstLine reads the first line of standard input, for flag: a secret (what) that must
// not be on the command line.
func firstLine(ctx context.Context, streams *iostreams.IOStreams, flag, what string) (string, error) {
	line, err := bufio.NewReader(stdinData(ctx, streams, "")).ReadString('\n')
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err != nil && line == "" {
		return "", usagef("%s: no %s on standard input", flag, what)
	}
	line = strings.TrimSpace(line)
	if line == "" {
		return "", usagef("%s: the first line of standard input is empty", flag)
	}
	return line, nil
}

// contextOptions reads --option NAME=VALUE and --option-stdin NAME.
func contextOptions(ctx context.Context, opts *contextAddOptions) (map[string]string, error) {
	options := map[string]string{}
	for _, kv := range opts.Options {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if !ok || k == "" {
			return nil, usagef("--option %q: want NAME=VALUE", kv)
		}
		if _, dup := options[k]; dup {
			return nil, usagef("--option %s is given twice", k)
		}
		options[k] = v
	}
	if opts.OptionStdin != "" {
		k := strings.ToLower(strings.TrimSpace(opts.OptionStdin))
		if _, dup := options[k]; dup {
			return nil, usagef("--option-stdin %s: the option is given by --option too", k)
		}
		v, err := firstLine(ctx, opts.streams, "--option-stdin", "value")
		if err != nil {
			return nil, err
		}
		options[k] = v
	}
	return options, nil
}

// optionsFromAddress moves the options written in a source's address (kafka://B/T?NAME=VALUE)
// into options, so that the context keeps them as it keeps --option (a password among them
// is then never printed back), and returns the address without them.
func optionsFromAddress(node string, options map[string]string) (string, error) {
	base, query, ok := strings.Cut(node, "?")
	if !ok || strings.HasPrefix(node, "http://") || strings.HasPrefix(node, "https://") {
		return node, nil
	}
	vals, err := neturl.ParseQuery(query)
	if err != nil {
		return "", usagef("--node: the options in the address cannot be read")
	}
	for k, vs := range vals {
		k = strings.ToLower(k)
		if _, dup := options[k]; dup || len(vs) > 1 {
			return "", usagef("option %s is given twice (in --node, or by --option too)", k)
		}
		options[k] = vs[0]
	}
	return base, nil
}

func newCmdContextUse(streams *iostreams.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:               "use NAME",
		Short:             "Make a context the current one",
		Args:              exactlyOneName("context use"),
		ValidArgsFunction: completeContextNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := editContext(args[0], func(f *config.File) { f.CurrentContext = args[0] })
			if err != nil {
				return err
			}
			fmt.Fprintf(streams.ErrOut, "now using context %q (%s)\n", args[0], f.Contexts[args[0]].Node)
			return nil
		},
	}
}

func newCmdContextRemove(streams *iostreams.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:               "remove NAME",
		Aliases:           []string{"rm"},
		Short:             "Remove a context",
		Args:              exactlyOneName("context remove"),
		ValidArgsFunction: completeContextNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			note := ""
			_, err := editContext(args[0], func(f *config.File) {
				delete(f.Contexts, args[0])
				if f.CurrentContext == args[0] {
					f.CurrentContext = ""
					note = "; no context is current now"
				}
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(streams.ErrOut, "removed context %q%s\n", args[0], note)
			return nil
		},
	}
}

func newCmdContextCurrent(streams *iostreams.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "current",
		Short: "Print the name of the current context",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, f, err := loadConfig()
			if err != nil {
				return err
			}
			if f.CurrentContext == "" {
				return fmt.Errorf("no context is current (see evtctl context use)")
			}
			fmt.Fprintln(streams.Out, f.CurrentContext)
			return nil
		},
	}
}

// contextView is a context as list shows it: secrets only as whether they are set.
type contextView struct {
	Name        string `json:"name"`
	Current     bool   `json:"current"`
	Node        string `json:"node"`
	Token       bool   `json:"token"`
	IngestToken bool   `json:"ingest_token"`
	CAFile      string `json:"ca_file,omitempty"`
	Insecure    bool   `json:"insecure,omitempty"`
	// Options are the node's source's options but the secret ones, which Secrets names.
	Options map[string]string `json:"options,omitempty"`
	Secrets []string          `json:"secret_options,omitempty"`
}

// viewOf is a context as list shows it.
func viewOf(name string, current bool, c *config.Context) contextView {
	v := contextView{Name: name, Current: current, Node: client.Redact(c.Node), // a password in it is a secret
		Token: c.Token != "", IngestToken: c.IngestToken != "", CAFile: c.CAFile, Insecure: c.Insecure}
	for _, k := range slices.Sorted(maps.Keys(c.Options())) {
		if config.SecretOption(k) {
			v.Secrets = append(v.Secrets, k)
			continue
		}
		if v.Options == nil {
			v.Options = map[string]string{}
		}
		v.Options[k] = c.Options()[k]
	}
	return v
}

// optionsText shows a context's options in a table cell, secrets as set.
func (v contextView) optionsText() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(v.Options)) {
		parts = append(parts, k+"="+v.Options[k])
	}
	for _, k := range v.Secrets {
		parts = append(parts, k+" set")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func newCmdContextList(streams *iostreams.IOStreams) *cobra.Command {
	var output string
	var jq jqOption
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the contexts (tokens and passwords are shown only as set or not)",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := jq.implyJSON(&output, cmd.Flags().Changed("output"), "json"); err != nil {
				return err
			}
			if err := jq.compile(cmd.Context()); err != nil {
				return err
			}
			path, f, err := loadConfig()
			if err != nil {
				return err
			}
			views := make([]contextView, 0, len(f.Contexts))
			for _, n := range f.Names() {
				views = append(views, viewOf(n, n == f.CurrentContext, f.Contexts[n]))
			}
			if config.TooOpen(path, f) {
				fmt.Fprintf(streams.ErrOut, "evtctl: warning: %s holds tokens and others can read it; chmod 600 it\n", path)
			}
			if output == "json" {
				enc := json.NewEncoder(jq.writer(streams.Out))
				for _, v := range views {
					if err := enc.Encode(v); err != nil {
						return err
					}
				}
				return nil
			}
			if len(views) == 0 {
				fmt.Fprintln(streams.ErrOut, "no contexts; add one with evtctl context add NAME --node URL")
				return nil
			}
			options := slices.ContainsFunc(views, func(v contextView) bool { return v.optionsText() != "-" })
			tw := tabwriter.NewWriter(streams.Out, 0, 4, 2, ' ', 0)
			head := "CURRENT\tNAME\tNODE\tTOKEN\tINGEST TOKEN\tTLS"
			if options {
				head += "\tOPTIONS"
			}
			fmt.Fprintln(tw, head)
			for _, v := range views {
				tlsNote := "-"
				switch {
				case v.Insecure:
					tlsNote = "insecure"
				case v.CAFile != "":
					tlsNote = "ca " + v.CAFile
				}
				line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", mark(v.Current, "*"), v.Name, v.Node, setOrNot(v.Token), setOrNot(v.IngestToken), tlsNote)
				if options {
					line += "\t" + v.optionsText()
				}
				fmt.Fprintln(tw, line)
			}
			return tw.Flush()
		},
	}
	enumVarP(cmd.Flags(), &output, "output", "o", "table", "{values}", choice{name: "table"}, choice{name: "json", help: "JSON lines"})
	jq.addFlag(cmd.Flags())
	return cmd
}

func mark(b bool, s string) string {
	if b {
		return s
	}
	return ""
}

func setOrNot(b bool) string {
	if b {
		return "set"
	}
	return "-"
}

func exactlyOneName(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("%s takes one context name, got %d arguments", what, len(args))
		}
		return nil
	}
}

// completeContextNames completes the names of the configured contexts.
func completeContextNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	_, f, err := loadConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, n := range f.Names() {
		if strings.HasPrefix(n, toComplete) {
			out = append(out, n+"\t"+client.Redact(f.Contexts[n].Node))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
