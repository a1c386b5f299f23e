package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/testwait"
)

const emptyResult = `{"jsonrpc":"2.0","id":1,"result":{"items":[],"more":false,"oldest":"","newest":""}}`

var refusedErr = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// Until a node has answered, failures that waiting does not mend end a stream or a range at
// once, as a *ContactError of the right kind, without a single retry.
func TestFirstContactFailsAtOnce(t *testing.T) {
	html501 := "<!DOCTYPE HTML>\n<html lang=\"en\">\n<head><title>Error response</title></head>\n<body>\n<h1>Error response</h1>\n<p>Error code: 501</p>\n<p>Message: Unsupported method ('POST').</p>\n</body>\n</html>\n"
	replying := func(status int, ctype, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.WriteHeader(status)
			w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	plain := replying(200, "application/json", emptyResult)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(emptyResult)) }))
	t.Cleanup(tlsSrv.Close)
	tlsSrv.Config.ErrorLog = nil
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		name string
		node string
		opts Options
		kind ContactKind
		msg  string
	}{
		{"nothing listens", refusedURL, Options{}, NoNode, "no node answers at " + refusedURL + " (connection refused)"},
		{"no such host", "http://nowhere.invalid:7480", Options{HTTPClient: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "nowhere.invalid", IsNotFound: true}}
		})}}, NoHost, `cannot find the host of http://nowhere.invalid:7480: no such host "nowhere.invalid"`},
		{"https to plain http", "https://" + strings.TrimPrefix(plain, "http://"), Options{}, TLSMismatch, "answers in plain HTTP, not HTTPS"},
		{"http to a TLS port", "http://" + strings.TrimPrefix(tlsSrv.URL, "https://"), Options{}, TLSMismatch, "is an HTTPS port: it answered plain HTTP with 400 Bad Request"},
		{"untrusted certificate", tlsSrv.URL, Options{}, BadCertificate, "certificate"},
		{"a web page, 501", replying(501, "text/html", html501), Options{}, NotEventsAPI,
			`does not serve the events API: it answered 501 Not Implemented (a web page: "Error response Error code: 501 Message: Unsupported method ('POST').")`},
		{"a web page, 502", replying(502, "text/html", "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"), Options{}, NotEventsAPI, "answered 502 Bad Gateway (a web page)"},
		{"404 in JSON", replying(404, "application/json", `{"error":"no route"}`), Options{}, NotEventsAPI, "answered 404 Not Found: no route"},
		{"404 empty", replying(404, "text/plain", ""), Options{}, NotEventsAPI, "answered 404 Not Found"},
		{"other JSON", replying(200, "application/json", `{"status":"ok"}`), Options{}, NotEventsAPI, "does not serve the events API: the node's reply is not an events result: no result and no error"},
		{"no events method", replying(200, "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`), Options{}, NotEventsAPI, `has no method "events"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Node = tc.node
			c, err := New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			retries := 0
			ctx, cancel := testwait.Context(t, context.Background())
			defer cancel()
			// A retry is the failure: it ends the call at once, to be reported below.
			onRetry := func(error, int, time.Duration) { retries++; cancel() }
			err = c.Stream(ctx, StreamOptions{Backoff: fastBackoff, OnRetry: onRetry}, func(Batch) error { return nil })
			var ce *ContactError
			if !errors.As(err, &ce) || ce.Kind != tc.kind || Retryable(err) {
				t.Fatalf("Stream returned %v (%T), want a final ContactError of kind %d", err, err, tc.kind)
			}
			if retries != 0 {
				t.Errorf("%d retries before failing", retries)
			}
			if !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("message %q, want one line with %q", err.Error(), tc.msg)
			}
			if c.Answered() {
				t.Error("Answered after a failure")
			}
			// Range and a single call say the same.
			err = c.Range(ctx, RangeOptions{Backoff: fastBackoff, OnRetry: onRetry}, func([]Item) error { return nil })
			if !errors.As(err, &ce) || ce.Kind != tc.kind || retries != 0 {
				t.Errorf("Range returned %v after %d retries", err, retries)
			}
		})
	}
}

