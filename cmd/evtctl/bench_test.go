package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/internal/leaktest"
)

func init() {
	scriptCmds["benchjson"] = cmdBenchJSON
}

// cmdBenchJSON checks the previous command's stdout as a bench report: one JSON object with
// the environment, parameters, and figures that each have a number and a unit; then each
// PATH=VALUE (text) or PATH>VALUE (number) given, by gjson path.
//
//	benchjson [PATH=VALUE | PATH>VALUE]...
func cmdBenchJSON(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! benchjson")
	}
	text := strings.TrimSpace(ts.ReadFile("stdout"))
	if err := checkBenchReport(text); err != nil {
		ts.Fatalf("benchjson: %v\n%s", err, text)
	}
	for _, a := range args {
		if path, v, ok := strings.Cut(a, ">"); ok {
			lim, err := strconv.ParseFloat(v, 64)
			ts.Check(err)
			if got := gjson.Get(text, path); got.Type != gjson.Number || got.Float() <= lim {
				ts.Fatalf("benchjson: %s = %s, want a number above %s", path, got.Raw, v)
			}
			continue
		}
		path, v, ok := strings.Cut(a, "=")
		if !ok {
			ts.Fatalf("usage: benchjson [PATH=VALUE | PATH>VALUE]...")
		}
		if got := gjson.Get(text, path); !got.Exists() || got.String() != v {
			ts.Fatalf("benchjson: %s = %s, want %s", path, got.Raw, v)
		}
	}
}

// checkBenchReport checks the shape of a bench's JSON report.
func checkBenchReport(text string) error {
	var r struct {
		Bench       string                     `json:"bench"`
		Partial     *bool                      `json:"partial"`
		Environment map[string]json.RawMessage `json:"environment"`
		Parameters  map[string]map[string]any  `json:"parameters"`
		Figures     map[string]map[string]any  `json:"figures"`
		Notes       []string                   `json:"notes"`
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	if r.Bench == "" || r.Partial == nil || r.Notes == nil || len(r.Parameters) == 0 || len(r.Figures) == 0 {
		return errors.New("bench, partial, parameters, figures or notes missing")
	}
	for _, k := range []string{"evtctl_version", "go_version", "goos", "goarch", "cpus", "gomaxprocs", "node_url", "node_kind", "started", "elapsed_s"} {
		if _, ok := r.Environment[k]; !ok {
			return errors.New("environment lacks " + k)
		}
	}
	for name, f := range r.Figures {
		if _, ok := f["value"].(float64); !ok {
			return errors.New("figure " + name + " has no number")
		}
		if u, _ := f["unit"].(string); u == "" {
			return errors.New("figure " + name + " has no unit")
		}
	}
	return nil
}

// runBenchCLI runs a command line in-process with bench commands whose node processes are
// this test binary acting as evtctl; stdout is a terminal when tty is set.
func runBenchCLI(t *testing.T, ctx context.Context, tty bool, args ...string) (int, string, string) {
	t.Helper()
	streams, _, out, errOut := testStreams()
	streams.SetTTY(false, tty, false)
	root := newRootCmd(streams)
	for _, c := range root.Commands() {
		if c.Name() == "bench" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newCmdBenchWith(streams, func(s *iostreams.IOStreams) *benchOptions {
		o := newBenchOptions(s)
		o.nodeProcess = func() (string, []string, error) {
			return os.Args[0], append(os.Environ(), "EVTCTL_TEST_AS_MAIN=1"), nil
		}
		return o
	}))
	root.SetArgs(args)
	return exitCode(streams, root.ExecuteContext(ctx), ctx), out.String(), errOut.String()
}

func TestBenchUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "ingest", "--embedded", "--node", "127.0.0.1:1"}, "--embedded and --node"},
		{[]string{"bench", "ingest", "--mode", "binary"}, `invalid argument "binary" for "--mode" flag: must be batch or structured`},
		{[]string{"bench", "ingest", "-o", "yaml"}, `invalid argument "yaml" for "-o, --output" flag: must be table or json`},
		{[]string{"bench", "ingest", "--event-size", "10"}, "--event-size must be at least"},
		{[]string{"bench", "ingest", "--sync", "none"}, "--sync configures the node of --embedded"},
		{[]string{"bench", "latency", "--rate", "0"}, "--rate must be above 0"},
		{[]string{"bench", "replay", "--type", "a.#", "--events", "10"}, "do not go with --events"},
		{[]string{"bench", "replay", "-q", "type = "}, "--query"},
		{[]string{"bench", "pollers", "--pollers", "0"}, "--pollers, --rounds and --connect must be at least 1"},
		{[]string{"bench", "pollers", "--embedded", "--memory"}, "do not apply"},
		{[]string{"bench", "ingest", "extra"}, "takes no arguments"},
		{[]string{"bench", "emit", "--runs", "0"}, "--events and --runs must be at least 1"},
		{[]string{"bench", "emit", "--event-size", "70000"}, "--event-size must be at most 65536"},
		{[]string{"bench", "emit", "--memory"}, "--memory configures the node of --embedded"},
	} {
		code, _, stderr := runBenchCLI(t, context.Background(), false, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

// ingest and latency send events: against a Tendermint node (here its recorded reply) that
// is a usage error, found before any load; an unreachable node is an error.
func TestBenchSendersNeedEvtctlNode(t *testing.T) {
	t.Parallel()
	capture, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tendermint-captures", "post_tx_page1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var others atomic.Int64
	tm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			others.Add(1)
			http.NotFound(w, r)
			return
		}
		w.Write(capture)
	}))
	defer tm.Close()
	for _, bench := range []string{"latency", "ingest"} {
		code, _, stderr := runBenchCLI(t, context.Background(), false, "bench", bench, "--node", tm.URL, "--count", "1")
		if code != exitUsage || !strings.Contains(stderr, "cannot run against a tendermint node") {
			t.Errorf("%s: exit %d, stderr %q", bench, code, stderr)
		}
	}
	if n := others.Load(); n > 2 { // the two /healthz probes
		t.Errorf("%d requests beside the events method reached the node", n)
	}
	// latency reads a node of any kind (a chain's too): one that does not answer is said to be
	// unreadable, with the transport's reason.
	code, _, stderr := runBenchCLI(t, context.Background(), false, "bench", "latency", "--node", "127.0.0.1:1", "--count", "1")
	if code != exitError || !strings.Contains(stderr, "the node at http://127.0.0.1:1 cannot be read: no node answers") {
		t.Errorf("unreachable node: exit %d, stderr %q", code, stderr)
	}
}

