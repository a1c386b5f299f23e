package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
)

// unavailableStore is a log whose engine is out of reach (a distributed store between
// leaders): every read and append fails with an error worth retrying.
type unavailableStore struct{ eventlog.Store }

var errNoQuorum = fmt.Errorf("%w: no quorum", eventlog.ErrUnavailable)

func (unavailableStore) Read(context.Context, eventlog.Query) (eventlog.Page, error) {
	return eventlog.Page{}, errNoQuorum
}

func (unavailableStore) Append(context.Context, []eventlog.Entry) ([]eventlog.AppendResult, error) {
	return nil, errNoQuorum
}

// An unavailable log is a retryable error with Retry-After: 503 on ingest and signals, and
// on reads the -32000 code that clients retry (HTTP 200, as JSON-RPC errors are).
func TestUnavailableStoreAsksForRetry(t *testing.T) {
	l, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := server.New(server.Config{Store: unavailableStore{l}})
	hs := httptest.NewServer(srv)
	defer hs.Close()

	for _, tc := range []struct {
		method, path, ctype, body string
		status                    int
		retryAfter, want          string
	}{
		{"POST", "/events", "application/cloudevents+json", ceJSON("/u", "1", "u.t", 1), 503, "2", `the event log cannot take events right now: event log is unavailable: no quorum`},
		{"POST", "/signal/x?_domain=d&_name=n", "", "", 503, "2", `no quorum`},
		{"POST", "/", "application/json", `{"jsonrpc":"2.0","id":1,"method":"events","params":{}}`, 200, "1", `"error":{"code":-32000,"message":"Server busy","data":"event log is unavailable: no quorum; retry shortly"}`},
		{"GET", "/events?maxItems=3", "", "", 200, "1", `{"code":-32000,"message":"Server busy","data":"event log is unavailable: no quorum; retry shortly"}`},
	} {
		req, _ := http.NewRequest(tc.method, hs.URL+tc.path, strings.NewReader(tc.body))
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Retry-After") != tc.retryAfter || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s %s: %d, Retry-After %q, %s; want %d, %q, %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Retry-After"), b, tc.status, tc.retryAfter, tc.want)
		}
	}
}

// fullDiskStore is a log on a full disk: appends fail with a passing reason, which the log
// also reports as Unwritable; reads work. failedStore is a log stopped by an I/O error.
type fullDiskStore struct {
	eventlog.Store
	full error
}

func (s fullDiskStore) Append(context.Context, []eventlog.Entry) ([]eventlog.AppendResult, error) {
	return nil, s.full
}

func (s fullDiskStore) Unwritable() error { return s.full }

type failedStore struct{ eventlog.Store }

func (failedStore) Append(context.Context, []eventlog.Entry) ([]eventlog.AppendResult, error) {
	return nil, fmt.Errorf("%w: write seg-1: input/output error", eventlog.ErrFailed)
}

// A full disk asks for a retry (503, Retry-After) and degrades /healthz, saying why, while
// reads go on; a failed log answers 503 without Retry-After, since no retry can succeed
// before the node is restarted.
func TestFullDiskAndFailedLog(t *testing.T) {
	l, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	full := fmt.Errorf("%w: the disk is full: no space left on device", eventlog.ErrUnavailable)
	do := func(h http.Handler, method, path, ctype, body string) (*http.Response, string) {
		t.Helper()
		hs := httptest.NewServer(h)
		defer hs.Close()
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	ev := ceJSON("/d", "1", "d.t", 1)

	disk := server.New(server.Config{Store: fullDiskStore{l, full}})
	resp, b := do(disk, "POST", "/events", "application/cloudevents+json", ev)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "2" || !strings.Contains(b, "the disk is full") {
		t.Errorf("ingest on a full disk: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if resp, b = do(disk, "GET", "/healthz", "", ""); !strings.Contains(b, `"status":"degraded"`) || !strings.Contains(b, `"appends":"refused for now: `) {
		t.Errorf("healthz on a full disk: %d %s", resp.StatusCode, b)
	}
	if _, b = do(disk, "GET", "/metrics", "", ""); !strings.Contains(b, "evtctl_log_unwritable 1\n") {
		t.Errorf("metrics on a full disk do not say appends are refused")
	}
	if resp, b = do(disk, "GET", "/events?maxItems=3", "", ""); resp.StatusCode != 200 || strings.Contains(b, `"error"`) {
		t.Errorf("a read on a full disk: %d %s", resp.StatusCode, b)
	}

	failed := server.New(server.Config{Store: failedStore{l}})
	resp, b = do(failed, "POST", "/events", "application/cloudevents+json", ev)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "" || !strings.Contains(b, "until the node is restarted") {
		t.Errorf("ingest on a failed log: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
}
