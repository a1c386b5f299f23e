package cevent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
)

// specData is the data a reader that follows the JSON format takes from a stored event: the
// bytes of data_base64, else the JSON text of data under a JSON type and the text of a string
// under any other, else nil.
func specData(t *testing.T, stored []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(stored, &m); err != nil {
		t.Fatal(err)
	}
	if raw, ok := m["data_base64"]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	raw, ok := m["data"]
	if !ok {
		return nil
	}
	var ct string
	if c, ok := m["datacontenttype"]; ok {
		json.Unmarshal(c, &ct)
	}
	if ct != "" && !IsJSONMediaType(ct) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		return []byte(s)
	}
	return raw
}

// ForSDK writes JSON data of a type sdk-go does not read as JSON as data_base64, which sdk-go
// and every reader of the JSON format (the node's decoder here) read the same bytes from, and
// leaves every other event as it is.
func TestForSDK(t *testing.T) {
	const head = `{"specversion":"1.0","id":"1","source":"/s","type":"t"`
	for _, tc := range []struct {
		name, in string
		changed  bool
		data     string // the data's bytes, for both readers
	}{
		{"vnd.api+json object", head + `,"datacontenttype":"application/vnd.api+json","data":{"data":{"type":"articles","id":"1"}},"x":"y"}`, true, `{"data":{"type":"articles","id":"1"}}`},
		{"+json string", head + `,"datacontenttype":"application/vnd.api+json","data":"just a string"}`, true, `"just a string"`},
		{"+json number, data first", `{"data":42,"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"application/geo+json"}`, true, `42`},
		{"+json with a parameter", head + `,"datacontenttype":"application/problem+json; charset=utf-8","data":[1,2]}`, true, `[1,2]`},
		{"application/json in capitals", head + `,"datacontenttype":"Application/JSON","data":{"a":1}}`, true, `{"a":1}`},
		{"another */json", head + `,"datacontenttype":"model/json","data":{"a":1}}`, true, `{"a":1}`},
		{"cloudevents+json in capitals", head + `,"datacontenttype":"application/CloudEvents+json","data":{"a":1}}`, true, `{"a":1}`},
		{"whitespace kept", "{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"/s\",\"type\":\"t\",\"datacontenttype\":\"application/vnd.api+json\",\"data\":{\"a\": [1, 2]}\n}", true, "{\"a\": [1, 2]}\n"},
		{"null data_base64 beside data", head + `,"datacontenttype":"application/vnd.api+json","data_base64":null,"data":{"a":1}}`, true, `{"a":1}`},
		{"application/json", head + `,"datacontenttype":"application/json","data":{"a":1}}`, false, `{"a":1}`},
		{"application/json; charset=utf-8", head + `,"datacontenttype":"application/json; charset=utf-8","data":{"a":1}}`, false, `{"a":1}`},
		{"text/json", head + `,"datacontenttype":"text/json","data":{"a":1}}`, false, `{"a":1}`},
		{"cloudevents+json", head + `,"datacontenttype":"application/cloudevents+json","data":{"specversion":"1.0"}}`, false, `{"specversion":"1.0"}`},
		{"no datacontenttype", head + `,"data":{"a":1}}`, false, `{"a":1}`},
		{"text", head + `,"datacontenttype":"text/plain","data":"hi"}`, false, `hi`},
		{"xml", head + `,"datacontenttype":"application/xml","data":"<a/>"}`, false, `<a/>`},
		{"data_base64 already", head + `,"datacontenttype":"application/vnd.api+json","data_base64":"e30="}`, false, `{}`},
		{"+json without data", head + `,"datacontenttype":"application/vnd.api+json"}`, false, ``},
		{"+json null data", head + `,"datacontenttype":"application/vnd.api+json","data":null}`, false, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed := ForSDK([]byte(tc.in))
			if changed != tc.changed {
				t.Fatalf("changed = %v, want %v: %s", changed, tc.changed, out)
			}
			if !changed && string(out) != tc.in {
				t.Fatalf("unchanged event rewritten: %s", out)
			}
			var e event.Event
			if err := json.Unmarshal(out, &e); err != nil {
				t.Fatalf("sdk-go cannot read %s: %v", out, err)
			}
			if err := e.Validate(); err != nil {
				t.Fatalf("sdk-go finds %s invalid: %v", out, err)
			}
			if !bytes.Equal(e.Data(), []byte(tc.data)) {
				t.Errorf("sdk-go reads data %q from %s, want %q", e.Data(), out, tc.data)
			}
			ev, err := DecodeStructured(out, Limits{})
			if err != nil {
				t.Fatalf("the node's decoder refuses %s: %v", out, err)
			}
			if got := specData(t, ev.JSON); !bytes.Equal(got, []byte(tc.data)) && !(tc.data == "" && string(got) == "null") {
				t.Errorf("a reader of the JSON format reads data %q from %s, want %q", got, out, tc.data)
			}
			var before, after map[string]json.RawMessage
			json.Unmarshal([]byte(tc.in), &before)
			json.Unmarshal(out, &after)
			for k, v := range before {
				if k != "data" && k != "data_base64" && !bytes.Equal(after[k], v) {
					t.Errorf("%s: %s, was %s", k, after[k], v)
				}
			}
		})
	}
	// Input that is no event is returned as it is.
	for _, in := range []string{``, `[]`, `{"datacontenttype":`, `null`} {
		if out, changed := ForSDK([]byte(in)); changed || string(out) != in {
			t.Errorf("ForSDK(%q) = %q, %v", in, out, changed)
		}
	}
}

