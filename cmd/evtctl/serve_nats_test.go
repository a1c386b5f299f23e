package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/jetstream/natstest"
	"github.com/evtctl/evtctl/pkg/cursor"
)

func init() {
	natstest.ServeIfAsked() // a test binary started as nats-server serves and exits
	scriptCmds["natsserver"] = cmdNATSServer
	scriptCmds["natsstop"] = cmdNATSStop
	scriptCmds["catfiles"] = cmdCatFiles
	scriptCmds["natsstream"] = cmdNATSStream
	scriptCmds["natspub"] = cmdNATSPub
}

var (
	scriptNATSMu sync.Mutex
	scriptNATS   = map[*testscript.TestScript]*natstest.InProcess{}
)

// cmdNATSServer starts an in-process NATS server with JetStream on a loopback port, storing
// under the script's directory, and sets NATS_URL to its URL. With -restart it starts the
// server stopped by natsstop again, on the same port and storage.
//
//	natsserver [-restart]
func cmdNATSServer(ts *testscript.TestScript, neg bool, args []string) {
	restart := len(args) == 1 && args[0] == "-restart"
	if neg || len(args) > 1 || len(args) == 1 && !restart {
		ts.Fatalf("usage: natsserver [-restart]")
	}
	scriptNATSMu.Lock()
	defer scriptNATSMu.Unlock()
	g := scriptNATS[ts]
	switch {
	case restart && g == nil:
		ts.Fatalf("natsserver -restart: no server was started")
	case restart:
		ts.Check(g.Restart())
		return
	case g != nil:
		ts.Fatalf("natsserver: already started")
	}
	g, err := natstest.StartInProcess(natstest.InProcessConfig{Dir: func(int) string { return ts.MkAbs("nats") }})
	ts.Check(err)
	scriptNATS[ts] = g
	ts.Setenv("NATS_URL", g.URL())
	ts.Defer(func() {
		g.StopAll()
		scriptNATSMu.Lock()
		delete(scriptNATS, ts)
		scriptNATSMu.Unlock()
	})
}

// cmdNATSStop stops the script's NATS server (natsserver -restart brings it back).
//
//	natsstop
func cmdNATSStop(ts *testscript.TestScript, neg bool, args []string) {
	scriptNATSMu.Lock()
	g := scriptNATS[ts]
	scriptNATSMu.Unlock()
	if g == nil || neg || len(args) != 0 {
		ts.Fatalf("usage: natsstop, after natsserver")
	}
	g.StopAll()
}

// scriptJetStream connects to the script's NATS servers.
func scriptJetStream(ts *testscript.TestScript) (*nats.Conn, natsjs.JetStream) {
	nc, err := nats.Connect(ts.Getenv("NATS_URL"))
	ts.Check(err)
	js, err := natsjs.New(nc)
	ts.Check(err)
	return nc, js
}

// cmdNATSStream creates a stream as an operator would, without evtctl: file storage,
// limits retention, direct gets allowed unless no_direct.
//
//	natsstream NAME SUBJECT... [max_msgs=N] [max_msgs_per_subject=N] [no_direct]
func cmdNATSStream(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: natsstream NAME SUBJECT... [max_msgs=N] [max_msgs_per_subject=N] [no_direct]")
	}
	cfg := natsjs.StreamConfig{Name: args[0], AllowDirect: true, Storage: natsjs.FileStorage}
	for _, a := range args[1:] {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case a == "no_direct":
			cfg.AllowDirect = false
		case ok && k == "max_msgs":
			_, err := fmt.Sscan(v, &cfg.MaxMsgs)
			ts.Check(err)
		case ok && k == "max_msgs_per_subject":
			_, err := fmt.Sscan(v, &cfg.MaxMsgsPerSubject)
			ts.Check(err)
		case ok:
			ts.Fatalf("natsstream: unknown setting %s", k)
		default:
			cfg.Subjects = append(cfg.Subjects, a)
		}
	}
	nc, js := scriptJetStream(ts)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := js.CreateStream(ctx, cfg)
	ts.Check(err)
}

