package deliver

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"
)

func TestPolicyVerdicts(t *testing.T) {
	webhook, evented := WebhookPolicy(), EventedAPIPolicy()
	for status, want := range map[int][2]Verdict{
		200: {Delivered, Delivered}, 201: {Delivered, Delivered}, 202: {Delivered, Delivered}, 204: {Delivered, Delivered},
		500: {Retry, Retry}, 503: {Retry, Retry}, 504: {Retry, Retry},
		502: {Retry, Failed}, 429: {Retry, Failed},
		410: {Gone, Gone},
		400: {Failed, Failed}, 401: {Failed, Failed}, 403: {Failed, Failed}, 404: {Failed, Failed},
		409: {Failed, Failed}, 413: {Failed, Failed}, 415: {Failed, Failed},
		501: {Failed, Failed}, 505: {Failed, Failed}, 507: {Failed, Failed},
		301: {Failed, Failed}, 302: {Failed, Failed}, 303: {Failed, Failed},
	} {
		if got := webhook.verdictOf(status); got != want[0] {
			t.Errorf("webhook %d: %s, want %s", status, got, want[0])
		}
		if got := evented.verdictOf(status); got != want[1] {
			t.Errorf("Evented API %d: %s, want %s", status, got, want[1])
		}
	}
}

func TestPolicyWaitAndAttempts(t *testing.T) {
	p := Policy{Backoff: Backoff{Tiers: []time.Duration{time.Second, time.Minute}}}
	for n, want := range map[int]time.Duration{1: time.Second, 2: time.Minute, 3: time.Minute, 9: time.Minute} {
		if got := p.Wait(n, Attempt{}); got != want {
			t.Errorf("tiers: wait after failure %d = %s, want %s", n, got, want)
		}
	}
	// Retry-After wins when it is later, never when it is sooner.
	if got := p.Wait(1, Attempt{RetryAfter: 5 * time.Second, HasRetryAfter: true}); got != 5*time.Second {
		t.Errorf("Retry-After 5s after a 1s tier: %s", got)
	}
	if got := p.Wait(2, Attempt{RetryAfter: 5 * time.Second, HasRetryAfter: true}); got != time.Minute {
		t.Errorf("Retry-After 5s before a 1m tier: %s", got)
	}
	if p.Attempts() != 3 {
		t.Errorf("tiers: %d attempts, want one per tier and the first", p.Attempts())
	}
	var d Policy
	if d.Attempts() != DefaultMaxAttempts {
		t.Errorf("default attempts %d", d.Attempts())
	}
	for range 20 {
		if w := d.Wait(1, Attempt{}); w < DefaultInitial/2 || w > DefaultInitial {
			t.Fatalf("default first wait %s", w)
		}
	}
	if w := d.Wait(30, Attempt{}); w < DefaultMax/2 || w > DefaultMax {
		t.Errorf("default wait capped at %s: %s", DefaultMax, w)
	}
}

// TestGetFollowsAnyRedirect: a GET (an Evented API signal) follows a 302 or 303, which keep
// its method, and its query goes along when the new location is given in full.
func TestGetFollowsAnyRedirect(t *testing.T) {
	target, tts := serve(t, reply{status: 200})
	_, rts := serve(t, reply{status: 302, header: map[string]string{"Location": tts.URL + "/new?_domain=a&_name=b"}})
	p := EventedAPIPolicy()
	c, err := NewClient(Config{URL: rts.URL + "/old", Policy: &p})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Do(context.Background(), Request{Method: http.MethodGet, Query: "_domain=a&_name=b"})
	if err != nil || a.Redirects != 1 || a.Status != 200 {
		t.Fatalf("attempt %+v, err %v", a, err)
	}
	if r := target.requests(); len(r) != 1 || r[0].Method != http.MethodGet {
		t.Errorf("target got %+v", r)
	}
}

// TestPostNotTurnedIntoGet: a 303 to a POST comes back as a final failure that names the
// new location; nothing is sent there.
func TestPostNotTurnedIntoGet(t *testing.T) {
	target, tts := serve(t, reply{status: 200})
	_, rts := serve(t, reply{status: 303, header: map[string]string{"Location": tts.URL + "/new"}})
	c, err := NewClient(Config{URL: rts.URL})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Do(context.Background(), Request{Body: []byte("x")})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 303 || a.Verdict != Failed {
		t.Fatalf("attempt %+v, err %v", a, err)
	}
	if len(target.requests()) != 0 {
		t.Error("the 303 was followed")
	}
}

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"http://h/x", "http://H/y", true},
		{"http://h/x", "http://h:80/y", true},
		{"https://h/x", "https://h:443/y", true},
		{"http://h/x", "https://h/x", false},
		{"http://h:8080/x", "http://h:8081/x", false},
		{"http://h/x", "http://sub.h/x", false},
	} {
		a, b := mustURL(t, c.a), mustURL(t, c.b)
		if got := sameOrigin(a, b); got != c.same {
			t.Errorf("sameOrigin(%s, %s) = %v", c.a, c.b, got)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// String names a verdict in the messages of tests.
func (v Verdict) String() string {
	switch v {
	case Delivered:
		return "delivered"
	case Retry:
		return "retry"
	case Gone:
		return "gone"
	case Failed:
		return "failed"
	case Abandoned:
		return "abandoned"
	}
	return "Verdict(?)"
}
