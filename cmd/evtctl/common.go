package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
	"github.com/spf13/pflag"

	"github.com/evtctl/evtctl/internal/config"
	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/filter"
	"github.com/evtctl/evtctl/pkg/render"
)

// nodeOptions are the flags that say which node to talk to and how.
type nodeOptions struct {
	Node     string
	Token    string
	CAFile   string
	Insecure bool
	Context  string

	flags *pflag.FlagSet // to tell an explicit --insecure=false from the default
	// exact: Node is a node evtctl itself started (demo); neither the environment nor the
	// configuration file has a say, so a broken or unrelated configuration cannot get in.
	exact bool
	// resolved is what settings found last, for messages about the node (see explain).
	resolved nodeSettings
	// notes are what the client says on stderr (what the node turned out to be); while
	// the terminal UI draws there, they are held back (see holdNotes).
	notes heldNotes
}

// heldNotes are lines for stderr kept back while the terminal UI draws on the terminal.
type heldNotes struct {
	mu    sync.Mutex
	held  bool
	lines []string
}

func (o *nodeOptions) addFlags(f *pflag.FlagSet) {
	o.flags = f
	f.StringVar(&o.Node, "node", "", "the log to read: a node's URL or host:port (evtctl, Tendermint, CometBFT), a Kafka topic kafka://…/TOPIC or a Redis stream redis://…/STREAM (default $EVTCTL_NODE, the current context's, else http://"+defaultListen+")")
	f.StringVar(&o.Token, "token", "", "bearer token for the node (default $EVTCTL_TOKEN, or the context's)")
	f.StringVar(&o.CAFile, "ca-file", "", "PEM file of certificate authorities to trust for https (default $EVTCTL_CA_FILE, or the context's)")
	f.BoolVar(&o.Insecure, "insecure", false, "do not verify the node's TLS certificate (default $EVTCTL_INSECURE, or the context's)")
	f.StringVar(&o.Context, "context", "", "use this context from the configuration file (default $EVTCTL_CONTEXT, else the current one)")
}

// nodeSettings say which node to talk to and how, once flags, environment and context are
// weighed.
type nodeSettings struct {
	Node        string
	Token       string
	IngestToken string // for sending events
	CAFile      string
	Insecure    bool
	// Options are the context's options for the node's source (a Kafka topic's).
	Options map[string]string
	Context string // the context that supplied settings, if any
	// NodeFrom says where Node came from, for messages: "--node", "$EVTCTL_NODE",
	// `context "prod"`, or "" for the default.
	NodeFrom string
}

// settings resolves the node and how to reach it. Each setting comes from its flag, else
// its environment variable, else the context (--context, $EVTCTL_CONTEXT or the current
// one), else the default. A context's tokens and TLS settings go only to the context's own
// node: when --node or $EVTCTL_NODE names another node, they are not used. A value that
// cannot be used is an error that names where it came from.
func (o *nodeOptions) settings() (nodeSettings, error) {
	if o.exact {
		return nodeSettings{Node: o.Node, NodeFrom: "--node"}, nil
	}
	name, nameFrom := o.Context, "--context"
	if name == "" {
		name, nameFrom = os.Getenv("EVTCTL_CONTEXT"), "EVTCTL_CONTEXT"
	}
	named := name != ""
	var ctx *config.Context
	path, err := config.Path()
	if err != nil && named {
		return nodeSettings{}, settingError(nameFrom, name, fmt.Errorf("finding the configuration file: %w", err))
	}
	if err == nil {
		file, err := config.Load(path)
		if err != nil {
			return nodeSettings{}, configErrorf("configuration: %v", err)
		}
		if !named {
			name, ctx = file.Current()
		} else if ctx = file.Contexts[name]; ctx == nil {
			return nodeSettings{}, settingError(nameFrom, name, fmt.Errorf("no such context in %s (see evtctl context list)", path))
		}
	}
	s := nodeSettings{}
	switch {
	case o.Node != "":
		s.Node, s.NodeFrom = o.Node, "--node"
	case os.Getenv("EVTCTL_NODE") != "":
		s.Node, s.NodeFrom = os.Getenv("EVTCTL_NODE"), "$EVTCTL_NODE"
	}
	if ctx != nil && s.Node != "" && !sameNode(s.Node, ctx.Node) {
		ctx = nil // another node was asked for: the context's secrets stay with its own node
	}
	if ctx == nil {
		ctx = &config.Context{}
		name = ""
	}
	s.Context = name
	if s.Node == "" && ctx.Node != "" {
		s.Node, s.NodeFrom = ctx.Node, fmt.Sprintf("context %q", name)
	}
	if s.Node == "" {
		s.Node = "http://" + defaultListen
	}
	if _, err := client.NormalizeNode(s.Node); err != nil {
		switch s.NodeFrom {
		case "--node":
			return nodeSettings{}, usagef("--node: %v", err)
		case "$EVTCTL_NODE":
			return nodeSettings{}, envErrorf("EVTCTL_NODE: %v", err)
		}
		return nodeSettings{}, configErrorf("%s in %s: %v", s.NodeFrom, path, err)
	}
	envToken := firstNonEmpty(o.Token, os.Getenv("EVTCTL_TOKEN"))
	s.Token = firstNonEmpty(envToken, ctx.Token)
	s.IngestToken = firstNonEmpty(envToken, os.Getenv("EVTCTL_INGEST_TOKEN"), ctx.IngestToken, ctx.Token)
	s.CAFile = firstNonEmpty(o.CAFile, os.Getenv("EVTCTL_CA_FILE"), ctx.CAFile)
	s.Options = ctx.Options()
	switch v := os.Getenv("EVTCTL_INSECURE"); {
	case o.flags != nil && o.flags.Changed("insecure"):
		s.Insecure = o.Insecure
	case v != "":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nodeSettings{}, envErrorf("EVTCTL_INSECURE=%q: want true or false", v)
		}
		s.Insecure = b
	default:
		s.Insecure = ctx.Insecure
	}
	o.resolved = s
	return s, nil
}

