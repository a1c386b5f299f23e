package cevent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

var fuzzLimits = Limits{MaxEventBytes: 2048, MaxBatch: 50}

// checkRefusal checks that err is an *Error with one of the statuses.
func checkRefusal(t *testing.T, err error, statuses ...int) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	for _, s := range statuses {
		if e.Status == s {
			if e.Msg == "" {
				t.Fatal("empty error message")
			}
			return
		}
	}
	t.Fatalf("status %d (%s), want one of %v", e.Status, e.Msg, statuses)
}

// checkAccepted checks the invariants of an accepted event: valid, compact
// JSON within the limit that re-decodes to the same Event and that sdk-go
// reads with the same attributes.
func checkAccepted(t *testing.T, ev Event, lim Limits) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, ev.JSON); err != nil || !bytes.Equal(buf.Bytes(), ev.JSON) {
		t.Fatalf("stored JSON is not compact: %q", ev.JSON)
	}
	checkAcceptedSpaced(t, ev, lim)
}

// checkAcceptedSpaced is checkAccepted for binary mode, where a JSON body
// is stored with its whitespace (and Spaced says so).
func checkAcceptedSpaced(t *testing.T, ev Event, lim Limits) {
	t.Helper()
	if !json.Valid(ev.JSON) {
		t.Fatalf("stored invalid JSON %q", ev.JSON)
	}
	var buf bytes.Buffer
	if compact := json.Compact(&buf, ev.JSON) == nil && bytes.Equal(buf.Bytes(), ev.JSON); ev.Spaced == compact {
		t.Fatalf("Spaced is %v for %q", ev.Spaced, ev.JSON)
	}
	if len(ev.JSON) > lim.MaxEventBytes {
		t.Fatalf("stored %d bytes, over the limit %d", len(ev.JSON), lim.MaxEventBytes)
	}
	again, err := DecodeStructured(ev.JSON, lim)
	if err != nil {
		t.Fatalf("stored JSON %q does not decode again: %v", ev.JSON, err)
	}
	if !sameEvent(ev, again) {
		t.Fatalf("re-decoded %+v, want %+v", again, ev)
	}
	checkAgainstJSON(t, ev)
	sdkCheck(t, ev)
}

