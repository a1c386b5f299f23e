package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
)

// TestMain lets the test binary stand in for evtctl: in scripts (through testscript) and
// when a test starts it as a child process with EVTCTL_TEST_AS_MAIN=1.
func TestMain(m *testing.M) {
	if os.Getenv("EVTCTL_TEST_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:]))
	}
	// Most of this package's end-to-end tests wait — on child processes, long-polls, retry
	// delays, a Tendermint node's blocks — rather than compute: let more of them run at
	// once than the default of one per CPU. -test.parallel on the command line still wins.
	if f := flag.Lookup("test.parallel"); f != nil {
		_ = f.Value.Set("8")
	}
	// The evtctl processes the tests start inherit this (scripts through scriptEnv): in a
	// race-detector build each would otherwise sleep a second before it exits (GORACE's
	// atexit_sleep_ms), over the hundreds of commands the scripts run most of their time.
	// A race is still reported, and fails the command (exit status 66).
	if os.Getenv("GORACE") == "" {
		_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	go cliBin() // built while the first tests run
	testscript.Main(cliBinCleanup{m}, map[string]func(){
		"evtctl": func() { os.Exit(run(os.Args[1:])) },
	})
}

// scriptCmds are the commands scripts may use beyond testscript's own. Test files of
// other commands add theirs in init.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"node":     cmdNode,
	"http":     cmdHTTP,
	"ingest":   cmdIngest,
	"waitaddr": cmdWaitAddr,
	"jsonvar":  cmdJSONVar,
	"status":   cmdStatus,
	"waitfile": cmdWaitFile,
	"jsonl":    cmdJSONL,
	"waithttp": cmdWaitHTTP,
	"now":      cmdNow,
}

// scriptEnv is what every script's environment holds beyond testscript's own, and points
// its evtctl at the one built for the scripts (cli_bin_test.go).
func scriptEnv(env *testscript.Env) error {
	env.Setenv("NO_COLOR", "1")
	env.Setenv("XDG_STATE_HOME", env.WorkDir+"/state")
	env.Setenv("XDG_CONFIG_HOME", env.WorkDir+"/config")
	env.Setenv("GORACE", os.Getenv("GORACE"))
	return useCLIBin(env)
}

