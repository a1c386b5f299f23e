package eventgen

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/cevent"
)

var fixed = func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) }

func TestEventDefaults(t *testing.T) {
	g, err := New(Spec{Type: "org.openedx.learning.course.enrollment.created.v1", Source: "/openedx/lms/web", Data: `{"a": 1}`}, fixed)
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Event(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cevent.DecodeStructured(b, cevent.Limits{}); err != nil {
		t.Fatalf("not a valid CloudEvent: %v\n%s", err, b)
	}
	id := gjson.GetBytes(b, "id").String()
	if u, err := uuid.Parse(id); err != nil || u.Version() != 1 {
		t.Errorf("id %q is not a UUID1", id)
	}
	for path, want := range map[string]string{
		"specversion": "1.0", "time": "2026-11-22T10:00:00Z", "datacontenttype": "application/json",
		"minorversion": "0", "pii": "false", "data": `{"a":1}`,
	} {
		if got := gjson.GetBytes(b, path).Raw; strings.Trim(got, `"`) != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
	if gjson.GetBytes(b, "minorversion").Type != gjson.Number || gjson.GetBytes(b, "pii").Type != gjson.False {
		t.Error("OEP-41 extensions must be a number and a boolean")
	}
}

func TestTemplates(t *testing.T) {
	g, err := New(Spec{
		Type: "org.example.{{randChoice \"a\" \"b\"}}.v1", Source: "/s", ID: "ev-{{.Seq}}",
		Data:       `{"n": {{.Seq}}, "id": "{{uuid}}", "r": {{randInt 5 5}}, "at": "{{now}}"}`,
		Extensions: map[string]string{"pii": "true", "tenant": "t{{.Seq}}"},
	}, fixed)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 1; i <= 3; i++ {
		b, err := g.Event(i)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cevent.DecodeStructured(b, cevent.Limits{}); err != nil {
			t.Fatalf("event %d invalid: %v", i, err)
		}
		if got := gjson.GetBytes(b, "data.n").Int(); got != int64(i) {
			t.Errorf("data.n = %d, want %d", got, i)
		}
		if gjson.GetBytes(b, "id").String() != "ev-"+string(rune('0'+i)) {
			t.Errorf("id = %s", gjson.GetBytes(b, "id"))
		}
		if gjson.GetBytes(b, "data.r").Int() != 5 || gjson.GetBytes(b, "data.at").String() != "2026-11-22T10:00:00Z" {
			t.Errorf("helpers: %s", b)
		}
		if gjson.GetBytes(b, "pii").Type != gjson.True || gjson.GetBytes(b, "tenant").String() != "t"+string(rune('0'+i)) {
			t.Errorf("extensions: %s", b)
		}
		if typ := gjson.GetBytes(b, "type").String(); typ != "org.example.a.v1" && typ != "org.example.b.v1" {
			t.Errorf("type = %s", typ)
		}
		u := gjson.GetBytes(b, "data.id").String()
		if seen[u] {
			t.Error("uuid repeated")
		}
		seen[u] = true
	}
}

func TestErrors(t *testing.T) {
	if _, err := New(Spec{Data: `{{.Seq`}, fixed); err == nil || !strings.Contains(err.Error(), "--data template") {
		t.Errorf("bad template: %v", err)
	}
	g, _ := New(Spec{Type: "t", Source: "/s", Data: `{"n": {{.Nope}}}`}, fixed)
	if _, err := g.Event(1); err == nil {
		t.Error("unknown template field accepted")
	}
	g, _ = New(Spec{Type: "t", Source: "/s", Data: `{"n": `}, fixed)
	if _, err := g.Event(1); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("bad JSON data: %v", err)
	}
	g, _ = New(Spec{Type: "t", Source: "/s", Data: `{{randInt 5 1}}`}, fixed)
	if _, err := g.Event(1); err == nil {
		t.Error("randInt with max < min accepted")
	}
	// Text data with a text content type is a JSON string.
	g, _ = New(Spec{Type: "t", Source: "/s", Data: "hello\nworld", DataContentType: "text/plain"}, fixed)
	b, err := g.Event(1)
	if err != nil || gjson.GetBytes(b, "data").String() != "hello\nworld" {
		t.Errorf("text data: %s %v", b, err)
	}
}

func TestCompleteFillsDefaults(t *testing.T) {
	fillDefaults := func(line []byte, now time.Time) ([]byte, error) {
		ev, _, err := Complete(line, now)
		return ev, err
	}
	now := fixed()
	out, err := fillDefaults([]byte(`{"source":"/s","type":"t","data":{"x":1}}`), now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cevent.DecodeStructured(out, cevent.Limits{}); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if gjson.GetBytes(out, "time").String() != "2026-11-22T10:00:00Z" || gjson.GetBytes(out, "specversion").String() != "1.0" {
		t.Errorf("defaults missing: %s", out)
	}
	full := []byte(`{"specversion":"1.0","id":"x","source":"/s","type":"t","time":"2026-01-01T00:00:00Z"}`)
	if out, _ := fillDefaults(full, now); string(out) != string(full) {
		t.Errorf("complete event changed: %s", out)
	}
	if out, err := fillDefaults([]byte(`{}`), now); err != nil || !gjson.ValidBytes(out) {
		t.Errorf("empty object: %s %v", out, err)
	}
	if _, err := fillDefaults([]byte(`[1]`), now); err == nil {
		t.Error("array accepted")
	}
}

// Data that is not JSON goes byte for byte: text in UTF-8 as a string (markup and trailing
// newlines as they are), anything else in data_base64; bytes that are not UTF-8 are never
// executed as a template.
func TestDataNotJSON(t *testing.T) {
	for _, tc := range []struct {
		data, ct, member, want string
	}{
		{"line\n\n", "text/plain", "data", "line\n\n"},
		{"<a href=\"x\">&amp;</a>\n", "application/xml", "data", "<a href=\"x\">&amp;</a>\n"},
		{"\xfe\xff", "application/octet-stream", "data_base64", "/v8="},
		{"hello", "application/octet-stream", "data_base64", "aGVsbG8="},
		{"caf\xe9", "text/plain", "data_base64", "Y2Fm6Q=="},
		{"caf\u00e9", "text/plain; charset=iso-8859-1", "data_base64", "Y2Fmw6k="},
		{"{{\xff", "application/octet-stream", "data_base64", "e3v/"},
	} {
		g, err := New(Spec{Type: "t.a.b", Source: "/s", Data: tc.data, DataContentType: tc.ct}, fixed)
		if err != nil {
			t.Fatalf("%q: %v", tc.data, err)
		}
		b, err := g.Event(1)
		if err != nil {
			t.Fatalf("%q: %v", tc.data, err)
		}
		if _, err := cevent.DecodeStructured(b, cevent.Limits{}); err != nil {
			t.Fatalf("%q: not a valid CloudEvent: %v\n%s", tc.data, err, b)
		}
		if got := gjson.GetBytes(b, tc.member); got.String() != tc.want {
			t.Errorf("%q as %s: %s = %q, want %q\n%s", tc.data, tc.ct, tc.member, got.String(), tc.want, b)
		}
	}
}
