package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/internal/testwait"
)

// startChild starts the test binary as evtctl with args; stdout and stderr go where given.
// It returns a channel that yields the exit status.
func startChild(t *testing.T, stdout, stderr io.Writer, args ...string) <-chan int {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = []string{"EVTCTL_TEST_AS_MAIN=1", "HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir(), "NO_COLOR=1"}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		done <- code
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
		}
	})
	return done
}

// brokenPipe returns the write end of a pipe whose read end is closed.
func brokenPipe(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close() })
	return w
}

// exited waits for a child's exit status; a child still running at the test's deadline
// fails the test.
func exited(t *testing.T, done <-chan int, what string) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-testwait.Expired(t):
		t.Fatalf("%s: still running", what)
	}
	return 0
}

// testNode starts a node in this process; stop ends it (connections then are refused).
func testNode(t *testing.T) (url string, stop func()) {
	t.Helper()
	store, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Store: store})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer(ln.Addr().String(), 2*time.Second)
	go hs.Serve(ln)
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		srv.Shutdown(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		store.Close()
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

// waitReaders waits until the node has n long-polls waiting.
func waitReaders(t *testing.T, node string, n int) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^evtctl_waiting_readers ` + strconv.Itoa(n) + `$`)
	testwait.Until(t, fmt.Sprintf("%d waiting readers on %s", n, node), func() bool {
		resp, err := http.Get(node + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return re.Match(b)
	})
}

// `evtctl completion bash | true`: the reader is gone before the script is written; evtctl
// ends quietly, with status 0.
func TestCompletionToClosedPipe(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	code := exited(t, startChild(t, brokenPipe(t), &stderr, "completion", "bash"), "completion bash")
	if code != 0 || stderr.Len() != 0 {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, stderr.String())
	}
}

// `evtctl tail | head -2` on a quiet log: the reader goes away while tail waits in a
// long-poll, with nothing to write, and tail ends with it rather than at an event that may
// never come.
func TestTailEndsWhenStdoutReaderGoes(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("a closed stdout is noticed while idle on Linux only; elsewhere at the next write")
	}
	node, _ := testNode(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var stderr bytes.Buffer
	done := startChild(t, w, &stderr, "tail", "--node", node, "-o", "jsonl")
	waitReaders(t, node, 1)
	r.Close()
	if code := exited(t, done, "tail with its reader gone"); code != 0 || stderr.Len() != 0 {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, stderr.String())
	}
}

// `evtctl tail 2>&1 | head -2` when the node goes away after it has answered: tail retries
// and says so on stderr, whose reader is gone: it ends rather than retry for ever unheard.
func TestTailEndsWhenStderrReaderGoes(t *testing.T) {
	t.Parallel()
	node, stop := testNode(t)
	out, err := os.Create(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	done := startChild(t, out, brokenPipe(t), "tail", "--node", node, "-o", "jsonl")
	waitReaders(t, node, 1)
	stop()
	if code := exited(t, done, "tail retrying with stderr gone"); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
}

// emit with its stdout closed before it starts (emit | true, the reader already gone): every
// event is sent, in every mode, the status is 0, and stderr says once that the lines were
// discarded.
func TestEmitToClosedStdout(t *testing.T) {
	t.Parallel()
	node, _ := testNode(t)
	recv := newSignalConsumer(t, func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusOK) })
	events := filepath.Join(t.TempDir(), "events.jsonl")
	var lines bytes.Buffer
	for i := range 20 {
		fmt.Fprintf(&lines, `{"specversion":"1.0","id":"file-%d","source":"/closed","type":"org.example.closed.file.v1"}`+"\n", i)
	}
	if err := os.WriteFile(events, lines.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	gen := func(typ string) []string {
		return []string{"--node", node, "--count", "20", "--type", typ, "--source", "/closed", "-o", "json"}
	}
	for _, tc := range []struct {
		name, typ string
		args      []string
	}{
		{"structured", "org.example.closed.structured.v1", append([]string{"emit"}, gen("org.example.closed.structured.v1")...)},
		{"concurrent", "org.example.closed.concurrent.v1", append([]string{"emit", "--concurrency", "4"}, gen("org.example.closed.concurrent.v1")...)},
		{"batch", "org.example.closed.batch.v1", append([]string{"emit", "--mode", "batch", "--batch-size", "3"}, gen("org.example.closed.batch.v1")...)},
		{"spool", "org.example.closed.spool.v1", append([]string{"emit", "--spool", filepath.Join(t.TempDir(), "sp")}, gen("org.example.closed.spool.v1")...)},
		{"file", "org.example.closed.file.v1", []string{"emit", "--node", node, "--file", events, "--batch-size", "3", "-o", "json"}},
		{"signal", "org.example.closed.signal", []string{"emit", "--signal", recv.srv.URL + "/s", "--count", "20", "--type", "org.example.closed.signal", "--source", "/closed", "-o", "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			code := exited(t, startChild(t, brokenPipe(t), &stderr, tc.args...), "emit to a closed stdout")
			if code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr.String())
			}
			if n := strings.Count(stderr.String(), "standard output was closed"); n != 1 {
				t.Errorf("stderr says %d times that standard output was closed, want once:\n%s", n, stderr.String())
			}
			if tc.name == "signal" {
				if n := len(recv.requests()); n < 20 {
					t.Errorf("the consumer got %d signals, want 20", n)
				}
				return
			}
			_, out, _ := runCLI(t, "replay", "--node", node, "--type", tc.typ, "-o", "jsonl")
			if n := strings.Count(out, "\n"); n != 20 {
				t.Errorf("the node holds %d events of the run, want 20", n)
			}
		})
	}
}
