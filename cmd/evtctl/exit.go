package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/evtctl/evtctl/pkg/iostreams"
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

// exitError carries a specific status; its message, if any, is printed.
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
		fmt.Fprintf(streams.ErrOut, "evtctl: %v\nRun 'evtctl --help' for usage.\n", err)
		return exitUsage
	case errors.As(err, &se):
		if se.err != nil && se.err.Error() != "" {
			fmt.Fprintf(streams.ErrOut, "evtctl: %v\n", se.err)
		}
		return se.code
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, ctx.Err())):
		return exitInterrupted
	}
	fmt.Fprintf(streams.ErrOut, "evtctl: %v\n", err)
	return exitError
}
