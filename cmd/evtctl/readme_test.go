package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeSetup returns the commands of the README's first shell block: the two that set
// everything up.
func readmeSetup(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```sh\n")
	if !ok {
		t.Fatal("README has no shell block")
	}
	block, _, _ := strings.Cut(rest, "```")
	var cmds []string
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// The README's first block is the whole set-up: the main job on the embedded default, and
// the test suite exactly as CI runs it.
func TestReadmeTestCommandIsCI(t *testing.T) {
	cmds := readmeSetup(t)
	if len(cmds) != 2 {
		t.Fatalf("the README's set-up block has %d commands, want 2: %q", len(cmds), cmds)
	}
	ci, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var ciTest []string
	for _, line := range strings.Split(string(ci), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "go test") {
			ciTest = append(ciTest, strings.TrimSpace(line))
		}
	}
	if len(ciTest) != 1 || ciTest[0] != cmds[1] {
		t.Fatalf("README's test command %q, .ci/run runs %q", cmds[1], ciTest)
	}
}

// The README's main job, run as a new user would on a clean home with --count 5, prints
// five JSON lines of events.
func TestReadmeQuickStart(t *testing.T) {
	cmds := readmeSetup(t)
	const prefix = "go run ./cmd/evtctl "
	if !strings.HasPrefix(cmds[0], prefix) {
		t.Fatalf("the README's main job %q does not run evtctl", cmds[0])
	}
	args := append(strings.Fields(strings.TrimPrefix(cmds[0], prefix)), "--count", "5")
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = home
	cmd.Env = []string{"EVTCTL_TEST_AS_MAIN=1", "HOME=" + home, "PATH=" + os.Getenv("PATH")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), stdout.String())
	}
	for _, l := range lines {
		var item struct {
			Cursor string          `json:"cursor"`
			Event  string          `json:"event"`
			Data   json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(l), &item); err != nil || item.Cursor == "" || !strings.HasPrefix(item.Event, "org.openedx.") {
			t.Fatalf("line %q: %v", l, err)
		}
	}
	if !strings.Contains(stderr.String(), "a node is running in memory at http://127.0.0.1:") {
		t.Fatalf("stderr does not give the node's address:\n%s", stderr.String())
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Fatalf("the demo left files in a clean home: %v", entries)
	}
}
