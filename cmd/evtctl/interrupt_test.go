package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/evtctl/evtctl/internal/iostreams"
)

// Ctrl-C ends every command promptly (the promise is 100 ms), with status 130, whatever it
// is doing: generating events, sending them, or waiting for standard input. These tests send
// SIGINT to the real program and wait for it to exit, up to interruptBound: a bound for a
// program that does not stop at all, far above the promise and far below the time the work
// interrupted would take (minutes), not a measure of how fast it stops.
const interruptBound = 30 * time.Second

// manyEvents is more events than a test could wait for emit to make.
const manyEvents = "100000000"

// child is an evtctl started by a test, with its stdout read line by line.
type child struct {
	cmd    *exec.Cmd
	done   chan int
	lines  chan string // stdout
	stderr *syncBuffer
	stdin  io.WriteCloser
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in different goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startEvtctl starts the test binary as evtctl with args in dir; its stdin is a pipe the
// test holds open.
func startEvtctl(t *testing.T, dir string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = []string{"EVTCTL_TEST_AS_MAIN=1", "HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir(), "NO_COLOR=1", "GORACE=" + os.Getenv("GORACE")}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan int, 1), lines: make(chan string, 1024), stderr: &syncBuffer{}, stdin: stdin}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case c.lines <- sc.Text():
			default: // the test reads only the first lines
			}
		}
		io.Copy(io.Discard, stdout)
		c.done <- exitStatus(cmd.Wait())
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-c.done:
		default:
			_ = cmd.Process.Kill()
		}
	})
	return c
}

func exitStatus(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		return -1
	}
	return 0
}

// firstLine waits for the child's first line on stdout: it is at work.
func (c *child) firstLine(t *testing.T) string {
	t.Helper()
	select {
	case l := <-c.lines:
		return l
	case code := <-c.done:
		t.Fatalf("exited %d before writing a line; stderr:\n%s", code, c.stderr.String())
	case <-time.After(interruptBound):
		t.Fatalf("no line on stdout; stderr:\n%s", c.stderr.String())
	}
	return ""
}

// interrupt sends SIGINT and waits for the exit status, up to interruptBound.
func (c *child) interrupt(t *testing.T) int {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	return waitExit(t, c.done, c.stderr)
}

func waitExit(t *testing.T, done <-chan int, stderr fmt.Stringer) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(interruptBound):
		t.Fatalf("still running %s after SIGINT; stderr:\n%s", interruptBound, stderr.String())
	}
	return 0
}

// Ctrl-C while emit makes and sends events, in each mode: it stops with status 130 long
// before it would have made them all.
func TestCtrlCEndsEmit(t *testing.T) {
	t.Parallel()
	node, _ := testNode(t)
	gen := []string{"--node", node, "--count", manyEvents, "--type", "org.example.ctrlc.sent.v1", "--source", "/ctrlc", "-o", "json"}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"batch", append([]string{"emit", "--mode", "batch", "--batch-size", "10"}, gen...)},
		{"structured", append([]string{"emit"}, gen...)},
		{"concurrent", append([]string{"emit", "--concurrency", "4"}, gen...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := startEvtctl(t, t.TempDir(), tc.args...)
			c.firstLine(t)
			if code := c.interrupt(t); code != exitInterrupted {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitInterrupted, c.stderr.String())
			}
		})
	}
	// With --spool, every event is written to the spool before any is sent: Ctrl-C stops
	// the writing, and what was written waits in the spool.
	t.Run("spool", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		c := startEvtctl(t, dir, append([]string{"emit", "--spool", "sp"}, gen...)...)
		waitEntry(t, filepath.Join(dir, "sp"), c)
		if code := c.interrupt(t); code != exitInterrupted {
			t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitInterrupted, c.stderr.String())
		}
		if !strings.Contains(c.stderr.String(), "wait in the spool sp") {
			t.Errorf("stderr does not say what waits in the spool:\n%s", c.stderr.String())
		}
	})
}

