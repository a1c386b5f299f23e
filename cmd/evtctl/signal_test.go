package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// signalSeen is a request a test consumer got.
type signalSeen struct {
	method, path string
	form         url.Values
	header       http.Header
}

// signalConsumer answers with handle and records what it got.
type signalConsumer struct {
	mu   sync.Mutex
	seen []signalSeen
	srv  *httptest.Server
}

func newSignalConsumer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *signalConsumer {
	c := &signalConsumer{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form := r.URL.Query()
		if r.Method == http.MethodPost {
			form, _ = url.ParseQuery(string(body))
		}
		c.mu.Lock()
		c.seen = append(c.seen, signalSeen{r.Method, r.URL.Path, form, r.Header.Clone()})
		n := len(c.seen)
		c.mu.Unlock()
		handle(w, r, n)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *signalConsumer) requests() []signalSeen {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]signalSeen(nil), c.seen...)
}

func signalOpts(url string, headers ...string) *emitOptions {
	s, _, _, _ := testStreams()
	return &emitOptions{
		streams: s, Signal: url, SignalFormat: "form", Type: "shop.purchased", Source: "/x",
		Data: `{"total":"12.50"}`, MaxAttempts: 3, Timeout: 5 * time.Second, Headers: headers, now: time.Now,
	}
}

// TestSignalRedirectDoesNotLoseTheSignal: a consumer that answers a POST signal with 302
// must not have it turned into a GET without the attributes and counted as sent.
func TestSignalRedirectDoesNotLoseTheSignal(t *testing.T) {
	t.Parallel()
	c := newSignalConsumer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	opts := signalOpts(c.srv.URL + "/old")
	_, err := runEmit(context.Background(), opts)
	var arrived bool
	for _, r := range c.requests() {
		if r.path == "/new" && r.form.Get("_domain") == "shop" && r.form.Get("_name") == "purchased" && r.form.Get("total") == "12.50" {
			arrived = true
		}
	}
	if err == nil && !arrived {
		t.Fatalf("emit reported success, but the signal never reached the consumer whole: %+v", c.requests())
	}
	if err != nil && !strings.Contains(err.Error(), "302") {
		t.Errorf("err = %v, want it to name the 302", err)
	}
}

// TestSignalRetryRules: the Evented API lets a generator retry only 500, 503 and 504,
// honouring Retry-After; 502 and 429 are final, 410 stops.
func TestSignalRetryRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		first    int
		requests int
		ok       bool
	}{{500, 2, true}, {503, 2, true}, {504, 2, true}, {502, 1, false}, {429, 1, false}, {410, 1, false}, {400, 1, false}} {
		c := newSignalConsumer(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				w.WriteHeader(tc.first)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
		opts := signalOpts(c.srv.URL + "/s")
		_, err := runEmit(context.Background(), opts)
		if n := len(c.requests()); n != tc.requests || (err == nil) != tc.ok {
			t.Errorf("first reply %d: %d requests, err %v; want %d requests, success %v", tc.first, n, err, tc.requests, tc.ok)
		}
		if tc.first == 410 && (err == nil || !strings.Contains(err.Error(), "410")) {
			t.Errorf("410: err = %v", err)
		}
	}
}

// TestSignalHeaders: -H headers go to the consumer, and not to another origin it redirects to.
func TestSignalHeaders(t *testing.T) {
	t.Parallel()
	other := newSignalConsumer(t, func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusOK) })
	c := newSignalConsumer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path == "/away" {
			w.Header().Set("Location", other.srv.URL+"/in")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	opts := signalOpts(c.srv.URL+"/here", "X-Api-Key: k", "Authorization: Bearer t")
	if _, err := runEmit(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if r := c.requests(); len(r) != 1 || r[0].header.Get("X-Api-Key") != "k" || r[0].header.Get("Authorization") != "Bearer t" {
		t.Errorf("the consumer got %+v", r)
	}
	opts = signalOpts(c.srv.URL+"/away", "X-Api-Key: k", "Authorization: Bearer t")
	if _, err := runEmit(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	r := other.requests()
	if len(r) != 1 || r[0].form.Get("_name") != "purchased" {
		t.Fatalf("the other origin got %+v", r)
	}
	if r[0].header.Get("X-Api-Key") != "" || r[0].header.Get("Authorization") != "" {
		t.Errorf("credentials went to another origin: %v", r[0].header)
	}
}
