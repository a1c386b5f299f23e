package deliver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// With FirstContactFinal, a receiver that nothing answers for fails at the first attempt;
// once it has answered, the same failure is retried, as for a receiver that restarts.
func TestFirstContactFinal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	policy := WebhookPolicy()
	policy.FirstContactFinal = true
	policy.Backoff = Backoff{Initial: time.Millisecond, Max: time.Millisecond, MaxAttempts: 3}
	retries := 0
	c, err := NewClient(Config{URL: "http://" + addr + "/hook", Policy: &policy, OnRetry: func(int, time.Duration, error) { retries++ }})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Do(context.Background(), Request{Body: []byte("{}")})
	if err == nil || a.Verdict != Failed || retries != 0 {
		t.Fatalf("nothing listening: verdict %s, %d retries, %v; want a final failure at once", a.Verdict, retries, err)
	}

	// Without the flag, the same is retried up to the attempts allowed.
	policy.FirstContactFinal = false
	c2, _ := NewClient(Config{URL: "http://" + addr + "/hook", Policy: &policy, OnRetry: func(int, time.Duration, error) { retries++ }})
	if _, err := c2.Do(context.Background(), Request{Body: []byte("{}")}); err == nil || retries != 2 {
		t.Fatalf("without FirstContactFinal: %d retries, %v", retries, err)
	}

	// A receiver that has answered (here with a 500) and then goes away is retried.
	var calls atomic.Int32
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			go srv.CloseClientConnections()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	policy.FirstContactFinal = true
	retries = 0
	c3, _ := NewClient(Config{URL: srv.URL, Policy: &policy, OnRetry: func(int, time.Duration, error) { retries++ }})
	if _, err := c3.Do(context.Background(), Request{Body: []byte("{}")}); err != nil {
		t.Fatalf("answered 500, then 204: %v", err)
	}
	srv.Close()
	retries = 0
	a, err = c3.Do(context.Background(), Request{Body: []byte("{}")})
	if err == nil || retries != 2 || a.Verdict != Retry {
		t.Fatalf("gone after answering: verdict %s after %d retries, %v; want it retried", a.Verdict, retries, err)
	}
	var se *StatusError
	if errors.As(err, &se) {
		t.Fatalf("a transport failure came back as %v", se)
	}
}
