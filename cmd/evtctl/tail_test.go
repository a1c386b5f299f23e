package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/evtctl/evtctl/internal/iostreams"
)

// --idle-timeout's timer fires once no event has come for its duration: each event starts
// the duration again. On a fake clock, exactly.
func TestIdleTimer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fired := make(chan time.Duration, 1)
		it := newIdleTimer(300*time.Millisecond, func() { fired <- time.Since(start) })
		defer it.stop()
		time.Sleep(200 * time.Millisecond)
		it.reset() // an event at 200ms
		time.Sleep(250 * time.Millisecond)
		it.reset() // and at 450ms
		if d := <-fired; d != 750*time.Millisecond {
			t.Fatalf("fired at %v, want 300ms after the last event, at 750ms", d)
		}
		// Without a duration there is no timer.
		never := newIdleTimer(0, func() { t.Error("a timer of 0 fired") })
		never.reset()
		time.Sleep(time.Hour)
		never.stop()
	})
}

// removeOnWrite passes writes to a buffer, and removes dir at the nth.
type removeOnWrite struct {
	bytes.Buffer
	n, writes int
	dir       string
}

func (w *removeOnWrite) Write(p []byte) (int, error) {
	if w.writes++; w.writes == w.n {
		os.RemoveAll(w.dir)
	}
	return w.Buffer.Write(p)
}

// A checkpoint that cannot be written on the way out is reported, and the status says so:
// the output went further than the checkpoint, which the next run would write again. Two
// events a page: the first is recorded at once, the second (within the checkpoint interval)
// only on the way out, after the checkpoint's directory is gone.
func TestTailReportsFailedFinalCheckpoint(t *testing.T) {
	t.Parallel()
	node, _ := testNode(t)
	if code, _, errOut := runCLI(t, "emit", "--node", node, "--count", "2", "--type", "org.example.cp.created.v1", "--source", "/cp"); code != 0 {
		t.Fatalf("emit: exit %d: %s", code, errOut)
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := &removeOnWrite{n: 2, dir: dir}
	errOut := &bytes.Buffer{}
	streams := &iostreams.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}
	code := execute(context.Background(), streams, nil, []string{"tail", "--node", node, "--from-start", "--page-size", "1", "--count", "2",
		"--checkpoint", filepath.Join(dir, "cp.json"), "-o", "jsonl"})
	if lines := strings.Count(out.String(), "\n"); lines != 2 {
		t.Fatalf("%d lines written, want 2:\n%s", lines, out.String())
	}
	if code != 1 || !strings.Contains(errOut.String(), "checkpoint") {
		t.Fatalf("exit %d, stderr %q: want 1 and the checkpoint's failure", code, errOut.String())
	}
}
