package main

import (
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
