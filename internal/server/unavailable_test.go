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