func TestScripts(t *testing.T) {
	t.Parallel() // beside the other long end-to-end tests
	testscript.Run(t, testscript.Params{
		Dir:                 "../../testdata/script",
		RequireExplicitExec: true,
		Setup:               scriptEnv,
		Cmds:                scriptCmds,
		Condition: func(cond string) (bool, error) {
			if port, ok := strings.CutPrefix(cond, "free:"); ok {
				return portFree(port), nil // [free:7480]: nothing listens on 127.0.0.1:7480
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

// cmdNode starts an in-process node on a free loopback port and points EVTCTL_NODE at it
// (NODE_ADDR is its host:port).
//
//	node [-max-items N] [-window D] [-read-token T] [-ingest-token T] [-dir DIR] [-wait-max D]
func cmdNode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! node")
	}
	var lopts eventlog.Options
	cfg := server.Config{}
	for i := 0; i < len(args); i++ {
		if i+1 >= len(args) {
			ts.Fatalf("node: %s needs a value", args[i])
		}
		v := args[i+1]
		switch args[i] {
		case "-max-items":
			n, err := strconv.ParseUint(v, 10, 64)
			ts.Check(err)
			lopts.MaxItems = n
		case "-read-token":
			cfg.ReadToken = v
		case "-ingest-token":
			cfg.IngestToken = v
		case "-dir":
			lopts.Dir = ts.MkAbs(v)
		case "-window":
			d, err := time.ParseDuration(v)
			ts.Check(err)
			lopts.Window = d
		case "-wait-max":
			d, err := time.ParseDuration(v)
			ts.Check(err)
			cfg.MaxWait = d
		default:
			ts.Fatalf("node: unknown flag %s", args[i])
		}
		i++
	}
	store, err := eventlog.Open(lopts)
	ts.Check(err)
	cfg.Store = store
	srv := server.New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	hs := srv.HTTPServer(ln.Addr().String(), 2*time.Second)
	go hs.Serve(ln)
	ts.Setenv("EVTCTL_NODE", "http://"+ln.Addr().String())
	ts.Setenv("NODE_ADDR", ln.Addr().String())
	ts.Defer(func() {
		srv.Shutdown(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		store.Close()
	})
}

// cmdHTTP sends a request and prints the body on stdout and "status N" on stderr.
//
//	http [-H 'Name: value']... METHOD URL [BODYFILE]
func cmdHTTP(ts *testscript.TestScript, neg bool, args []string) {
	hdr := http.Header{}
	for len(args) >= 2 && args[0] == "-H" {
		k, v, ok := strings.Cut(args[1], ":")
		if !ok {
			ts.Fatalf("http: header %q has no colon", args[1])
		}
		hdr.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		args = args[2:]
	}
	if len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: http [-H 'Name: value']... METHOD URL [BODYFILE]")
	}
	var body io.Reader
	if len(args) == 3 {
		body = strings.NewReader(ts.ReadFile(args[2]))
	}
	req, err := http.NewRequest(args[0], os.Expand(args[1], ts.Getenv), body)
	ts.Check(err)
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if neg {
			return
		}
		ts.Fatalf("http: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "%s", b)
	fmt.Fprintf(ts.Stderr(), "status %d\n", resp.StatusCode)
	for _, k := range []string{"Retry-After", "WWW-Authenticate", "Content-Type"} {
		if v := resp.Header.Get(k); v != "" {
			fmt.Fprintf(ts.Stderr(), "%s: %s\n", k, v)
		}
	}
	if ok := resp.StatusCode < 300; ok == neg {
		ts.Fatalf("http: status %d", resp.StatusCode)
	}
}

// cmdIngest posts N generated CloudEvents to $EVTCTL_NODE as one batch.
//
//	ingest N [TYPE]
func cmdIngest(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: ingest N [TYPE]")
	}
	n, err := strconv.Atoi(args[0])
	ts.Check(err)
	typ := "org.example.test.created.v1"
	if len(args) == 2 {
		typ = args[1]
	}
	var b bytes.Buffer
	b.WriteByte('[')
	base := time.Now().UnixNano()
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"specversion":"1.0","id":"gen-%d-%d","source":"/script","type":%q,"data":{"n":%d}}`, base, i, typ, i)
	}
	b.WriteByte(']')
	resp, err := http.Post(ts.Getenv("EVTCTL_NODE")+"/events", "application/cloudevents-batch+json", &b)
	ts.Check(err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		ts.Fatalf("ingest: status %d: %s", resp.StatusCode, body)
	}
}

// cmdWaitAddr waits for a node's --addr-file and points EVTCTL_NODE at the address in it.
//
//	waitaddr FILE
func cmdWaitAddr(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: waitaddr FILE")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(ts.MkAbs(args[0]))
		if addr := strings.TrimSpace(string(b)); err == nil && addr != "" {
			ts.Setenv("EVTCTL_NODE", "http://"+addr)
			ts.Setenv("NODE_ADDR", addr)
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitaddr: %s did not appear", args[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cmdJSONVar sets an environment variable from the previous command's stdout (JSON), by a
// gjson path; it fails when the path matches nothing.
//
//	jsonvar NAME PATH
func cmdJSONVar(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: jsonvar NAME PATH")
	}
	r := gjson.Get(ts.ReadFile("stdout"), args[1])
	if !r.Exists() {
		ts.Fatalf("jsonvar: %s matches nothing in stdout", args[1])
	}
	ts.Setenv(args[0], r.String())
}

// cmdStatus runs evtctl as a child process and checks its exit status; its output becomes
// the command's stdout and stderr.
//
//	status N ARGS...
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: status N ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	bin, env := os.Args[0], []string{"EVTCTL_TEST_AS_MAIN=1"}
	if b := ts.Getenv("EVTCTL_TEST_BIN"); b != "" {
		bin, env = b, nil
	}
	cmd := exec.Command(bin, args[1:]...)
	cmd.Dir = ts.MkAbs(".")
	for _, k := range []string{"EVTCTL_NODE", "EVTCTL_TOKEN", "EVTCTL_CONTEXT", "EVTCTL_INGEST_TOKEN", "EVTCTL_READ_TOKEN", "EVTCTL_CA_FILE", "EVTCTL_INSECURE", "HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "NO_COLOR", "PATH", "TMPDIR"} {
		env = append(env, k+"="+ts.Getenv(k))
	}
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	ts.Stdout().Write(stdout.Bytes())
	ts.Stderr().Write(stderr.Bytes())
	got := 0
	if ee, ok := err.(*exec.ExitError); ok {
		got = ee.ExitCode()
	} else {
		ts.Check(err)
	}
	if got != want {
		ts.Fatalf("exit status %d, want %d", got, want)
	}
}

// cmdWaitFile waits until a file exists and its content matches a regular expression.
//
//	waitfile FILE [REGEXP]
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waitfile FILE [REGEXP]")
	}
	re := regexp.MustCompile(".")
	if len(args) == 2 {
		re = regexp.MustCompile(args[1])
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(ts.MkAbs(args[0]))
		if err == nil && re.Match(b) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfile: %s did not match %q in time; it holds %q", args[0], re, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cmdJSONL checks a file (or the last stdout) of JSON lines as evtctl writes them: every line
// is an item with a cursor, cursors strictly increase (decrease with -desc), the events' ids
// (data.id, where there is one: a Tendermint item has none) are unique, and there are N lines.
//
//	jsonl [-desc] N|any [FILE]
func cmdJSONL(ts *testscript.TestScript, neg bool, args []string) {
	desc := len(args) > 0 && args[0] == "-desc"
	if desc {
		args = args[1:]
	}
	if len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: jsonl [-desc] N|any [FILE]")
	}
	want := -1 // "any": check order and uniqueness only
	if args[0] != "any" {
		n, err := strconv.Atoi(args[0])
		ts.Check(err)
		want = n
	}
	file := "stdout"
	if len(args) == 2 {
		file = args[1]
	}
	text := ts.ReadFile(file)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if text == "" {
		lines = nil
	}
	ids := map[string]bool{}
	prev := ""
	for i, line := range lines {
		if !gjson.Valid(line) {
			ts.Fatalf("line %d is not JSON: %q", i+1, line)
		}
		c := gjson.Get(line, "cursor").String()
		if c == "" {
			ts.Fatalf("line %d has no cursor: %q", i+1, line)
		}
		if prev != "" && ((!desc && c <= prev) || (desc && c >= prev)) {
			ts.Fatalf("line %d: cursor %s out of order after %s", i+1, c, prev)
		}
		prev = c
		id := gjson.Get(line, "data.id").String()
		if id != "" && ids[id] {
			ts.Fatalf("line %d: event %s repeated", i+1, id)
		}
		ids[id] = true
	}
	if want >= 0 && len(lines) != want {
		ts.Fatalf("%d lines, want %d", len(lines), want)
	}
}

// cmdWaitHTTP polls a URL until its body matches a regular expression, e.g. until a tail's
// long-poll is waiting on the node: waithttp $EVTCTL_NODE/metrics '(?m)^evtctl_waiting_readers 1$'
//
//	waithttp URL REGEXP
func cmdWaitHTTP(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: waithttp URL REGEXP")
	}
	re := regexp.MustCompile(args[1])
	deadline := time.Now().Add(20 * time.Second)
	var last []byte
	for {
		if resp, err := http.Get(args[0]); err == nil {
			last, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if re.Match(last) {
				return
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waithttp: %s did not match %q in time; last body %q", args[0], re, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cmdNow sets an environment variable to the current time in RFC 3339, or in LAYOUT (a Go
// time layout) in the time zone $TZ names, as a user would type a local time.
//
//	now NAME [LAYOUT]
func cmdNow(ts *testscript.TestScript, neg bool, args []string) {
	switch len(args) {
	case 1:
		ts.Setenv(args[0], time.Now().UTC().Format(time.RFC3339Nano))
	case 2:
		// The time as the script's evtctl reads local times: in the zone $TZ names.
		loc, err := time.LoadLocation(ts.Getenv("TZ"))
		ts.Check(err)
		ts.Setenv(args[0], time.Now().In(loc).Format(args[1]))
	default:
		ts.Fatalf("usage: now NAME [LAYOUT]")
	}
}