// Until a node has answered, a busy node, 429 and 5xx replies in JSON or without a body, and
// failures that may pass by themselves (a dropped connection) are still retried.
func TestFirstContactRetriesPassingFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply func(w http.ResponseWriter)
	}{
		{"503 in JSON", func(w http.ResponseWriter) {
			w.WriteHeader(503)
			w.Write([]byte(`{"error":"the event log cannot serve right now"}`))
		}},
		{"502 without a body", func(w http.ResponseWriter) { w.WriteHeader(502) }},
		{"429", func(w http.ResponseWriter) { w.WriteHeader(429) }},
		{"busy", func(w http.ResponseWriter) {
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Server busy","data":"too many waiting readers"}}`))
		}},
		{"dropped connection", func(w http.ResponseWriter) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) <= 2 {
					tc.reply(w)
					return
				}
				w.Write([]byte(emptyResult))
			}))
			defer srv.Close()
			c := newTestClient(t, srv.URL)
			var errs []error
			err := c.Range(context.Background(), RangeOptions{Backoff: fastBackoff, OnRetry: func(err error, _ int, _ time.Duration) { errs = append(errs, err) }}, func([]Item) error { return nil })
			if err != nil || len(errs) != 2 {
				t.Fatalf("Range: %v after retries %v; want success after 2", err, errs)
			}
			if !c.Answered() {
				t.Error("not Answered after a result")
			}
		})
	}
}

// Once the node has answered, a refused connection (a node restarting) is retried, as long
// as --retry-for allows.
func TestRefusedAfterAnswerIsRetried(t *testing.T) {
	var calls atomic.Int32
	c, err := New(Options{Node: "http://127.0.0.1:7480", HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n := calls.Add(1)
		if n == 1 || n > 4 {
			return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: r,
				ContentLength: -1}, nil
		}
		return nil, refusedErr
	})}})
	if err != nil {
		t.Fatal(err)
	}
	// The first reply is empty, not a result: the node has not answered yet, and a refusal
	// now is final.
	if _, err := c.Events(context.Background(), Request{}); err == nil {
		t.Fatal("an empty reply was taken for a result")
	}
	var ce *ContactError
	if _, err := c.Events(context.Background(), Request{}); !errors.As(err, &ce) || ce.Kind != NoNode {
		t.Fatalf("refused before an answer: %v", err)
	}

	calls.Store(0)
	c2, _ := New(Options{Node: "http://127.0.0.1:7480", HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n := calls.Add(1)
		if n == 1 || n > 4 {
			return &http.Response{StatusCode: 200, Body: nopCloser{strings.NewReader(emptyResult)}, Header: http.Header{}, Request: r, ContentLength: -1}, nil
		}
		return nil, refusedErr
	})}})
	if _, err := c2.Events(context.Background(), Request{}); err != nil || !c2.Answered() {
		t.Fatalf("first call: %v, answered %v", err, c2.Answered())
	}
	var retried []error
	if _, err := retrying(context.Background(), fastBackoff, func(err error, _ int, _ time.Duration) { retried = append(retried, err) }, func() (*Reply, error) { return c2.Events(context.Background(), Request{}) }); err != nil {
		t.Fatalf("after an answer: %v", err)
	}
	if len(retried) != 3 || !Retryable(retried[0]) || errors.As(retried[0], &ce) {
		t.Fatalf("retries %v, want 3 retryable refusals", retried)
	}
	// --retry-for still bounds it.
	calls.Store(1)
	_, err = retrying(context.Background(), Backoff{Initial: 20 * time.Millisecond, Max: 20 * time.Millisecond, GiveUp: 25 * time.Millisecond}, nil, func() (*Reply, error) { return c2.Events(context.Background(), Request{}) })
	if err == nil || !strings.Contains(err.Error(), "gave up after retrying for") {
		t.Fatalf("with GiveUp: %v", err)
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }
