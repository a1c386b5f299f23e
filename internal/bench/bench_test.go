package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/leaktest"
	"github.com/evtctl/evtctl/internal/server"
)

type testNode struct {
	URL   string
	Store *eventlog.Log
}

// newTestNode serves an in-memory evtctl node on a loopback port (pages of up to 1000, as
// evtctl serve); maxWaiters 0 means the server's default.
func newTestNode(t *testing.T, maxWaiters int) *testNode {
	t.Helper()
	return newTestNodeWith(t, maxWaiters, func(*http.Server) {})
}

// newTestNodeWith is newTestNode whose HTTP server setup configures; its listener is
// attached, as evtctl serve attaches its own.
func newTestNodeWith(t *testing.T, maxWaiters int, setup func(*http.Server)) *testNode {
	t.Helper()
	store, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Store: store, Version: "test-version", MaxItems: 1000, MaxWaiters: maxWaiters})
	ts := httptest.NewUnstartedServer(srv)
	setup(ts.Config)
	ts.Listener = srv.Attach(ts.Config, ts.Listener)
	ts.Start()
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		ts.Close()
		store.Close()
	})
	return &testNode{URL: ts.URL, Store: store}
}

// noLeaks: a bench must leave no goroutine or connection behind.
var noLeaks = leaktest.Check

