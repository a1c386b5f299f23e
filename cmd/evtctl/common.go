package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/filter"
	"github.com/evtctl/evtctl/pkg/iostreams"
	"github.com/evtctl/evtctl/pkg/render"
)

// nodeOptions are the flags that say which node to talk to and how.
type nodeOptions struct {
	Node     string
	Token    string
	CAFile   string
	Insecure bool
}

func (o *nodeOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Node, "node", "", "node URL or host:port (default $EVTCTL_NODE, else http://"+defaultListen+")")
	f.StringVar(&o.Token, "token", "", "bearer token for the node (default $EVTCTL_TOKEN)")
	f.StringVar(&o.CAFile, "ca-file", "", "PEM file of certificate authorities to trust for https")
	f.BoolVar(&o.Insecure, "insecure", false, "do not verify the node's TLS certificate")
}

// resolve picks the node and token: the flag, then the environment, then the default.
func (o *nodeOptions) resolve() (node, token string) {
	return firstNonEmpty(o.Node, os.Getenv("EVTCTL_NODE"), "http://"+defaultListen),
		firstNonEmpty(o.Token, os.Getenv("EVTCTL_TOKEN"))
}

// client returns a client of the resolved node.
func (o *nodeOptions) client() (*client.Client, error) {
	node, token := o.resolve()
	c, err := client.New(client.Options{Node: node, Token: token, CAFile: o.CAFile, Insecure: o.Insecure, UserAgent: "evtctl/" + versionString()})
	if err != nil {
		return nil, usagef("--node: %v", err)
	}
	return c, nil
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

// explainSyntax shows a query error with a caret under the offending byte.
func explainSyntax(q string, err error) string {
	var se *filter.SyntaxError
	if !errors.As(err, &se) || strings.ContainsAny(q, "\n\t") {
		return err.Error()
	}
	return fmt.Sprintf("%v\n  %s\n  %s^", err, q, strings.Repeat(" ", min(se.Offset, len(q))))
}

// outputOptions are the flags that shape what is written to stdout.
type outputOptions struct {
	Format   string
	Template string
	Fields   []string
}

func (o *outputOptions) addFlags(f *pflag.FlagSet) {
	f.StringVarP(&o.Format, "output", "o", "", "output format: "+strings.Join(render.Formats(), ", ")+" (default pretty on a terminal, jsonl otherwise)")
	f.StringVar(&o.Template, "template", "", "Go template for -o template, e.g. '{{.Cursor}} {{.Type}}'")
	f.StringSliceVar(&o.Fields, "fields", nil, "print only these gjson paths, as JSON lines (e.g. cursor,data.type)")
}

func (o *outputOptions) renderer(s *iostreams.IOStreams) (*render.Renderer, error) {
	format := o.Format
	if format == "" {
		switch {
		case o.Template != "":
			format = "template"
		case s.IsStdoutTTY() && len(o.Fields) == 0:
			format = "pretty"
		default:
			format = "jsonl"
		}
	}
	if o.Template != "" && format != "template" {
		return nil, usagef("--template goes with -o template")
	}
	r, err := render.New(s.Out, render.Options{Format: format, Template: o.Template, Fields: o.Fields, Color: s.ColorEnabled()})
	if err != nil {
		return nil, usagef("%v", err)
	}
	return r, nil
}

// closedPipe reports a write to a pipe whose reader has gone (`evtctl replay | head -1`):
// the command then ends quietly with status 0.
func closedPipe(err error) bool {
	return errors.Is(err, syscall.EPIPE)
}

// parsePosition reads a start or end of a range: @FILE (a checkpoint), a cursor, an RFC 3339
// time, or a duration back from now.
func parsePosition(flag, s string, now time.Time) (client.Position, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return client.Position{}, nil
	case strings.HasPrefix(s, "@"):
		cp, ok, err := cursor.LoadCheckpoint(s[1:])
		if err != nil {
			return client.Position{}, usagef("%s: %v", flag, err)
		}
		if !ok {
			return client.Position{}, usagef("%s: checkpoint file %s does not exist", flag, s[1:])
		}
		return client.Position{Cursor: cp.Cursor}, nil
	}
	if c, err := cursor.Parse(s); err == nil {
		return client.Position{Cursor: c.String()}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return client.Position{Time: t}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return client.Position{Time: now.Add(-d)}, nil
	}
	return client.Position{}, usagef("%s %q: want a cursor, @CHECKPOINT_FILE, an RFC 3339 time (2026-11-22T10:00:00Z) or a duration (10m)", flag, s)
}
