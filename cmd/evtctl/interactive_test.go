package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/iostreams"
)

// Without a terminal the UI does not start: a usage error says why.
func TestInteractiveNeedsTerminal(t *testing.T) {
	streams, _, out, errOut := iostreams.Test()
	c, err := client.New(client.Options{Node: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	err = runInteractive(context.Background(), streams, c, interactiveConfig{Follow: true})
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "needs a terminal") {
		t.Fatalf("err = %v, want a usage error about the terminal", err)
	}
	if code := exitCode(streams, err, context.Background()); code != exitUsage {
		t.Errorf("exit status %d, want %d", code, exitUsage)
	}
	if out.Len() != 0 || !strings.Contains(errOut.String(), "needs a terminal") {
		t.Errorf("stdout %q, stderr %q", out, errOut)
	}
}

// TestInteractiveTmux runs the real command, evtctl tail -i, in a tmux session against a
// node, and checks the screen as a user would see it: testdata/tmux/tail_interactive.sh
// says what. The test binary stands in for evtctl. It is skipped where tmux is missing.
func TestInteractiveTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	if testing.Short() {
		t.Skip("drives a terminal for several seconds")
	}
	node, err := startEmbedded(embeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	var b bytes.Buffer
	b.WriteByte('[')
	for i := 1; i <= 300; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"specversion":"1.0","id":"seed-%d","source":"/tmux","type":"org.example.tmux.seeded.v1","subject":"seed-%d","data":{"n":%d}}`, i, i, i)
	}
	b.WriteByte(']')
	resp, err := http.Post(node.URL+"/events", "application/cloudevents-batch+json", &b)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("seeding the node: status %d", resp.StatusCode)
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	script, err := filepath.Abs(filepath.Join("..", "..", "testdata", "tmux", "tail_interactive.sh"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", script)
	cmd.Dir = work
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "NO_COLOR=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "EVTCTL="+self, "EVTCTL_TEST_AS_MAIN=1", "EVTCTL_NODE="+node.URL, "WORK="+work, "TERM=xterm-256color")
	defer exec.Command("tmux", "-S", filepath.Join(work, "tmux.sock"), "kill-server").Run()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(script), err, out)
	}
}