// cmdNATSPub publishes to JetStream as another NATS program would: one message with the
// payload (text; @FILE for a file's bytes; - for none) and headers, or with -n N, N
// messages whose payload has %d replaced by 1..N.
//
//	natspub [-n N] SUBJECT PAYLOAD [HEADER=VALUE...]
func cmdNATSPub(ts *testscript.TestScript, neg bool, args []string) {
	n := 0
	if len(args) > 1 && args[0] == "-n" {
		_, err := fmt.Sscan(args[1], &n)
		ts.Check(err)
		args = args[2:]
	}
	if neg || len(args) < 2 {
		ts.Fatalf("usage: natspub [-n N] SUBJECT PAYLOAD [HEADER=VALUE...]")
	}
	payload := []byte(args[1])
	switch {
	case args[1] == "-":
		payload = nil
	case strings.HasPrefix(args[1], "@"):
		payload = []byte(ts.ReadFile(args[1][1:]))
	}
	nc, js := scriptJetStream(ts)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 1; i <= max(n, 1); i++ {
		m := nats.NewMsg(args[0])
		m.Data = payload
		if n > 0 {
			m.Data = []byte(strings.ReplaceAll(string(payload), "%d", fmt.Sprint(i)))
		}
		for _, h := range args[2:] {
			k, v, ok := strings.Cut(h, "=")
			if !ok {
				ts.Fatalf("natspub: header %q is not NAME=VALUE", h)
			}
			m.Header[k] = append(m.Header[k], v)
		}
		_, err := js.PublishMsg(ctx, m)
		ts.Check(err)
	}
}

// cmdCatFiles writes the concatenation of files to the command's stdout.
//
//	catfiles FILE...
func cmdCatFiles(ts *testscript.TestScript, neg bool, args []string) {
	for _, f := range args {
		fmt.Fprint(ts.Stdout(), ts.ReadFile(f))
	}
}

// startTail runs `evtctl tail` as a child process writing JSON lines to a file.
func startTail(t *testing.T, out string, args ...string) *exec.Cmd {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], append([]string{"tail", "-o", "jsonl"}, args...)...)
	cmd.Env = append(os.Environ(), "EVTCTL_TEST_AS_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
		if t.Failed() {
			t.Logf("tail's stderr:\n%s", stderr.String())
		}
	})
	return cmd
}

// tailLine is one line of tail's output.
type tailLine struct{ cursor, id string }

// readTail reads the complete lines a tail has written.
func readTail(t *testing.T, path string) []tailLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []tailLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !gjson.ValidBytes(line) {
			continue // a line being written
		}
		out = append(out, tailLine{gjson.GetBytes(line, "cursor").String(), gjson.GetBytes(line, "data.id").String()})
	}
	return out
}

