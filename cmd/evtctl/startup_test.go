package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// A command that does not open the terminal UI must not talk to the terminal: no query
// for its background colour (OSC 11) or the cursor's position (DSR), which a terminal
// that never answers, such as a bare pseudo-terminal, would leave it waiting on. The test
// binary runs as evtctl version on a pseudo-terminal whose other end only reads.
func TestStartupSendsNoTerminalQuery(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The deadline only bounds a failure; a working evtctl version exits at once.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "version")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, "TMUX=") &&
			!strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "EVTCTL_TEST_AS_MAIN=") {
			env = append(env, kv)
		}
	}
	// A terminal type that may be asked about its colours.
	cmd.Env = append(env, "EVTCTL_TEST_AS_MAIN=1", "TERM=xterm-256color")
	term, err := pty.Start(cmd)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer term.Close()

	read := make(chan []byte, 1)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, term) // ends when the child's side closes
		read <- b.Bytes()
	}()
	waitErr := cmd.Wait()
	var out []byte
	select {
	case out = <-read:
	case <-ctx.Done():
		term.Close()
		out = <-read
	}

	for _, q := range []string{"\x1b]11;", "\x1b[6n"} {
		if bytes.Contains(out, []byte(q)) {
			t.Errorf("evtctl version sent the terminal query %q; the output was %q", q, out)
		}
	}
	switch {
	case ctx.Err() != nil:
		t.Fatalf("evtctl version did not exit: it waits on the terminal; the output was %q", out)
	case waitErr != nil:
		t.Fatalf("evtctl version: %v; the output was %q", waitErr, out)
	}
	if !bytes.Contains(out, []byte("evtctl")) {
		t.Errorf("the output %q lacks the version", out)
	}
}
