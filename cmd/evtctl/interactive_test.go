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
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/evtctl/evtctl/internal/demo"
	"github.com/evtctl/evtctl/pkg/client"
)

// Without a terminal the UI does not start: a usage error says why.
func TestInteractiveNeedsTerminal(t *testing.T) {
	t.Parallel()
	streams, _, out, errOut := testStreams()
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
	t.Parallel()
	needTmux(t)
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

	runTmuxScript(t, "tail_interactive.sh", "EVTCTL_NODE="+node.URL)
}

// runTmuxScript runs a script of testdata/tmux, which drives evtctl in a tmux session, in
// a new directory WORK, with EVTCTL naming this test binary (which stands in for evtctl)
// and env added. It fails the test with the script's output unless the script exits 0.
func runTmuxScript(t *testing.T, name string, env ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	script, err := filepath.Abs(filepath.Join("..", "..", "testdata", "tmux", name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", script)
	cmd.Dir = work
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "NO_COLOR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "EVTCTL="+self, "EVTCTL_TEST_AS_MAIN=1", "WORK="+work, "TERM=xterm-256color")
	cmd.Env = append(cmd.Env, env...)
	defer exec.Command("tmux", "-S", filepath.Join(work, "tmux.sock"), "kill-server").Run()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	return work
}

// needTmux skips a test that drives a terminal where tmux is missing, or in -short mode.
func needTmux(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	if testing.Short() {
		t.Skip("drives a terminal for several seconds")
	}
}

// TestInteractiveWidthsTmux opens the terminal UI (tail -i and replay -i) at 80 and 120
// columns against a node holding the demo's OEP-41 events, whose types are long
// reverse-DNS names (org.openedx.learning.course.enrollment.created.v1), and checks each
// screen testdata/tmux/tui_widths.sh saved: every line fits the width (wrapped lines are
// joined when captured, so one that wrapped shows as too long), the status bar is the last
// line alone, and each row's type cell shows the end of its type, where types differ; the
// help screen (?) shows every key down to q, which quits.
func TestInteractiveWidthsTmux(t *testing.T) {
	t.Parallel()
	needTmux(t)
	node, err := startEmbedded(embeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	gen := demo.New(1, func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) })
	var evs [][]byte
	for range 150 {
		evs = append(evs, gen.Next())
	}
	resp, err := http.Post(node.URL+"/events", "application/cloudevents-batch+json", bytes.NewReader(append(append([]byte("["), bytes.Join(evs, []byte(","))...), ']')))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("seeding the node: status %d", resp.StatusCode)
	}

	work := runTmuxScript(t, "tui_widths.sh", "EVTCTL_NODE="+node.URL)
	row := regexp.MustCompile(`^(?:  |▶ )\d\d:\d\d:\d\d\.\d{3} `)
	typeCell := regexp.MustCompile(`^(?:  |▶ )\d\d:\d\d:\d\d\.\d{3} (?:org\.openedx\.[a-z.]+|…[a-z.]*)\.v1 `)
	const height = 30
	for _, width := range []int{80, 120} {
		for _, name := range []string{"tail", "tail-paused", "tail-query", "replay", "help"} {
			file := fmt.Sprintf("%s-%d.txt", name, width)
			b, err := os.ReadFile(filepath.Join(work, "screens", file))
			if err != nil {
				t.Fatal(err)
			}
			screen := strings.TrimSuffix(string(b), "\n")
			lines := strings.Split(screen, "\n")
			var problems []string
			if len(lines) != height {
				problems = append(problems, fmt.Sprintf("%d lines, want %d", len(lines), height))
			}
			rows := 0
			for i, l := range lines {
				if w := ansi.StringWidth(l); w > width {
					problems = append(problems, fmt.Sprintf("line %d is %d columns wide", i+1, w))
				}
				if row.MatchString(l) {
					rows++
					if !typeCell.MatchString(l) {
						problems = append(problems, fmt.Sprintf("line %d: the type cell does not end the type", i+1))
					}
				}
			}
			switch {
			case name == "help":
				if !regexp.MustCompile(`(?m)^  q ctrl\+c +quit, restoring the terminal`).MatchString(screen) {
					problems = append(problems, "no q to quit")
				}
			case rows < 5:
				problems = append(problems, fmt.Sprintf("%d rows of events", rows))
			case !strings.Contains(screen, "enrollment.created.v1"):
				problems = append(problems, "no type ends in enrollment.created.v1")
			}
			last := lines[len(lines)-1]
			if !strings.Contains(last, "? help") || !strings.Contains(last, "●") {
				problems = append(problems, "the last line is not the whole status bar")
			}
			if len(problems) > 0 {
				t.Errorf("%s: %s\n%s", file, strings.Join(problems, "; "), screen)
			}
		}
	}
}

// TestDemoTmux runs evtctl demo on a terminal and checks, with testdata/tmux/demo.sh, that
// the commands to try from another terminal can be read while its terminal UI runs, and
// work against the node it names.
func TestDemoTmux(t *testing.T) {
	t.Parallel()
	needTmux(t)
	runTmuxScript(t, "demo.sh")
}
