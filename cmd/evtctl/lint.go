package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/evtctl/evtctl/internal/english"
	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/internal/lint"
)

type lintOptions struct {
	streams *iostreams.IOStreams
	Output  string
	JQ      jqOption
	Args    []string
	Rules   bool // list the rules instead of checking
}

func newCmdLint(streams *iostreams.IOStreams) *cobra.Command {
	opts := &lintOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "lint [FILE | - | JSON]...",
		Short: "Check CloudEvents against the spec and the OEP-41 conventions",
		Long: `Check CloudEvents in JSON format against the CloudEvents 1.0 spec and Open edX OEP-41:
type shaped {reverse DNS}.{domain}.{subject}.{action}.v{major} in lower case, a past-tense action,
an absolute-URI source, time in UTC, valid extension names, minorversion an integer, pii a
boolean, at most 64 KiB, and a UUID1 id.

Each argument is a file (one event, a JSON array of events, or JSON lines), - for stdin, or an
event given inline; with no argument, stdin is read. Exit status 1 when any error is found;
warnings alone exit 0. --rules lists the rules, their IDs and severities.`,
		Example: `  evtctl lint events.jsonl
  evtctl replay --since 1h -o ce | evtctl lint
  evtctl lint -o json \
      '{"specversion":"1.0","id":"1","source":"/s","type":"Bad.Type"}'
  evtctl lint --rules`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.JQ.implyJSON(&opts.Output, cmd.Flags().Changed("output"), "json"); err != nil {
				return err
			}
			if err := opts.JQ.compile(cmd.Context()); err != nil {
				return err
			}
			opts.Args = args
			if opts.Rules {
				if len(args) > 0 {
					return usagef("--rules takes no arguments")
				}
				return listLintRules(opts)
			}
			return runLint(cmd.Context(), opts)
		},
	}
	enumVarP(cmd.Flags(), &opts.Output, "output", "o", "text", "{values}", choice{name: "text"}, choice{name: "json", help: "one finding per line"})
	opts.JQ.addFlag(cmd.Flags())
	cmd.Flags().BoolVar(&opts.Rules, "rules", false, "list the rules lint applies, in order, and exit")
	return cmd
}

// listLintRules writes the rules: aligned text, or with -o json one object per line.
func listLintRules(opts *lintOptions) error {
	w := bufio.NewWriter(opts.JQ.writer(opts.streams.Out))
	defer w.Flush()
	rules := lint.Rules()
	if opts.Output == "json" {
		enc := json.NewEncoder(w)
		for _, r := range rules {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	width := 0
	for _, r := range rules {
		width = max(width, len(r.ID))
	}
	for _, r := range rules {
		fmt.Fprintf(w, "%-*s  %-7s  %s\n", width, r.ID, r.Severity, r.Summary)
	}
	return nil
}

// lintFinding is a finding with where it came from, for --output json.
type lintFinding struct {
	Input string `json:"input"`
	Event int    `json:"event"` // 1-based index of the event in its input
	lint.Finding
}

func runLint(ctx context.Context, opts *lintOptions) error {
	inputs := opts.Args
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	w := bufio.NewWriter(opts.JQ.writer(opts.streams.Out))
	defer w.Flush()
	errs, warns, events := 0, 0, 0
	for _, in := range inputs {
		name, data, err := readLintInput(ctx, opts.streams, in)
		if err != nil {
			return err
		}
		evs, err := splitEvents(data)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for i, ev := range evs {
			events++
			for _, f := range lint.Check(ev, lint.Options{}) {
				if f.Severity == lint.SeverityError {
					errs++
				} else {
					warns++
				}
				if opts.Output == "json" {
					b, _ := json.Marshal(lintFinding{Input: name, Event: i + 1, Finding: f})
					w.Write(append(b, '\n'))
				} else {
					fmt.Fprintf(w, "%s:%d: %s\n", name, i+1, f)
				}
			}
		}
	}
	if err := w.Flush(); err != nil && !closedPipe(err) {
		return err
	}
	if opts.Output == "text" {
		fmt.Fprintf(opts.streams.ErrOut, "%s checked: %s, %s\n", english.Plural(events, "event"), english.Plural(errs, "error"), english.Plural(warns, "warning"))
	}
	if errs > 0 {
		return &statusError{exitError, errors.New("")}
	}
	return nil
}

func readLintInput(ctx context.Context, s *iostreams.IOStreams, in string) (string, []byte, error) {
	switch {
	case in == "-":
		b, err := io.ReadAll(stdinData(ctx, s, "events"))
		return "stdin", b, err
	case strings.HasPrefix(strings.TrimSpace(in), "{"):
		return "argument", []byte(in), nil
	}
	b, err := os.ReadFile(in)
	if err != nil {
		return "", nil, usagef("%v", err)
	}
	return in, b, nil
}

// splitEvents reads one event, a JSON array of events, or a stream of events (JSON lines).
// A value that is not valid JSON is passed on as it is, so that lint reports it.
func splitEvents(data []byte) ([][]byte, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, nil
	}
	if data[0] == '[' {
		var arr []json.RawMessage
		if err := json.Unmarshal(data, &arr); err != nil {
			return nil, fmt.Errorf("not a JSON array of events: %w", err)
		}
		out := make([][]byte, len(arr))
		for i, r := range arr {
			out[i] = r
		}
		return out, nil
	}
	var out [][]byte
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var r json.RawMessage
		err := dec.Decode(&r)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			// Hand the rest, line by line, to lint: it names the problem in each.
			rest := data[dec.InputOffset():]
			for _, line := range bytes.Split(rest, []byte("\n")) {
				if line = bytes.TrimSpace(line); len(line) > 0 {
					out = append(out, line)
				}
			}
			return out, nil
		}
		out = append(out, r)
	}
}