// waitEntry waits until the spool dir holds an entry.
func waitEntry(t *testing.T, dir string, c *child) {
	t.Helper()
	deadline := time.Now().Add(interruptBound)
	for {
		if m, _ := filepath.Glob(filepath.Join(dir, "*.entry")); len(m) > 0 {
			return
		}
		select {
		case code := <-c.done:
			t.Fatalf("exited %d; stderr:\n%s", code, c.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no spool entry in %s; stderr:\n%s", dir, c.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ctrl-C while emit --file - waits for more input on a pipe that stays open: it stops with
// status 130, in each mode, without waiting for the end of the input.
func TestCtrlCEndsEmitReadingStdin(t *testing.T) {
	t.Parallel()
	node, _ := testNode(t)
	recv := newSignalConsumer(t, func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusNoContent) })
	line := `{"specversion":"1.0","id":"in-%s-%d","source":"/ctrlc","type":"org.example.ctrlc.sent.v1"}` + "\n"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"batch", []string{"emit", "--node", node, "--file", "-", "-o", "json"}},
		{"structured", []string{"emit", "--node", node, "--file", "-", "--mode", "structured", "-o", "json"}},
		{"receiver", []string{"emit", "--to", recv.srv.URL + "/hook", "--file", "-", "-o", "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := startEvtctl(t, t.TempDir(), tc.args...)
			fmt.Fprintf(c.stdin, line, tc.name, 1)
			if tc.name == "batch" {
				// A batch is acknowledged once the next one goes or the input ends; it is
				// sent once the input pauses: the node has it.
				waitStored(t, node, "in-batch-1", c)
			} else {
				c.firstLine(t)
			}
			if code := c.interrupt(t); code != exitInterrupted {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitInterrupted, c.stderr.String())
			}
		})
	}
	t.Run("spool", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		c := startEvtctl(t, dir, "emit", "--node", node, "--file", "-", "--spool", "sp", "-o", "json")
		for i := range spoolChunk {
			fmt.Fprintf(c.stdin, line, "spool", i)
		}
		waitEntry(t, filepath.Join(dir, "sp"), c)
		if code := c.interrupt(t); code != exitInterrupted {
			t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitInterrupted, c.stderr.String())
		}
	})
}