// producer posts batches of events to a node until stopped, retrying a batch that is not
// acknowledged (with the same ids, as a real producer does), and records every event
// acknowledged with its cursor.
type producer struct {
	mu      sync.Mutex
	acked   map[string]string // id → cursor
	n       atomic.Int64
	retries atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newProducer() *producer {
	return &producer{acked: map[string]string{}, stop: make(chan struct{})}
}

func (p *producer) run(t *testing.T, url string, worker int) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		client := &http.Client{Timeout: 10 * time.Second}
		for i := 0; ; i++ {
			ids := make([]string, 5)
			var b bytes.Buffer
			b.WriteByte('[')
			for j := range ids {
				ids[j] = fmt.Sprintf("w%d-%d-%d", worker, i, j)
				if j > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"specversion":"1.0","id":%q,"source":"/failover","type":"org.example.failover.v1","data":{"w":%d,"i":%d}}`, ids[j], worker, i)
			}
			b.WriteByte(']')
			body := b.Bytes()
			for {
				select {
				case <-p.stop:
					return
				default:
				}
				resp, err := client.Post(url+"/events", "application/cloudevents-batch+json", bytes.NewReader(body))
				if err != nil {
					p.retries.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				reply, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					p.retries.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				res := gjson.GetBytes(reply, "results.#.cursor").Array()
				if len(res) != len(ids) {
					t.Errorf("reply %s has %d cursors for %d events", reply, len(res), len(ids))
					return
				}
				p.mu.Lock()
				for j, id := range ids {
					p.acked[id] = res[j].String()
				}
				p.mu.Unlock()
				p.n.Add(int64(len(ids)))
				break
			}
		}
	}()
}

func (p *producer) halt() {
	close(p.stop)
	p.wg.Wait()
}

// replayAll reads a node's whole log oldest first and returns (id, cursor) in order. A page
// answered "event log is unavailable … retry shortly" (-32000, as while a cluster settles
// after losing a server) is asked again, as evtctl's clients do, for up to 30 s.
func replayAll(t *testing.T, url string) []tailLine {
	t.Helper()
	var out []tailLine
	after := ""
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/events?order=asc&maxItems=1000&after=" + after)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if code := gjson.GetBytes(body, "code"); code.Exists() {
			if code.Int() == -32000 && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			t.Fatalf("replay: %s", body)
		}
		items := gjson.GetBytes(body, "items").Array()
		for _, it := range items {
			out = append(out, tailLine{it.Get("cursor").String(), it.Get("data.id").String()})
		}
		if !gjson.GetBytes(body, "more").Bool() {
			return out
		}
		after = items[len(items)-1].Get("cursor").String()
	}
}

// checkOnce checks lines for increasing cursors and unique ids, and that every
// acknowledged event is among them with the cursor it was acknowledged with.
func checkOnce(t *testing.T, what string, lines []tailLine, acked map[string]string) {
	t.Helper()
	seen := map[string]string{}
	var prev cursor.Cursor
	for i, l := range lines {
		c, err := cursor.Parse(l.cursor)
		if err != nil || !c.After(prev) || (i > 0 && l.cursor <= lines[i-1].cursor) {
			t.Fatalf("%s: line %d: cursor %q out of order after %v", what, i, l.cursor, prev)
		}
		prev = c
		if _, dup := seen[l.id]; dup {
			t.Fatalf("%s: event %s twice", what, l.id)
		}
		seen[l.id] = l.cursor
	}
	missing := 0
	for id, c := range acked {
		got, ok := seen[id]
		switch {
		case !ok:
			missing++
			if missing <= 5 {
				t.Errorf("%s: acknowledged event %s (cursor %s) is missing", what, id, c)
			}
		case got != c:
			t.Errorf("%s: event %s has cursor %s, acknowledged with %s", what, id, got, c)
		}
	}
	if missing > 0 {
		t.Fatalf("%s: %d of %d acknowledged events missing", what, missing, len(acked))
	}
}

// tailAcrossNodes runs `evtctl tail` on each node in turn, each run going on from the
// checkpoint the one before left (the first from the start), and returns what the runs
// wrote, in order. A run is stopped with SIGINT once it has written 200 events; before the
// last one is, halt stops the events coming in and says how many there are, and the tail
// catches up with them.
func tailAcrossNodes(t *testing.T, nodes []string, halt func() int) []tailLine {
	t.Helper()
	dir := t.TempDir()
	cp := dir + "/cp.json"
	var lines []tailLine
	for i, node := range nodes {
		out := fmt.Sprintf("%s/tail%d.jsonl", dir, i)
		args := []string{"--node", node, "--checkpoint", cp}
		if i == 0 {
			args = append(args, "--from-start")
		}
		tail := startTail(t, out, args...)
		natstest.WaitUntil(t, 20*time.Second, "the tail writes events", func() bool { return len(readTail(t, out)) >= 200 })
		if i == len(nodes)-1 {
			total := halt()
			natstest.WaitUntil(t, 20*time.Second, "the tail catches up", func() bool { return len(lines)+len(readTail(t, out)) >= total })
		}
		if err := tail.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		_ = tail.Wait()
		lines = append(lines, readTail(t, out)...)
	}
	return lines
}

// TestNATSTailSwitchesNodes runs two nodes on one stream of a NATS server. While events
// stream in through the first, a tail on the second is stopped mid-stream and resumed from
// its checkpoint on the first, then moved back: together its runs write every event
// exactly once, in order, with the cursors the producer was given.
func TestNATSTailSwitchesNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts NATS and child processes")
	}
	url := natstest.Solo(t).ClientURL()
	_, n1 := startServe(t, "--store", url, "--nats-stream", "SWITCH")
	_, n2 := startServe(t, "--store", url, "--nats-stream", "SWITCH")

	p := newProducer()
	p.run(t, n1, 1)
	p.run(t, n1, 2)
	lines := tailAcrossNodes(t, []string{n2, n1, n2}, func() int { p.halt(); return len(p.acked) })
	checkOnce(t, "the tail across nodes", lines, p.acked)
	checkOnce(t, "a replay from the second node", replayAll(t, n2), p.acked)
	t.Logf("%d events acknowledged; the tail wrote them across three runs on two nodes", len(p.acked))
}

// TestNATSClusterLeaderStop stops the server leading the stream, in a JetStream cluster of
// three in-process servers, while events flow: see failStreamLeader.
func TestNATSClusterLeaderStop(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS cluster and child processes")
	}
	g := natstest.NewInProcess(t, natstest.InProcessConfig{Servers: 3})
	failStreamLeader(t, g.URL(), "HA", "stopped", func(name string) {
		for i := range 3 {
			if g.Name(i) == name {
				g.Stop(i)
			}
		}
	})
}

// failStreamLeader runs two nodes on stream, replicated three times in the JetStream
// cluster of three servers at url. While producers send events to the first node and a
// tail follows the second, fail makes the server leading the stream fail (it is given its
// name; how says what it does to it): every acknowledged event is in the log exactly once,
// ingest and the tail go on once a new leader is elected, and the tail writes every event
// exactly once.
func failStreamLeader(t *testing.T, url, stream, how string, fail func(name string)) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := natsjs.New(nc)
	urls := strings.Split(url, ",")
	_, a := startServe(t, "--store", urls[0]+","+urls[1]+","+urls[2], "--nats-stream", stream, "--nats-replicas", "3", "--nats-timeout", "2s")
	_, b := startServe(t, "--store", urls[1]+","+urls[2]+","+urls[0], "--nats-stream", stream, "--nats-replicas", "3", "--nats-timeout", "2s")
	out := t.TempDir() + "/tail.jsonl"
	startTail(t, out, "--node", b, "--from-start", "--wait", "2s")

	p := newProducer()
	for w := range 3 {
		p.run(t, a, w)
	}
	natstest.WaitUntil(t, 20*time.Second, "300 events are acknowledged", func() bool { return p.n.Load() >= 300 })
	natstest.WaitUntil(t, 20*time.Second, "the tail writes events", func() bool { return len(readTail(t, out)) >= 100 })

	leaderName := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		str, err := js.Stream(ctx, stream)
		if err != nil {
			return ""
		}
		if ci := str.CachedInfo().Cluster; ci != nil {
			return ci.Leader
		}
		return ""
	}
	var leader string
	natstest.WaitUntil(t, 10*time.Second, "the stream has a leader", func() bool { leader = leaderName(); return leader != "" })
	failedAt := p.n.Load()
	fail(leader)
	t.Logf("%s the stream leader %s after %d events", how, leader, failedAt)

	natstest.WaitUntil(t, 40*time.Second, "300 more events are acknowledged after the leader failed", func() bool { return p.n.Load() >= failedAt+300 })
	p.halt()
	acked := p.acked
	// Should the tail not catch up, say whether the node it follows has the events (a tail
	// that stopped asking) or not (a node whose reads stalled).
	for deadline := time.Now().Add(30 * time.Second); len(readTail(t, out)) < len(acked); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("within 30s the tail wrote %d of the %d acknowledged events; a replay from the node it follows holds %d, from the other %d",
				len(readTail(t, out)), len(acked), len(replayAll(t, b)), len(replayAll(t, a)))
		}
	}

	checkOnce(t, "a replay from the first node", replayAll(t, a), acked)
	checkOnce(t, "a replay from the second node", replayAll(t, b), acked)
	// The tail wrote every event, those acknowledged after the election included.
	tailed := readTail(t, out)
	checkOnce(t, "the tail", tailed, acked)
	t.Logf("%d events acknowledged (%d retried requests); new leader %s; the tail wrote %d",
		len(acked), p.retries.Load(), leaderName(), len(tailed))
}

// foreignPublisher publishes messages to a stream as another NATS program would (JSON with
// a Nats-Msg-Id, which a node serves as the event's id) until stopped, and records the
// stream sequence of each one stored.
type foreignPublisher struct {
	mu     sync.Mutex
	acked  map[string]uint64 // id → stream sequence
	stop   chan struct{}
	halted sync.Once
	wg     sync.WaitGroup
}

func startForeignPublisher(t *testing.T, url string) *foreignPublisher {
	p := &foreignPublisher{acked: map[string]uint64{}, stop: make(chan struct{})}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p.wg.Add(1)
	// A test that fails before it halts the publisher stops it on the way out, before the
	// server goes: a publish failing after the test ended would fail the whole package.
	t.Cleanup(func() { p.halt() })
	go func() {
		defer p.wg.Done()
		defer nc.Close()
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			default:
			}
			id := fmt.Sprintf("f-%d", i)
			m := nats.NewMsg([]string{"orders.eu.created", "orders.us.created"}[i%2])
			m.Header.Set("Nats-Msg-Id", id)
			m.Data = fmt.Appendf(nil, `{"order":%d}`, i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			a, err := js.PublishMsg(ctx, m)
			cancel()
			if err != nil {
				t.Errorf("publishing %s: %v", id, err)
				return
			}
			p.mu.Lock()
			p.acked[id] = a.Sequence
			p.mu.Unlock()
			if i%50 == 49 {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	return p
}

func (p *foreignPublisher) halt() map[string]uint64 {
	p.halted.Do(func() { close(p.stop) })
	p.wg.Wait()
	return p.acked
}

// TestNATSForeignTailSwitchesNodes runs two nodes on a stream evtctl did not write while
// another program publishes to it. A tail on the second node is stopped mid-stream, goes
// on from its checkpoint on the first, then back: together its runs write every message
// exactly once, in order, each with the stream sequence it was stored at.
func TestNATSForeignTailSwitchesNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts NATS and child processes")
	}
	url := natstest.Solo(t).ClientURL()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := natsjs.New(nc)
	if _, err := js.CreateStream(context.Background(), natsjs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	_, n1 := startServe(t, "--store", url, "--nats-stream", "ORDERS", "--nats-manage-stream=false")
	_, n2 := startServe(t, "--store", url, "--nats-stream", "ORDERS", "--nats-manage-stream=false")

	p := startForeignPublisher(t, url)
	lines := tailAcrossNodes(t, []string{n2, n1, n2}, func() int { return len(p.halt()) })
	acked := p.acked
	seen := map[string]bool{}
	var prev cursor.Cursor
	for i, l := range lines {
		c, err := cursor.Parse(l.cursor)
		if err != nil || !c.After(prev) {
			t.Fatalf("line %d: cursor %q out of order after %v", i, l.cursor, prev)
		}
		prev = c
		if seen[l.id] {
			t.Fatalf("message %s twice", l.id)
		}
		seen[l.id] = true
		if seq, ok := acked[l.id]; !ok || seq != c.Seq {
			t.Fatalf("line %d: message %s at cursor %v, stored at sequence %d", i, l.id, c, seq)
		}
	}
	if len(seen) != len(acked) {
		t.Fatalf("the tail wrote %d messages of %d published", len(seen), len(acked))
	}
	t.Logf("%d messages published by another program; the tail wrote them across three runs on two nodes", len(acked))
}

// TestNATSClusterLeaderKill is TestNATSClusterLeaderStop with a crash: the servers run as
// child processes, and the one leading the stream is killed with SIGKILL.
func TestNATSClusterLeaderKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS cluster and child processes")
	}
	srvs := natstest.StartCluster(t, natstest.Self(), 3)
	failStreamLeader(t, natstest.URLs(srvs), "CRASH", "killed (SIGKILL)", func(name string) {
		for _, s := range srvs {
			if s.Config.Name == name {
				s.Kill()
			}
		}
	})
}

// testPKI is a certificate authority with a server certificate for 127.0.0.1 and a client
// certificate, as PEM files in a directory.
type testPKI struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, kind string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := key()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "evtctl test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		k := key()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	p := testPKI{ca: write("ca.pem", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

// natsAuthServer runs a nats-server child process with JetStream and extra configuration.
func natsAuthServer(t *testing.T, extra string) *natstest.Server {
	t.Helper()
	return natstest.Start(t, natstest.Self(), natstest.Config{Extra: extra})
}

// serveFails runs serve, which must fail at start, and returns what it wrote to stderr.
func serveFails(t *testing.T, args ...string) string {
	t.Helper()
	return serveFailsEnv(t, nil, args...)
}

// serveFailsEnv is serveFails with env added to the node's environment.
func serveFailsEnv(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(append(os.Environ(), "EVTCTL_TEST_AS_MAIN=1"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("serve %v exited 0", args)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("serve %v did not fail within 30s: %s", args, stderr.String())
	}
	return stderr.String()
}

// roundTrip sends an event to a node and reads it back.
func roundTrip(t *testing.T, node string) {
	t.Helper()
	body := `{"specversion":"1.0","id":"auth-1","source":"/auth","type":"org.example.auth.v1","data":{"ok":true}}`
	resp, err := http.Post(node+"/events", "application/cloudevents+json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ingest answered %d: %s", resp.StatusCode, reply)
	}
	lines := replayAll(t, node)
	if len(lines) != 1 || lines[0].id != "auth-1" {
		t.Fatalf("read back %+v", lines)
	}
}

// The NATS connection options of serve against servers configured for them: TLS with a
// private CA and client certificates, an NKey, a credentials file (JWT) of an operator's
// account, a user and password, and a token (the secrets from the environment).
func TestNATSAuthOptions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts NATS servers and child processes")
	}
	t.Run("tls", func(t *testing.T) {
		pki := newTestPKI(t)
		srv := natsAuthServer(t, fmt.Sprintf("tls {\n cert_file: %q\n key_file: %q\n ca_file: %q\n verify: true\n}\n", pki.serverCert, pki.serverKey, pki.ca))
		url := "tls://" + strings.TrimPrefix(srv.URL(), "nats://")
		_, node := startServe(t, "--store", url, "--nats-ca", pki.ca, "--nats-cert", pki.clientCert, "--nats-key", pki.clientKey)
		roundTrip(t, node)
		// Without a client certificate the server refuses the connection; without the CA
		// the node does not trust the server.
		// (The server's refusal reaches the client as an alert or as the connection closed.)
		// The refusals come at once; the timeout only bounds a handshake on a busy machine.
		if msg := serveFails(t, "--store", url, "--nats-ca", pki.ca, "--nats-timeout", "10s"); !strings.Contains(msg, "certificate required") && !strings.Contains(msg, "tls error") {
			t.Fatalf("without a client certificate: %s", msg)
		}
		if msg := serveFails(t, "--store", url, "--nats-cert", pki.clientCert, "--nats-key", pki.clientKey, "--nats-timeout", "10s"); !strings.Contains(msg, "certificate signed by unknown authority") {
			t.Fatalf("without the CA: %s", msg)
		}
	})
	t.Run("nkey", func(t *testing.T) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		seedFile := filepath.Join(t.TempDir(), "user.nk")
		if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
			t.Fatal(err)
		}
		srv := natsAuthServer(t, fmt.Sprintf("authorization {\n users: [ { nkey: %q } ]\n}\n", pub))
		_, node := startServe(t, "--store", srv.URL(), "--nats-nkey", seedFile)
		roundTrip(t, node)
		other, _ := nkeys.CreateUser()
		otherSeed, _ := other.Seed()
		otherFile := filepath.Join(t.TempDir(), "other.nk")
		if err := os.WriteFile(otherFile, otherSeed, 0o600); err != nil {
			t.Fatal(err)
		}
		if msg := serveFails(t, "--store", srv.URL(), "--nats-nkey", otherFile); !strings.Contains(strings.ToLower(msg), "authorization violation") {
			t.Fatalf("an unknown NKey: %s", msg)
		}
	})
	t.Run("creds", func(t *testing.T) {
		okp, _ := nkeys.CreateOperator()
		opub, _ := okp.PublicKey()
		skp, _ := nkeys.CreateAccount() // the system account JetStream needs
		spub, _ := skp.PublicKey()
		sjwt, err := jwt.NewAccountClaims(spub).Encode(okp)
		if err != nil {
			t.Fatal(err)
		}
		oc := jwt.NewOperatorClaims(opub)
		oc.SystemAccount = spub
		ojwt, err := oc.Encode(okp)
		if err != nil {
			t.Fatal(err)
		}
		akp, _ := nkeys.CreateAccount()
		apub, _ := akp.PublicKey()
		ac := jwt.NewAccountClaims(apub)
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		ajwt, err := ac.Encode(okp)
		if err != nil {
			t.Fatal(err)
		}
		ukp, _ := nkeys.CreateUser()
		upub, _ := ukp.PublicKey()
		uc := jwt.NewUserClaims(upub)
		uc.IssuerAccount = apub
		ujwt, err := uc.Encode(akp)
		if err != nil {
			t.Fatal(err)
		}
		useed, _ := ukp.Seed()
		creds, err := jwt.FormatUserConfig(ujwt, useed)
		if err != nil {
			t.Fatal(err)
		}
		credsFile := filepath.Join(t.TempDir(), "evtctl.creds")
		if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
			t.Fatal(err)
		}
		srv := natsAuthServer(t, fmt.Sprintf("operator: %q\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n %s: %q\n %s: %q\n}\n", ojwt, spub, spub, sjwt, apub, ajwt))
		_, node := startServe(t, "--store", srv.URL(), "--nats-creds", credsFile)
		roundTrip(t, node)
		if msg := serveFails(t, "--store", srv.URL()); !strings.Contains(strings.ToLower(msg), "authorization violation") {
			t.Fatalf("without credentials: %s", msg)
		}
	})
	t.Run("user-password-token", func(t *testing.T) {
		srv := natsAuthServer(t, "authorization {\n users: [ { user: evtctl, password: \"s3cr3t pass\" } ]\n}\n")
		_, node := startServeEnv(t, []string{"EVTCTL_NATS_PASSWORD=s3cr3t pass"}, "--store", srv.URL(), "--nats-user", "evtctl")
		roundTrip(t, node)
		if msg := serveFailsEnv(t, []string{"EVTCTL_NATS_PASSWORD=wrong"}, "--store", srv.URL(), "--nats-user", "evtctl"); !strings.Contains(strings.ToLower(msg), "authorization violation") || strings.Contains(msg, "wrong") {
			t.Fatalf("a wrong password: %s", msg)
		}
		tsrv := natsAuthServer(t, "authorization {\n token: \"t0ken\"\n}\n")
		_, node = startServeEnv(t, []string{"EVTCTL_NATS_TOKEN=t0ken"}, "--store", tsrv.URL())
		roundTrip(t, node)
	})
}
