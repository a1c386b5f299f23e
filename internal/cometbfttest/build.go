// Package cometbfttest builds and starts real CometBFT nodes for tests: single-validator
// nodes of the kvstore application, full nodes that follow them, on free loopback ports, as
// child processes.
//
// Two programs are built for each line (Lines), when first needed, into a directory kept
// between runs, $EVTCTL_COMETBFT (default <user cache dir>/evtctl/cometbft), under a file
// lock so that the test processes of one `go test ./...` build each once:
//
//   - cometbft: the release, with `go install github.com/cometbft/cometbft/cmd/cometbft@vX`
//     through the Go module proxy;
//   - kvnode: a small program of its own module (kvnode/<line> beside this file), built with
//     `go build` there, that runs the kvstore application in the node's process with block
//     events on and, when asked, RetainBlocks (pruning): the built-in kvstore of the release
//     emits no block events and keeps every block. Its own module keeps CometBFT out of the
//     project's dependencies.
//
// A line that cannot be built (no go command, no module proxy) skips its tests, saying why.
package cometbfttest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/buildtest"
)

// EnvDir names the environment variable that holds the directory of built programs.
const EnvDir = "EVTCTL_COMETBFT"

// Releases are the released lines the tests run, each with the release built for it.
var Releases = map[string]string{
	"0.37": "0.37.18",
	"0.38": "0.38.26",
	"1.0":  "1.0.1",
}

// Lines are the keys of Releases, oldest first.
var Lines = slices.Sorted(maps.Keys(Releases))

// reported is the version a release's binary reports, where it is not the release's own.
var reported = map[string]string{"0.37.18": "0.37.16"}

// Dir is where the programs are kept.
func Dir() string { return buildtest.Dir(EnvDir, "cometbft") }

// Kind of program.
type Kind string

// The programs built for each line.
const (
	KindCometBFT Kind = "cometbft"
	KindKVNode   Kind = "kvnode"
)

// Binary is a built program.
type Binary struct {
	Kind    Kind
	Line    string
	Version string // the release
	Path    string
}

type buildKey struct {
	line string
	kind Kind
}

type buildResult struct {
	bin Binary
	err error
}

// built holds what this process found or built.
var built struct {
	mu  sync.Mutex
	got map[buildKey]buildResult
}

// Program returns the program of kind for a line ("0.38"), building it when missing.
func Program(line string, kind Kind) (Binary, error) {
	release, ok := Releases[line]
	if !ok {
		return Binary{}, fmt.Errorf("CometBFT %s is not a line these tests build (%v)", line, Lines)
	}
	key := buildKey{line, kind}
	built.mu.Lock()
	defer built.mu.Unlock()
	if r, ok := built.got[key]; ok {
		return r.bin, r.err
	}
	var r buildResult
	switch kind {
	case KindCometBFT:
		r.bin, r.err = buildRelease(line, release)
	case KindKVNode:
		r.bin, r.err = buildKVNode(line, release)
	default:
		r.err = fmt.Errorf("no program %q", kind)
	}
	if built.got == nil {
		built.got = map[buildKey]buildResult{}
	}
	built.got[key] = r
	return r.bin, r.err
}

// Need is Program for a test: it skips t when the program cannot be had.
func Need(t testing.TB, line string, kind Kind) Binary {
	t.Helper()
	b, err := Program(line, kind)
	if err != nil {
		t.Skip(err)
	}
	return b
}

// buildTimeout bounds one build: the first, with nothing in Go's caches, takes minutes.
const buildTimeout = 20 * time.Minute

// buildRelease returns the cometbft of release in Dir()/line, installing it there first
// when it is missing or of another version.
func buildRelease(line, release string) (Binary, error) {
	dir := filepath.Join(Dir(), line)
	bin := Binary{Kind: KindCometBFT, Line: line, Version: release, Path: filepath.Join(dir, "cometbft")}
	want := release
	if v, ok := reported[release]; ok {
		want = v
	}
	have := func() bool { v, err := Version(bin.Path); return err == nil && v == want }
	pkg := "github.com/cometbft/cometbft/cmd/cometbft@v" + release
	err := buildOnce(dir, line, have, func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "go", "install", pkg)
		cmd.Dir = dir // outside any module: the release builds with its own go.mod
		cmd.Env = append(os.Environ(), "GOBIN="+dir)
		return cmd
	}, nil)
	if err != nil {
		return Binary{}, fmt.Errorf("no cometbft %s: `GOBIN=%s go install %s`: %w", release, dir, pkg, err)
	}
	if !have() {
		v, err := Version(bin.Path)
		return Binary{}, fmt.Errorf("built cometbft %s, but it reports version %q (%v)", release, v, err)
	}
	return bin, nil
}

// buildKVNode returns the kvnode of line, built from its module beside this file into a
// directory named for the hash of its sources, so that a changed program is built anew.
func buildKVNode(line, release string) (Binary, error) {
	src, err := kvnodeSource(line)
	if err != nil {
		return Binary{}, err
	}
	sum, err := hashFiles(src, "main.go", "go.mod", "go.sum")
	if err != nil {
		return Binary{}, err
	}
	name := "kvnode-" + line + "-" + sum[:12]
	dir := filepath.Join(Dir(), name)
	bin := Binary{Kind: KindKVNode, Line: line, Version: release, Path: filepath.Join(dir, "kvnode")}
	have := func() bool { _, err := os.Stat(bin.Path); return err == nil }
	err = buildOnce(dir, name, have, func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin.Path+".tmp", ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK=off")
		return cmd
	}, func() error { return os.Rename(bin.Path+".tmp", bin.Path) })
	if err != nil {
		return Binary{}, fmt.Errorf("no kvnode %s: `go build` in %s: %w", line, src, err)
	}
	return bin, nil
}

// kvnodeSource is the directory of line's kvnode module.
func kvnodeSource(line string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot find the kvnode sources")
	}
	dir := filepath.Join(filepath.Dir(file), "kvnode", "v"+line)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("no kvnode module for CometBFT %s: %w", line, err)
	}
	return dir, nil
}

func hashFiles(dir string, names ...string) (string, error) {
	h := sha256.New()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// buildOnce runs the build that command makes into dir, then done (when set), unless have
// reports the program there, holding lockName's lock in Dir() meanwhile: another test
// process building it is waited for, not joined.
func buildOnce(dir, lockName string, have func() bool, command func(context.Context) *exec.Cmd, done func() error) error {
	if have() {
		return nil
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building needs the go command on PATH: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	lock, err := buildtest.WaitLock(ctx, filepath.Join(Dir(), lockName+".lock"))
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if have() {
		return nil // another process built it meanwhile
	}
	cmd := command(ctx)
	cmd.Path = goCmd
	// GOFLAGS of the test run (-race, -mod) are not for the node's build.
	cmd.Env = append(cmd.Env, "GOFLAGS=", "CGO_ENABLED=0")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v\n%s", err, buildtest.LastLines(out, 10))
	}
	if done != nil {
		if err := done(); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "cometbfttest: built %s in %v\n", dir, time.Since(start).Round(time.Second))
	return nil
}

var versionRE = regexp.MustCompile(`(\d+\.\d+\.\d+\S*)`)

// Version runs bin version and returns the version it reports.
func Version(bin string) (string, error) {
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s version: %v: %s", bin, err, out)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s version: no version in %q", bin, out)
	}
	return string(m[1]), nil
}