func FuzzDecodeStructured(f *testing.F) {
	for _, tc := range append(structuredValid, structuredInvalid...) {
		if len(tc.in) < 4096 {
			f.Add([]byte(tc.in))
		}
	}
	f.Add([]byte(benchEvent(7)))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeStructured(b, fuzzLimits)
		if err != nil {
			checkRefusal(t, err, 400, 413)
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		checkAccepted(t, ev, fuzzLimits)
	})
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte("[]"))
	f.Add([]byte(batchOf(minimal, with(`,"data":{"a":[1,2]}`))))
	f.Add([]byte(batchOf(minimal, `{"specversion":"1.0"}`, minimal)))
	f.Add([]byte(batchOf(with(`,"datacontenttype":"text/plain","data":"x"`), with(`,"datacontenttype":"text/plain; charset=utf-8","data_base64":"eA=="`))))
	f.Add(benchBatch(3))
	for _, tc := range structuredValid[:10] {
		f.Add([]byte(batchOf(tc.in, minimal)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := DecodeBatch(b, fuzzLimits)
		if err != nil {
			if evs != nil {
				t.Fatalf("%d events returned with an error", len(evs))
			}
			checkRefusal(t, err, 400, 413)
			var e *Error
			errors.As(err, &e)
			if e.Index >= 0 && !strings.HasPrefix(e.Msg, "batch index ") {
				t.Fatalf("index %d but message %q", e.Index, e.Msg)
			}
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		var raw []json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil || len(raw) != len(evs) {
			t.Fatalf("encoding/json sees %d elements (%v), we decoded %d", len(raw), err, len(evs))
		}
		for i, ev := range evs {
			checkAccepted(t, ev, fuzzLimits)
			one, err := DecodeStructured(raw[i], fuzzLimits)
			if err != nil || !sameEvent(one, ev) {
				t.Fatalf("event %d decodes differently alone: %v", i, err)
			}
		}
	})
}

func FuzzDecodeBinary(f *testing.F) {
	f.Add("1.0", "1", "/s", "t", "", "", "", "", "", []byte(nil))
	f.Add("1.0", "a%20b", "https://example.com/x", "com.example", "sub", "2018-04-05T17:31:00Z", "Myext", "v%C3%A9", "application/json", []byte(`{"a": [1, null]}`))
	f.Add("1.0", `"q\"x"`, "/s", "t", "%E2%82%AC", "2018-04-05T17:31:00.5+02:00", "Ext", "%", "text/plain; charset=utf-8", []byte("hello\n"))
	f.Add("1.0", "1", "/s", "t", "", "", "", "", "application/octet-stream", []byte{0, 1, 2})
	f.Add("1.0", "1", "/s", "t", "", "", "", "", "", []byte(`hello`))
	f.Add("1.0", "1", "/s", "t", "", "", "Dataschema", "https://x/y", "text/csv", []byte("\xff"))
	f.Add("1.0", "1", "/a%20b", "t", `say "hi" now`, "", "Comexampleextension2", `{"othervalue": 5}`, "application/json", []byte("{\"a\": 1}\n"))
	f.Add("1.0", `""`, "/s", "t", "100% sure", "", "Ext", "caf%E9 %0A", "application/atom+xml", []byte("<a>\n</a>"))
	f.Add("1.0", "1", "/s", "t", `"a\"b"`, "", "Ext", `"x" "y"`, "application/xml; charset=latin1", []byte("<a/>"))
	f.Add("0.3", "", "a b", "", "", "bad", "my_ext", "x", "bad type", []byte(`{`))
	f.Fuzz(func(t *testing.T, sv, id, source, typ, subject, tm, extName, extValue, ct string, body []byte) {
		h := http.Header{}
		h["Ce-Specversion"] = []string{sv}
		h["Ce-Id"] = []string{id}
		h["Ce-Source"] = []string{source}
		h["Ce-Type"] = []string{typ}
		if subject != "" {
			h["Ce-Subject"] = []string{subject}
		}
		if tm != "" {
			h["Ce-Time"] = []string{tm}
		}
		if extName != "" {
			h["Ce-"+extName] = append(h["Ce-"+extName], extValue)
		}
		if ct != "" {
			h["Content-Type"] = []string{ct}
		}
		ev, err := DecodeBinary(h, body, fuzzLimits)
		if err != nil {
			checkRefusal(t, err, 400, 413)
			return
		}
		checkAcceptedSpaced(t, ev, fuzzLimits)
		var stored map[string]any
		if err := json.Unmarshal(ev.JSON, &stored); err != nil {
			t.Fatal(err)
		}
		// An attribute is the header value decoded, or the value as received.
		if name := strings.ToLower(extName); extName != "" && name != "specversion" && name != "id" && name != "source" && name != "type" {
			got, _ := stored[name].(string)
			if got != decodeHeaderValue(extValue) && got != extValue {
				t.Fatalf("header %q stored as %q", extValue, got)
			}
			if !strings.Contains(extValue, "%") && !isQuotedString(extValue) && got != extValue {
				t.Fatalf("header %q needs no decoding, stored as %q", extValue, got)
			}
		}
		// Data is stored without losing a byte.
		if len(body) > 0 {
			js := ct == "" || IsJSONMediaType(ct)
			if _, ok := stored["data"]; ok && js && !bytes.HasSuffix(ev.JSON, append(append([]byte(`,"data":`), body...), '}')) {
				t.Fatalf("JSON body %q stored as %s", body, ev.JSON)
			}
			if s, ok := stored["data"].(string); ok && !js && s != string(body) {
				t.Fatalf("text body %q stored as %q", body, s)
			}
			if b64, ok := stored["data_base64"].(string); ok {
				if d, err := base64.StdEncoding.DecodeString(b64); err != nil || !bytes.Equal(d, body) {
					t.Fatalf("body %q stored as data_base64 %q", body, b64)
				}
			}
		}
	})
}

// FuzzDecodeHeaderValue checks that decodeHeaderValue undoes the binding's
// percent-encoding and RFC 7230 quoting of any string, and leaves a value
// that needs neither as it is.
func FuzzDecodeHeaderValue(f *testing.F) {
	for _, s := range []string{"", "plain", "a b", `"q"`, `say "hi" now`, "100%", "100% sure", "%20", "%zz", "%4", "%C0%A0", `"a\"b"`, `"a"b"`, `"`, `""`, "é☃", "\x00\x7f\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := decodeHeaderValue(s)
		if len(got) > len(s) {
			t.Fatalf("decodeHeaderValue(%q) = %q is longer", s, got)
		}
		if !strings.Contains(s, "%") && !isQuotedString(s) && got != s {
			t.Fatalf("decodeHeaderValue(%q) = %q, want it unchanged", s, got)
		}
		enc := percentEncode(s)
		if got := decodeHeaderValue(enc); got != s {
			t.Fatalf("decodeHeaderValue(%q) = %q, want %q", enc, got, s)
		}
		q := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(enc) + `"`
		if got := decodeHeaderValue(q); got != s {
			t.Fatalf("decodeHeaderValue(%q) = %q, want %q", q, got, s)
		}
	})
}

// percentEncode encodes s as the HTTP binding asks a sender to.
func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func FuzzFromSignal(f *testing.F) {
	f.Add("user-42", false, "_domain=web&_name=pageview&a=1&a=2;b", "", []byte(nil))
	f.Add("e", true, "", "application/x-www-form-urlencoded", []byte("_domain=d&_name=n&_timestamp=Sun%2C+06+Nov+1994+08%3A49%3A37+GMT"))
	f.Add("a/b c", true, "", "application/json", []byte(`{"_domain":"d","_name":"n","x":{"y":[1,null]},"_timestamp":"2012-03-04T05:06:07Z"}`))
	f.Add("", true, "", "", []byte(`{"_domain":"d","_name":"n"}`))
	f.Fuzz(func(t *testing.T, entity string, post bool, query, ct string, body []byte) {
		r := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/signal/x", RawQuery: query}, Header: http.Header{}}
		if post {
			r.Method = http.MethodPost
		}
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		ev, err := FromSignal(entity, r, body, fuzzLimits, fixedID)
		if err != nil {
			checkRefusal(t, err, 400, 413, 415)
			return
		}
		checkAccepted(t, ev, fuzzLimits)
		if ev.ID != "id-1" || !strings.Contains(ev.Type, ".") || !strings.HasPrefix(ev.Source, "/signal") {
			t.Fatalf("unexpected mapping %+v", ev)
		}
	})
}
