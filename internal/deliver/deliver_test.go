package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/evtctl/evtctl/internal/inprocess"
	"github.com/evtctl/evtctl/internal/retry"
)

// request is what a scripted server received.
type request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// reply is one scripted answer.
type reply struct {
	status int
	header map[string]string
	body   string
	hang   bool // wait until the client gives up
}

// scripted serves replies in order (the last one repeats) and records requests.
type scripted struct {
	mu      sync.Mutex
	replies []reply
	reqs    []request
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, request{r.Method, r.URL.Path, r.Header.Clone(), body})
	rep := s.replies[min(len(s.reqs), len(s.replies))-1]
	s.mu.Unlock()
	if rep.hang {
		_ = retry.Sleep(r.Context(), 10*time.Second)
		return
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
}

func (s *scripted) requests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.reqs...)
}

func serve(t *testing.T, replies ...reply) (*scripted, *httptest.Server) {
	t.Helper()
	s := &scripted{replies: replies}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

// serveInProcess is serve for a test in a synctest bubble, where the sender's timeouts and
// waits run on a fake clock and take exactly as long as they should: the client it returns
// hands each request to the scripted server in the sending goroutine, with no connection,
// which a bubble cannot wait on. The target's URL is receiverURL.
func serveInProcess(replies ...reply) (*scripted, *http.Client) {
	s := &scripted{replies: replies}
	return s, &http.Client{Transport: inprocess.Transport{Handler: s}}
}

const receiverURL = "http://receiver.test/hook"

// retryLog records OnRetry calls.
type retryLog struct {
	mu    sync.Mutex
	calls []retryCall
}

type retryCall struct {
	attempt int
	delay   time.Duration
	err     error
}

func (l *retryLog) record(attempt int, delay time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, retryCall{attempt, delay, err})
}

func (l *retryLog) get() []retryCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]retryCall(nil), l.calls...)
}

func newSender(t *testing.T, opts Options) (*Sender, *retryLog) {
	t.Helper()
	log := &retryLog{}
	opts.OnRetry = log.record
	if opts.Policy == nil {
		p := WebhookPolicy()
		opts.Policy = &p
	}
	if opts.Policy.Backoff.Initial == 0 {
		opts.Policy.Backoff.Initial = 10 * time.Millisecond
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, log
}

func event(id string) []byte {
	return fmt.Appendf(nil, `{"specversion":"1.0","id":%q,"source":"/test","type":"org.example.test.v1",`+
		`"datacontenttype":"application/json","data":{"n":1}}`, id)
}

func TestRetry500Then200SameBody(t *testing.T) {
	for _, mode := range []Mode{Binary, Structured, Batch} {
		t.Run(mode.String(), func(t *testing.T) {
			srv, ts := serve(t, reply{status: 500, body: "boom"}, reply{status: 200, body: `{"cursor":"c1","duplicate":false}`})
			s, log := newSender(t, Options{URL: ts.URL, Mode: mode})
			res, err := s.Send(context.Background(), [][]byte{event("e1")})
			if err != nil {
				t.Fatal(err)
			}
			reqs := srv.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			if !bytes.Equal(reqs[0].Body, reqs[1].Body) || reqs[0].Header.Get("Ce-Id") != reqs[1].Header.Get("Ce-Id") {
				t.Errorf("retry changed the request: %q %v vs %q %v", reqs[0].Body, reqs[0].Header, reqs[1].Body, reqs[1].Header)
			}
			if !bytes.Contains(reqs[1].Body, []byte(`"e1"`)) && reqs[1].Header.Get("Ce-Id") != "e1" {
				t.Errorf("the id is in neither body nor headers: %q %v", reqs[1].Body, reqs[1].Header)
			}
			calls := log.get()
			var se *StatusError
			if len(calls) != 1 || calls[0].attempt != 1 || !errors.As(calls[0].err, &se) || se.Status != 500 || se.Reason != "boom" {
				t.Fatalf("OnRetry calls %+v", calls)
			}
			if len(res) != 1 || res[0].Status != 200 {
				t.Fatalf("results %+v", res)
			}
			if mode != Batch && res[0].Cursor != "c1" {
				t.Errorf("cursor %q, want c1", res[0].Cursor)
			}
		})
	}
}

// A Retry-After is waited out: on a fake clock, the sender waits exactly the delay it reports
// to OnRetry, and that is the second the receiver asked for.
func TestRetryAfterHonoured(t *testing.T) {
	for _, status := range []int{503, 429} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, hc := serveInProcess(reply{status: status, header: map[string]string{"Retry-After": "1"}}, reply{status: 204})
				s, log := newSender(t, Options{URL: receiverURL, Mode: Structured, Client: hc})
				start := time.Now()
				res, err := s.Send(context.Background(), [][]byte{event("e1")})
				if err != nil {
					t.Fatal(err)
				}
				if n := len(srv.requests()); n != 2 {
					t.Errorf("%d requests, want 2", n)
				}
				calls := log.get()
				if len(calls) != 1 || calls[0].delay != time.Second {
					t.Fatalf("OnRetry %+v: want one call with the Retry-After delay of 1s", calls)
				}
				if el := time.Since(start); el != calls[0].delay {
					t.Errorf("retried after %s, want the %s delay", el, calls[0].delay)
				}
				if res[0].Status != 204 || res[0].Cursor != "" {
					t.Errorf("result %+v", res[0])
				}
			})
		})
	}
}