// waitStored waits until the node holds the event with the given id.
func waitStored(t *testing.T, node, id string, c *child) {
	t.Helper()
	deadline := time.Now().Add(interruptBound)
	for {
		if code, out, _ := runCLI(t, "replay", "--node", node, "-o", "jsonl"); code == 0 && strings.Contains(out, `"id":"`+id+`"`) {
			return
		}
		select {
		case code := <-c.done:
			t.Fatalf("exited %d; stderr:\n%s", code, c.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node does not hold %s; stderr:\n%s", id, c.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// onTerminal starts evtctl with stdin, stdout and stderr on a pseudo-terminal, as in a shell
// where nothing is piped in; what the terminal shows is collected.
func onTerminal(t *testing.T, args ...string) (term *os.File, shown *syncBuffer, done <-chan int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"EVTCTL_TEST_AS_MAIN=1", "HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir(), "NO_COLOR=1", "TERM=xterm", "GORACE=" + os.Getenv("GORACE")}
	term, err := pty.Start(cmd)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	shown = &syncBuffer{}
	ch := make(chan int, 1)
	go func() {
		io.Copy(shown, term) // ends with EIO once the child's side is closed
		ch <- exitStatus(cmd.Wait())
	}()
	t.Cleanup(func() {
		select {
		case <-ch:
		default:
			_ = cmd.Process.Kill()
		}
		term.Close()
	})
	return term, shown, ch
}

// waitShown waits until the terminal has shown text.
func waitShown(t *testing.T, shown *syncBuffer, done <-chan int, text string) {
	t.Helper()
	deadline := time.Now().Add(interruptBound)
	for !strings.Contains(shown.String(), text) {
		select {
		case code := <-done:
			t.Fatalf("exited %d before showing %q; the terminal shows:\n%s", code, text, shown.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal does not show %q:\n%s", text, shown.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A command that reads standard input from a terminal says so, and Ctrl-C (typed on the
// terminal, before any Ctrl-D) ends it with status 130.
func TestCtrlCEndsStdinOnTerminal(t *testing.T) {
	t.Parallel()
	node, _ := testNode(t)
	for _, tc := range []struct {
		name, says string
		args       []string
	}{
		{"lint", "reading events from standard input; Ctrl-D to end", []string{"lint"}},
		{"lint -", "reading events from standard input; Ctrl-D to end", []string{"lint", "-"}},
		{"emit --file -", "reading events from standard input; Ctrl-D to end", []string{"emit", "--node", node, "--file", "-"}},
		{"emit --data -", "reading the data from standard input; Ctrl-D to end",
			[]string{"emit", "--node", node, "--data", "-", "--type", "org.example.ctrlc.sent.v1", "--source", "/ctrlc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			term, shown, done := onTerminal(t, tc.args...)
			waitShown(t, shown, done, tc.says)
			if _, err := term.Write([]byte{3}); err != nil { // Ctrl-C
				t.Fatal(err)
			}
			if code := waitExit(t, done, shown); code != exitInterrupted {
				t.Fatalf("exit %d, want %d; the terminal shows:\n%s", code, exitInterrupted, shown.String())
			}
		})
	}
}

// context add --token-stdin waits for the token's line; Ctrl-C ends the wait.
func TestCtrlCEndsTokenStdin(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe() // the writer stays open: no line, no end of input
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errOut := &syncBuffer{}
	streams := &iostreams.IOStreams{In: r, Out: &syncBuffer{}, ErrOut: errOut}
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, streams, nil, []string{"context", "add", "prod", "--node", "http://127.0.0.1:1", "--token-stdin"})
	}()
	cancel()
	if code := waitExit(t, done, errOut); code != exitInterrupted {
		t.Fatalf("exit %d, want %d", code, exitInterrupted)
	}
}

// Ctrl-C while forward waits for a slow receiver: it exits 130 without waiting for the
// delivery in flight, which is abandoned (the receiver sees the request end) and left for the
// next run, which sends it: the checkpoint stayed before it.
func TestCtrlCEndsForward(t *testing.T) {
	t.Parallel()
	node, _ := testNode(t)
	if code, _, errOut := runCLI(t, "emit", "--node", node, "--type", "org.example.ctrlc.sent.v1", "--source", "/ctrlc", "--id", "slow-1"); code != 0 {
		t.Fatalf("emit: exit %d: %s", code, errOut)
	}
	arrived, outcome := make(chan struct{}, 1), make(chan string, 2)
	slow := true
	var mu sync.Mutex
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		first := slow
		slow = false
		mu.Unlock()
		if !first {
			w.WriteHeader(http.StatusNoContent)
			outcome <- "delivered again"
			return
		}
		arrived <- struct{}{}
		select {
		case <-time.After(2 * time.Second): // a slow receiver: 20 times the time Ctrl-C may take
			w.WriteHeader(http.StatusNoContent)
			outcome <- "delivered"
		case <-r.Context().Done():
			outcome <- "abandoned"
		}
	}))
	t.Cleanup(recv.Close)
	dir := t.TempDir()
	args := []string{"forward", "--node", node, "--to", recv.URL + "/hook", "--from", "start", "--checkpoint", "cp.json", "--timeout", "1h"}
	c := startEvtctl(t, dir, args...)
	select {
	case <-arrived:
	case code := <-c.done:
		t.Fatalf("exited %d; stderr:\n%s", code, c.stderr.String())
	case <-time.After(interruptBound):
		t.Fatalf("no delivery; stderr:\n%s", c.stderr.String())
	}
	if code := c.interrupt(t); code != exitInterrupted {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitInterrupted, c.stderr.String())
	}
	if got := <-outcome; got != "abandoned" {
		t.Fatalf("the delivery in flight was %s, want abandoned at Ctrl-C", got)
	}
	c = startEvtctl(t, dir, append(args, "--until-caught-up")...)
	if code := waitExit(t, c.done, c.stderr); code != 0 {
		t.Fatalf("the next run: exit %d; stderr:\n%s", code, c.stderr.String())
	}
	if got := <-outcome; got != "delivered again" {
		t.Fatalf("the next run: %s", got)
	}
}