// checkLeaks is leaktest.Check once the scripts' evtctl is built (TestMain starts that in
// the background, and the build's goroutines would count). Its tests check the whole
// process's goroutines, so they do not run beside parallel tests.
func checkLeaks(t *testing.T) func() {
	t.Helper()
	if _, err := cliBin(); err != nil {
		t.Fatal(err)
	}
	return leaktest.Check(t)
}

// On a terminal the report is a table; the embedded node is durable by default and gone
// afterwards, with nothing left running.
func TestBenchIngestEmbeddedTable(t *testing.T) {
	settled := checkLeaks(t)
	dir := t.TempDir()
	code, out, stderr := runBenchCLI(t, context.Background(), true, "bench", "ingest", "--embedded", "--embedded-dir", dir, "--count", "300", "--producers", "2", "--batch-size", "50")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"evtctl bench ingest", "in-process, durable, fsync before acknowledging", "FIGURE", "events_acknowledged", "300", "events/s", "≥ 150,000"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
		t.Errorf("--embedded-dir %s holds no log (%v)", dir, err)
	}
	settled()
}

// Ctrl-C: the partial report is written, marked as such, and the status is 130.
func TestBenchInterruptedReportsPartial(t *testing.T) {
	settled := checkLeaks(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(300*time.Millisecond, cancel) // a trigger only: nothing depends on how much ran
	code, out, stderr := runBenchCLI(t, ctx, false, "bench", "ingest", "--embedded", "--memory", "--duration", "1h", "--warmup", "0")
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d: %s", code, exitInterrupted, stderr)
	}
	if err := checkBenchReport(out); err != nil || !gjson.Get(out, "partial").Bool() {
		t.Fatalf("partial report: %v\n%s", err, out)
	}
	settled()
}

// pollers --embedded runs its node as a process of its own and stops it afterwards.
func TestBenchPollersChildNode(t *testing.T) {
	settled := checkLeaks(t)
	code, out, stderr := runBenchCLI(t, context.Background(), false, "bench", "pollers", "--embedded", "--pollers", "30", "--rounds", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if err := checkBenchReport(out); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for path, want := range map[string]string{
		"environment.embedded":                "child process",
		"figures.wakes.value":                 "60",
		"figures.rounds_completed.value":      "2",
		"figures.node_waiting_readers.value":  "30",
		"figures.wake_p99.goal.value":         "250",
		"figures.node_cpu_per_wake.unit":      "µs",
		"parameters.pollers.value":            "30",
		"figures.node_rss_before.unit":        "MB",
		"figures.node_goroutines_added.value": "", // present, any value
	} {
		got := gjson.Get(out, path)
		if !got.Exists() || (want != "" && got.String() != want) {
			t.Errorf("%s = %s, want %s", path, got.Raw, want)
		}
	}
	settled()
}