// settingError is a value that cannot be used, as an error of its source: a usage error for
// a flag, an environment error for a variable.
func settingError(from, value string, err error) error {
	if strings.HasPrefix(from, "--") {
		return usagef("%s %q: %v", from, value, err)
	}
	return envErrorf("%s=%q: %v", from, value, err)
}

// sameNode reports whether two node addresses name the same base URL.
func sameNode(a, b string) bool {
	na, err1 := client.NormalizeNode(a)
	nb, err2 := client.NormalizeNode(b)
	return err1 == nil && err2 == nil && na == nb
}

// client returns a client of the resolved node. What an http node turns out to be, when it
// is not a node of the events method (a CometBFT node), is said once on streams' stderr.
func (o *nodeOptions) client(streams *iostreams.IOStreams) (*client.Client, error) {
	s, err := o.settings()
	if err != nil {
		return nil, err
	}
	var onDetect func(string)
	if streams != nil {
		onDetect = func(what string) { o.note(streams, "evtctl: "+safeText(what)+"\n") }
	}
	c, err := client.New(client.Options{Node: s.Node, Token: s.Token, CAFile: s.CAFile, Insecure: s.Insecure, Settings: s.Options, UserAgent: "evtctl/" + versionString(), OnDetect: onDetect})
	if err != nil {
		return nil, usagef("%v", err) // the CA file, a source's address or options
	}
	return c, nil
}

// note says line on stderr, or keeps it for later while notes are held.
func (o *nodeOptions) note(streams *iostreams.IOStreams, line string) {
	o.notes.mu.Lock()
	defer o.notes.mu.Unlock()
	if o.notes.held {
		o.notes.lines = append(o.notes.lines, line)
		return
	}
	fmt.Fprint(streams.ErrOut, line)
}

