// Package bench measures a node from outside, as operators and users meet it: ingest
// throughput, tail latency, catch-up (replay) and the cost of idle long-polling clients.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/wire"
)

// Node kinds, as found by Inspect; a node read through another source than the events
// method has the kind its source names (a CometBFT node's: "cometbft").
const (
	KindEvtctl     = "evtctl"
	KindTendermint = "tendermint"
	KindUnknown    = "unknown"
)

// Target is the node under test.
type Target struct {
	URL         string // base URL, e.g. http://127.0.0.1:7480
	Token       string // bearer token for reading (events, metrics)
	IngestToken string // bearer token for POST /events; default Token
	CAFile      string
	Insecure    bool
	// MetricsURL is where the node's Prometheus metrics are; default URL + "/metrics".
	MetricsURL string
	// Embedded describes a node started for the run: "in-process" or "child process"; ""
	// for a node given with --node.
	Embedded string
	// Durability describes an embedded node's log ("durable, fsync always", "memory", …).
	Durability string
	// Store is an in-process node's log: replay loads its events straight into it.
	Store eventlog.Store
}

func (t Target) ingestToken() string {
	if t.IngestToken != "" {
		return t.IngestToken
	}
	return t.Token
}

func (t Target) metricsURL() string {
	if t.MetricsURL != "" {
		return t.MetricsURL
	}
	return t.URL + wire.PathMetrics
}

// Common are the settings every bench takes.
type Common struct {
	Target  Target
	Version string // evtctl's version, for the report
	// Progress, when set, is told now and then how the run is going (one line, no newline).
	Progress func(line string)
}

func (c Common) progress(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(format, args...))
	}
}

// Report is what a bench measured, and under which conditions.
type Report struct {
	Bench   string
	Partial bool // the run was interrupted: figures cover only what ran
	Env     Environment
	Params  []Value
	Figures []Value
	Notes   []string
}

// Value is a named quantity with its unit. Figures carry a float64 Value; parameters may
// also be text (then Unit is empty).
type Value struct {
	Name  string
	Value any // float64 or string
	Unit  string
	Goal  *Goal // a figure's target, if the project has one
}

// Goal is a performance target for a figure.
type Goal struct {
	Op    string // ">=" or "<="
	Value float64
}

// Met reports whether v meets the goal.
func (g Goal) Met(v float64) bool {
	if g.Op == "<=" {
		return v <= g.Value
	}
	return v >= g.Value
}

func (r *Report) param(name string, v any, unit string) {
	if f, ok := v.(int); ok {
		v = float64(f)
	}
	if d, ok := v.(time.Duration); ok {
		v = d.Seconds()
	}
	r.Params = append(r.Params, Value{Name: name, Value: v, Unit: unit})
}

func (r *Report) figure(name string, v float64, unit string) {
	r.Figures = append(r.Figures, Value{Name: name, Value: v, Unit: unit})
}

func (r *Report) goal(name string, v float64, unit, op string, target float64) {
	r.Figures = append(r.Figures, Value{Name: name, Value: v, Unit: unit, Goal: &Goal{Op: op, Value: target}})
}

func (r *Report) latencies(prefix string, s *samples) {
	for _, q := range []struct {
		name string
		p    float64
	}{{"p50", 50}, {"p90", 90}, {"p99", 99}} {
		r.figure(prefix+"_"+q.name, ms(s.percentile(q.p)), "ms")
	}
	r.figure(prefix+"_max", ms(s.max()), "ms")
}

func (r *Report) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// Environment describes where and when a bench ran.
type Environment struct {
	EvtctlVersion string    `json:"evtctl_version"`
	GoVersion     string    `json:"go_version"`
	GOOS          string    `json:"goos"`
	GOARCH        string    `json:"goarch"`
	CPUs          int       `json:"cpus"`
	GOMAXPROCS    int       `json:"gomaxprocs"`
	NodeURL       string    `json:"node_url"`
	NodeKind      string    `json:"node_kind"`
	NodeVersion   string    `json:"node_version,omitempty"`
	Embedded      string    `json:"embedded,omitempty"`
	Durability    string    `json:"durability,omitempty"`
	Started       time.Time `json:"started"`
	ElapsedS      float64   `json:"elapsed_s"`
	// Load averages over one minute at the start and at the end of the run (Linux only),
	// to tell a quiet machine from a busy one.
	LoadBefore *float64 `json:"load_average_1m_before,omitempty"`
	LoadAfter  *float64 `json:"load_average_1m_after,omitempty"`
}

// begin starts a report: it inspects the node and notes the environment.
func begin(ctx context.Context, bench string, c Common) (*Report, NodeInfo) {
	info := Inspect(ctx, c.Target)
	r := &Report{Bench: bench, Env: Environment{
		EvtctlVersion: c.Version,
		GoVersion:     runtime.Version(),
		GOOS:          runtime.GOOS,
		GOARCH:        runtime.GOARCH,
		CPUs:          runtime.NumCPU(),
		GOMAXPROCS:    runtime.GOMAXPROCS(0),
		NodeURL:       c.Target.URL,
		NodeKind:      info.Kind,
		NodeVersion:   info.Version,
		Embedded:      c.Target.Embedded,
		Durability:    c.Target.Durability,
		Started:       time.Now().UTC().Truncate(time.Millisecond),
		LoadBefore:    loadAverage(),
	}}
	if info.How != "" {
		r.note("node: %s", info.How)
	}
	return r, info
}

// finish completes the environment and marks an interrupted run.
func (r *Report) finish(ctx context.Context) {
	r.Env.ElapsedS = round3(time.Since(r.Env.Started).Seconds())
	r.Env.LoadAfter = loadAverage()
	if ctx.Err() != nil {
		r.Partial = true
	}
}

func round3(v float64) float64 {
	return float64(int64(v*1000+0.5)) / 1000
}

// newRunID returns a short random name for this run, used in event ids and sources so
// that a run's events never collide with another's (an evtctl node drops repeated ids).
func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newClient returns an events client of the target with a transport set up as the
// client's default one (which tail and replay use), and a function that closes its idle
// connections.
func newClient(t Target, version string) (*client.Client, func(), error) {
	tr, err := newTransport(t, 16)
	if err != nil {
		return nil, nil, err
	}
	tr.MaxIdleConns = http.DefaultTransport.(*http.Transport).MaxIdleConns
	tr.MaxIdleConnsPerHost = 16
	tr.ReadBufferSize = 256 << 10 // as the client's own: replay pages run to megabytes
	c, err := client.New(client.Options{Node: t.URL, Token: t.Token, UserAgent: userAgent(version), HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, nil, err
	}
	return c, tr.CloseIdleConnections, nil
}

func userAgent(version string) string {
	if version == "" {
		return "evtctl-bench"
	}
	return "evtctl-bench/" + version
}

// newTransport returns a keep-alive HTTP/1.1 transport for conns concurrent requests.
func newTransport(t Target, conns int) (*http.Transport, error) {
	cfg, err := client.TLSConfig(t.CAFile, t.Insecure)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = conns + 4
	tr.TLSClientConfig = cfg
	tr.ForceAttemptHTTP2 = false
	tr.ResponseHeaderTimeout = 0
	return tr, nil
}

// interrupted reports whether err is only the run's context ending.
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ctx.Err()))
}

// notifier tells waiters that something changed: changed returns a channel that signal
// closes (and replaces). The zero value is ready to use.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (n *notifier) signal() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
	}
	n.ch = make(chan struct{})
	n.mu.Unlock()
}

func (n *notifier) changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}
