package main

import (
	"errors"
	"fmt"

	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/pkg/client"
)

// onGapChoices are the values of --on-gap.
var onGapChoices = []choice{
	{name: "warn", help: "on stderr, and go on"},
	{name: "fail", help: "exit 3, 4 or 5: see evtctl help exit-codes"},
	{name: "ignore", help: "say nothing of lost events"},
}

// onGap applies --on-gap (policy) to what a reader was told of the node's log: g, when set.
// fail ends the command with the gap's exit status; warn says what happened on stderr and
// goes on; ignore goes on without a word — except for a cursor that is not of the node's
// log, which is never passed over silently.
func onGap(s *iostreams.IOStreams, policy string, g *client.Gap) error {
	switch {
	case g == nil:
		return nil
	case policy == "fail":
		return gapError(g)
	case policy == "warn", g.NotOfLog():
		fmt.Fprintf(s.ErrOut, "evtctl: warning: %s\n", safeText(g.String()))
	}
	return nil
}

// gapError is a gap with --on-gap fail: exit status 3 for lost events, 4 for a cursor that
// is not of the node's log (or a log that went back), 5 for a node that restarted.
func gapError(g *client.Gap) error {
	code := exitLost
	switch {
	case g.NotOfLog():
		code = exitNotOfLog
	case g.Kind == client.GapRestarted:
		code = exitRestarted
	}
	return &statusError{code, errors.New(g.String())}
}
