package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/evtctl/evtctl/pkg/filter"
)

// newCmdHelp is `evtctl help [COMMAND | TOPIC]`. Unlike cobra's own, an unknown command or
// topic is a usage error (status 2) on stderr that suggests what was meant.
func newCmdHelp() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command | topic]",
		Short: "Help about any command, and the help topics",
		Long: `Help about any command, and about the topics:

` + topicList() + `

evtctl help COMMAND is the same as evtctl COMMAND --help.`,
		Example: `  evtctl help tail
  evtctl help context add
  evtctl help query`,
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			parent, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, sub := range parent.Commands() {
				if (sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand()) && strings.HasPrefix(sub.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err == nil && len(rest) == 0 {
				return cmd.Help()
			}
			what := strings.Join(args, " ")
			parent := c.Root()
			if cmd != nil {
				parent = cmd
			}
			msg := fmt.Sprintf("no help topic or command %q", what)
			if len(rest) > 0 {
				if s := suggest(rest[0], helpNames(parent)); len(s) > 0 {
					msg += "; did you mean " + quotedOrList(prefixed(parent, s)) + "?"
				}
			}
			return &usageError{err: errors.New(msg)}
		},
	}
}

// helpNames are the commands and help topics under cmd.
func helpNames(cmd *cobra.Command) []string {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
			names = append(names, sub.Name())
		}
	}
	return names
}

// prefixed names the suggestions as a user would type them after evtctl help.
func prefixed(parent *cobra.Command, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		if parent.HasParent() {
			n = strings.TrimPrefix(parent.CommandPath(), parent.Root().Name()+" ") + " " + n
		}
		out[i] = n
	}
	return out
}

// groupArgs is the Args of a command that groups others: an argument can only be the name
// of one of them, so any that is left over names none.
func groupArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + quotedOrList(s) + "?"
	} else if cmd.HasParent() {
		msg += "; its commands are " + strings.Join(names, ", ")
	}
	return &usageError{err: errors.New(msg)}
}

// setGroupArgs gives every command with subcommands groupArgs, and those that do nothing
// of their own a RunE that shows their help, so that the arguments are checked.
func setGroupArgs(cmd *cobra.Command) {
	if cmd.HasSubCommands() {
		cmd.Args = groupArgs
		cmd.SuggestionsMinimumDistance = 2
		if !cmd.Runnable() {
			cmd.RunE = func(c *cobra.Command, args []string) error { return c.Help() }
		}
	}
	for _, sub := range cmd.Commands() {
		setGroupArgs(sub)
	}
}

func quotedOrList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return orList(q)
}

