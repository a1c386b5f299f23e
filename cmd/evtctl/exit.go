package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/pkg/render"
)

// Exit statuses, documented in docs/exit-codes.md and in evtctl help exit-codes.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitLost        = 3 // events were lost and --on-gap fail was given
	exitNotOfLog    = 4 // the cursor is not of the node's log, or the log went back; --on-gap fail
	exitRestarted   = 5 // the node restarted, its log starts again; --on-gap fail
	exitInterrupted = 130
)

// usageError marks a mistake in the command line: exit status 2. cmd is the command whose
// --help the message points at ("evtctl tail"; "": evtctl).
type usageError struct {
	err error
	cmd string
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// envError is a value in an environment variable that evtctl cannot use: exit status 2,
// like a usage error, pointing at evtctl help environment.
type envError struct{ err error }

func (e *envError) Error() string { return e.err.Error() }
func (e *envError) Unwrap() error { return e.err }

func envErrorf(format string, args ...any) error {
	return &envError{fmt.Errorf(format, args...)}
}

// configErrorf is a problem with the configuration file: exit status 2, like a usage error,
// without pointing at the command line.
func configErrorf(format string, args ...any) error {
	return &statusError{exitUsage, fmt.Errorf(format, args...)}
}

// statusError carries a specific status; its message, if any, is printed.
type statusError struct {
	code int
	err  error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// hintedError is an error with lines that say what to do about it, printed after it.
type hintedError struct {
	err   error
	hints []string
}

func (e *hintedError) Error() string { return e.err.Error() }
func (e *hintedError) Unwrap() error { return e.err }

// withHints adds lines that say what to do about err; none: err as it is.
func withHints(err error, hints ...string) error {
	if err == nil || len(hints) == 0 {
		return err
	}
	return &hintedError{err: err, hints: hints}
}

// splitHints separates err's hints from it.
func splitHints(err error) (hints []string, rest error) {
	var he *hintedError
	if errors.As(err, &he) && he == err {
		return he.hints, he.err
	}
	return hintsOf(err), err
}

// hintsOf returns the hints err carries, if any.
func hintsOf(err error) []string {
	var he *hintedError
	if errors.As(err, &he) {
		return he.hints
	}
	return nil
}

// describeError is err as evtctl prints it: "evtctl: " and the message, then any hints, each
// on a line of its own.
func describeError(err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "evtctl: %s\n", safeText(err.Error()))
	var he *hintedError
	if errors.As(err, &he) {
		for _, h := range he.hints {
			fmt.Fprintf(&b, "%s\n", safeText(h))
		}
	}
	return b.String()
}

// exitCode prints err (once, here) and maps it to an exit status.
func exitCode(streams *iostreams.IOStreams, err error, ctx context.Context) int {
	if err == nil {
		return exitOK
	}
	var (
		ue *usageError
		ee *envError
		se *statusError
	)
	switch {
	case streamGone(err) || streamGone(context.Cause(ctx)):
		// The reader of the output went away (evtctl replay | head -1): nothing more can be
		// said, and the pipeline ends as pipelines do.
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(streams.ErrOut, "%sRun '%s --help' for usage.\n", describeError(err), firstNonEmpty(ue.cmd, "evtctl"))
		return exitUsage
	case errors.As(err, &ee):
		fmt.Fprintf(streams.ErrOut, "%sRun 'evtctl help environment' for the variables evtctl reads.\n", describeError(err))
		return exitUsage
	case errors.As(err, &se):
		if se.err != nil && se.err.Error() != "" {
			fmt.Fprint(streams.ErrOut, describeError(err))
		}
		return se.code
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, ctx.Err())):
		return exitInterrupted
	}
	fmt.Fprint(streams.ErrOut, describeError(err))
	return exitError
}

// pointUsage makes a usage error point at the --help of cmd, the command whose command line
// was wrong (evtctl itself for the help command).
func pointUsage(err error, cmd *cobra.Command) error {
	var ue *usageError
	if errors.As(err, &ue) && ue.cmd == "" {
		ue.cmd = helpPath(cmd)
	}
	return err
}

func helpPath(cmd *cobra.Command) string {
	if cmd == nil || cmd.Name() == "help" && cmd.Parent() != nil && !cmd.Parent().HasParent() {
		return "evtctl"
	}
	return cmd.CommandPath()
}

// safeText makes text that may come from a node or a receiver safe to print on a terminal:
// control characters (escape sequences among them), C1 controls and bidi overrides are
// shown as \uXXXX. Newlines and tabs stay.
func safeText(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return r != '\n' && r != '\t' && render.UnsafeRune(r)
}
