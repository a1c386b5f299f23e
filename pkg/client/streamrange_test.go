package client

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/pkg/wire"
)

// cutter is a node whose streams are cut off: the first `cuts` streams lose their
// connection after `after` bytes of body, in the middle of a line.
type cutter struct {
	h     http.Handler
	mu    sync.Mutex
	cuts  int
	after int
	seen  []string // the after parameter of each stream
}

func (c *cutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != wire.PathStream {
		c.h.ServeHTTP(w, r)
		return
	}
	c.mu.Lock()
	c.seen = append(c.seen, r.URL.Query().Get("after"))
	cut := c.cuts > 0
	c.cuts--
	c.mu.Unlock()
	if !cut {
		c.h.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body))) // a promise the node breaks
	w.WriteHeader(rec.Code)
	n := min(c.after, len(body)-1)
	if i := bytes.IndexByte(body[n:], '\n'); i >= 0 {
		n += i / 2 // inside the line after the cut
	}
	w.Write(body[:n])
	w.(http.Flusher).Flush()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

// streamFixture is a log of n events served by an evtctl node with its stream, through h.
func streamFixture(t *testing.T, n int, cfg server.Config, wrap func(http.Handler) http.Handler) (*Client, *eventlog.Log, []string) {
	t.Helper()
	return streamFixtureRetaining(t, n, 0, cfg, wrap)
}