// suggest returns the names close to s: within two edits, or starting with it.
func suggest(s string, names []string) []string {
	var out []string
	for _, n := range names {
		if editDistance(strings.ToLower(s), strings.ToLower(n)) <= 2 || len(s) > 1 && strings.HasPrefix(n, s) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// editDistance is the Levenshtein distance between a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// helpTopic is a page of help that is not a command: `evtctl help NAME`.
type helpTopic struct {
	name, short, long string
}

var helpTopics = []helpTopic{
	{"query", "The filter language of --query (-q) and --type", queryHelp},
	{"environment", "The environment variables evtctl reads", environmentHelp},
	{"exit-codes", "What evtctl's exit statuses mean", exitCodesHelp},
	{"delivery", "How emit and forward deliver: retries, order, dead letters", deliveryHelp},
}

func topicList() string {
	var b strings.Builder
	for _, t := range helpTopics {
		fmt.Fprintf(&b, "  %-13s%s\n", t.name, t.short)
	}
	return strings.TrimRight(b.String(), "\n")
}

// newHelpTopics returns the topics as cobra's additional help topics: commands that only
// have help.
func newHelpTopics() []*cobra.Command {
	var cmds []*cobra.Command
	for _, t := range helpTopics {
		cmds = append(cmds, &cobra.Command{Use: t.name, Short: t.short, Long: t.long})
	}
	return cmds
}

var queryHelp = fmt.Sprintf(`--query (-q) selects events on the node, before anything crosses the network. The
language is Tendermint's, so every query a Tendermint node takes means the same here, with
OR, NOT, parentheses and MATCHES added.

  type MATCHES 'org.openedx.learning.#' AND data.user.id >= 100
  (subject = 'order-42' OR subject = 'order-43') AND NOT pii = true
  time >= TIME 2026-11-22T10:00:00Z AND time < DATE 2026-11-23
  tm.event = 'org.example.shop.order.purchased.v1'
  data.tags CONTAINS 'urgent' AND dataschema EXISTS

Conditions
  tag = 'text'          equal text (single quotes, no escapes)
  tag = 12.5            equal number (unsigned, with an optional fraction)
  tag < 10              also <=, > and >=, with a number, TIME <RFC 3339 instant> or
                        DATE <YYYY-MM-DD> (a calendar day, UTC)
  tag CONTAINS 'text'   the text holds this substring
  tag MATCHES 'a.*.c'   a topic pattern of dot-separated words: * is exactly one word,
                        # any number of them (org.#, *.purchased.#)
  tag EXISTS            the tag has a value

Combining
  a AND b, a OR b, NOT a, ( ... )   NOT binds tightest, then AND, then OR. Keywords are
                                    upper case.

Tags
  A CloudEvent's attributes by name (id, source, type, subject, time,
  datacontenttype, dataschema, specversion), its extensions by name
  (minorversion, pii, ...), and data.PATH into JSON data (data.user.id,
  data.items.0.sku). tm.event is the type, so Tendermint queries work. A
  JSON array matches when any element does; null is absent.

  A number compares numerically: text is read by its leading number, as
  Tendermint does ("8stake" is 8). A value that cannot be read as the
  operand's kind does not match. DATE also matches timestamps, by their UTC
  day: time = DATE 2026-11-22 means "on that day".

--type PATTERN is short for type MATCHES 'PATTERN', joined to --query with AND.

Against a Tendermint node
  A Tendermint node takes only conditions joined by AND: no OR, NOT,
  parentheses or MATCHES (so no --type), and not a query of white space
  alone. Once evtctl has learned from the node's first reply that it is one,
  such a query is refused before it is sent, with exit status 2 and a caret
  under the offending byte.

Limits
  A query is at most %d bytes long, has at most %d conditions and nests
  parentheses and NOT at most %d deep. A Tendermint node takes at most 512
  bytes for a subscription, so every such query fits.

Errors
  A syntax error is a usage error (exit status 2) that names the byte offset
  and shows the query with a caret under it. For a query in Tendermint's own
  language the message is the one a Tendermint node gives, e.g. "offset 11:
  got tag, wanted number, timestamp, datestamp or string".`, filter.MaxQueryBytes, filter.MaxConditions, filter.MaxDepth)

const environmentHelp = `evtctl reads these variables. A flag given on the command line wins over its variable;
a variable wins over the context (see evtctl context --help).

Reaching a node (tail, replay, emit, forward, bench, completion of --type)
  EVTCTL_NODE            the node's URL or host:port, or a Kafka topic's address
                         (kafka://BROKER[,BROKER...]/TOPIC[?OPTION=VALUE&...]), as --node.
                         When it names a node other than the context's, the context is not
                         used at all.
  EVTCTL_CONTEXT         the context to use, as --context (default: the current context)
  EVTCTL_TOKEN           the bearer token sent to the node, as --token; emit sends it too
  EVTCTL_INGEST_TOKEN    emit's token when EVTCTL_TOKEN is not set; also serve's
                         --ingest-token (below)
  EVTCTL_CA_FILE         a PEM file of certificate authorities to trust, as --ca-file (for
                         a Kafka topic over SSL, ssl.ca.location unless an option names it)
  EVTCTL_INSECURE        true: do not verify the node's TLS certificate, as --insecure
                         (true or false; --insecure=false on the command line wins)
                         A Kafka topic takes no token: its options (security.protocol,
                         sasl.mechanism, sasl.username, sasl.password, ssl.*) go in its
                         address or in a context (evtctl context add NAME --node
                         kafka://... --option NAME=VALUE).

Running a node (serve)
  EVTCTL_READ_TOKEN      the token readers must send, as --read-token
  EVTCTL_INGEST_TOKEN    the token senders must send, as --ingest-token
  EVTCTL_NATS_PASSWORD   the password for --nats-user, with --store nats://...
  EVTCTL_NATS_TOKEN      a NATS token, with --store nats://...
  GOGC                   Go's garbage collector target; a node on NATS sets 400 when it is
                         not set (its heap is only its requests in flight)

Delivering (forward)
  EVTCTL_WEBHOOK_SECRET  the signing secret (whsec_...), as --secret

Tokens and secrets given in the environment stay out of process listings and the shell's
history.

Others
  COLUMNS                the width -o pretty and --help fit their lines to when the
                         terminal does not say (80 without either)
  EVTCTL_FORCE_TTY       write to stdout as to a terminal even when it is not (1); a number
                         is also the width to fit (EVTCTL_FORCE_TTY=100)
  NO_COLOR               set (to anything): no colour in output
  TERM                   dumb: no colour
  XDG_CONFIG_HOME        where the configuration file (the contexts) is kept:
                         $XDG_CONFIG_HOME/evtctl/config.yaml
  XDG_STATE_HOME         where serve keeps its log by default: $XDG_STATE_HOME/evtctl/node`

const exitCodesHelp = `evtctl exits with one of these statuses:

  0    success. Also when the reader of the output goes away (evtctl tail | head -2):
       evtctl stops quietly, as a pipeline's commands do; emit, a producer, still sends
       every event it was asked to.
  1    an error; the message says what, and often what to do about it
  2    a usage error: an unknown command, flag or help topic, a bad or missing value,
       flags that do not go together, a query that does not parse, a bad value in an
       EVTCTL_ variable, or a configuration file evtctl cannot read
  3    events were lost and --on-gap fail was given (tail, replay, forward); serve --verify
       found events lost to damage
  4    with --on-gap fail: the cursor to start from is not of the node's log, or the log
       went back (it lost its newest events and numbers new ones again below the cursor);
       always: a checkpoint that names another log (a CometBFT chain's names its chain)
  5    with --on-gap fail: the node restarted and its log starts again (a Tendermint node,
       whose log lives in memory)
  130  interrupted (Ctrl-C or SIGTERM)`

const deliveryHelp = `emit and forward send CloudEvents over HTTP and answer the receiver's replies in the
same way (the CloudEvents webhook rules). Delivery is at least once: an event whose answer
may have been lost is sent again, so a receiver can get it twice. Each request carries the
event's id (ce-id, or webhook-id when forward signs), the same on every resend: an evtctl
node answers a repeat as a duplicate and stores nothing twice, and any receiver can drop
repeats by it.

Replies
  2xx           delivered
  retried       429, 500, 502, 503 and 504, transport errors and timeouts: tried again
                with backoff, no sooner than the receiver's Retry-After (capped at 1 h)
  410 Gone      stops: emit ends the run; forward stops for good, records it in
                DIR/gone.json and refuses to start again until that file is removed
  other         any other reply is final, and the receiver's reason is printed
  unreachable   a receiver that has not answered in the run and cannot be reached at
                all (nothing listening, no such host, TLS that does not fit) stops the
                run at once, exit 1, leaving the event for the next run; once it has
                answered, such failures are retried like the others
  redirects     307 and 308 are followed with the same method and body (at most 5); a
                301, 302 or 303 is not. On a redirect to another origin the token,
                Authorization, cookies, the -H headers and the signature are not sent
                on; a redirect from https to http is refused (forward dead-letters the
                event)

emit
  retries       each request is tried up to --max-attempts times (default 10), each
                attempt within --timeout
  order         with --concurrency 1 (the default) events arrive in order; above 1 they
                may not. The lines of --file go to a node in batches, in the file's
                order: an evtctl node that keeps the order of batches in flight gets
                the next batch before its reply to the one before
  batches       a batch whose answer was lost is sent again, and the node answers its
                events as repeats. When the node refuses an event of a batch, the events
                before it are sent, the run stops and the error names its line
  refusals      without --spool, a final failure stops the run: the message names the
                event and says how many were delivered and how many were not sent
  spool         with --spool DIR every event is written durably to DIR before any is
                sent, and taken out once delivered: an interrupted emit or a node that
                is down loses nothing, and the last message says how many events wait.
                --flush DIR sends them (a --spool run also sends first what earlier
                runs left). A kill -9 resends at most the events of the entries that
                were in flight
  dead letters  with --spool, events the receiver refuses for themselves (400, 413,
                422) go to DIR/dead-letter.jsonl and the others are still sent; any
                other final failure stops the run and leaves the rest in the spool
  signals       --signal retries only 500, 503 and 504, as the Evented API asks

forward
  retries       a failed event moves to the next retry tier (--retry-delays, default
                10s,1m,10m,1h), kept in a durable store, and is tried again once that
                tier's delay, or the receiver's Retry-After when later, has passed; past
                the last tier the last delay repeats up to --max-attempts. A 429 with
                Retry-After pauses every delivery for that long
  order         events waiting for a retry never hold up new ones, and at most
                --concurrency deliveries are in flight, so an event may arrive after
                later ones. --ordered delivers strictly in log order, one at a time,
                waiting for a failing event's retries
  dead letters  after the last attempt, or on any other 4xx or 5xx, or a redirect it
                does not follow, the event is given up on: written as a JSON line (with
                status, reason, attempts and the event) to DIR/dead-letter.jsonl or
                --dead-letter FILE. With --until-caught-up, --fail-on-dead-letter
                exits 1 when any event of the run was dead-lettered
  checkpoint    with --checkpoint FILE (or --state DIR) forward resumes where it
                stopped. The checkpoint only moves past events that were delivered,
                dead-lettered or stored for a retry, and every outcome is on disk
                before its delivery slot is freed: after a crash or kill -9, the only
                events sent again are those whose delivery was in flight (at most
                --concurrency)
  state         DIR (default FILE.state beside the checkpoint) holds the retry
                journal, the 410 record and a lock; the checkpoint defaults to
                DIR/checkpoint and dead letters to DIR/dead-letter.jsonl. Without
                either, nothing survives a restart
  sync          --sync always (the default) fsyncs every outcome; --sync checkpoint
                only before each checkpoint: faster, and it survives kill -9, but a
                power loss may repeat recent deliveries`
