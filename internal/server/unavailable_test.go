package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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

// damagedStore is a log whose Stats report a damaged range in a file.
type damagedStore struct {
	eventlog.Store
	file string
}

func (s damagedStore) Stats() eventlog.Stats {
	st := s.Store.Stats()
	st.Damage = []eventlog.Damage{{First: 3, Last: 5, File: s.file, Offset: 4096, End: 8192, Reason: "records that do not read back intact"}}
	st.Lost = 3
	return st
}

// The paths of the node's files stay in its log and behind the read token: /healthz
// shows a damaged range's file and offsets, and error texts as the log words them, only to a
// caller that sends the read token, and a producer refused for a full disk is told why
// without them.
func TestPathsStayWithTheNode(t *testing.T) {
	l, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const dir = "/srv/private/evtctl-data"
	full := fmt.Errorf("%w: the disk is full: write %s/00000000000000000007.seg: no space left on device", eventlog.ErrUnavailable, dir)
	var logged strings.Builder
	logger := slog.New(slog.NewTextHandler(&syncWriter{w: &logged}, nil))
	get := func(srv *server.Server, method, path, ctype, body string, hdr ...string) (int, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		srv.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	store := fullDiskStore{damagedStore{l, dir + "/00000000000000000003.seg"}, full}
	for _, token := range []string{"", "reader"} {
		srv := server.New(server.Config{Store: store, ReadToken: token, Logger: logger})
		code, b := get(srv, "POST", "/events", "application/cloudevents+json", ceJSON("/d", "1", "d.t", 1))
		if code != 503 || strings.Contains(b, dir) || !strings.Contains(b, "the disk is full") || !strings.Contains(b, "00000000000000000007.seg") {
			t.Errorf("read token %q: ingest on a full disk: %d %s", token, code, b)
		}
		_, b = get(srv, "GET", "/healthz", "", "")
		if strings.Contains(b, dir) || strings.Contains(b, `"offset"`) || strings.Contains(b, `"file"`) {
			t.Errorf("read token %q: /healthz without the token: %s", token, b)
		}
		if token == "" {
			if !strings.Contains(b, `"damaged":[{`) || !strings.Contains(b, `"first_seq":3`) || !strings.Contains(b, `"appends":"refused for now: `) {
				t.Errorf("/healthz of a node without a read token: %s", b)
			}
			continue
		}
		_, b = get(srv, "GET", "/healthz", "", "", "Authorization", "Bearer reader")
		if !strings.Contains(b, `"file":"`+dir+`/00000000000000000003.seg"`) || !strings.Contains(b, `"offset":4096`) || !strings.Contains(b, dir+"/00000000000000000007.seg") {
			t.Errorf("/healthz with the read token: %s", b)
		}
	}
	if !strings.Contains(logged.String(), dir+"/00000000000000000007.seg") {
		t.Errorf("the node's log does not name the file: %s", logged.String())
	}
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// switchedStore is a log whose appends fail with err while it is set.
type switchedStore struct {
	eventlog.Store
	mu  sync.Mutex
	err error
}

func (s *switchedStore) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *switchedStore) Append(ctx context.Context, e []eventlog.Entry) ([]eventlog.AppendResult, error) {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.Store.Append(ctx, e)
}

// A run of refused appends is logged in a line when it starts, a summary now and then while
// it lasts, and a line when it ends, not a line per refused request.
func TestRefusedAppendsAreSummedUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := eventlog.Open(eventlog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var logged strings.Builder
		store := &switchedStore{Store: l}
		srv := server.New(server.Config{Store: store, Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &logged}, nil))})
		defer srv.Shutdown(context.Background())
		ingest := func(i int) int {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/events", strings.NewReader(ceJSON("/r", fmt.Sprint(i), "r.t", i)))
			req.Header.Set("Content-Type", "application/cloudevents+json")
			srv.ServeHTTP(rec, req)
			return rec.Code
		}
		lines := func() []string { return strings.Split(strings.TrimSpace(logged.String()), "\n") }
		store.set(fmt.Errorf("%w: the disk is full: no space left on device", eventlog.ErrUnavailable))
		for i := range 300 {
			if code := ingest(i); code != 503 {
				t.Fatalf("append %d on a full disk: %d", i, code)
			}
			time.Sleep(100 * time.Millisecond) // 30 s of refusals
		}
		got := lines()
		if len(got) < 2 || len(got) > 4 || !strings.Contains(got[0], "no space left on device") {
			t.Fatalf("300 refused appends over 30 s logged %d lines:\n%s", len(got), logged.String())
		}
		if last := got[len(got)-1]; !strings.Contains(last, "refused=") {
			t.Fatalf("no summary of the refused appends: %s", logged.String())
		}
		store.set(nil)
		for i := range 10 {
			if code := ingest(1000 + i); code != 200 {
				t.Fatalf("append %d once there is space: %d", i, code)
			}
		}
		end := lines()
		if len(end) != len(got)+1 || !strings.Contains(end[len(end)-1], "refused=300") {
			t.Fatalf("the end of the refusals was not logged once with their count:\n%s", logged.String())
		}
	})
}