// checkReport writes r as JSON, parses it back, checks that the environment is complete
// and that every figure has a number and a unit, and returns the figures by name.
func checkReport(t *testing.T, r *Report) map[string]float64 {
	t.Helper()
	if r == nil {
		t.Fatal("no report")
	}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Bench       string                     `json:"bench"`
		Partial     *bool                      `json:"partial"`
		Environment map[string]json.RawMessage `json:"environment"`
		Parameters  map[string]map[string]any  `json:"parameters"`
		Figures     map[string]map[string]any  `json:"figures"`
		Notes       []string                   `json:"notes"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, b.String())
	}
	if got.Bench != r.Bench || got.Partial == nil || got.Notes == nil || len(got.Parameters) == 0 {
		t.Errorf("report lacks bench, partial, notes or parameters: %s", b.String())
	}
	for _, k := range []string{"evtctl_version", "go_version", "goos", "goarch", "cpus", "gomaxprocs", "node_url", "node_kind", "started", "elapsed_s"} {
		if _, ok := got.Environment[k]; !ok {
			t.Errorf("environment lacks %s: %s", k, b.String())
		}
	}
	figures := map[string]float64{}
	for name, f := range got.Figures {
		v, ok := f["value"].(float64)
		unit, _ := f["unit"].(string)
		if !ok || unit == "" {
			t.Errorf("figure %s has no number or no unit: %v", name, f)
		}
		figures[name] = v
	}
	if len(figures) != len(r.Figures) {
		t.Errorf("%d figures in JSON, %d in the report (a name repeated?)", len(figures), len(r.Figures))
	}
	return figures
}

func want(t *testing.T, figures map[string]float64, name string, v float64) {
	t.Helper()
	got, ok := figures[name]
	if !ok {
		t.Errorf("no figure %s among %v", name, figures)
	} else if got != v {
		t.Errorf("%s = %v, want %v", name, got, v)
	}
}

func common(url string) Common { return Common{Target: Target{URL: url}, Version: "test"} }

func TestIngestCountsAddUp(t *testing.T) {
	n := newTestNode(t, 0)
	defer noLeaks(t)()
	r, err := Ingest(context.Background(), IngestConfig{Common: common(n.URL), Producers: 3, BatchSize: 40, Count: 500})
	if err != nil {
		t.Fatal(err)
	}
	f := checkReport(t, r)
	want(t, f, "events_acknowledged", 500)
	want(t, f, "events_acknowledged_total", 500)
	want(t, f, "node_appended_events", 500)
	want(t, f, "requests", 13) // 12 batches of 40 and one of 20
	if f["events_per_second"] <= 0 || f["megabytes_per_second"] <= 0 || f["ack_p50"] <= 0 || f["ack_max"] < f["ack_p99"] {
		t.Errorf("figures: %v", f)
	}
	if r.Partial || r.Env.NodeKind != KindEvtctl {
		t.Errorf("partial %v, kind %s", r.Partial, r.Env.NodeKind)
	}

	r, err = Ingest(context.Background(), IngestConfig{Common: common(n.URL), Producers: 2, Mode: "structured", Count: 25, EventSize: 700})
	if err != nil {
		t.Fatal(err)
	}
	f = checkReport(t, r)
	want(t, f, "events_acknowledged", 25)
	want(t, f, "requests", 25)
	if st := n.Store.Stats(); st.Appended != 525 || st.Duplicates != 0 {
		t.Errorf("the node appended %d events (%d duplicates), want 525 distinct", st.Appended, st.Duplicates)
	}
}

// Interrupted, a bench reports what it measured, marked partial.
func TestIngestInterruptedIsPartial(t *testing.T) {
	n := newTestNode(t, 0)
	defer noLeaks(t)()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for n.Store.Stats().Appended < 300 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	r, err := Ingest(ctx, IngestConfig{Common: common(n.URL), Producers: 2, BatchSize: 10, Duration: time.Hour})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	f := checkReport(t, r)
	if !r.Partial || f["events_acknowledged"] < 300-20 || f["node_appended_events"] < f["events_acknowledged_total"] {
		t.Errorf("partial %v, figures %v", r.Partial, f)
	}
}

func TestLatencyMatchesEveryEvent(t *testing.T) {
	n := newTestNode(t, 0)
	defer noLeaks(t)()
	r, err := Latency(context.Background(), LatencyConfig{Common: common(n.URL), Rate: 400, Count: 40, Warmup: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f := checkReport(t, r)
	want(t, f, "events_measured", 40)
	want(t, f, "missing", 0)
	want(t, f, "duplicates_received", 0)
	if f["latency_max"] < f["latency_p99"] || f["latency_p99"] < f["latency_p50"] || f["from_send_max"] <= 0 {
		t.Errorf("figures out of order: %v", f)
	}
	if fig, _ := figure(r, "latency_p99"); fig.Goal == nil || fig.Goal.Value != GoalTailP99Ms {
		t.Errorf("latency_p99 carries no goal: %+v", fig)
	}
	if got := n.Store.Stats().Appended; got != 60 { // 20 in the warm-up
		t.Errorf("the node appended %d events, want 60", got)
	}
}

// A tail that cannot read (here: no read token) ends the run at once with its error.
func TestLatencyTailFailureEndsRun(t *testing.T) {
	store, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Store: store, ReadToken: "read", IngestToken: "ingest"})
	ts := httptest.NewServer(srv)
	defer func() { srv.Shutdown(context.Background()); ts.Close(); store.Close() }()
	defer noLeaks(t)()
	c := common(ts.URL)
	c.Target.IngestToken = "ingest"
	_, err = Latency(context.Background(), LatencyConfig{Common: c, Rate: 100, Duration: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "the tail failed") || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v, want the tail's 401", err)
	}
}

func TestReplayLoadsAndCounts(t *testing.T) {
	n := newTestNode(t, 0)
	defer noLeaks(t)()
	// Someone else's events before: the replay covers only its own.
	if _, err := Ingest(context.Background(), IngestConfig{Common: common(n.URL), Producers: 1, Count: 7}); err != nil {
		t.Fatal(err)
	}
	c := common(n.URL)
	c.Target.Store = n.Store // loaded straight into the log
	r, err := Replay(context.Background(), ReplayConfig{Common: c, Events: 1000, PageSize: 300, Runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	f := checkReport(t, r)
	want(t, f, "events_replayed", 1000)
	want(t, f, "filtered_events_matched", 10)
	if f["bytes_written"] < 1000*DefaultEventSize || f["events_per_second_min"] > f["events_per_second_max"] || f["filtered_scan_events_per_second"] <= 0 {
		t.Errorf("figures: %v", f)
	}
	// Through the ingest endpoint, and a count that is not a multiple of 100.
	r, err = Replay(context.Background(), ReplayConfig{Common: common(n.URL), Events: 1250, PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	f = checkReport(t, r)
	want(t, f, "events_replayed", 1250)
	want(t, f, "filtered_events_matched", 12)
	if got := n.Store.Stats().Appended; got != 7+1000+1250 {
		t.Errorf("the node holds %d events", got)
	}
}

func TestTendermintNode(t *testing.T) {
	tm := newFakeTM(t)
	tm.add(250)
	defer noLeaks(t)()
	r, err := Replay(context.Background(), ReplayConfig{Common: common(tm.URL()), PageSize: 100, Query: "tm.event = 'Tx'"})
	if err != nil {
		t.Fatal(err)
	}
	f := checkReport(t, r)
	want(t, f, "events_replayed", 250)
	want(t, f, "filtered_events_matched", 250)
	if r.Env.NodeKind != KindTendermint || len(r.Notes) == 0 {
		t.Errorf("kind %s, notes %q", r.Env.NodeKind, r.Notes)
	}
	var ke *KindError
	for name, run := range map[string]func() error{
		"replay with events": func() error {
			_, err := Replay(context.Background(), ReplayConfig{Common: common(tm.URL()), Events: 10})
			return err
		},
		"latency": func() error {
			_, err := Latency(context.Background(), LatencyConfig{Common: common(tm.URL()), Count: 1})
			return err
		},
		"ingest": func() error {
			_, err := Ingest(context.Background(), IngestConfig{Common: common(tm.URL()), Count: 1})
			return err
		},
	} {
		if err := run(); !errors.As(err, &ke) || ke.Kind != KindTendermint {
			t.Errorf("%s against a Tendermint node: %v, want a KindError", name, err)
		}
	}
}

func TestPollersWakeEveryPoller(t *testing.T) {
	n := newTestNode(t, 100)
	defer noLeaks(t)()
	r, err := Pollers(context.Background(), PollersConfig{Common: common(n.URL), Pollers: 20, Rounds: 3, Connect: 4, Settle: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f := checkReport(t, r)
	want(t, f, "rounds_completed", 3)
	want(t, f, "wakes", 60)
	want(t, f, "node_waiting_readers", 20)
	want(t, f, "poller_errors", 0)
	for _, name := range []string{"node_rss_added", "node_heap_added", "wake_p50", "wake_p99", "wake_max", "wake_from_send_p99", "wake_spread_p99", "connect_seconds"} {
		if _, ok := f[name]; !ok {
			t.Errorf("no figure %s", name)
		}
	}
	if f["wake_max"] < f["wake_p99"] || f["wake_from_send_max"] < f["wake_max"] {
		t.Errorf("figures out of order: %v", f)
	}
	if got := n.Store.Stats().Appended; got != 3 {
		t.Errorf("the node appended %d events, want one per round", got)
	}
}

// Warm-up rounds wake every poller and count in no figure but their own.
func TestPollersWarmUp(t *testing.T) {
	n := newTestNode(t, 100)
	defer noLeaks(t)()
	r, err := Pollers(context.Background(), PollersConfig{Common: common(n.URL), Pollers: 20, Rounds: 3, Warmup: 2, Connect: 4, Settle: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f := checkReport(t, r)
	want(t, f, "rounds_completed", 3)
	want(t, f, "wakes", 60)
	want(t, f, "poller_errors", 0)
	if got := n.Store.Stats().Appended; got != 5 {
		t.Errorf("the node appended %d events, want one per round, warm-up rounds too", got)
	}
	warm := any(nil)
	for _, p := range r.Params {
		if p.Name == "warmup_rounds" {
			warm = p.Value
		}
	}
	if warm != 2.0 {
		t.Errorf("warmup_rounds parameter %v, want 2", warm)
	}
	// The test's node reports its process's CPU, as a node of its own does.
	for _, name := range []string{"node_cpu_per_round", "warmup_node_cpu_per_wake"} {
		if _, ok := f[name]; !ok {
			t.Errorf("no figure %s: %v", name, f)
		}
	}
}

// A node that closes every connection after its reply: pollers connect again, and no round
// misses a wake.
func TestPollersOnANodeThatCloses(t *testing.T) {
	n := newTestNodeWith(t, 100, func(hs *http.Server) { hs.SetKeepAlivesEnabled(false) })
	defer noLeaks(t)()
	r, err := Pollers(context.Background(), PollersConfig{Common: common(n.URL), Pollers: 10, Rounds: 3, Settle: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f := checkReport(t, r)
	want(t, f, "rounds_completed", 3)
	want(t, f, "wakes", 30)
	want(t, f, "poller_errors", 0)
}

// On a Tendermint node nothing is appended: each round waits for the node's next event, and
// only the spread of the wake-ups is measured.
func TestPollersTendermint(t *testing.T) {
	tm := newFakeTM(t)
	tm.add(3)
	defer noLeaks(t)()
	const K, rounds = 10, 2
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // the node's events: one each time every poller waits
		defer close(done)
		for range rounds {
			for tm.WaitingAtHead() < K {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
			tm.add(1)
		}
	}()
	r, err := Pollers(context.Background(), PollersConfig{Common: common(tm.URL()), Pollers: K, Rounds: rounds, Settle: time.Minute})
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	f := checkReport(t, r)
	want(t, f, "rounds_completed", rounds)
	want(t, f, "wakes", K*rounds)
	if _, ok := f["wake_p99"]; ok {
		t.Error("a wake time from an append that the bench did not make")
	}
	if _, ok := f["wake_spread_p99"]; !ok {
		t.Error("no wake spread")
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "memory is not available") {
		t.Errorf("notes %q do not say the memory is unknown", r.Notes)
	}
}

func TestPollersInterruptedIsPartial(t *testing.T) {
	tm := newFakeTM(t)
	defer noLeaks(t)()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for tm.Waiting() < 5 {
			time.Sleep(time.Millisecond)
		}
		cancel() // while the first round waits for an event that never comes
	}()
	r, err := Pollers(ctx, PollersConfig{Common: common(tm.URL()), Pollers: 5, Rounds: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	f := checkReport(t, r)
	want(t, f, "rounds_completed", 0)
	if !r.Partial {
		t.Error("not marked partial")
	}
}

func TestPollersRefusedByBusyNode(t *testing.T) {
	n := newTestNode(t, 5)
	defer noLeaks(t)()
	_, err := Pollers(context.Background(), PollersConfig{Common: common(n.URL), Pollers: 10, Rounds: 1, Settle: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "--max-waiters above 10") {
		t.Fatalf("err = %v, want the node's refusal and what to do", err)
	}
}

func TestPollersOverOpenFileLimit(t *testing.T) {
	if !openFileLimitKnown {
		t.Skip("no open-file limit here")
	}
	soft, _, err := raiseOpenFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	n := newTestNode(t, 0)
	defer noLeaks(t)()
	_, err = Pollers(context.Background(), PollersConfig{Common: common(n.URL), Pollers: int(soft)})
	var le *LimitError
	if !errors.As(err, &le) || le.Soft != soft || le.Need != soft+fdMargin {
		t.Fatalf("err = %v, want a LimitError", err)
	}
}

// figure returns the figure of r named name.
func figure(r *Report, name string) (Value, bool) {
	for _, f := range r.Figures {
		if f.Name == name {
			return f, true
		}
	}
	return Value{}, false
}
