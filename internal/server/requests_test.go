package server_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
)

// A query string that is not one (a bad %-escape, a semicolon) is refused with 400 rather
// than read in part.
func TestMalformedQueryString(t *testing.T) {
	n := newMemNode(t)
	for _, q := range []string{"after=%zz", "maxItems=1&after=%2", "maxItems=1;after=x"} {
		resp, b := n.get("/events?" + q)
		var e errorReply
		mustUnmarshal(t, b, &e)
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(e.Error, "malformed query string: ") {
			t.Errorf("GET /events?%s: HTTP %d %s", q, resp.StatusCode, b)
		}
	}
}

// An id that is a string with bytes that are not UTF-8 is echoed as valid JSON, each such
// byte replaced by U+FFFD, in a single call, in a batch and in an error reply.
func TestIDNotUTF8(t *testing.T) {
	n := newMemNode(t)
	good := `"method":"events","params":{"before":"7fffffffffffffff-0000000000000000"}}`
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":"a` + "\xff" + `b",` + good,
		`[{"jsonrpc":"2.0","id":"a` + "\xff" + `b",` + good + `]`,
		`{"jsonrpc":"2.0","id":"a` + "\xff" + `b","method":"nope"}`,
	} {
		resp, b := n.post("/", "application/json", body)
		if resp.StatusCode != http.StatusOK || !utf8.Valid(b) || !json.Valid(b) {
			t.Fatalf("%q: HTTP %d, reply %q", body, resp.StatusCode, b)
		}
		m := regexp.MustCompile(`"id":("[^"]*")`).FindSubmatch(b)
		if m == nil || string(m[1]) != "\"a\uFFFDb\"" {
			t.Fatalf("%q: reply %s, want the id \"a\\uFFFDb\"", body, b)
		}
	}
}

// The Bearer scheme's name is matched without regard to case (RFC 7235); the token is not.
func TestBearerSchemeIgnoresCase(t *testing.T) {
	n := newNode(t, server.Config{ReadToken: "read-secret", IngestToken: "ingest-secret"}, eventlog.Options{})
	for _, scheme := range []string{"bearer", "BEARER", "bEaReR"} {
		resp, b := n.get("/events?before=7fffffffffffffff-0000000000000000", "Authorization", scheme+" read-secret")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("read with %q: HTTP %d %s", scheme, resp.StatusCode, b)
		}
		resp, b = n.post("/events", "application/cloudevents+json", ceJSON("/s", scheme, "t", 1), "Authorization", scheme+" ingest-secret")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("ingest with %q: HTTP %d %s", scheme, resp.StatusCode, b)
		}
		resp, b = n.get("/healthz", "Authorization", scheme+" read-secret")
		if !strings.Contains(string(b), `"items"`) {
			t.Fatalf("health with %q: HTTP %d %s, want the details", scheme, resp.StatusCode, b)
		}
	}
	for _, auth := range []string{"bearer READ-SECRET", "Bearerread-secret", "Basic read-secret"} {
		if resp, _ := n.get("/events", "Authorization", auth); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("read with %q: HTTP %d, want 401", auth, resp.StatusCode)
		}
	}
}
