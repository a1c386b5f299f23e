package forward

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/retry"
)

// step is one scripted reply of the test receiver.
type step struct {
	status int
	header map[string]string
	body   string
	hang   bool          // answer nothing until the sender gives up
	sleep  time.Duration // wait this long, then answer
}

// seen is one request the test receiver got.
type seen struct {
	at     time.Time
	host   string
	path   string
	method string
	id     string // ce-id, or the id of a structured event
	header http.Header
	body   string
	status int // what it answered; 0 for a hang
}

// receiver answers each event id from its script (the last step repeats; 204 when it has no
// script) and records every request.
type receiver struct {
	mu     sync.Mutex
	script map[string][]step
	count  map[string]int
	reqs   []seen
	// route, if set, may answer a request itself (redirects), before the script.
	route func(w http.ResponseWriter, r *http.Request) bool
}

func newReceiver() *receiver {
	return &receiver{script: map[string][]step{}, count: map[string]int{}}
}

func (rc *receiver) on(id string, steps ...step) *receiver {
	rc.script[id] = steps
	return rc
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if rc.route != nil && rc.route(w, r) {
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, seen{at: time.Now(), host: r.Host, path: r.URL.Path, method: r.Method, header: r.Header.Clone(), body: string(body), status: -1})
		rc.mu.Unlock()
		return
	}
	id := r.Header.Get("Ce-Id")
	if id == "" {
		id = jsonID(body)
	}
	rc.mu.Lock()
	n := rc.count[id]
	rc.count[id]++
	st := step{status: http.StatusNoContent}
	if s := rc.script[id]; len(s) > 0 {
		st = s[min(n, len(s)-1)]
	}
	i := len(rc.reqs)
	rc.reqs = append(rc.reqs, seen{at: time.Now(), host: r.Host, path: r.URL.Path, method: r.Method, id: id, header: r.Header.Clone(), body: string(body), status: st.status})
	rc.mu.Unlock()
	if st.hang {
		<-r.Context().Done()
		rc.mu.Lock()
		rc.reqs[i].status = 0
		rc.mu.Unlock()
		return
	}
	if st.sleep > 0 && retry.Sleep(r.Context(), st.sleep) != nil {
		return
	}
	for k, v := range st.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(st.status)
	io.WriteString(w, st.body)
}

func jsonID(body []byte) string {
	_, rest, ok := strings.Cut(string(body), `"id":"`)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, `"`)
	return id
}

// requests returns what the receiver saw, in order.
func (rc *receiver) requests() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seen(nil), rc.reqs...)
}

// ids returns the event ids of the requests answered by the script, in order.
func (rc *receiver) ids() []string {
	var out []string
	for _, s := range rc.requests() {
		if s.id != "" {
			out = append(out, s.id)
		}
	}
	return out
}

// inProcess is a transport that hands requests straight to a handler, so that tests can run
// in a synctest bubble, on its fake clock.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(strings.NewReader(string(b)))
	}
	req = req.Clone(req.Context()) // as a server sees it: with its Host
	req.Host = req.URL.Host
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.h.ServeHTTP(rec, req)
	}()
	select {
	case <-done:
		return rec.Result(), nil
	case <-req.Context().Done():
		<-done // the handler sees the same context and returns
		return nil, req.Context().Err()
	}
}

// cursorOf makes the cursor of the n-th event of a test log.
func cursorOf(n int) string { return fmt.Sprintf("18ea61a27c39abd8-%016x", n) }

// eventOf makes the n-th event of a test log, id "e<n>".
func eventOf(n int) Event {
	return Event{Cursor: cursorOf(n), Data: fmt.Appendf(nil,
		`{"specversion":"1.0","id":"e%d","source":"/test","type":"org.example.test.created.v1","datacontenttype":"application/json","data":{"n":%d}}`, n, n)}
}

// feed returns a closed channel holding events 1..n.
func feed(from, to int) <-chan Event {
	ch := make(chan Event, to-from+1)
	for i := from; i <= to; i++ {
		ch <- eventOf(i)
	}
	close(ch)
	return ch
}

// harness collects what a forwarder reports.
type harness struct {
	mu          sync.Mutex
	results     []Result
	checkpoints []string
	log         []string // results and checkpoints, in the order they happened
}

func (h *harness) onResult(r Result) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.results = append(h.results, r)
	h.log = append(h.log, string(r.Outcome)+" "+r.ID)
	return nil
}

func (h *harness) checkpoint(c string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkpoints = append(h.checkpoints, c)
	h.log = append(h.log, "checkpoint "+c)
	return nil
}

func (h *harness) outcomes(id string) []Outcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Outcome
	for _, r := range h.results {
		if r.ID == id {
			out = append(out, r.Outcome)
		}
	}
	return out
}

func (h *harness) lastCheckpoint() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.checkpoints) == 0 {
		return ""
	}
	return h.checkpoints[len(h.checkpoints)-1]
}

// options returns forwarder options that send to rc in process.
func (h *harness) options(rc http.Handler) Options {
	return Options{
		Target:     Target{URL: "http://receiver.test/hook", Mode: deliver.Binary, Client: &http.Client{Transport: inProcess{rc}}},
		OnResult:   h.onResult,
		Checkpoint: h.checkpoint,
	}
}

// forward runs a forwarder over src until it returns.
func forward(t *testing.T, ctx context.Context, opts Options, src <-chan Event) error {
	t.Helper()
	f, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return f.Run(ctx, src)
}
