package main

import (
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/evtctl/evtctl/internal/outbox"
)

func init() {
	scriptCmds["spooled"] = cmdSpooled
}

// cmdSpooled checks that a spool directory holds N events, in entries that pass their checks.
//
//	spooled DIR N
func cmdSpooled(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: spooled DIR N")
	}
	want, err := strconv.Atoi(args[1])
	ts.Check(err)
	sp, err := outbox.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer sp.Close()
	es, err := sp.Pending()
	ts.Check(err)
	n := 0
	for _, e := range es {
		evs, err := e.Events()
		ts.Check(err)
		n += len(evs)
	}
	if n != want {
		ts.Fatalf("the spool holds %d events in %d entries, want %d", n, len(es), want)
	}
}