func Test429WithoutRetryAfterBacksOff(t *testing.T) {
	srv, ts := serve(t, reply{status: 429}, reply{status: 429}, reply{status: 202})
	s, log := newSender(t, Options{URL: ts.URL, Mode: Structured})
	if _, err := s.Send(context.Background(), [][]byte{event("e1")}); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	calls := log.get()
	if len(calls) != 2 || calls[0].attempt != 1 || calls[1].attempt != 2 {
		t.Fatalf("OnRetry %+v", calls)
	}
	// Equal jitter: between half and all of 10ms, then of 20ms.
	if d := calls[0].delay; d < 5*time.Millisecond || d > 10*time.Millisecond {
		t.Errorf("first delay %s", d)
	}
	if d := calls[1].delay; d < 10*time.Millisecond || d > 20*time.Millisecond {
		t.Errorf("second delay %s", d)
	}
}

func TestGoneStops(t *testing.T) {
	srv, ts := serve(t, reply{status: 410, body: `{"error":"retired"}`}, reply{status: 200})
	s, log := newSender(t, Options{URL: ts.URL, Mode: Binary})
	res, err := s.Send(context.Background(), [][]byte{event("e1"), event("e2")})
	if !errors.Is(err, ErrGone) {
		t.Fatalf("err = %v, want ErrGone", err)
	}
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 410 || se.Reason != "retired" {
		t.Errorf("StatusError %+v", se)
	}
	if n := len(srv.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	if len(res) != 0 || len(log.get()) != 0 {
		t.Errorf("results %+v, retries %+v", res, log.get())
	}
}

func TestClientErrorsNotRetried(t *testing.T) {
	cases := []struct {
		status int
		body   string
		reason string
	}{
		{404, `{"error":"no such endpoint"}`, "no such endpoint"},
		{400, `{"error":"attribute \"time\": not RFC 3339","index":0}`, `attribute "time": not RFC 3339`},
		{415, "unsupported\n  media type\n", "unsupported media type"},
		{413, `{"message":"too big"}`, "too big"},
		{401, "", ""},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			srv, ts := serve(t, reply{status: c.status, body: c.body}, reply{status: 200})
			s, log := newSender(t, Options{URL: ts.URL, Mode: Structured})
			_, err := s.Send(context.Background(), [][]byte{event("e1")})
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *StatusError", err)
			}
			if se.Status != c.status || se.Reason != c.reason {
				t.Errorf("got %d %q, want %d %q", se.Status, se.Reason, c.status, c.reason)
			}
			if errors.Is(err, ErrGone) {
				t.Error("a non-410 is ErrGone")
			}
			if c.reason != "" && !strings.Contains(err.Error(), c.reason) {
				t.Errorf("error %q does not name the reason", err)
			}
			if n := len(srv.requests()); n != 1 || len(log.get()) != 0 {
				t.Errorf("%d requests, %d retries: want 1 and 0", n, len(log.get()))
			}
		})
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	srv, ts := serve(t, reply{status: 502, body: "bad gateway"})
	p := WebhookPolicy()
	p.Backoff = Backoff{Initial: time.Millisecond, MaxAttempts: 3}
	s, log := newSender(t, Options{URL: ts.URL, Mode: Batch, Policy: &p})
	_, err := s.Send(context.Background(), [][]byte{event("e1")})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 502 || !strings.Contains(err.Error(), "3 attempts") {
		t.Fatalf("err = %v", err)
	}
	if n := len(srv.requests()); n != 3 || len(log.get()) != 2 {
		t.Errorf("%d requests and %d retries, want 3 and 2", n, len(log.get()))
	}
}

