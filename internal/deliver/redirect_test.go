package deliver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCrossOriginRedirectDropsCredentials: a 307 to another origin (here another port of the
// same host) carries the event, but neither the bearer token, a cookie nor any -H header; a
// redirect within the origin keeps them.
func TestCrossOriginRedirectDropsCredentials(t *testing.T) {
	other, ots := serve(t, reply{status: 202})
	same, sts := serve(t, reply{status: 307, header: map[string]string{"Location": "/moved"}}, reply{status: 202})
	_, rts := serve(t, reply{status: 307, header: map[string]string{"Location": ots.URL + "/new"}})
	opts := Options{
		Mode: Binary, Token: "s3cret",
		Headers: http.Header{"X-Api-Key": {"k"}, "Cookie": {"session=1"}, "Proxy-Authorization": {"Basic eA=="}},
	}
	opts.URL = rts.URL + "/old"
	s, _ := newSender(t, opts)
	if _, err := s.Send(context.Background(), [][]byte{event("e1")}); err != nil {
		t.Fatal(err)
	}
	reqs := other.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests reached the other origin", len(reqs))
	}
	h := reqs[0].Header
	for _, k := range []string{"Authorization", "X-Api-Key", "Cookie", "Proxy-Authorization"} {
		if v := h.Get(k); v != "" {
			t.Errorf("%s: %q went to another origin", k, v)
		}
	}
	if h.Get("Ce-Id") != "e1" || h.Get("Content-Type") != "application/json" || string(reqs[0].Body) != `{"n":1}` {
		t.Errorf("the event did not arrive whole: %v %q", h, reqs[0].Body)
	}

	opts.URL = sts.URL + "/old"
	s, _ = newSender(t, opts)
	if _, err := s.Send(context.Background(), [][]byte{event("e2")}); err != nil {
		t.Fatal(err)
	}
	reqs = same.requests()
	if len(reqs) != 2 || reqs[1].Path != "/moved" {
		t.Fatalf("requests %+v", reqs)
	}
	if h := reqs[1].Header; h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Api-Key") != "k" {
		t.Errorf("a same-origin redirect lost the headers: %v", h)
	}
}

// TestRedirectToPlainHTTPRefused: an https receiver that redirects to http would have the
// events sent in clear text; the redirect is not followed, and not retried.
func TestRedirectToPlainHTTPRefused(t *testing.T) {
	plain, pts := serve(t, reply{status: 202})
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, pts.URL+"/new", http.StatusPermanentRedirect)
	}))
	defer tls.Close()
	s, log := newSender(t, Options{URL: tls.URL, Mode: Structured, Client: tls.Client()})
	_, err := s.Send(context.Background(), [][]byte{event("e1")})
	if err == nil || !strings.Contains(err.Error(), "https") {
		t.Fatalf("err = %v, want a refusal naming https", err)
	}
	if errors.Is(err, ErrGone) || len(log.get()) != 0 {
		t.Errorf("retried %d times", len(log.get()))
	}
	if n := len(plain.requests()); n != 0 {
		t.Errorf("%d requests went out over plain http", n)
	}
}

// TestWebhookPolicyStatuses: by default (the CloudEvents webhook rules) 500, 502, 503, 504
// and 429 are retried; another 5xx such as 501 is final.
func TestWebhookPolicyStatuses(t *testing.T) {
	for status, retried := range map[int]bool{500: true, 502: true, 503: true, 504: true, 429: true, 501: false, 505: false, 507: false} {
		srv, ts := serve(t, reply{status: status}, reply{status: 200})
		s, log := newSender(t, Options{URL: ts.URL, Mode: Structured})
		_, err := s.Send(context.Background(), [][]byte{event("e1")})
		if got := len(log.get()) > 0; got != retried {
			t.Errorf("%d: retried %v, want %v (err %v)", status, got, retried, err)
		}
		if want := map[bool]int{true: 2, false: 1}[retried]; len(srv.requests()) != want {
			t.Errorf("%d: %d requests, want %d", status, len(srv.requests()), want)
		}
	}
}