// streamFixtureRetaining is streamFixture with a log that keeps only the newest retain
// events (0: all).
func streamFixtureRetaining(t *testing.T, n, retain int, cfg server.Config, wrap func(http.Handler) http.Handler) (*Client, *eventlog.Log, []string) {
	t.Helper()
	log, err := eventlog.Open(eventlog.Options{Sync: eventlog.SyncNone, MaxItems: uint64(retain)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	cfg.Store = log
	srv := server.New(cfg)
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(srv)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	var all []string
	for len(all) < n {
		evs := events(min(100, n-len(all)), "Tx")
		for i := range evs {
			if i%3 == 0 {
				evs[i].Type = "NewBlock"
			}
			evs[i].Pad = 50 + i*7
		}
		entries := make([]eventlog.Entry, len(evs))
		for i, e := range evs {
			entries[i] = eventlog.Entry{Type: e.Type, Source: "/client-test", ID: fmt.Sprintf("ev-%d", e.N), JSON: cloudEventJSON(e)}
		}
		res, err := log.Append(context.Background(), entries)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			all = append(all, r.Cursor.String())
		}
	}
	return newTestClient(t, ts.URL), log, all
}

func collectRange(t *testing.T, c *Client, opts RangeOptions) ([]string, error) {
	t.Helper()
	var got []string
	err := c.Range(context.Background(), opts, func(items []Item) error {
		for _, it := range items {
			if !bytes.HasPrefix(it.Raw, []byte(`{"cursor":"`+it.Cursor+`"`)) || !bytes.HasSuffix(it.Raw, append(append([]byte(nil), it.Data...), '}')) {
				t.Errorf("item %s: Raw %q does not hold its cursor and data", it.Cursor, it.Raw)
			}
			got = append(got, strings.Clone(it.Cursor)) // the items' memory is reused
		}
		return nil
	})
	return got, err
}

// A stream cut off in the middle of a line is resumed after the last item delivered:
// every event is delivered once, in order.
func TestStreamRangeCut(t *testing.T) {
	cut := &cutter{cuts: 3, after: 40_000}
	c, _, all := streamFixture(t, 3000, server.Config{}, func(h http.Handler) http.Handler { cut.h = h; return cut })
	var retries []error
	got, err := collectRange(t, c, RangeOptions{PageSize: 1000, ReuseMemory: true, Backoff: fastBackoff,
		OnRetry: func(err error, _ int, _ time.Duration) { retries = append(retries, err) }})
	if err != nil {
		t.Fatal(err)
	}
	sameCursors(t, "after cuts", got, all)
	if len(retries) != 3 || len(cut.seen) != 4 {
		t.Errorf("%d retries, %d streams; want 3 and 4: %v", len(retries), len(cut.seen), retries)
	}
	for i := 1; i < len(cut.seen); i++ {
		if cut.seen[i] <= cut.seen[i-1] {
			t.Errorf("stream %d resumed after %q, not past %q", i, cut.seen[i], cut.seen[i-1])
		}
	}
}

// A filter whose work budget runs out ends a stream with more:true and where to resume; the
// client goes on from there and delivers every match once.
func TestStreamRangeResumesOnBudget(t *testing.T) {
	var streams int
	var mu sync.Mutex
	c, _, all := streamFixture(t, 2000, server.Config{ScanBudget: 300 << 10}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == wire.PathStream {
				mu.Lock()
				streams++
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	})
	got, err := collectRange(t, c, RangeOptions{Query: "tm.event = 'NewBlock'", PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, cur := range all {
		if i%100%3 == 0 {
			want = append(want, cur)
		}
	}
	sameCursors(t, "filtered", got, want)
	if streams < 3 {
		t.Errorf("%d streams: the budget should have stopped a few", streams)
	}
	// The same bounded, with a limit.
	got, err = collectRange(t, c, RangeOptions{Query: "tm.event = 'NewBlock'", From: Position{Cursor: all[149]}, To: Position{Cursor: all[1500]}, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var bounded []string
	for _, cur := range want {
		if cur > all[149] && cur <= all[1500] && len(bounded) < 50 {
			bounded = append(bounded, cur)
		}
	}
	sameCursors(t, "filtered, bounded, limited", got, bounded)
}

// Events lost after the range's start are reported before the first event, as when paging.
func TestStreamRangeGap(t *testing.T) {
	c, _, all := streamFixtureRetaining(t, 500, 100, server.Config{}, nil)
	var gaps []Gap
	var got []string
	err := c.Range(context.Background(), RangeOptions{From: Position{Cursor: all[199]}, OnGap: func(g Gap) error {
		if len(got) > 0 {
			t.Error("the gap was reported after events")
		}
		gaps = append(gaps, g)
		return nil
	}}, func(items []Item) error {
		got = append(got, cursorsOf(items)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sameCursors(t, "after the gap", got, all[400:])
	if len(gaps) != 1 || gaps[0].After != all[199] || gaps[0].Oldest != all[400] {
		t.Errorf("gaps %+v, want one after %s with the log starting at %s", gaps, all[199], all[400])
	}
	// No gap from a cursor whose next event is the oldest.
	gaps = nil
	got = nil
	if err := c.Range(context.Background(), RangeOptions{From: Position{Cursor: all[399]}, OnGap: func(g Gap) error { gaps = append(gaps, g); return nil }}, func(items []Item) error {
		got = append(got, cursorsOf(items)...)
		return nil
	}); err != nil || len(gaps) > 0 {
		t.Errorf("from the cursor before the oldest: %v, gaps %+v", err, gaps)
	}
	sameCursors(t, "from the cursor before the oldest", got, all[400:])
}

// A node that advertises its stream but does not serve it (a proxy in front that knows only
// the events method) is paged.
func TestStreamRangeFallsBackToPages(t *testing.T) {
	c, _, all := streamFixture(t, 300, server.Config{}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == wire.PathStream {
				http.NotFound(w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	got, err := collectRange(t, c, RangeOptions{PageSize: 70})
	if err != nil {
		t.Fatal(err)
	}
	sameCursors(t, "paged", got, all)
}

func FuzzStreamItem(f *testing.F) {
	f.Add([]byte(`{"cursor":"18ea6461241d1dcb-0000000000000001","event":"a.b","data":{"x":1}}`))
	f.Add([]byte(`{"cursor":"18ea6461241d1dcb-0000000000000001","event":"a\"\\","data":"}"}`))
	f.Add([]byte(`{"cursor":"18ea6461241d1dcb-0001","event":"","data":null}`))
	f.Add([]byte(`{"end":{"more":true,"resume":"18ea6461241d1dcb-0000000000000001","newest":""}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if it, ok := parseStreamItem(line); ok {
			if !bytes.Equal(it.Raw, line) || !cursorText([]byte(it.Cursor)) {
				t.Fatalf("accepted %q as %+v", line, it)
			}
			// The parts make the line again.
			ev := line[len(itemCursor)+len(it.Cursor)+len(itemEvent) : len(line)-len(it.Data)-len(itemData)-1]
			rebuilt := string(itemCursor) + it.Cursor + `"` + `,"event":` + string(ev) + itemData + string(it.Data) + "}"
			if rebuilt != string(line) {
				t.Fatalf("parts of %q make %q", line, rebuilt)
			}
		}
		parseStreamEnd(line)
		var sc streamScanner
		if bytes.HasSuffix(line, []byte("\n")) {
			sc.parse(line, nil)
		}
	})
}

func TestStreamItemParts(t *testing.T) {
	for _, tc := range []struct {
		line        string
		ok          bool
		event, data string
	}{
		{`{"cursor":"18ea6461241d1dcb-0000000000000001","event":"a.b","data":{"x":1}}`, true, "a.b", `{"x":1}`},
		{`{"cursor":"18ea6461241d1dcb-0000000000000001","event":"q\"\\\u00e9","data":"}"}`, true, "q\"\\é", `"}"`},
		{`{"cursor":"18ea6461241d1dcb-0000000000000001","event":"a\\","data":[]}`, true, `a\`, `[]`},
		{`{"cursor":"18EA6461241D1DCB-0000000000000001","event":"a","data":1}`, false, "", ""},
		{`{"cursor":"18ea6461241d1dcb-01","event":"a","data":1}`, false, "", ""},
		{`{"cursor":"18ea6461241d1dcb-0000000000000001","event":"a","data":}`, false, "", ""},
		{`{"cursor":"18ea6461241d1dcb-0000000000000001","event":"a,"data":1}`, false, "", ""},
		{`{"cursor":"18ea6461241d1dcb-0000000000000001","data":1,"event":"a"}`, false, "", ""},
		{`{"end":{"more":false,"newest":""}}`, false, "", ""},
	} {
		it, ok := parseStreamItem([]byte(tc.line))
		if ok != tc.ok || ok && (it.Event != tc.event || string(it.Data) != tc.data) {
			t.Errorf("%s: ok %v event %q data %q; want %v %q %q", tc.line, ok, it.Event, it.Data, tc.ok, tc.event, tc.data)
		}
	}
	var sc streamScanner
	_, _, err := sc.parse([]byte(`{"cursor":"18ea6461241d1dcb-0000000000000002","event":"a","data":1}`+"\n"+`{"cursor":"18ea6461241d1dcb-0000000000000001","event":"a","data":1}`+"\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "does not follow") {
		t.Errorf("cursors out of order: %v", err)
	}
	_, end, err := sc.parse([]byte(`{"end":{"more":true,"resume":"18ea6461241d1dcb-0000000000000009","newest":"18ea6461241d1dcb-0000000000000010"}}`+"\n"), nil)
	if err != nil || end == nil || !end.more || end.resume != "18ea6461241d1dcb-0000000000000009" {
		t.Errorf("end line: %+v, %v", end, err)
	}
	_, _, err = sc.parse([]byte(`{"end":{"more":false,"newest":""}}`+"\n"+`{"cursor":"18ea6461241d1dcb-0000000000000003","event":"a","data":1}`+"\n"), nil)
	if err == nil {
		t.Error("a line after the end was taken")
	}
}