func TestTransportErrorRetried(t *testing.T) {
	// A server that closes the connection without answering, then works.
	var mu sync.Mutex
	n := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.WriteHeader(200)
	}))
	defer ts.Close()
	s, log := newSender(t, Options{URL: ts.URL, Mode: Structured})
	if _, err := s.Send(context.Background(), [][]byte{event("e1")}); err != nil {
		t.Fatal(err)
	}
	if calls := log.get(); len(calls) != 1 {
		t.Fatalf("OnRetry %+v, want one transport failure", calls)
	}
}

// An attempt that gets no reply is given up at the timeout, exactly (on a fake clock), and
// retried.
func TestHungServerTimesOutAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc := serveInProcess(reply{hang: true}, reply{status: 200})
		s, log := newSender(t, Options{URL: receiverURL, Mode: Structured, Timeout: 200 * time.Millisecond, Client: hc})
		start := time.Now()
		res, err := s.Send(context.Background(), [][]byte{event("e1")})
		if err != nil {
			t.Fatal(err)
		}
		calls := log.get()
		if len(calls) != 1 || !errors.Is(calls[0].err, context.DeadlineExceeded) {
			t.Fatalf("OnRetry %+v, want one timeout", calls)
		}
		if el, want := time.Since(start), 200*time.Millisecond+calls[0].delay; el != want {
			t.Errorf("delivered after %s, want the 200ms timeout and the %s delay", el, calls[0].delay)
		}
		if n := len(srv.requests()); n != 2 || res[0].Status != 200 {
			t.Errorf("%d requests, result %+v", n, res)
		}
	})
}

// A context that ends while the sender waits to retry ends the wait: on a fake clock, Send
// returns when the context ends, not when the 30s Retry-After would have.
func TestContextEndsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc := serveInProcess(reply{status: 503, header: map[string]string{"Retry-After": "30"}})
		s, _ := newSender(t, Options{URL: receiverURL, Mode: Structured, Client: hc})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := s.Send(ctx, [][]byte{event("e1")})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if !strings.Contains(err.Error(), "503") {
			t.Errorf("error %q does not mention the last failure", err)
		}
		if el := time.Since(start); el != 200*time.Millisecond {
			t.Errorf("returned after %s, want when the context ended, at 200ms", el)
		}
		if n := len(srv.requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
}

