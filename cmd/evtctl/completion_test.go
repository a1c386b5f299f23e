package main

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runCLI runs one command line in-process and returns its exit status, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	streams, _, out, errOut := testStreams()
	return execute(context.Background(), streams, nil, args), out.String(), errOut.String()
}

var completionFiles = map[string]string{
	"bash":       "evtctl.bash",
	"zsh":        "_evtctl",
	"fish":       "evtctl.fish",
	"powershell": "evtctl.ps1",
}

// The scripts committed under completions/ are what `evtctl completion SHELL` prints now.
// EVTCTL_UPDATE_COMPLETIONS=1 rewrites them.
func TestCompletionsFresh(t *testing.T) {
	t.Parallel()
	for shell, name := range completionFiles {
		code, got, stderr := runCLI(t, "completion", shell)
		if code != 0 {
			t.Fatalf("completion %s: exit %d: %s", shell, code, stderr)
		}
		path := filepath.Join("..", "..", "completions", name)
		if os.Getenv("EVTCTL_UPDATE_COMPLETIONS") == "1" {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (make it with EVTCTL_UPDATE_COMPLETIONS=1 go test ./cmd/evtctl -run TestCompletionsFresh)", err)
		}
		if got != string(want) {
			t.Errorf("%s is stale: run EVTCTL_UPDATE_COMPLETIONS=1 go test ./cmd/evtctl -run TestCompletionsFresh", path)
		}
	}
}

// The bash script loads into bash and registers a completion for evtctl.
func TestBashCompletionLoads(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", "source completions/evtctl.bash && complete -p evtctl")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "complete") || !strings.Contains(string(out), "evtctl") {
		t.Fatalf("complete -p printed %q", out)
	}
}

// Enum flags complete to their values; the command's own list wins where it has one.
func TestCompleteChoices(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"tail", "--on-gap", ""}, []string{"warn", "fail", "ignore"}},
		{[]string{"tail", "-o", "p"}, []string{"pretty"}},
		{[]string{"replay", "--output", ""}, []string{"jsonl", "json", "pretty", "ce", "data", "template", "tui"}},
		{[]string{"emit", "--signal-format", ""}, []string{"form", "json", "get"}},
		{[]string{"forward", "-o", ""}, []string{"jsonl", "json"}},
		{[]string{"serve", "--log-level", "d"}, []string{"debug"}},
		{[]string{"bench", "ingest", "--mode", ""}, []string{"batch", "structured"}},
		{[]string{"emit", "--mode", "b"}, []string{"binary", "batch"}},
		{[]string{"emit", "--header-encoding", ""}, []string{"percent", "raw"}},
		{[]string{"forward", "--header-encoding", "r"}, []string{"raw"}},
		{[]string{"context", "list", "-o", ""}, []string{"table", "json"}},
		{[]string{"lint", "-o", "j"}, []string{"json"}},
	} {
		code, out, stderr := runCLI(t, append([]string{"__complete"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", tc.args, code, stderr)
		}
		got := completionValues(out)
		for _, w := range tc.want {
			if !strings.Contains(","+strings.Join(got, ",")+",", ","+w+",") {
				t.Errorf("%v: got %v, want %s among them", tc.args, got, w)
			}
		}
		for _, g := range got {
			if !strings.HasPrefix(g, tc.args[len(tc.args)-1]) {
				t.Errorf("%v: %q does not start with what was typed", tc.args, g)
			}
		}
	}
}

// completionValues are the candidate lines of a __complete answer, without descriptions
// and the directive line.
func completionValues(out string) []string {
	var vs []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" || strings.HasPrefix(line, ":") {
			continue
		}
		v, _, _ := strings.Cut(line, "\t")
		vs = append(vs, v)
	}
	return vs
}

// The generated manual pages cover every visible command.
func TestGenMan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "gen-man", dir); code != 0 {
		t.Fatalf("gen-man: %s", stderr)
	}
	for _, page := range []string{"evtctl.1", "evtctl-tail.1", "evtctl-replay.1", "evtctl-emit.1", "evtctl-serve.1", "evtctl-demo.1", "evtctl-context-add.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(".SH NAME")) {
			t.Errorf("%s has no NAME section", page)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "evtctl-gen-man.1")); err == nil {
		t.Error("the hidden gen-man command got a page")
	}
}

// Each enum flag of every command is declared once, and that declaration gives its help,
// its validation and its completion: the help lists every value, a value that is none of
// them is a usage error naming them all, and any of them (case aside) is taken.
func TestEnumFlags(t *testing.T) {
	t.Parallel()
	streams, _, _, _ := testStreams()
	root := newRootCmd(streams)
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(fl *pflag.Flag) {
			e, ok := fl.Value.(*enumValue)
			if !ok {
				return
			}
			seen++
			where := c.CommandPath() + " --" + fl.Name
			if strings.Contains(fl.Usage, "{values}") || !strings.Contains(fl.Usage, e.describe()) {
				t.Errorf("%s: the help %q does not list the values", where, fl.Usage)
			}
			for _, ch := range e.choices {
				if !strings.Contains(fl.Usage, ch.name) {
					t.Errorf("%s: the help leaves out %s", where, ch.name)
				}
			}
			if fl.DefValue != "" && e.lookup(fl.DefValue) != fl.DefValue {
				t.Errorf("%s: the default %q is not a value", where, fl.DefValue)
			}
			old := *e.p
			defer func() { *e.p = old }()
			err := e.Set("no-such-value")
			if err == nil || err.Error() != "must be "+e.names() {
				t.Errorf("%s: Set of a bad value: %v", where, err)
			}
			for _, ch := range e.choices {
				if err := e.Set(strings.ToUpper(ch.name)); err != nil || *e.p != cmp.Or(ch.alias, ch.name) {
					t.Errorf("%s: Set(%q): %v, stored %q", where, strings.ToUpper(ch.name), err, *e.p)
				}
			}
			got, dir := e.complete(c, nil, "")
			if len(got) != len(e.choices) || dir != cobra.ShellCompDirectiveNoFileComp {
				t.Errorf("%s: completes to %q", where, got)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if seen < 20 {
		t.Errorf("%d enum flags in the command tree; expected at least 20", seen)
	}
	// A bad value is a usage error, with the command line's spelling of the flag.
	code, _, stderr := runCLI(t, "replay", "--on-gap", "maybe")
	if code != exitUsage || !strings.Contains(stderr, `invalid argument "maybe" for "--on-gap" flag: must be warn, fail or ignore`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
