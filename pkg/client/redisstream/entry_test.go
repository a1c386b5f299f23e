package redisstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// openEdX is an entry as the Open edX event bus writes one (event_data Avro).
func openEdX(id string, data string) rawEntry {
	return rawEntry{id: id, fields: []field{
		{"type", "org.openedx.learning.course.enrollment.created.v1"},
		{"id", "5e9f5a4c-c8b1-11ee-a506-0242ac120002"},
		{"source", "openedx/lms/web"},
		{"time", "2026-11-22T10:00:00.123456+00:00"},
		{"minorversion", "0"},
		{"sourcehost", "lms-7d9c"},
		{"sourcelib", "9.5.1"},
		{"event_data", data},
	}}
}

const openEdXAttrs = `{"specversion":"1.0","id":"5e9f5a4c-c8b1-11ee-a506-0242ac120002","source":"openedx/lms/web","type":"org.openedx.learning.course.enrollment.created.v1",` +
	`"time":"2026-11-22T10:00:00.123456+00:00","minorversion":"0","sourcehost":"lms-7d9c","sourcelib":"9.5.1"`

func TestAppendItem(t *testing.T) {
	c := newConverter("dev-openedx")
	for _, tc := range []struct {
		name      string
		e         rawEntry
		typ, data string
		made      string // the redisfields reason, in part
	}{
		{name: "Open edX entry", e: openEdX("1-0", "\x00\x02\x0acourse-v1"), typ: "org.openedx.learning.course.enrollment.created.v1",
			data: openEdXAttrs + `,"data_base64":"AAIKY291cnNlLXYx"}`},
		{name: "Open edX entry with JSON data", e: openEdX("1-1", `{"user":{"id":7}}`), typ: "org.openedx.learning.course.enrollment.created.v1",
			data: openEdXAttrs + `,"data":{"user":{"id":7}}}`},
		{name: "a CloudEvent in one field", e: rawEntry{id: "2-0", fields: []field{{"event", ` {"specversion": "1.0", "id": "x", "source": "/s", "type": "t", "data": {"a": 1}}`}}},
			typ: "t", data: `{"specversion":"1.0","id":"x","source":"/s","type":"t","data":{"a":1}}`},
		{name: "an invalid CloudEvent in one field", e: rawEntry{id: "2-1", fields: []field{{"event", `{"specversion":"1.0","id":"x"}`}}},
			typ: "dev-openedx", made: `field event holds no valid CloudEvent: missing required attribute "source"`,
			data: `{"event":"{\"specversion\":\"1.0\",\"id\":\"x\"}"}`},
		{name: "JSON in one field", e: rawEntry{id: "3-0", fields: []field{{"payload", `{"a":1}`}}}, typ: "dev-openedx",
			made: "no type, id and source fields", data: `{"payload":"{\"a\":1}"}`},
		{name: "a time that is not RFC 3339", e: func() rawEntry {
			e := openEdX("4-0", "x")
			e.fields[3].value = "2026-11-22T10:00:00.123456"
			return e
		}(), typ: "dev-openedx", made: `its fields are no valid CloudEvent: attribute "time" is "2026-11-22T10:00:00.123456"`},
		{name: "a field name that is no attribute's", e: rawEntry{id: "5-0", fields: []field{{"type", "t"}, {"id", "1"}, {"source", "/s"}, {"user-id", "7"}}},
			typ: "dev-openedx", made: `field "user-id" is not a valid attribute name`,
			data: `{"type":"t","id":"1","source":"/s","user-id":"7"}`},
		{name: "bytes and a name twice", e: rawEntry{id: "6-0", fields: []field{{"a", "\xff\x00"}, {"a", "x"}, {"\xfe", "y"}}}, typ: "dev-openedx",
			made: "no type", data: `[["a",{"base64":"/wA="}],["a","x"],[{"base64":"/g=="},"y"]]`},
		{name: "no fields", e: rawEntry{id: "7-0"}, typ: "dev-openedx", made: "no type", data: `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, typ, ds, de := c.appendItem([]byte("before"), tc.e)
			line = line[len("before"):]
			ds, de = ds-len("before"), de-len("before")
			if !strings.HasSuffix(string(line), "}\n") || !json.Valid(line) {
				t.Fatalf("line %q", line)
			}
			ev := line[ds:de]
			if typ != tc.typ || gjson.GetBytes(line, "event").String() != tc.typ || gjson.GetBytes(line, "cursor").String() != tc.e.id {
				t.Fatalf("type %q, line %s", typ, line)
			}
			if string(gjson.GetBytes(line, "data").Raw) != string(ev) {
				t.Fatalf("event at %d:%d is %s, in line %s", ds, de, ev, line)
			}
			if tc.made == "" {
				if string(ev) != tc.data {
					t.Fatalf("got  %s\nwant %s", ev, tc.data)
				}
				return
			}
			why := gjson.GetBytes(ev, MadeExtension).String()
			if !strings.Contains(why, tc.made) {
				t.Fatalf("reason %q, want %q", why, tc.made)
			}
			want := map[string]string{"specversion": "1.0", "id": tc.e.id, "source": "redis:dev-openedx", "type": "dev-openedx", "datacontenttype": "application/json"}
			for k, v := range want {
				if got := gjson.GetBytes(ev, k).String(); got != v {
					t.Fatalf("%s is %q, want %q in %s", k, got, v, ev)
				}
			}
			if tc.data != "" && gjson.GetBytes(ev, "data").Raw != tc.data {
				t.Fatalf("data %s, want %s", gjson.GetBytes(ev, "data").Raw, tc.data)
			}
		})
	}
}

// FuzzAppendItem checks that any entry makes a line of JSON whose data is a CloudEvent.
func FuzzAppendItem(f *testing.F) {
	f.Add("1-0", "type", "t", "id", "1", "source", "/s", "event_data", "\x00")
	f.Add("1-1", "event", `{"specversion":"1.0","id":"1","source":"/s","type":"t"}`, "", "", "", "", "", "")
	f.Add("x", "\xff", "\xfe", "a", "a", "time", "now", "", "")
	f.Fuzz(func(t *testing.T, id, n1, v1, n2, v2, n3, v3, n4, v4 string) {
		e := rawEntry{id: id}
		for _, kv := range [][2]string{{n1, v1}, {n2, v2}, {n3, v3}, {n4, v4}} {
			if kv[0] != "" || kv[1] != "" {
				e.fields = append(e.fields, field{kv[0], kv[1]})
			}
		}
		line, _, ds, de := newConverter("k\xff").appendItem(nil, e)
		if !json.Valid(line) || line[len(line)-1] != '\n' {
			t.Fatalf("line %q", line)
		}
		ev := line[ds:de]
		if !json.Valid(ev) || gjson.GetBytes(ev, "specversion").String() != "1.0" || gjson.GetBytes(ev, "id").String() == "" {
			t.Fatalf("event %q", ev)
		}
	})
}