func TestPartialResults(t *testing.T) {
	srv, ts := serve(t, reply{status: 200, body: `{"cursor":"c1"}`}, reply{status: 400, body: `{"error":"bad"}`})
	s, _ := newSender(t, Options{URL: ts.URL, Mode: Structured})
	res, err := s.Send(context.Background(), [][]byte{event("e1"), event("e2"), event("e3")})
	if err == nil || !strings.Contains(err.Error(), "event 2 of 3") {
		t.Fatalf("err = %v", err)
	}
	if len(res) != 1 || res[0].Cursor != "c1" {
		t.Errorf("results %+v, want the first event's", res)
	}
	if n := len(srv.requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestRedirects(t *testing.T) {
	for _, code := range []int{307, 308} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			target, tts := serve(t, reply{status: 202})
			_, rts := serve(t, reply{status: code, header: map[string]string{"Location": tts.URL + "/new"}})
			s, _ := newSender(t, Options{URL: rts.URL + "/old", Mode: Binary, Headers: http.Header{"X-Extra": {"1"}}})
			ev := event("e1")
			res, err := s.Send(context.Background(), [][]byte{ev})
			if err != nil {
				t.Fatal(err)
			}
			reqs := target.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests reached the new location", len(reqs))
			}
			r := reqs[0]
			if r.Method != "POST" || r.Path != "/new" || string(r.Body) != `{"n":1}` ||
				r.Header.Get("Ce-Id") != "e1" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Extra") != "" {
				t.Errorf("redirected request %+v", r)
			}
			if res[0].Status != 202 {
				t.Errorf("result %+v", res[0])
			}
		})
	}
	for _, code := range []int{301, 302, 303} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			target, tts := serve(t, reply{status: 200})
			_, rts := serve(t, reply{status: code, header: map[string]string{"Location": tts.URL + "/new"}})
			s, log := newSender(t, Options{URL: rts.URL, Mode: Structured})
			_, err := s.Send(context.Background(), [][]byte{event("e1")})
			var se *StatusError
			if !errors.As(err, &se) || se.Status != code || !strings.Contains(se.Reason, "/new") {
				t.Fatalf("err = %v", err)
			}
			if len(target.requests()) != 0 || len(log.get()) != 0 {
				t.Errorf("followed a %d (as a GET?) or retried it", code)
			}
		})
	}
	t.Run("loop", func(t *testing.T) {
		var loop *httptest.Server
		var mu sync.Mutex
		hits := 0
		loop = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits++
			mu.Unlock()
			http.Redirect(w, r, loop.URL+"/again", http.StatusTemporaryRedirect)
		}))
		defer loop.Close()
		s, log := newSender(t, Options{URL: loop.URL, Mode: Structured})
		_, err := s.Send(context.Background(), [][]byte{event("e1")})
		if !errors.Is(err, errTooManyRedirects) {
			t.Fatalf("err = %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if hits != DefaultMaxRedirects+1 || len(log.get()) != 0 {
			t.Errorf("%d requests and %d retries, want %d and 0", hits, len(log.get()), DefaultMaxRedirects+1)
		}
	})
}

func TestHeadersAndToken(t *testing.T) {
	srv, ts := serve(t, reply{status: 200})
	s, _ := newSender(t, Options{
		URL: ts.URL, Mode: Structured, Token: "s3cret",
		Headers: http.Header{"X-Trace": {"abc"}, "Content-Type": {"text/plain"}, "Host": {"events.example"}},
	})
	if _, err := s.Send(context.Background(), [][]byte{event("e1")}); err != nil {
		t.Fatal(err)
	}
	h := srv.requests()[0].Header
	if h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Trace") != "abc" || h.Get("Content-Type") != ContentTypeStructured {
		t.Errorf("headers %v", h)
	}
	b, _ := newSender(t, Options{URL: ts.URL, Mode: Binary, Headers: http.Header{"Content-Type": {"text/plain"}}})
	if _, err := b.Send(context.Background(), [][]byte{[]byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":{}}`)}); err != nil {
		t.Fatal(err)
	}
	if h := srv.requests()[1].Header; h.Get("Content-Type") != "" || h.Get("Ce-Id") != "1" {
		t.Errorf("binary headers %v: an event without datacontenttype got a Content-Type", h)
	}
}

