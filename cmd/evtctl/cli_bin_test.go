package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// The end-to-end scripts start evtctl some 450 times. Started as this test binary, each
// one is a race-detector build: about 0.15 s of CPU to start (the detector's shadow memory
// and every package's init) and several times the CPU for its work, which made these
// scripts most of the suite's time on two cores. So the scripts run one evtctl built once
// per test run, without the race detector (go build, from Go's build cache after the first
// time), except:
//
//   - the nodes the scripts start in-process (cmdNode) are still this race-detector build,
//     as are the evtctl processes the Go tests start (nodes killed and damaged, the
//     terminal UI under tmux);
//   - the scripts in raceScripts, which drive the CLI's own concurrency (several requests
//     in flight, a spool drained while interrupted, forwarding to slow receivers), run the
//     race-detector build of the CLI too;
//   - EVTCTL_TEST_RACE_CLI=1 runs every script's evtctl as the race-detector build, as a
//     release check.
var raceScripts = map[string]bool{
	"emit_spool_interrupt": true,
	"emit_signal":          true,
	"forward_fairness":     true,
	"forward_interrupt":    true,
	"tail_checkpoint":      true,
	"tail_gap":             true,
}

// cliBin is the evtctl scripts run: a directory holding it as "evtctl", or "" for this
// test binary (testscript puts it on PATH as evtctl). TestMain starts the build early, so
// that it overlaps the first tests.
var cliBin = sync.OnceValues(func() (string, error) {
	if os.Getenv("EVTCTL_TEST_RACE_CLI") == "1" {
		return "", nil
	}
	gobin, err := exec.LookPath("go")
	if err != nil && os.Getenv("GOROOT") != "" {
		gobin, err = filepath.Join(os.Getenv("GOROOT"), "bin", "go"), nil
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cmd/evtctl tests: go is not on PATH: the scripts run the race-detector test binary as evtctl")
		return "", nil
	}
	dir, err := os.MkdirTemp("", "evtctl-cli-")
	if err != nil {
		return "", err
	}
	// -buildvcs=false: like the test binary, whatever the state of the checkout.
	cmd := exec.Command(gobin, "build", "-buildvcs=false", "-o", filepath.Join(dir, "evtctl"), ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("building evtctl for the scripts: %v\n%s", err, out)
	}
	return dir, nil
})

// useCLIBin points a script's evtctl at cliBin, unless the script is one of raceScripts.
// EVTCTL_TEST_BIN is the binary cmdStatus runs ("" for this test binary).
func useCLIBin(env *testscript.Env) error {
	dir, err := cliBin()
	if err != nil {
		return err
	}
	name := strings.TrimPrefix(filepath.Base(env.WorkDir), "script-") // testscript's naming
	if dir == "" || raceScripts[name] {
		env.Setenv("EVTCTL_TEST_BIN", "")
		return nil
	}
	env.Setenv("PATH", dir+string(os.PathListSeparator)+env.Getenv("PATH"))
	env.Setenv("EVTCTL_TEST_BIN", filepath.Join(dir, "evtctl"))
	return nil
}

// cliBinCleanup removes the built evtctl once the tests are done.
type cliBinCleanup struct{ m *testing.M }

func (c cliBinCleanup) Run() int {
	code := c.m.Run()
	if dir, err := cliBin(); err == nil && dir != "" {
		_ = os.RemoveAll(dir)
	}
	return code
}
