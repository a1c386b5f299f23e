package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/evtctl/evtctl/internal/cevent"
	"github.com/evtctl/evtctl/internal/forward"
	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/wire"
)

func init() {
	scriptCmds["receiver"] = cmdReceiver
	scriptCmds["delivered"] = cmdDelivered
}

// recvStep is one scripted reply: a status with an optional Retry-After and delay, or a hang
// (no reply until the sender gives up).
type recvStep struct {
	status     int
	retryAfter string
	sleep      time.Duration
	hang       bool
}

// parseRecvSteps reads "500 503,ra=2 200,sleep=300ms hang".
func parseRecvSteps(fields []string) ([]recvStep, error) {
	var steps []recvStep
	for _, f := range fields {
		if f == "hang" {
			steps = append(steps, recvStep{hang: true})
			continue
		}
		parts := strings.Split(f, ",")
		n, err := strconv.Atoi(parts[0])
		if err != nil {
			return nil, fmt.Errorf("step %q: want STATUS[,ra=V][,sleep=D] or hang", f)
		}
		st := recvStep{status: n}
		for _, p := range parts[1:] {
			k, v, _ := strings.Cut(p, "=")
			switch k {
			case "ra":
				st.retryAfter = v
			case "sleep":
				if st.sleep, err = time.ParseDuration(v); err != nil {
					return nil, fmt.Errorf("step %q: %v", f, err)
				}
			default:
				return nil, fmt.Errorf("step %q: unknown option %q", f, k)
			}
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// recvLine is one line of a receiver's log: a request it got and what it answered (status
// 0: it hung until the sender gave up; -1: it redirected).
type recvLine struct {
	N         int    `json:"n"`
	ID        string `json:"id"`
	Attempt   int    `json:"attempt"`
	Method    string `json:"method"`
	Path      string `json:"path"`
	Status    int    `json:"status"`
	Signature string `json:"signature,omitempty"` // ok, bad or absent
	Auth      string `json:"auth,omitempty"`
}

// cmdReceiver starts a webhook receiver on a free loopback port and sets NAME to its base URL.
// It answers each event (by ce-id, or the id of a structured event) from its script: lines
// "ID STEP..." where a step is STATUS[,ra=RETRY_AFTER][,sleep=D] or hang, and the last step
// repeats; ID * applies to events the script does not name; the default is 204. A path
// /307/REST or /308/REST redirects to /REST. It logs every request to FILE as JSON lines
// once it answers it, and, with -arrivals, the id of every request to AFILE as it arrives
// (what a hanging request shows before it ends).
//
//	receiver NAME [-script FILE] [-log FILE] [-arrivals AFILE] [-secret S] [-fail-first-every N] [-fail-percent P]
//
// -secret checks Standard Webhooks signatures (logged as ok or bad); -fail-first-every N
// answers 500 to the first attempt of every Nth event it sees; -fail-percent P answers 500 to
// P percent of all attempts, at random.
func cmdReceiver(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: receiver NAME [-script FILE] [-log FILE] [-arrivals AFILE] [-secret S] [-fail-first-every N] [-fail-percent P]")
	}
	name := args[0]
	script := map[string][]recvStep{}
	logPath, arrivalsPath := "", ""
	var key []byte
	failEvery, failPercent := 0, 0
	for i := 1; i < len(args); i += 2 {
		if i+1 >= len(args) {
			ts.Fatalf("receiver: %s needs a value", args[i])
		}
		v := args[i+1]
		switch args[i] {
		case "-script":
			for _, line := range strings.Split(ts.ReadFile(v), "\n") {
				f := strings.Fields(line)
				if len(f) < 2 || strings.HasPrefix(f[0], "#") {
					continue
				}
				steps, err := parseRecvSteps(f[1:])
				ts.Check(err)
				script[f[0]] = steps
			}
		case "-log":
			logPath = ts.MkAbs(v)
		case "-arrivals":
			arrivalsPath = ts.MkAbs(v)
		case "-secret":
			var err error
			key, err = forward.ParseSecret(v)
			ts.Check(err)
		case "-fail-first-every":
			n, err := strconv.Atoi(v)
			ts.Check(err)
			failEvery = n
		case "-fail-percent":
			n, err := strconv.Atoi(v)
			ts.Check(err)
			failPercent = n
		default:
			ts.Fatalf("receiver: unknown flag %s", args[i])
		}
	}
	var logf, arrivals *os.File
	if logPath != "" {
		var err error
		logf, err = os.Create(logPath)
		ts.Check(err)
	}
	if arrivalsPath != "" {
		var err error
		arrivals, err = os.Create(arrivalsPath)
		ts.Check(err)
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	order := map[string]int{} // the order in which ids were first seen
	n := 0
	record := func(l recvLine) {
		mu.Lock()
		defer mu.Unlock()
		n++
		l.N = n
		if logf != nil {
			b, _ := json.Marshal(l)
			logf.Write(append(b, '\n'))
		}
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		id := r.Header.Get("Ce-Id")
		if id == "" {
			var ev struct {
				ID string `json:"id"`
			}
			json.Unmarshal(body, &ev)
			id = ev.ID
		}
		if arrivals != nil {
			mu.Lock()
			fmt.Fprintln(arrivals, id)
			mu.Unlock()
		}
		line := recvLine{ID: id, Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization")}
		if key != nil && r.Header.Get(forward.HeaderWebhookSignature) != "" {
			ts, _ := strconv.ParseInt(r.Header.Get(forward.HeaderWebhookTimestamp), 10, 64)
			line.Signature = "bad"
			if forward.Sign(key, r.Header.Get(forward.HeaderWebhookID), ts, body) == r.Header.Get(forward.HeaderWebhookSignature) {
				line.Signature = "ok"
			}
		}
		for _, code := range []string{"307", "308"} {
			if rest, ok := strings.CutPrefix(r.URL.Path, "/"+code+"/"); ok {
				c, _ := strconv.Atoi(code)
				line.Status = -1
				record(line)
				w.Header().Set("Location", "/"+rest)
				w.WriteHeader(c)
				return
			}
		}
		mu.Lock()
		attempts[id]++
		line.Attempt = attempts[id]
		if _, ok := order[id]; !ok {
			order[id] = len(order) + 1
		}
		nth := order[id]
		mu.Unlock()
		steps := script[id]
		if steps == nil {
			steps = script["*"]
		}
		st := recvStep{status: http.StatusNoContent}
		if len(steps) > 0 {
			st = steps[min(line.Attempt, len(steps))-1]
		}
		if failEvery > 0 && nth%failEvery == 0 && line.Attempt == 1 || failPercent > 0 && rand.IntN(100) < failPercent {
			st = recvStep{status: http.StatusInternalServerError}
		}
		if st.hang {
			<-r.Context().Done()
			record(line)
			return
		}
		if st.sleep > 0 {
			_ = retry.Sleep(r.Context(), st.sleep)
		}
		if st.retryAfter != "" {
			w.Header().Set("Retry-After", st.retryAfter)
		}
		line.Status = st.status
		record(line)
		w.WriteHeader(st.status)
		fmt.Fprintf(w, `{"message":"scripted %d"}`, st.status)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	ts.Setenv(name, "http://"+ln.Addr().String())
	ts.Defer(func() {
		srv.Close()
		if logf != nil {
			logf.Close()
		}
	})
}

// cmdDelivered checks a receiver's log after a forward: N distinct events were answered with
// a 2xx, and at most MAXDUP of those answers were repeats.
//
//	delivered LOG N MAXDUP
func cmdDelivered(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: delivered LOG N MAXDUP")
	}
	want, err := strconv.Atoi(args[1])
	ts.Check(err)
	maxDup, err := strconv.Atoi(args[2])
	ts.Check(err)
	f, err := os.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer f.Close()
	ok := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l recvLine
		ts.Check(json.Unmarshal(sc.Bytes(), &l))
		if l.Status >= 200 && l.Status <= 299 {
			ok[l.ID]++
		}
	}
	dups := 0
	for _, n := range ok {
		dups += n - 1
	}
	fmt.Fprintf(ts.Stdout(), "%d events delivered, %d repeats\n", len(ok), dups)
	if len(ok) != want {
		ids := slices.Sorted(maps.Keys(ok))
		if len(ids) > 20 {
			ids = append(ids[:20], "…")
		}
		ts.Fatalf("%d distinct events delivered, want %d: %s", len(ok), want, strings.Join(ids, " "))
	}
	if dups > maxDup {
		ts.Fatalf("%d repeated deliveries, want at most %d", dups, maxDup)
	}
}

// A Tendermint node's items are not CloudEvents: forward wraps each in one, so that the
// receiver gets a valid event whose id (the cursor) is stable across retries and restarts.
func TestForwardWrapsTendermintItems(t *testing.T) {
	t.Parallel()
	it := client.Item{Item: wire.Item{Cursor: "18ea61a27c399e6c-00c6", Event: "Tx", Data: json.RawMessage(`{"type":"tendermint/event/Tx","value":{"height":202}}`)}}
	b := asCloudEvent("http://tm:26657", it)
	ev, err := cevent.DecodeStructured(b, cevent.Limits{})
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if ev.ID != it.Cursor || ev.Source != "http://tm:26657" || ev.Type != "Tx" || !strings.Contains(string(b), `"data":{"type":"tendermint/event/Tx","value":{"height":202}}`) {
		t.Errorf("wrapped as %s", b)
	}
	if strings.Contains(string(b), `"time"`) {
		t.Errorf("an item without a time was given one: %s", b)
	}
	// An item the source stamped with a time (a chain's, with its block's) has it as the
	// event's time.
	it.Time = time.Date(2026, 11, 22, 13, 39, 11, 957e6, time.UTC)
	if ev, err := cevent.DecodeStructured(asCloudEvent("http://tm:26657", it), cevent.Limits{}); err != nil || !ev.Time.Equal(it.Time) {
		t.Errorf("the event's time is %v (%v), want %v", ev.Time, err, it.Time)
	}
	own := client.Item{Item: wire.Item{Cursor: "c", Data: json.RawMessage(`{"specversion":"1.0","id":"x","source":"/s","type":"t"}`)}}
	if got := asCloudEvent("http://n", own); string(got) != string(own.Data) {
		t.Errorf("a CloudEvent was changed: %s", got)
	}
}

// Mistakes on the command line are usage errors (exit status 2), caught before anything is
// read or sent.
func TestForwardUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--to is required"},
		{[]string{"--retry-delays", "10s,,1m"}, "--retry-delays: delay 2 is empty"},
		{[]string{"--retry-delays", "1m,10s"}, "shorter than the one before it"},
		{[]string{"--retry-delays", "10"}, "not a duration"},
		{[]string{"-H", "Content-Type: text/plain"}, "forward sets Content-Type itself"},
		{[]string{"-H", "X-Bad"}, "want 'Name: value'"},
		{[]string{"--secret", "not base64!"}, "--secret: the secret is not base64"},
		{[]string{"--ordered", "--concurrency", "4"}, "--ordered delivers one event at a time"},
		{[]string{"--mode", "batch"}, `invalid argument "batch" for "--mode" flag: must be binary or structured`},
		{[]string{"--header-encoding", "quoted"}, `invalid argument "quoted" for "--header-encoding" flag: must be percent or raw`},
		{[]string{"--mode", "structured", "--header-encoding", "raw"}, "--header-encoding applies to binary mode; it does not go with --mode structured"},
		{[]string{"--sync", "never"}, `invalid argument "never" for "--sync" flag: must be always or checkpoint`},
		{[]string{"--from", "yesterday"}, `--from "yesterday": want start, a cursor`},
		{[]string{"-q", "type ="}, "--query"},
	} {
		args := append([]string{"forward"}, tc.args...)
		if tc.args != nil {
			args = append(args, "--to", "127.0.0.1:1/hook", "--node", "127.0.0.1:1")
		}
		streams, _, out, errOut := testStreams()
		root := newRootCmd(streams)
		root.SetArgs(args)
		ctx := context.Background()
		code := exitCode(streams, root.ExecuteContext(ctx), ctx)
		if code != exitUsage || !strings.Contains(errOut.String(), tc.want) || out.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", args, code, errOut.String(), tc.want)
		}
	}
}
