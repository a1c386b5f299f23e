package cevent

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unsafe"
)

// openEdXFields are the fields the Open edX event bus writes to a Redis stream entry, in its
// order, without event_data.
func openEdXFields() []Field {
	return []Field{
		{"type", "org.openedx.learning.course.enrollment.created.v1"},
		{"id", "5e9f5a4c-c8b1-11ee-a506-0242ac120002"},
		{"source", "openedx/lms/web"},
		{"time", "2026-11-22T10:00:00.123456+00:00"},
		{"minorversion", "0"},
		{"sourcehost", "lms-7d9c"},
		{"sourcelib", "9.5.1"},
	}
}

const openEdXJSON = `{"specversion":"1.0","id":"5e9f5a4c-c8b1-11ee-a506-0242ac120002","source":"openedx/lms/web","type":"org.openedx.learning.course.enrollment.created.v1",` +
	`"time":"2026-11-22T10:00:00.123456+00:00","minorversion":"0","sourcehost":"lms-7d9c","sourcelib":"9.5.1"`

func TestAppendFields(t *testing.T) {
	cases := []struct {
		name   string
		fields []Field
		data   string
		want   string
		msg    string // error message part, when refused
	}{
		{name: "Open edX entry, Avro data", fields: openEdXFields(), data: "\x00\x02\x0acourse-v1\xff",
			want: openEdXJSON + `,"data_base64":"AAIKY291cnNlLXYx/w=="}`},
		{name: "Open edX entry, JSON data", fields: openEdXFields(), data: `{"user": {"id": 3}}`,
			want: openEdXJSON + `,"data":{"user": {"id": 3}}}`},
		{name: "no data", fields: openEdXFields(), want: openEdXJSON + `}`},
		{name: "values are taken as they are", fields: []Field{{"id", "a%20b"}, {"source", "/s"}, {"type", `"t"`}, {"ext", "100%25"}},
			want: `{"specversion":"1.0","id":"a%20b","source":"/s","type":"\"t\"","ext":"100%25"}`},
		{name: "datacontenttype is the data's type", fields: []Field{{"id", "1"}, {"source", "/s"}, {"type", "t"}, {"datacontenttype", "text/plain"}}, data: "héllo",
			want: `{"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"text/plain","data":"héllo"}`},
		{name: "specversion 1.0 given", fields: []Field{{"specversion", "1.0"}, {"id", "1"}, {"source", "/s"}, {"type", "t"}}, want: minimal},
		{name: "specversion 0.3", fields: []Field{{"specversion", "0.3"}, {"id", "1"}, {"source", "/s"}, {"type", "t"}}, msg: `unsupported specversion "0.3"`},
		{name: "no type", fields: []Field{{"id", "1"}, {"source", "/s"}}, msg: `missing required attribute "type" (field type)`},
		{name: "a field twice", fields: []Field{{"id", "1"}, {"source", "/s"}, {"type", "t"}, {"type", "u"}}, msg: "field type is given twice"},
		{name: "a name that is no attribute's", fields: []Field{{"id", "1"}, {"source", "/s"}, {"type", "t"}, {"user-id", "7"}}, msg: `field "user-id" is not a valid attribute name`},
		{name: "upper case is another name", fields: []Field{{"id", "1"}, {"source", "/s"}, {"type", "t"}, {"Type", "u"}}, msg: `field "Type" is not a valid attribute name`},
		{name: "time without an offset", fields: []Field{{"id", "1"}, {"source", "/s"}, {"type", "t"}, {"time", "2026-11-22T10:00:00.123456"}}, msg: `attribute "time" is "2026-11-22T10:00:00.123456"`},
		{name: "a value that is no UTF-8", fields: []Field{{"id", "1"}, {"source", "/s"}, {"type", "t"}, {"ext", "\xff"}}, msg: `attribute "ext" is not valid UTF-8`},
		{name: "JSON data declared and invalid", fields: []Field{{"id", "1"}, {"source", "/s"}, {"type", "t"}, {"datacontenttype", "application/json"}}, data: "{",
			msg: "declares JSON, but the body is not valid JSON"},
		{name: "no fields", msg: "no attributes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prefix := []byte("kept:")
			out, ev, err := AppendFields(bytes.Clone(prefix), c.fields, []byte(c.data), Limits{})
			if c.msg != "" {
				if err == nil || !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("got %v, want an error with %q", err, c.msg)
				}
				if string(out) != string(prefix) {
					t.Fatalf("dst became %q on error", out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(ev.JSON) != c.want {
				t.Fatalf("got  %s\nwant %s", ev.JSON, c.want)
			}
			if string(out) != string(prefix)+c.want {
				t.Fatalf("dst is %q", out)
			}
			checkAcceptedSpaced(t, ev, Limits{}.withDefaults())
		})
	}
}

func TestAppendFieldsSize(t *testing.T) {
	_, _, err := AppendFields(nil, openEdXFields(), bytes.Repeat([]byte{0xff}, 1000), Limits{MaxEventBytes: 512})
	if err == nil || !strings.Contains(err.Error(), "the limit is 512 bytes") {
		t.Fatalf("got %v", err)
	}
}

// TestFieldEncoderSources checks that an encoder that remembers the last source still
// refuses a bad one, also when the good one lay in memory that now holds the bad one.
func TestFieldEncoderSources(t *testing.T) {
	var enc FieldEncoder
	buf := []byte("/good")
	src := unsafe.String(&buf[0], len(buf))
	if _, _, err := enc.Append(nil, []Field{{"id", "1"}, {"source", src}, {"type", "t"}}, nil); err != nil {
		t.Fatal(err)
	}
	copy(buf, "a b c")
	if _, _, err := enc.Append(nil, []Field{{"id", "1"}, {"source", src}, {"type", "t"}}, nil); err == nil {
		t.Fatal("source \"a b c\" accepted")
	}
	if _, _, err := enc.Append(nil, []Field{{"id", "1"}, {"source", "/good"}, {"type", "t"}}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestAppendFieldsAllocations(t *testing.T) {
	fields, data := openEdXFields(), []byte("\x00\x02\x0acourse-v1\xff")
	buf := make([]byte, 0, 4096)
	var enc FieldEncoder
	n := testing.AllocsPerRun(100, func() {
		var err error
		if buf, _, err = enc.Append(buf[:0], fields, data); err != nil {
			t.Fatal(err)
		}
	})
	if n > 0 {
		t.Fatalf("%.0f allocations an event; want none when dst has room", n)
	}
}

// FuzzAppendFields checks AppendFields against DecodeBinary: fields it accepts, sent as
// headers encoded as the binding asks, decode to the same event; fields it refuses are
// refused there too (but for datacontenttype, a header there, and specversion, optional here).
func FuzzAppendFields(f *testing.F) {
	f.Add("5e9f5a4c", "openedx/lms/web", "org.openedx.x.v1", "2026-11-22T10:00:00.5+00:00", "sourcehost", "lms", "", []byte("\x00\x01"))
	f.Add("a%20b", "/s", `"t"`, "", "ext", "100%", "text/plain", []byte("hi"))
	f.Add("1", "a b", "t", "bad", "user-id", "x", "application/json", []byte("{"))
	f.Add("1", "/s", "t", "", "data", "x", "", []byte(`{"a":1}`))
	f.Fuzz(func(t *testing.T, id, source, typ, tm, extName, extValue, ct string, data []byte) {
		fields := []Field{{"id", id}, {"source", source}, {"type", typ}}
		h := http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {percentEncode(id)}, "Ce-Source": {percentEncode(source)}, "Ce-Type": {percentEncode(typ)}}
		if tm != "" {
			fields = append(fields, Field{"time", tm})
			h["Ce-Time"] = []string{percentEncode(tm)}
		}
		if extName != "" && extName != "datacontenttype" && classify([]byte(extName)) == kExtension {
			fields = append(fields, Field{extName, extValue})
			h["Ce-"+extName] = []string{percentEncode(extValue)}
		}
		if ct != "" {
			fields = append(fields, Field{"datacontenttype", ct})
			h["Content-Type"] = []string{ct}
		}
		_, ev, err := AppendFields(nil, fields, data, fuzzLimits)
		want, werr := DecodeBinary(h, data, fuzzLimits)
		switch {
		case err != nil && werr == nil && !keptEncoded(want.JSON, fields):
			t.Fatalf("AppendFields: %v; DecodeBinary accepts the same values: %s", err, want.JSON)
		case err != nil && werr == nil:
			// DecodeBinary stored a value as received (still encoded), which it does when
			// the decoded one is invalid: the fields' own value is refused rightly.
		case (err == nil) != (werr == nil):
			t.Fatalf("AppendFields: %v; DecodeBinary: %v", err, werr)
		case err != nil:
			checkRefusal(t, err, 400, 413)
		case string(ev.JSON) != string(want.JSON):
			t.Fatalf("AppendFields: %s\nDecodeBinary: %s", ev.JSON, want.JSON)
		}
	})
}

// keptEncoded reports whether the event holds some attribute with another value than its
// field: DecodeBinary kept a header value as received.
func keptEncoded(event []byte, fields []Field) bool {
	var m map[string]any
	if err := json.Unmarshal(event, &m); err != nil {
		return false
	}
	for _, f := range fields {
		if v, ok := m[f.Name].(string); ok && f.Name != "datacontenttype" && v != f.Value {
			return true
		}
	}
	return false
}
