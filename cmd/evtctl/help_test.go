package main

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/mattn/go-runewidth"
	"github.com/spf13/cobra"
)

// readVariables returns the environment variables the module's code reads by name
// (os.Getenv, os.LookupEnv), outside tests and packages of test helpers, with a file that
// reads each.
func readVariables(t *testing.T) map[string]string {
	t.Helper()
	vars := map[string]string{}
	fset := token.NewFileSet()
	for _, dir := range []string{"../../cmd", "../../pkg", "../../internal"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && path != dir && strings.HasSuffix(d.Name(), "test") {
				return filepath.SkipDir // a package of test helpers (storetest, natstest): not read by evtctl
			}
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 1 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Getenv" && sel.Sel.Name != "LookupEnv") {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "os" {
					return true
				}
				lit, ok := call.Args[0].(*ast.BasicLit)
				if !ok {
					t.Errorf("%s: %s reads a variable whose name is not a literal; this test cannot check it", fset.Position(call.Pos()), sel.Sel.Name)
					return true
				}
				name, _ := strconv.Unquote(lit.Value)
				vars[name] = path
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return vars
}

// Every variable the code reads is in evtctl help environment, and every EVTCTL_ variable
// there is read by the code; the manual's page of them (docs/environment.md) names each
// EVTCTL_ variable too.
func TestHelpEnvironmentCoversEveryVariable(t *testing.T) {
	t.Parallel()
	read := readVariables(t)
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  ([A-Za-z_][A-Za-z0-9_]*) `).FindAllStringSubmatch(environmentHelp, -1) {
		documented[m[1]] = true
	}
	page, err := os.ReadFile("../../docs/environment.md")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range read {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch {
		case name == "EVTCTL_TEST_AS_MAIN":
		case name == "LocalAppData": // Windows' own, for serve's default directory: described with --data-dir
		case !documented[name]:
			t.Errorf("%s reads %s, which evtctl help environment does not describe", read[name], name)
		case strings.HasPrefix(name, "EVTCTL_") && !strings.Contains(string(page), name):
			t.Errorf("%s reads %s, which docs/environment.md does not name", read[name], name)
		}
	}
	for name := range documented {
		if _, ok := read[name]; !ok {
			t.Errorf("evtctl help environment describes %s, which no code reads", name)
		}
	}
	if len(documented) < 10 {
		t.Fatalf("found only %d variables in the help text: %v", len(documented), documented)
	}
}

// helpAt returns what `evtctl ARGS` writes to stdout when stdout is a terminal width
// columns wide, or (width 0) not a terminal.
func helpAt(t *testing.T, width int, args ...string) string {
	t.Helper()
	streams, _, out, errOut := testStreams()
	if width > 0 {
		streams.SetTTY(false, true, false)
		streams.SetTerminalWidth(width)
	}
	if code := execute(context.Background(), streams, nil, args); code != 0 {
		t.Fatalf("evtctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out.String()
}

// everyHelp returns the command line of the help of every command and help topic,
// hidden ones too.
func everyHelp() [][]string {
	var lines [][]string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.Fields(c.CommandPath())[1:]
		if c.IsAdditionalHelpTopicCommand() {
			lines = append(lines, append([]string{"help"}, path...))
		} else {
			lines = append(lines, append(path, "--help"))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	streams, _, _, _ := testStreams()
	walk(newRootCmd(streams))
	return lines
}

// widest returns the widest line of text and its width in columns.
func widest(text string) (string, int) {
	var line string
	n := -1
	for _, l := range strings.Split(text, "\n") {
		if w := runewidth.StringWidth(l); w > n {
			line, n = l, w
		}
	}
	return line, n
}

// No line of any command's or help topic's help is wider than the terminal at 80 columns,
// nor wider than 80 when stdout is not a terminal.
func TestHelpFitsEightyColumns(t *testing.T) {
	t.Parallel()
	all := everyHelp()
	if len(all) < 20 {
		t.Fatalf("found only %d commands and topics: %v", len(all), all)
	}
	for _, args := range all {
		for _, width := range []int{0, 80} {
			help := helpAt(t, width, args...)
			if !strings.Contains(help, "\n") {
				t.Errorf("evtctl %s: no help:\n%s", strings.Join(args, " "), help)
			}
			if l, w := widest(help); w > 80 {
				t.Errorf("evtctl %s (terminal width %d): a line of %d columns:\n%s", strings.Join(args, " "), width, w, l)
			}
		}
	}
}

// On a wide terminal the flags' usages use its width (and stay within it), and prose is
// reflowed to it.
func TestHelpUsesAWideTerminal(t *testing.T) {
	t.Parallel()
	narrow := helpAt(t, 80, "emit", "--help")
	wide := helpAt(t, 120, "emit", "--help")
	if l, w := widest(wide); w > 120 || w <= 100 {
		t.Errorf("at 120 columns the widest line is %d columns:\n%s", w, l)
	}
	_, narrowFlags, _ := strings.Cut(narrow, "\nFlags:\n")
	_, wideFlags, _ := strings.Cut(wide, "\nFlags:\n")
	if n, w := strings.Count(narrowFlags, "\n"), strings.Count(wideFlags, "\n"); w >= n || w == 0 {
		t.Errorf("emit's flags take %d lines at 120 columns and %d at 80", w, n)
	}
	if !strings.Contains(wideFlags, "--header-encoding string") {
		t.Errorf("no --header-encoding in:\n%s", wideFlags)
	}
	// Other widths: the flags fit the terminal.
	for _, width := range []int{60, 100} {
		help := helpAt(t, width, "tail", "--help")
		_, flags, _ := strings.Cut(help, "\nFlags:\n")
		if l, w := widest(flags); w > width {
			t.Errorf("tail's flags at %d columns: a line of %d:\n%s", width, w, l)
		}
	}
}
