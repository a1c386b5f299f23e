package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/cevent"
	"github.com/evtctl/evtctl/pkg/client"
)

func TestSamplesPercentiles(t *testing.T) {
	var s samples
	if s.percentile(50) != 0 || s.max() != 0 {
		t.Fatal("empty samples must answer 0")
	}
	for i := 100; i >= 1; i-- { // added out of order
		s.add(time.Duration(i) * time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 50 * time.Millisecond, 90: 90 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond, 0.1: time.Millisecond} {
		if got := s.percentile(p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	s.add(time.Hour)
	if s.max() != time.Hour || s.len() != 101 {
		t.Errorf("after one more sample: max %v, %d samples", s.max(), s.len())
	}
}

func TestEventMakerSizesIDsAndRareShare(t *testing.T) {
	for _, size := range []int{MinEventSize(), DefaultEventSize, 1000, 4096} {
		m, err := newEventMaker(size, "0123abcd")
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		seen := map[string]bool{}
		rareN := 0
		var buf []byte
		for seq := uint64(1); seq <= 300; seq++ {
			buf = m.appendEvent(buf[:0], seq)
			if len(buf) != size {
				t.Fatalf("size %d: event %d has %d bytes", size, seq, len(buf))
			}
			ev, err := cevent.DecodeStructured(buf, cevent.Limits{})
			if err != nil {
				t.Fatalf("size %d: event %d is not a valid CloudEvent: %v\n%s", size, seq, err, buf)
			}
			if ev.ID != m.id(seq) || seen[ev.ID] {
				t.Fatalf("event %d has id %q (want %q, unique)", seq, ev.ID, m.id(seq))
			}
			seen[ev.ID] = true
			if got, ok := m.seqOf(ev.ID); !ok || got != seq {
				t.Fatalf("seqOf(%q) = %d, %v", ev.ID, got, ok)
			}
			if ev.Type == RareType {
				rareN++
			} else if ev.Type != CommonType {
				t.Fatalf("event %d has type %q", seq, ev.Type)
			}
		}
		if rareN != 3 {
			t.Errorf("size %d: %d rare events in 300, want 3", size, rareN)
		}
	}
	if _, err := newEventMaker(MinEventSize()-1, "0123abcd"); err == nil {
		t.Error("an event below the minimum size was made")
	}
	m, _ := newEventMaker(DefaultEventSize, "0123abcd")
	batch := m.appendBatch(nil, 41, 3)
	if !gjson.ValidBytes(batch) || gjson.GetBytes(batch, "#").Int() != 3 || gjson.GetBytes(batch, "2.id").String() != m.id(43) {
		t.Errorf("batch is not the three events 41..43: %.200s", batch)
	}
	for _, id := range []string{"", "0123abcd-zz", "ffffffff-0000000000000001", "0123abcd-000000000000000g"} {
		if _, ok := m.seqOf(id); ok {
			t.Errorf("seqOf(%q) accepted an id this maker did not make", id)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	m := parseMetrics(`# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.6343040e+07
evtctl_http_requests_total{endpoint="rpc",code="200"} 42
evtctl_waiting_readers 3 1700000000000
go_goroutines	12
broken_line
not_a_number NaNish
`)
	for series, want := range map[string]float64{
		"process_resident_memory_bytes":                         16343040,
		`evtctl_http_requests_total{endpoint="rpc",code="200"}`: 42,
		"evtctl_waiting_readers":                                3,
		"go_goroutines":                                         12,
	} {
		if got, ok := m.value(series); !ok || got != want {
			t.Errorf("%s = %v, %v; want %v", series, got, ok, want)
		}
	}
	if len(m) != 4 {
		t.Errorf("parsed %d series, want 4: %v", len(m), m)
	}
}

// A Tendermint node's recorded reply is recognised by its shape; an evtctl node by its
// /healthz and its reply; a server that is neither is unknown.
func TestInspectKinds(t *testing.T) {
	capture, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tendermint-captures", "post_tx_page1.json"))
	if err != nil {
		t.Fatal(err)
	}
	tm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Write(capture)
	}))
	defer tm.Close()
	if info := Inspect(context.Background(), Target{URL: tm.URL}); info.Kind != KindTendermint || info.Newest != "18ea61a27c39abd8-00c7" {
		t.Errorf("recorded Tendermint reply: %+v", info)
	}
	n := newTestNode(t, 0)
	if info := Inspect(context.Background(), Target{URL: n.URL}); info.Kind != KindEvtctl || info.Version != "test-version" || info.Err != nil {
		t.Errorf("evtctl node: %+v", info)
	}
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	if info := Inspect(context.Background(), Target{URL: other.URL}); info.Kind != KindUnknown || info.Err == nil {
		t.Errorf("a server without the events method: %+v", info)
	}
}

// The JSON report is one object: every figure has a number and a unit, a goal says whether
// it is met, and the table shows every figure.
func TestReportOutput(t *testing.T) {
	r := &Report{Bench: "ingest", Env: Environment{NodeKind: KindEvtctl, NodeURL: "http://127.0.0.1:1", Started: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}}
	r.param("producers", 8, "connections")
	r.param("mode", "batch", "")
	r.param("duration", 10*time.Second, "s")
	r.goal("events_per_second", 160000.5, "events/s", ">=", 150000)
	r.goal("latency_p99", 2.5, "ms", "<=", 2)
	r.figure("ack_p50", 0.0012345678, "ms")
	r.note("a note with <html> & friends")
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Bench       string
		Partial     bool
		Environment map[string]any
		Parameters  map[string]struct {
			Value any
			Unit  string
		}
		Figures map[string]struct {
			Value float64
			Unit  string
			Goal  *struct {
				Op    string
				Value float64
				Met   bool
			}
		}
		Notes []string
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if got.Bench != "ingest" || got.Environment["node_kind"] != "evtctl" || got.Parameters["duration"].Value != 10.0 || got.Parameters["mode"].Value != "batch" {
		t.Errorf("report: %s", b.String())
	}
	if f := got.Figures["events_per_second"]; f.Unit != "events/s" || f.Goal == nil || !f.Goal.Met || f.Goal.Op != ">=" {
		t.Errorf("events_per_second: %+v", f)
	}
	if f := got.Figures["latency_p99"]; f.Goal == nil || f.Goal.Met {
		t.Errorf("latency_p99 2.5 ms must miss a goal of 2 ms: %+v", f)
	}
	if f := got.Figures["ack_p50"]; f.Value != 0.001235 || f.Unit != "ms" {
		t.Errorf("ack_p50: %+v", f)
	}
	if !strings.Contains(b.String(), `"op":">="`) || got.Notes[0] != "a note with <html> & friends" {
		t.Errorf("escaped text: %s", b.String())
	}
	b.Reset()
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"evtctl bench ingest", "events_per_second", "160,001", "≥ 150,000 met", "≤ 2 NOT met", "0.001", "producers 8 connections", "note: a note"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestLimitErrorSaysWhatToDo(t *testing.T) {
	msg := (&LimitError{Pollers: 10000, Need: 10064, Soft: 1024, Hard: 4096}).Error()
	for _, want := range []string{"10000 pollers", "10064 open files", "limit is 1024", "could not be raised to the hard limit of 4096", "at most 960 pollers with --pollers"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	msg = (&LimitError{Pollers: 10000, Need: 10064, Soft: 4096, Hard: 4096}).Error()
	for _, want := range []string{"limit is 4096 (the hard limit", "at most 4032 pollers"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if openFileLimitKnown && (!strings.Contains(msg, "ulimit -Hn 10064") || !strings.Contains(msg, "LimitNOFILE=10064")) {
		t.Errorf("%q does not say how to raise the limit", msg)
	}
}

func TestFirstCursor(t *testing.T) {
	const c = "0000000000000001-0000000000000002"
	for _, tc := range []struct {
		body string
		cur  string
		ok   bool
	}{
		{`{"jsonrpc":"2.0","id":12,"result":{"items":[{"cursor":"` + c + `","event":"t","data":{"cursor":"x"}}],"more":false,"oldest":"` + c + `","newest":"` + c + `"}}` + "\n", c, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"items":[],"more":false,"oldest":"","newest":""}}`, "", true},
		// Ascending: the newest item is the last, read by the full parse.
		{`{"jsonrpc":"2.0","id":1,"result":{"items":[{"cursor":"` + c + `","event":"t","data":{}}],"more":false,"oldest":"` + c + `","newest":"` + c + `","order":"asc"}}`, "", false},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Server busy"}}`, "", false},
		{`{"jsonrpc":"2.0","id":1,"result":{"items":[{"cursor":"17d9-0001","event":"t","data":{}}]}}`, "", false}, // another node's cursors
		{`{"id":1,"jsonrpc":"2.0","result":{"items":[]}}`, "", false},
		{``, "", false},
	} {
		cur, ok := firstCursor([]byte(tc.body))
		if cur != tc.cur || ok != tc.ok {
			t.Errorf("firstCursor(%s) = %q, %v; want %q, %v", tc.body, cur, ok, tc.cur, tc.ok)
		}
	}
}

// fakeCommitter stamps the items at cursors with commit times: the clock skew and losses a
// real chain on one machine does not show.
type fakeCommitter map[string][2]time.Time // cursor: commit time, the commit before

func (f fakeCommitter) Submit(context.Context, string, int) error { return nil }
func (f fakeCommitter) Mark(client.Item) string                   { return "" }
func (f fakeCommitter) Committed(_ context.Context, pos string) (time.Time, time.Duration, error) {
	c, ok := f[pos]
	if !ok {
		return time.Time{}, 0, fmt.Errorf("no item at %s", pos)
	}
	return c[0], c[0].Sub(c[1]), nil
}

// Against a log that stamps when it committed each item (a chain), latency runs from the
// commit to the tail's receipt; its goal is the run's block time plus the margin; an item
// received before its commit by the log's clock counts as 0 ms and is noted; a block's
// time counts once however many items it held.
func TestCommittedFigures(t *testing.T) {
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	com := fakeCommitter{
		"a": {ms(0), ms(-600)},   // a block 600 ms after the one before
		"b": {ms(700), ms(0)},    // 700 ms
		"c": {ms(1400), ms(700)}, // 700 ms
	}
	tr := newTracker(4)
	for seq, it := range []struct {
		cursor          string
		sent, ack, recv int
	}{1: {"a", -400, -399, 30}, 2: {"a", -300, -299, 50}, 3: {"b", 200, 201, 790}, 4: {"c", 900, 901, 1390}} {
		if seq == 0 {
			continue
		}
		tr.acked(uint64(seq), ms(it.sent), ms(it.ack))
		tr.received1(uint64(seq), ms(it.recv))
		tr.cursor[seq] = it.cursor
	}
	r := &Report{}
	r, err := committedFigures(context.Background(), r, LatencyConfig{Rate: 4, Concurrency: 1}, com, tr, 0, 4, 4, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := map[string]Value{}
	for _, v := range r.Figures {
		f[v.Name] = v
	}
	for name, want := range map[string]float64{
		"events_measured": 4, "blocks": 3, "block_time": 700, "latency_p50": 30, "latency_max": 90, "missing": 0,
	} {
		if got := f[name].Value.(float64); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if g := f["latency_p99"].Goal; g == nil || g.Value != 700+GoalCommitP99MarginMs {
		t.Errorf("latency_p99's goal: %+v, want the block time and %d ms", g, GoalCommitP99MarginMs)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "1 items were written out before their commit") {
		t.Errorf("the item received before its commit is not noted: %q", r.Notes)
	}

	// An item taken and never received fails the run, after its report.
	tr = newTracker(1)
	tr.acked(1, ms(0), ms(1))
	if _, err := committedFigures(context.Background(), &Report{}, LatencyConfig{Rate: 1, Concurrency: 1}, com, tr, 0, 1, 1, time.Second); err == nil || !strings.Contains(err.Error(), "1 items the log took never reached the tail") {
		t.Errorf("a missing item: %v", err)
	}
}
