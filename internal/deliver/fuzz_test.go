package deliver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/evtctl/evtctl/internal/cevent"
)

// FuzzEncodeHeaderValue checks that decoding undoes EncodeHeaderValue, that
// its output has only the bytes the HTTP binding allows unencoded, and
// that the node's decoder reads valid strings back intact.
func FuzzEncodeHeaderValue(f *testing.F) {
	for _, s := range []string{"", "plain", "a b", `"q"`, "100%", "%20", "é☃", "\x00\x7f\xff", "~!#$&'()*+,/:;=?@[]", "tab\there"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := EncodeHeaderValue(s)
		for i := 0; i < len(enc); i++ {
			if c := enc[i]; c < 0x21 || c > 0x7e || c == '"' {
				t.Fatalf("EncodeHeaderValue(%q) = %q has byte %#x", s, enc, c)
			}
		}
		if strings.Count(enc, "%") != (len(enc)-len(s))/2 {
			t.Fatalf("EncodeHeaderValue(%q) = %q: a '%%' that does not start an escape", s, enc)
		}
		dec, err := url.PathUnescape(enc)
		if err != nil || dec != s {
			t.Fatalf("PathUnescape(EncodeHeaderValue(%q) = %q) = %q, %v", s, enc, dec, err)
		}
		// The node decodes the value of a ce- header back to s, whenever s
		// is a valid id (as the structured decoder judges it).
		js, _ := json.Marshal(map[string]string{"specversion": "1.0", "id": s, "source": "/s", "type": "t"})
		if _, err := cevent.DecodeStructured(js, cevent.Limits{}); err != nil || !utf8.ValidString(s) {
			return
		}
		h := http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {enc}, "Ce-Source": {"/s"}, "Ce-Type": {"t"}}
		if ev, err := cevent.DecodeBinary(h, nil, cevent.Limits{}); err != nil || ev.ID != s {
			t.Fatalf("node decoded %q as id %q (%v), want %q", enc, ev.ID, err, s)
		}
	})
}

// FuzzBinaryRoundTrip stores a binary-mode request as a node would and sends
// the stored event on in binary mode with either header encoding: the body
// goes out byte for byte, a raw header carries the stored value as it is,
// and a node that decodes the new request stores the same event.
func FuzzBinaryRoundTrip(f *testing.F) {
	f.Add(`say "hi" now`, "100% sure", "application/json", []byte("{\"a\": 1}\n"), false)
	f.Add(`"q"`, "a%20b", "", []byte(" [1,\r\n2] "), true)
	f.Add("é", `{"othervalue": 5}`, "application/xml", []byte("<a/>\n"), true)
	f.Add("x", "y", "application/octet-stream", []byte{0, 0xff}, false)
	f.Add("x", "y", "text/plain; charset=latin1", []byte("caf\xe9"), true)
	f.Add("x", "y", "application/cloudevents+json", []byte(`{"specversion":"1.0","id":"in"}`), false)
	f.Fuzz(func(t *testing.T, subject, ext, ct string, body []byte, raw bool) {
		h := http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {"1"}, "Ce-Source": {"/s"}, "Ce-Type": {"t"},
			"Ce-Subject": {subject}, "Ce-Myext": {ext}}
		if ct != "" {
			h["Content-Type"] = []string{ct}
		}
		stored, err := cevent.DecodeBinary(h, body, cevent.Limits{})
		if err != nil {
			return
		}
		enc := HeaderPercent
		if raw {
			enc = HeaderRaw
		}
		hdr, out, err := encode(Binary, enc, stored.JSON, true)
		if err != nil {
			if !raw {
				t.Fatalf("stored %s cannot be sent: %v", stored.JSON, err)
			}
			return
		}
		if cevent.RequestMode(hdr, out) != cevent.ModeBinary {
			// A CloudEvents format as the datacontenttype: the event goes structured, as stored.
			again, err := cevent.DecodeRequest(hdr, out, cevent.Limits{})
			if err != nil || len(again) != 1 || hdr.Get("Content-Type") != ContentTypeStructured || !bytes.Equal(out, stored.JSON) {
				t.Fatalf("stored %s went out as %v %s (%v)", stored.JSON, hdr, out, err)
			}
			return
		}
		br := binaryRequest{header: hdr, body: out}
		if !bytes.Equal(br.body, body) {
			t.Fatalf("body %q went out as %q (stored %s)", body, br.body, stored.JSON)
		}
		var m map[string]any
		if err := json.Unmarshal(stored.JSON, &m); err != nil {
			t.Fatal(err)
		}
		if raw && (br.header.Get("Ce-Subject") != m["subject"] || br.header.Get("Ce-Myext") != m["myext"]) {
			t.Fatalf("raw headers %q %q, stored %s", br.header.Get("Ce-Subject"), br.header.Get("Ce-Myext"), stored.JSON)
		}
		if raw {
			return // a node decodes raw values as the binding says; see the README
		}
		again, err := cevent.DecodeBinary(br.header, br.body, cevent.Limits{})
		if err != nil || !bytes.Equal(again.JSON, stored.JSON) {
			t.Fatalf("stored %s, then %s (%v)", stored.JSON, again.JSON, err)
		}
	})
}

// FuzzBatchReply holds the reading of an evtctl node's batch reply as the node writes it
// to encoding/json's reading of any reply: whatever the fast reading accepts, the slow one
// reads alike.
func FuzzBatchReply(f *testing.F) {
	f.Add([]byte(`{"count":2,"results":[{"cursor":"18ea-01","duplicate":false},{"cursor":"18ea-02","duplicate":true}]}`+"\n"), 2)
	f.Add([]byte(`{"count":0,"results":[]}`), 0)
	f.Add([]byte(`{"count":1,"results":[{"cursor":"a\"b","duplicate":false}]}`), 1)
	f.Add([]byte(`{"results":[{"duplicate":false,"cursor":"x"}],"count":1}`), 1)
	f.Add([]byte(`{"count":1,"results":[{"cursor":"x","duplicate":false}]} x`), 1)
	f.Fuzz(func(t *testing.T, reply []byte, n int) {
		if n < 0 || n > 1000 {
			return
		}
		out := make([]Result, n)
		if !readBatchReply(reply, out) {
			for i, r := range out {
				if r != (Result{}) {
					t.Fatalf("a refused reply changed result %d: %+v", i, r)
				}
			}
			return
		}
		r, ok := parseReply(reply)
		if !ok || len(r.Results) != n {
			t.Fatalf("readBatchReply read %q as %d results; parseReply: %v, %d", reply, n, ok, len(r.Results))
		}
		for i := range out {
			if out[i].Cursor != r.Results[i].Cursor || out[i].Duplicate != r.Results[i].Duplicate {
				t.Fatalf("result %d of %q: %+v, parseReply %+v", i, reply, out[i], r.Results[i])
			}
		}
	})
}