// holdNotes keeps back what the client would say on stderr from now on, for as long as the
// terminal UI draws on the terminal, where a line would be written over it; the function it
// returns says what was kept, once the UI has given the terminal back.
func (o *nodeOptions) holdNotes(streams *iostreams.IOStreams) func() {
	o.notes.mu.Lock()
	o.notes.held = true
	o.notes.mu.Unlock()
	return func() {
		o.notes.mu.Lock()
		defer o.notes.mu.Unlock()
		o.notes.held = false
		for _, l := range o.notes.lines {
			fmt.Fprint(streams.ErrOut, l)
		}
		o.notes.lines = nil
	}
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// queryOptions are the flags that select events.
type queryOptions struct {
	Query string
	Type  string
}

func (o *queryOptions) addFlags(f *pflag.FlagSet) {
	f.StringVarP(&o.Query, "query", "q", "", "filter query, e.g. \"type MATCHES 'org.example.#' AND data.total > 10\"")
	f.StringVar(&o.Type, "type", "", "only events whose type matches this pattern (* one word, # any words); evtctl nodes")
}

// build combines --type and --query and checks the result, pointing at a syntax error.
func (o *queryOptions) build() (string, error) {
	q := strings.TrimSpace(o.Query)
	if q == "" && o.Query != "" {
		return "", usagef("--query holds only spaces; leave it out to select every event")
	}
	if o.Type != "" {
		if strings.Contains(o.Type, "'") {
			return "", usagef("--type: a pattern cannot contain a single quote")
		}
		t := "type MATCHES '" + o.Type + "'"
		if _, err := filter.Compile(t); err != nil {
			return "", usagef("--type %q: %v", o.Type, err)
		}
		if q == "" {
			q = t
		} else {
			q = t + " AND (" + q + ")"
		}
	}
	if o.Query != "" {
		if _, err := filter.Compile(o.Query); err != nil {
			return "", usagef("--query: %s", explainSyntax(o.Query, err))
		}
	}
	return q, nil
}

// refused turns a query the node would not take, found by the client before sending it,
// into a usage error that points at the offending byte; other errors pass unchanged.
func (o *queryOptions) refused(err error) error {
	var qe *client.QueryError
	if !errors.As(err, &qe) {
		return err
	}
	if o.Type != "" {
		return usagef("--type needs an evtctl node: this node takes only Tendermint's query language, which has no MATCHES; select a type with -q \"tm.event = 'TYPE'\"")
	}
	return usagef("--query: the node takes only Tendermint's query language (no OR, NOT, parentheses or MATCHES): %s", explainSyntax(qe.Query, qe.Err))
}

// explainSyntax shows a query error with the query, or the part of a long one around the
// offending byte, and a caret under that byte.
func explainSyntax(q string, err error) string {
	var se *filter.SyntaxError
	if !errors.As(err, &se) {
		return err.Error()
	}
	return pointAt(q, se.Offset, err)
}

// pointAt shows err with the text it is about — or, for a long text, the part of it around
// byte offset — and a caret under the character at offset.
func pointAt(text string, offset int, err error) string {
	if offset < 0 {
		return err.Error()
	}
	shown, col := textWindow(text, offset, textWindowWidth)
	return fmt.Sprintf("%v\n  %s\n  %s^", err, shown, strings.Repeat(" ", col))
}

// textWindowWidth is the most columns of a text an error shows, so that its line and the
// caret's fit a terminal.
const textWindowWidth = 72

// textWindow returns the text, or about width columns of it around byte offset off, with
// "…" where it is cut and each control character (a newline, a tab) as a space, and the
// screen column of the character at off (or just past the end, for an offset at the end).
func textWindow(q string, off, width int) (string, int) {
	off = max(0, min(off, len(q)))
	rs := []rune(strings.ToValidUTF8(q, "\uFFFD"))
	at := utf8.RuneCountInString(strings.ToValidUTF8(q[:off], "\uFFFD"))
	start, end := 0, len(rs)
	if end > width {
		start = max(0, at-width*2/3) // more of what led up to the error than of what follows
		end = min(len(rs), start+width)
		start = max(0, end-width)
	}
	var b strings.Builder
	col := 0
	if start > 0 {
		b.WriteString("…")
		col++
	}
	for i, r := range rs[start:end] {
		if r < ' ' || unsafeRune(r) {
			r = ' '
		}
		b.WriteRune(r)
		if start+i < at {
			col += runewidth.RuneWidth(r)
		}
	}
	if end < len(rs) {
		b.WriteString("…")
	}
	return b.String(), col
}

// jqOption is --jq, on every command that writes JSON.
type jqOption struct {
	Expr string
	q    *render.JQ // compiled by compile
}

func (o *jqOption) addFlag(f *pflag.FlagSet) {
	f.StringVar(&o.Expr, "jq", "", "filter each JSON value written with a jq expression (gojq); a string result is printed as it is, others as compact JSON; implies JSON output")
}

// compile compiles --jq, once: a mistake is a usage error that points at it. The
// expression stops when ctx ends.
func (o *jqOption) compile(ctx context.Context) error {
	if o.Expr == "" || o.q != nil {
		return nil
	}
	q, err := render.CompileJQ(ctx, o.Expr)
	var je *render.JQError
	if errors.As(err, &je) {
		return usagef("--jq: %s", pointAt(o.Expr, je.Offset, err))
	}
	o.q = q
	return err
}

// implyJSON makes a command whose -o chooses between text and JSON write JSON for --jq:
// format becomes json when -o was not given, and any other format given is a usage error.
func (o *jqOption) implyJSON(format *string, given bool, json string) error {
	switch {
	case o.Expr == "":
	case !given:
		*format = json
	case *format != json:
		return usagef("--jq filters JSON; it does not go with -o %s", *format)
	}
	return nil
}

// writer returns w, through the compiled --jq if there is one: each line written must
// then be one JSON value.
func (o *jqOption) writer(w io.Writer) io.Writer {
	if o.q == nil {
		return w
	}
	return o.q.Writer(w)
}

// outputOptions are the flags that shape what tail, replay and demo write to stdout.
type outputOptions struct {
	Format   string
	Template string
	Fields   []string
	JQ       jqOption
}

// uiFormat is -o tui, for the commands that can show events in the terminal UI.
var uiFormat = choice{name: "tui", help: "the terminal UI, as -i"}

// addFlags adds -o with render's formats, json for jsonl, and more.
func (o *outputOptions) addFlags(f *pflag.FlagSet, more ...choice) {
	var formats []choice
	for _, name := range render.Formats() {
		formats = append(formats, choice{name: name})
		if name == "jsonl" {
			formats = append(formats, choice{name: "json", help: "the same as jsonl", alias: "jsonl"})
		}
	}
	enumVarP(f, &o.Format, "output", "o", "", "output format: {values}; by default pretty on a terminal, jsonl otherwise", append(formats, more...)...)
	f.StringVar(&o.Template, "template", "", `Go template for each event (-o template), e.g. '{{.Time}} {{.Type}} {{get "data.title"}}'. `+
		`Fields: .Cursor .Event .CloudEvent .ID .Type .Source .Subject .Time .DataContentType .Data (the CloudEvent) .Payload (its data) .Raw .CursorTime. `+
		`Functions: get PATH (a gjson path in the CloudEvent), item PATH (in the item as sent: item "cursor"), json, pretty, time LAYOUT, upper, lower, trunc N, default D`)
	f.StringSliceVar(&o.Fields, "fields", nil, "print only these gjson paths, as JSON lines (e.g. cursor,data.type)")
	o.JQ.addFlag(f)
}

// given reports whether a flag that shapes written output was given.
func (o *outputOptions) given() bool {
	return o.Format != "" || o.Template != "" || len(o.Fields) > 0 || o.JQ.Expr != ""
}

// check compiles --jq before any work, and refuses it where nothing JSON is written: in
// the terminal UI (interactive), with -o pretty, template or tui, or with --template.
func (o *outputOptions) check(ctx context.Context, interactive bool) error {
	if err := o.JQ.compile(ctx); err != nil || o.JQ.Expr == "" {
		return err
	}
	switch {
	case interactive && (o.Format == "" || o.Format == "tui"):
		return usagef("--jq does not go with -i (the terminal UI)")
	case o.Template != "":
		return usagef("--jq does not go with --template: a template writes text, and --jq filters JSON")
	case o.Format == "pretty" || o.Format == "template" || o.Format == "tui":
		return usagef("--jq filters JSON; it does not go with -o %s", o.Format)
	}
	return nil
}

func (o *outputOptions) renderer(ctx context.Context, s *iostreams.IOStreams) (*render.Renderer, error) {
	if err := o.check(ctx, false); err != nil {
		return nil, err
	}
	format := o.Format
	if format == "" {
		switch {
		case o.Template != "":
			format = "template"
		case s.IsStdoutTTY() && len(o.Fields) == 0 && o.JQ.Expr == "":
			format = "pretty"
		default:
			format = "jsonl"
		}
	}
	if o.Template != "" && format != "template" {
		return nil, usagef("--template goes with -o template")
	}
	r, err := render.New(s.Out, render.Options{
		Format: format, Template: o.Template, Fields: o.Fields, JQ: o.JQ.q,
		Color: s.ColorEnabled(), Width: s.TerminalWidth, // pretty lines fit a terminal
	})
	if err != nil {
		return nil, usagef("%v", err)
	}
	return r, nil
}

// headerEncodingOption is --header-encoding, which emit and forward share.
type headerEncodingOption struct {
	value string
	flags *pflag.FlagSet
}

func (o *headerEncodingOption) addFlag(f *pflag.FlagSet) {
	o.flags = f
	enumVar(f, &o.value, "header-encoding", "percent", "how binary mode writes ce- header values: {values}",
		choice{name: "percent", help: "as the HTTP binding requires; for evtctl nodes and receivers that follow the binding"},
		choice{name: "raw", help: "for receivers built on the CloudEvents Go SDK v2 and the conformance tool's listener, which do not decode them"})
}

// get checks the flag against the content mode and returns the encoding.
func (o *headerEncodingOption) get(mode string) (deliver.HeaderEncoding, error) {
	enc, err := deliver.ParseHeaderEncoding(o.value) // the flag took only these values
	if err != nil {
		return 0, usagef("--header-encoding: %v", err)
	}
	if o.flags != nil && o.flags.Changed("header-encoding") && mode != "binary" {
		return 0, usagef("--header-encoding applies to binary mode; it does not go with --mode %s", mode)
	}
	return enc, nil
}
