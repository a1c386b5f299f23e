package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The release builds every system goreleaser.yaml names: each is built here once (on amd64,
// or the first architecture named), so that code behind a build constraint — a Linux file
// without its stub elsewhere — fails here rather than in a release. (Other architectures are
// left to the release: the code has nothing of its own behind an architecture's constraint.)
func TestReleaseTargetsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the command")
	}
	t.Parallel()
	cfg, err := os.ReadFile(filepath.Join("..", "..", "goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	list := func(key string) []string {
		m := regexp.MustCompile(`(?m)^\s*` + key + `:\s*\[([^\]]*)\]`).FindSubmatch(cfg)
		if m == nil {
			t.Fatalf("goreleaser.yaml names no %s list", key)
		}
		var out []string
		for _, v := range strings.Split(string(m[1]), ",") {
			out = append(out, strings.TrimSpace(v))
		}
		return out
	}
	goos, goarch := list("goos"), list("goarch")
	if len(goos) < 2 || len(goarch) == 0 {
		t.Fatalf("goreleaser.yaml: goos %v, goarch %v", goos, goarch)
	}
	arch := "amd64"
	if !slices.Contains(goarch, arch) {
		arch = goarch[0]
	}
	for _, o := range goos {
		if o == runtime.GOOS && arch == runtime.GOARCH {
			continue // the other tests build it
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "evtctl"), ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+o, "GOARCH="+arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=%s GOARCH=%s go build: %v\n%s", o, arch, err, out)
		}
	}
}
