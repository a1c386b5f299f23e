package eventgen

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestInspect(t *testing.T) {
	for _, tc := range []struct {
		in      string
		id      string // the id's text, quotes included; "" for none
		missing int
		err     string // a part of the error; "" for none
	}{
		{in: `{"specversion":"1.0","id":"a-1","time":"2026-01-01T00:00:00Z","source":"/s","type":"t"}`, id: `"a-1"`},
		{in: "  {\"id\" : \"x\\\"y\" , \"data\":{\"id\":\"inner\",\"time\":1}}\r", id: `"x\"y"`, missing: MissingSpecversion | MissingTime},
		{in: `{"\u0069d":"escaped name","specversion":null}`, id: `"escaped name"`, missing: MissingSpecversion | MissingTime},
		{in: `{"id":"first","id":"second"}`, id: `"second"`, missing: MissingSpecversion | MissingTime},
		{in: `{"id":"first","id":null}`, missing: MissingSpecversion | MissingID | MissingTime},
		{in: `{"id":42,"time":"t","specversion":"1.0"}`},
		{in: `{}`, missing: MissingSpecversion | MissingID | MissingTime},
		{in: `{"a":[1,-2.5e+3,true,false,null,{"b":[]},"\u00e9\n"]}`, missing: MissingSpecversion | MissingID | MissingTime},
		{in: ``, err: "the line is empty"},
		{in: `[1]`, err: "not a JSON object"},
		{in: `"id"`, err: "not a JSON object"},
		{in: `{"id":"x"`, err: "the line ends in an object"},
		{in: `{"id":"x"}}`, err: "column 11: unexpected '}' after the object"},
		{in: `{"id":"x",}`, err: "column 11: unexpected '}' where a member name should be"},
		{in: `{"id":01}`, err: "column 8"},
		{in: `{"id":"a` + "\t" + `b"}`, err: "control characters"},
		{in: `{"id":"\x"}`, err: "in an escape"},
		{in: `{"id":"\u12g4"}`, err: `in a \u escape`},
		{in: `{"id":tru}`, err: "in a literal"},
		{in: `{"id":1.}`, err: "after a decimal point"},
		{in: `{"id":1e}`, err: "in an exponent"},
		{in: `{"id" "x"}`, err: "after a member name"},
		{in: `hello`, err: "column 1: unexpected 'h' where a value should be"},
	} {
		l, err := Inspect([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Inspect(%q) = %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if l.ID != nil && string(tc.in[l.IDAt:l.IDAt+len(l.ID)]) != string(l.ID) {
			t.Errorf("Inspect(%q): IDAt %d does not point at the id", tc.in, l.IDAt)
		}
		if err != nil || string(l.ID) != tc.id || l.Missing != tc.missing {
			t.Errorf("Inspect(%q) = id %s, missing %b, %v; want id %s, missing %b", tc.in, l.ID, l.Missing, err, tc.id, tc.missing)
		}
	}
	deep := strings.Repeat("[", maxNesting-1) + strings.Repeat("]", maxNesting-1)
	if _, err := Inspect([]byte(`{"a":` + deep + `}`)); err != nil {
		t.Errorf("nesting of %d: %v", maxNesting, err)
	}
	if _, err := Inspect([]byte(`{"a":[` + deep + `]}`)); err == nil {
		t.Errorf("nesting of %d accepted", maxNesting+1)
	}
}

func TestComplete(t *testing.T) {
	now := fixed()
	line := []byte(`{"source":"/s","type":"t"}`)
	ev, l, err := Complete(line, now)
	if err != nil || l.Missing != 0 || len(l.IDString()) != 36 || !bytes.HasPrefix(ev, []byte(`{"specversion":"1.0","id":"`)) {
		t.Fatalf("Complete = %s, %+v, %v", ev, l, err)
	}
	full := []byte(`{"specversion":"1.0","id":"a\/b","time":"t"}`)
	if ev, l, err := Complete(full, now); err != nil || &ev[0] != &full[0] || l.IDString() != "a/b" {
		t.Errorf("a complete line: %s, %q, %v", ev, l.IDString(), err)
	}
}

// FuzzInspect holds Inspect to encoding/json: it accepts exactly the JSON objects json.Valid
// accepts, and finds the members a map decoding finds.
func FuzzInspect(f *testing.F) {
	for _, s := range []string{
		`{"specversion":"1.0","id":"a","time":"t","data":{"id":[1,2,{"x":null}]}}`,
		`{"\u0069d":"x","id":null}`, `{"id":"\"\\\/\b\f\n\r\t\u00e9"}`, ` {} `, `[]`, `{"a":-0.5E-7}`,
		`{"a":"` + "\xff" + `"}`, `{"a":tru}`, `{"a":1,}`, "{\"a\":\"\x01\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Inspect(b)
		trimmed := bytes.TrimLeft(b, " \t\r\n")
		want := json.Valid(b) && len(trimmed) > 0 && trimmed[0] == '{'
		if (err == nil) != want {
			t.Fatalf("Inspect(%q): %v; json.Valid %v", b, err, json.Valid(b))
		}
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", b, err)
		}
		for name, bit := range map[string]int{"specversion": MissingSpecversion, "id": MissingID, "time": MissingTime} {
			v, ok := m[name]
			if missing := !ok || string(v) == "null"; missing != (l.Missing&bit != 0) {
				t.Fatalf("Inspect(%q): %s missing %v, want %v", b, name, !missing, missing)
			}
		}
		if v := m["id"]; len(v) > 0 && v[0] == '"' {
			if !bytes.Equal(l.ID, v) || !bytes.Equal(b[l.IDAt:l.IDAt+len(l.ID)], v) {
				t.Fatalf("Inspect(%q): id %s, want %s", b, l.ID, v)
			}
			var s string
			if json.Unmarshal(v, &s) == nil && l.IDString() != s {
				t.Fatalf("Inspect(%q): IDString %q, want %q", b, l.IDString(), s)
			}
		} else if l.ID != nil {
			t.Fatalf("Inspect(%q): id %s, want none", b, l.ID)
		}
	})
}

func BenchmarkInspect(b *testing.B) {
	line := []byte(`{"specversion":"1.0","id":"r1-00000000000f4240","source":"/openedx/lms/web","type":"org.openedx.learning.course.enrollment.created.v1",` +
		`"subject":"course-v1:edX+DemoX+Demo_Course","time":"2026-11-22T10:00:00Z","datacontenttype":"application/json","minorversion":0,"pii":false,` +
		`"data":{"user":{"id":4242,"username":"learner-4242","is_active":true},"course":{"course_key":"course-v1:edX+DemoX+Demo_Course","display_name":"Demonstration Course"},` +
		`"mode":"audit","is_active":true,"creation_date":"2026-11-22T10:00:00Z","pad":"` + strings.Repeat("x", 60) + `"}}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := Inspect(line); err != nil {
			b.Fatal(err)
		}
	}
}