// FuzzForSDK: for any event the node accepts, ForSDK gives what its slow path gives (the
// quick test never passes over an event it would change), and sdk-go and the node's decoder
// read the same data from the result as the node reads from the event.
func FuzzForSDK(f *testing.F) {
	f.Add(`{"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"application/vnd.api+json","data":{"a": [1, 2]}}`)
	f.Add(`{"data":"x","specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"application/geo+json"}`)
	f.Add(`{"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"application/json","data":{"datacontenttype":"a/b+json"}}`)
	f.Add(`{"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"text/plain","data":"hi"}`)
	f.Add(`{"specversion":"1.0","id":"1","source":"/s","type":"t","d\u0061tacontenttype":"x/y+json","data":1}`)
	f.Fuzz(func(t *testing.T, in string) {
		stored, err := DecodeStructured([]byte(in), Limits{})
		if err != nil {
			return
		}
		out, changed := ForSDK([]byte(in))
		slow, slowChanged := forSDK([]byte(in))
		if changed != slowChanged || !bytes.Equal(out, slow) {
			t.Fatalf("ForSDK(%s) = %s, %v; without the quick test %s, %v", in, out, changed, slow, slowChanged)
		}
		again, err := DecodeStructured(out, Limits{})
		if err != nil {
			t.Fatalf("the node accepts %s but not %s: %v", in, out, err)
		}
		want := compactIfJSON(specData(t, stored.JSON))
		if got := compactIfJSON(specData(t, again.JSON)); !bytes.Equal(got, want) {
			t.Fatalf("a reader of the JSON format reads %q from %s, %q from %s", got, out, want, in)
		}
		var e event.Event
		if err := json.Unmarshal(out, &e); err != nil {
			// sdk-go refuses more than data (a source it does not take, say): it must take
			// the event without its data then.
			var m map[string]json.RawMessage
			json.Unmarshal(out, &m)
			delete(m, "data")
			delete(m, "data_base64")
			b, _ := json.Marshal(m)
			if json.Unmarshal(b, &event.Event{}) == nil {
				t.Fatalf("sdk-go cannot read %s: %v", out, err)
			}
			return
		}
		if got := compactIfJSON(e.Data()); !bytes.Equal(got, want) && !(len(want) == 0 || string(want) == "null") {
			t.Fatalf("sdk-go reads %q from %s; the node %q from %s", got, out, want, in)
		}
	})
}

func compactIfJSON(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// ForSDKBatch gives each event of a batch the form ForSDK gives it, and keeps the rest of the
// array as it is.
func TestForSDKBatch(t *testing.T) {
	const api = `{"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"application/vnd.api+json","data":{"a":1}}`
	const plain = `{"specversion":"1.0","id":"2","source":"/s","type":"t","data":{"datacontenttype":"application/vnd.api+json"}}`
	conv, _ := ForSDK([]byte(api))
	in := "[ " + api + ",\n" + plain + " , " + api + "]"
	want := "[ " + string(conv) + ",\n" + plain + " , " + string(conv) + "]"
	if got := ForSDKBatch([]byte(in)); string(got) != want {
		t.Errorf("ForSDKBatch:\n got %s\nwant %s", got, want)
	}
	for _, in := range []string{"[" + plain + "]", "[]", "", "[1,"} {
		if got := ForSDKBatch([]byte(in)); string(got) != in {
			t.Errorf("ForSDKBatch(%s) = %s", in, got)
		}
	}
}