func TestStructuredAndBatchBodies(t *testing.T) {
	evs := [][]byte{event("e1"), event("e2")}
	srv, ts := serve(t, reply{status: 200})
	s, _ := newSender(t, Options{URL: ts.URL, Mode: Structured})
	if _, err := s.Send(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	b, _ := newSender(t, Options{URL: ts.URL, Mode: Batch})
	res, err := b.Send(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("results %+v", res)
	}
	reqs := srv.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i := range 2 {
		if !bytes.Equal(reqs[i].Body, evs[i]) || reqs[i].Header.Get("Content-Type") != ContentTypeStructured {
			t.Errorf("structured request %d: %q %v", i, reqs[i].Body, reqs[i].Header)
		}
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(reqs[2].Body, &arr); err != nil || len(arr) != 2 ||
		!bytes.Equal(arr[0], evs[0]) || !bytes.Equal(arr[1], evs[1]) {
		t.Errorf("batch body %q (%v)", reqs[2].Body, err)
	}
	if ct := reqs[2].Header.Get("Content-Type"); ct != ContentTypeBatch {
		t.Errorf("batch Content-Type %q", ct)
	}
	if res, err := b.Send(context.Background(), nil); err != nil || len(res) != 0 || len(srv.requests()) != 3 {
		t.Errorf("empty send: %v %v", res, err)
	}
}

func TestNewChecksOptions(t *testing.T) {
	for _, o := range []Options{
		{URL: "127.0.0.1:7480/events"},
		{URL: "ftp://x/y"},
		{URL: "http:///events"},
		{URL: "http://x/", Mode: Mode(7)},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Binary, Structured, Batch} {
		if got, err := ParseMode(strings.ToUpper(m.String())); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseMode("json"); err == nil {
		t.Error("ParseMode(json) accepted")
	}
}

func TestReasonIsShortened(t *testing.T) {
	r := Reason([]byte(strings.Repeat("é", 1000)))
	if len(r) > maxReasonLen+len("…") || !strings.HasSuffix(r, "…") || !strings.HasPrefix(r, "éé") {
		t.Errorf("reason of %d bytes: %q…", len(r), r[:20])
	}
	if r := Reason([]byte(`{"error":{"message":"nested"}}`)); r != "nested" {
		t.Errorf("nested reason %q", r)
	}
}

// A web page's text is cut to its start, and a title that repeats the status is said once.
func TestPageReasonIsBrief(t *testing.T) {
	page := "<html><head><title>501 Not Implemented</title></head><body><h1>501 Not Implemented</h1><p>" +
		strings.Repeat("The server does not support this. ", 40) + "</p></body></html>"
	err := &StatusError{Status: 501, Reason: Reason([]byte(page))}
	msg := err.Error()
	if strings.Count(msg, "501 Not Implemented") != 1 || !strings.HasPrefix(msg, "501 Not Implemented: The server does not") {
		t.Errorf("message %q", msg)
	}
	if len(msg) > len("501 Not Implemented: ")+maxPageLen+len("…") {
		t.Errorf("message of %d bytes: %q", len(msg), msg)
	}
}

// A batch already encoded goes as it is; an evtctl node's reply gives each event its cursor,
// read without encoding/json when it is in the node's own form.
func TestSendBatch(t *testing.T) {
	nodeReply := `{"count":2,"results":[{"cursor":"18ea-0000000000000001","duplicate":false},{"cursor":"18ea-0000000000000002","duplicate":true}]}` + "\n"
	srv, ts := serve(t, reply{status: 200, body: nodeReply})
	s, _ := newSender(t, Options{URL: ts.URL, Mode: Structured})
	body := []byte("[" + string(event("e1")) + "," + string(event("e2")) + "]")
	res, err := s.SendBatch(context.Background(), body, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{{Cursor: "18ea-0000000000000001", Status: 200}, {Cursor: "18ea-0000000000000002", Duplicate: true, Status: 200}}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Errorf("results %+v, want %+v", res, want)
	}
	if r := srv.requests()[0]; !bytes.Equal(r.Body, body) || r.Header.Get("Content-Type") != ContentTypeBatch {
		t.Errorf("request %q %v", r.Body, r.Header)
	}
	out := make([]Result, 2)
	if !readBatchReply([]byte(nodeReply), out) {
		t.Error("the node's own reply was not read by readBatchReply")
	}
	// The same reply in another form, or with another number of results.
	for _, other := range []string{`{"results":[{"duplicate":false,"cursor":"a"},{"cursor":"b","duplicate":true}],"count":2}`, nodeReply[:len(nodeReply)-3] + "}"} {
		if readBatchReply([]byte(other), make([]Result, 2)) {
			t.Errorf("readBatchReply read %s", other)
		}
	}
	if res := batchResults(200, []byte(`{"results":[{"duplicate":false,"cursor":"a"},{"cursor":"b","duplicate":true}],"count":2}`), 2); res[1].Cursor != "b" || !res[1].Duplicate {
		t.Errorf("another form: %+v", res)
	}
}

// A node's refusal of a batch says which event it refused.
func TestStatusErrorIndex(t *testing.T) {
	for body, want := range map[string]int{
		`{"error":"batch index 3: unsupported specversion","index":3}`: 3,
		`{"error":"bad"}`:             -1,
		`{"error":"bad","index":-1}`:  -1,
		`{"error":"bad","index":1.5}`: -1,
		`<html>index 3</html>`:        -1,
	} {
		_, ts := serve(t, reply{status: 400, body: body})
		s, _ := newSender(t, Options{URL: ts.URL, Mode: Batch})
		_, err := s.Send(context.Background(), [][]byte{event("e1")})
		var se *StatusError
		if !errors.As(err, &se) || se.Index != want {
			t.Errorf("%s: %v, index %d; want %d", body, err, se.Index, want)
		}
	}
}
