package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/evtctl/evtctl/pkg/iostreams"
	"github.com/evtctl/evtctl/pkg/render"
)

// Exit statuses, documented in the README.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitLost        = 3 // events were lost and --on-gap fail was given
	exitInterrupted = 130
)

// usageError marks a mistake in the command line: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
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

// exitCode prints err (once, here) and maps it to an exit status.
func exitCode(streams *iostreams.IOStreams, err error, ctx context.Context) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	var se *statusError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(streams.ErrOut, "evtctl: %s\nRun 'evtctl --help' for usage.\n", safeText(err.Error()))
		return exitUsage
	case errors.As(err, &se):
		if se.err != nil && se.err.Error() != "" {
			fmt.Fprintf(streams.ErrOut, "evtctl: %s\n", safeText(se.err.Error()))
		}
		return se.code
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, ctx.Err())):
		return exitInterrupted
	}
	fmt.Fprintf(streams.ErrOut, "evtctl: %s\n", safeText(err.Error()))
	return exitError
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
