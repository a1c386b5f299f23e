package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
// the test suite exactly as CI runs it: .ci/run, which runs the suite once.
func TestReadmeTestCommandIsCI(t *testing.T) {
	t.Parallel()
	cmds := readmeSetup(t)
	if len(cmds) != 2 {
		t.Fatalf("the README's set-up block has %d commands, want 2: %q", len(cmds), cmds)
	}
	if cmds[1] != ".ci/run" {
		t.Fatalf("README's test command %q, want .ci/run (what CI runs)", cmds[1])
	}
	ci, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var ciTest []string
	for _, line := range strings.Split(string(ci), "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "go test") || strings.HasPrefix(l, "go tool gotestsum") {
			ciTest = append(ciTest, l)
		}
	}
	if len(ciTest) != 1 || !strings.Contains(ciTest[0], "-race") || !strings.HasSuffix(ciTest[0], "./...") {
		t.Fatalf(".ci/run runs %q, want the whole suite once, with -race", ciTest)
	}
}

// The README's main job, run as a new user would on a clean home with --count 5, prints
// five JSON lines of events.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
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

// TestEmitExamplesPassLint: every `evtctl emit` example in the README, the pages of docs/
// and `emit --help` makes events that `evtctl lint` finds no error in, so that a user who
// copies one is not told off by the project's own linter. The examples are run against a
// receiver that keeps what it is sent, with --count 2 and no rate, and the events it got
// are linted.
func TestEmitExamplesPassLint(t *testing.T) {
	t.Parallel()
	var examples []string
	var all strings.Builder
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
		all.WriteByte('\n')
	}
	text := all.String()
	text = strings.ReplaceAll(text, "\\\n", " ") // continued lines
	for _, line := range strings.Split(text, "\n") {
		line = strings.Trim(strings.TrimSpace(line), "`")
		if i := strings.Index(line, "evtctl emit "); i >= 0 && (i == 0 || line[i-1] == '`' || line[i-1] == ' ') {
			ex := line[i:]
			if line[max(i-1, 0)] == '`' || strings.Contains(ex, "`") {
				ex, _, _ = strings.Cut(ex, "`") // inline code ends at its backquote
			}
			if j := strings.Index(ex, "  # "); j >= 0 {
				ex = ex[:j] // a comment
			}
			examples = append(examples, ex)
		}
	}
	_, help, _ := runCLI(t, "emit", "--help")
	_, ex, _ := strings.Cut(help, "Examples:")
	ex, _, _ = strings.Cut(ex, "Flags:")
	ex = strings.ReplaceAll(ex, "\\\n", " ") // continued lines
	for _, line := range strings.Split(ex, "\n") {
		for _, part := range strings.Split(line, ";") {
			if i := strings.Index(part, "evtctl emit "); i >= 0 {
				examples = append(examples, strings.TrimSpace(part[i:]))
			}
		}
	}
	var got []json.RawMessage
	var mu sync.Mutex
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/cloudevents-batch") {
			var batch []json.RawMessage
			json.Unmarshal(body, &batch)
			got = append(got, batch...)
		} else {
			got = append(got, body)
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer recv.Close()
	ran := 0
	for _, ex := range examples {
		args := splitArgs(strings.TrimPrefix(ex, "evtctl "))
		if slices.ContainsFunc(args, func(a string) bool {
			return a == "--file" || a == "--flush" || a == "--signal" || a == "[--id"
		}) || !slices.Contains(args, "--type") || slices.Contains(args, "T") {
			continue // not an example that makes events from flags (a synopsis, a file, a signal)
		}
		args = dropFlags(args, "--node", "--to", "--spool", "--count", "--rate", "-o")
		if i := slices.Index(args, "|"); i >= 0 {
			args = args[:i]
		}
		mu.Lock()
		got = got[:0]
		mu.Unlock()
		args = append(args, "--to", recv.URL, "--count", "2", "--rate", "0", "-o", "json")
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", ex, code, stderr)
		}
		mu.Lock()
		events := slices.Clone(got)
		mu.Unlock()
		if len(events) != 2 {
			t.Fatalf("%s: the receiver got %d events, want 2", ex, len(events))
		}
		for _, e := range events {
			if code, out, stderr := runCLI(t, "lint", string(e)); code != 0 {
				t.Errorf("%s makes an event lint refuses:\n%s%s", ex, out, stderr)
			}
		}
		ran++
	}
	if ran < 5 {
		t.Fatalf("only %d emit examples were checked: %q", ran, examples)
	}
}

// splitArgs splits a shell command line on spaces, keeping quoted words whole.
func splitArgs(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// dropFlags removes the named flags and their values.
func dropFlags(args []string, names ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if slices.Contains(names, args[i]) {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}
