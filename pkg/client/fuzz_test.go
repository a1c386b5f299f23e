package client

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzDecodeReply: any body with any status decodes to exactly one of a Reply or a typed
// error, and never panics.
func FuzzDecodeReply(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(capturesDir, "*.json"))
	if len(files) == 0 {
		f.Fatal("no captures")
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, 200, "")
	}
	for _, seed := range []struct {
		body   string
		status int
		ra     string
	}{
		{`{"error":"the node is shutting down; retry against it once it is back"}`, 503, "2"},
		{`{"error":"this node requires a bearer token"}`, 401, ""},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Server busy","data":"retry"}}`, 200, ""},
		{`{"jsonrpc":"2.0","id":1,"result":{"items":[{"cursor":"18ea61a27c39abd8-0000000000000001","event":"t","data":{}}],"more":false,"oldest":"","newest":"","order":"asc"}}`, 200, ""},
		{`{"jsonrpc":"2.0","id":1,"result":null}`, 200, ""},
		{`{"jsonrpc":"2.0","id":1,"result":{"items":[{"cursor":7}]}}`, 200, ""},
		{`[{"jsonrpc":"2.0","id":1,"result":{}}]`, 200, ""},
		{"<html>bad gateway</html>", 502, "Wed, 21 Oct 2015 07:28:00 GMT"},
		{"", 429, "-1"},
		{"\x00\xff", 200, "99999999999999999999"},
	} {
		f.Add([]byte(seed.body), seed.status, seed.ra)
	}
	f.Fuzz(func(t *testing.T, body []byte, status int, ra string) {
		if status < 100 || status > 999 {
			status = 100 + (status%900+900)%900
		}
		resp := &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {ra}}}
		r, err := decodeReply(resp, body)
		if (r == nil) == (err == nil) {
			t.Fatalf("reply %v and error %v", r, err)
		}
		if err != nil {
			var he *HTTPError
			var re *RPCError
			var de *DecodeError
			switch {
			case errors.As(err, &he):
				if status == http.StatusOK || he.Status != status || he.RetryAfter < 0 || he.RetryAfter > time.Hour {
					t.Fatalf("status %d gave %#v", status, he)
				}
				if Retryable(err) != (status >= 500 || status == 429) {
					t.Fatalf("HTTP %d: retryable %v", status, Retryable(err))
				}
			case errors.As(err, &re):
				if status != http.StatusOK || Retryable(err) != (re.Code == -32000) {
					t.Fatalf("status %d gave %#v", status, re)
				}
			case errors.As(err, &de):
				if status != http.StatusOK || Retryable(err) || len(de.Body) > 80+len("…") {
					t.Fatalf("status %d gave %#v", status, de)
				}
			default:
				t.Fatalf("an error of type %T: %v", err, err)
			}
			if err.Error() == "" {
				t.Fatal("an empty error message")
			}
			return
		}
		if status != http.StatusOK {
			t.Fatalf("HTTP %d decoded as a reply", status)
		}
		for _, it := range r.Items {
			// Raw is the item object itself; the fields are its members.
			var m map[string]json.RawMessage
			if err := json.Unmarshal(it.Raw, &m); err != nil {
				t.Fatalf("Raw %q is not a JSON object: %v", it.Raw, err)
			}
			var cur, ev string
			if err := json.Unmarshal(m["cursor"], &cur); err != nil || cur != it.Cursor {
				t.Fatalf("Raw %s: cursor %q, item says %q (%v)", it.Raw, cur, it.Cursor, err)
			}
			if json.Unmarshal(m["event"], &ev) == nil && ev != it.Event {
				t.Fatalf("Raw %s: event %q, item says %q", it.Raw, ev, it.Event)
			}
			if d, ok := m["data"]; ok && string(d) != string(it.Data) {
				t.Fatalf("Raw %s: data %s, item says %s", it.Raw, d, it.Data)
			}
		}
	})
}
