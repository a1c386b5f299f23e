package deliver

import (
	"context"
	"strings"
	"testing"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// rawFriendly is an event whose values a receiver that does not decode ce-
// header values (sdk-go) can only read exactly when they are sent raw.
const rawFriendly = `{"specversion":"1.0","id":"id 100% \"q\"","source":"https://example.com/a%20b?x=1",` +
	`"type":"org.example.raw.v1","subject":"say \"hi\" now","time":"2024-05-06T07:08:09Z",` +
	`"dataschema":"https://example.com/s.json","comexampleextension2":"{\"othervalue\": 5}",` +
	`"pct":"100% sure","tilde":"~!#$&'()*+,/:;=?@[]","num":42,"flag":true,"empty":"",` +
	`"datacontenttype":"application/json","data":{"a": 1}` + "\n}"

// With HeaderRaw, an sdk-go receiver, which does not percent-decode, reads
// every attribute exactly; the JSON data keeps its bytes.
func TestBinaryRawHeadersReadBySDK(t *testing.T) {
	ts, got := recorder(t, 202)
	s, _ := newSender(t, Options{URL: ts.URL, Mode: Binary, HeaderEncoding: HeaderRaw})
	if _, err := s.Send(context.Background(), [][]byte{[]byte(rawFriendly)}); err != nil {
		t.Fatal(err)
	}
	r := got()[0]
	if v := r.header.Get("Ce-Subject"); v != `say "hi" now` {
		t.Errorf("raw header Ce-Subject = %q", v)
	}
	e, err := cehttp.NewEventFromHTTPRequest(r.request())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"id": `id 100% "q"`, "source": "https://example.com/a%20b?x=1", "type": "org.example.raw.v1",
		"subject": `say "hi" now`, "time": "2024-05-06T07:08:09Z", "dataschema": "https://example.com/s.json",
		"datacontenttype": "application/json", "data": "{\"a\": 1}\n",
		"comexampleextension2": `{"othervalue": 5}`, "pct": "100% sure", "tilde": "~!#$&'()*+,/:;=?@[]",
		"num": "42", "flag": "true", "empty": "",
	}
	gotAttrs := map[string]string{
		"id": e.ID(), "source": e.Source(), "type": e.Type(), "subject": e.Subject(),
		"time": e.Time().UTC().Format("2006-01-02T15:04:05Z07:00"), "dataschema": e.DataSchema(),
		"datacontenttype": e.DataContentType(), "data": string(e.Data()),
	}
	for k, v := range e.Extensions() {
		s, _ := v.(string)
		gotAttrs[k] = s
	}
	for k, w := range want {
		if gotAttrs[k] != w {
			t.Errorf("%s = %q, want %q", k, gotAttrs[k], w)
		}
	}
	if len(e.Extensions()) != 6 {
		t.Errorf("extensions %v", e.Extensions())
	}
}

// The default stays the binding's percent-encoding.
func TestBinaryPercentIsTheDefault(t *testing.T) {
	ts, got := recorder(t, 202)
	s, _ := newSender(t, Options{URL: ts.URL, Mode: Binary})
	if _, err := s.Send(context.Background(), [][]byte{[]byte(rawFriendly)}); err != nil {
		t.Fatal(err)
	}
	if v := got()[0].header.Get("Ce-Subject"); v != "say%20%22hi%22%20now" {
		t.Errorf("Ce-Subject = %q", v)
	}
	if HeaderEncoding(0) != HeaderPercent {
		t.Error("the zero HeaderEncoding is not HeaderPercent")
	}
}

// A value that cannot go in a header unencoded is refused, naming the
// attribute, and nothing is sent.
func TestBinaryRawRefusesWhatCannotGoRaw(t *testing.T) {
	ts, got := recorder(t, 200)
	s, _ := newSender(t, Options{URL: ts.URL, Mode: Binary, HeaderEncoding: HeaderRaw})
	for _, c := range []struct{ ext, msg string }{
		{`"café"`, "non-ASCII"},
		{`" lead"`, "begins or ends with a space"},
		{`"trail "`, "begins or ends with a space"},
		{`"tab\there"`, "control character"},
		{`"line\r\nInjected: x"`, "control character"},
		{`"del\u007f"`, "control character"},
	} {
		ev := `{"specversion":"1.0","id":"1","source":"/s","type":"t","myext":` + c.ext + `}`
		_, err := s.Send(context.Background(), [][]byte{[]byte(ev)})
		if err == nil || !strings.Contains(err.Error(), `attribute "myext"`) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err = %v, want one naming myext and %q", c.ext, err, c.msg)
		}
	}
	if n := len(got()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestParseHeaderEncoding(t *testing.T) {
	for _, e := range []HeaderEncoding{HeaderPercent, HeaderRaw} {
		if got, err := ParseHeaderEncoding(strings.ToUpper(e.String())); err != nil || got != e {
			t.Errorf("ParseHeaderEncoding(%q) = %v, %v", e, got, err)
		}
	}
	if _, err := ParseHeaderEncoding("quoted"); err == nil {
		t.Error("ParseHeaderEncoding(quoted) accepted")
	}
}

// Encode gives what Send sends, in either encoding.
func TestEncodeHeaderEncodings(t *testing.T) {
	h, body, err := Encode(Binary, HeaderRaw, []byte(rawFriendly))
	if err != nil || h.Get("Ce-Pct") != "100% sure" || string(body) != "{\"a\": 1}\n" {
		t.Errorf("raw: %v %q %v", h, body, err)
	}
	h, _, err = Encode(Binary, HeaderPercent, []byte(rawFriendly))
	if err != nil || h.Get("Ce-Pct") != "100%25%20sure" {
		t.Errorf("percent: %v %v", h, err)
	}
}
