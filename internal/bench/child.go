package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// ChildNode is an evtctl node run as a process of its own, so that its /metrics show its
// memory alone, and its connections count against its own open-file limit.
type ChildNode struct {
	URL string

	cmd     *exec.Cmd
	dir     string
	stderr  *lastBytes
	exited  chan struct{}
	waitErr error
}

// StartChildNode runs exe (an evtctl binary) as "serve --memory --listen 127.0.0.1:0
// --addr-file F" followed by args, with env as its environment, and waits until it listens.
func StartChildNode(exe string, env []string, args ...string) (*ChildNode, error) {
	return StartChildServe(exe, env, append([]string{"--memory"}, args...)...)
}

// StartChildServe is StartChildNode without --memory: args choose the store.
func StartChildServe(exe string, env []string, args ...string) (*ChildNode, error) {
	dir, err := os.MkdirTemp("", "evtctl-bench-node-")
	if err != nil {
		return nil, err
	}
	addrFile := filepath.Join(dir, "addr")
	argv := append([]string{"serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile, "--log-level", "warn"}, args...)
	n := &ChildNode{cmd: exec.Command(exe, argv...), dir: dir, stderr: &lastBytes{max: 4096}, exited: make(chan struct{})}
	n.cmd.Env = env
	n.cmd.Stderr = n.stderr
	if err := n.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting a node process: %w", err)
	}
	go func() {
		n.waitErr = n.cmd.Wait()
		close(n.exited)
	}()
	deadline := time.After(30 * time.Second)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			n.URL = "http://" + strings.TrimSpace(string(b))
			return n, nil
		}
		select {
		case <-n.exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("the node process exited before it listened (%v): %s", n.waitErr, strings.TrimSpace(n.stderr.String()))
		case <-deadline:
			n.Close()
			return nil, errors.New("the node process did not listen within 30s")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Close stops the node as Ctrl-C would (it wakes its waiting readers and finishes requests
// in progress), killing it if it has not exited within 15 seconds.
func (n *ChildNode) Close() error {
	defer os.RemoveAll(n.dir)
	if runtime.GOOS == "windows" {
		_ = n.cmd.Process.Kill()
	} else {
		_ = n.cmd.Process.Signal(os.Interrupt)
	}
	select {
	case <-n.exited:
	case <-time.After(15 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
		return fmt.Errorf("the node process did not stop within 15s and was killed")
	}
	var ee *exec.ExitError
	if n.waitErr != nil && !(errors.As(n.waitErr, &ee) && runtime.GOOS == "windows") {
		return fmt.Errorf("the node process: %v: %s", n.waitErr, strings.TrimSpace(n.stderr.String()))
	}
	return nil
}

// lastBytes keeps the last max bytes written to it.
type lastBytes struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (l *lastBytes) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > l.max {
		l.b = append(l.b[:0], l.b[len(l.b)-l.max:]...)
	}
	return len(p), nil
}

func (l *lastBytes) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
