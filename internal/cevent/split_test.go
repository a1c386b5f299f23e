package cevent

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestSplitBinary(t *testing.T) {
	attrs, body, err := SplitBinary([]byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","minorversion":0,"pii":false,"subject":null,"datacontenttype":"text/plain","data":"héllo"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Field{{"datacontenttype", "text/plain"}, {"id", "1"}, {"minorversion", "0"}, {"pii", "false"}, {"source", "/s"}, {"specversion", "1.0"}, {"type", "t"}}
	if !slices.Equal(attrs, want) || string(body) != "héllo" {
		t.Fatalf("%v %q", attrs, body)
	}
	_, body, _ = SplitBinary([]byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":{ "a" : 1 }}`))
	if string(body) != `{ "a" : 1 }` {
		t.Fatalf("JSON data %q", body)
	}
	_, body, _ = SplitBinary([]byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data_base64":"AP8="}`))
	if !bytes.Equal(body, []byte{0, 0xff}) {
		t.Fatalf("data_base64 %q", body)
	}
	for _, bad := range []struct{ ev, msg string }{
		{`[1]`, "decoding the event"},
		{`{"id":"1","a_b":"x"}`, `member "a_b" is not a valid CloudEvents attribute name`},
		{`{"id":{"a":1}}`, `attribute "id": a JSON object or array`},
		{`{"data":1,"data_base64":"AA=="}`, `both "data" and "data_base64"`},
		{`{"data_base64":"%%"}`, `member "data_base64"`},
	} {
		if _, _, err := SplitBinary([]byte(bad.ev)); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%s: %v", bad.ev, err)
		}
	}
}

// FuzzSplitBinary checks that an event split into its binary form and encoded from it again
// splits the same: no attribute and no byte of data is lost on the way.
func FuzzSplitBinary(f *testing.F) {
	f.Add([]byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","minorversion":0,"data":{"a":[1,2]}}`))
	f.Add([]byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"text/plain","data":"x\ny"}`))
	f.Add([]byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data_base64":"AP8="}`))
	f.Add([]byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","time":"2026-11-22T10:00:00Z","data":"{}"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeStructured(b, Limits{})
		if err != nil {
			return
		}
		attrs, body, err := SplitBinary(ev.JSON)
		if err != nil {
			t.Fatalf("%s: %v", ev.JSON, err)
		}
		_, again, err := AppendFields(nil, attrs, body, Limits{MaxEventBytes: 1 << 20})
		if err != nil {
			t.Fatalf("%s splits into %v %q, which does not encode: %v", ev.JSON, attrs, body, err)
		}
		attrs2, body2, err := SplitBinary(again.JSON)
		if err != nil || !slices.Equal(attrs, attrs2) || !bytes.Equal(body, body2) {
			t.Fatalf("%s became %s: %v %q, then %v %q (%v)", ev.JSON, again.JSON, attrs, body, attrs2, body2, err)
		}
	})
}
