package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/english"
	"github.com/evtctl/evtctl/internal/iostreams"
)

// emit --count 0 sends until interrupted: Ctrl-C (here, the end of its context, as the
// signal makes it) ends it with status 130; each event the node acknowledged has its line
// on stdout, in order, and the summary counts them; the node holds those events, and at
// most the one in flight at the interruption besides.
func TestEmitCountZeroSendsUntilInterrupted(t *testing.T) {
	t.Parallel()
	node, _ := testNode(t)
	out, errOut := &syncBuffer{}, &syncBuffer{}
	streams := &iostreams.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}
	streams.SetTTY(false, true, true) // a line for each event, and the summary
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, streams, nil, []string{"emit", "--node", node, "--count", "0",
			"--type", "org.example.endless.sent.v1", "--source", "/endless", "--id", "e-{{.Seq}}"})
	}()
	deadline := time.Now().Add(interruptBound)
	for strings.Count(out.String(), "\n") < 3 {
		select {
		case code := <-done:
			t.Fatalf("emit --count 0 ended by itself (exit %d) after:\n%s\nstderr:\n%s", code, out, errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 3 events sent; stderr:\n%s", errOut)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if code := waitExit(t, done, errOut); code != exitInterrupted {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitInterrupted, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	for i, l := range lines {
		if want := fmt.Sprintf("sent e-%d (200) at ", i+1); !strings.HasPrefix(l, want) {
			t.Fatalf("line %d is %q, want it to begin %q", i+1, l, want)
		}
	}
	if want := "sent " + english.Plural(len(lines), "event") + " in "; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr does not sum up the %d events sent (%q):\n%s", len(lines), want, errOut)
	}
	code, held, stderr := runCLI(t, "replay", "--node", node, "-o", "jsonl")
	if n := strings.Count(held, "\n"); code != 0 || n < len(lines) || n > len(lines)+1 {
		t.Fatalf("the node holds %d events (exit %d, %s); %d were acknowledged", n, code, stderr, len(lines))
	}
}
