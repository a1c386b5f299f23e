package lint

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// validEvent is a fully valid OEP-41 event.
const validEvent = `{
  "specversion": "1.0",
  "id": "b3b3981e-7544-11ea-b663-acde48001122",
  "source": "https://discovery.edx.org/events/",
  "type": "org.openedx.learning.student.registration.completed.v1",
  "time": "2020-02-23T09:43:18Z",
  "datacontenttype": "application/json",
  "minorversion": 0,
  "pii": false,
  "data": {"user_id": 42}
}`

// edit returns validEvent with members set to raw JSON values; an empty
// value deletes the member.
func edit(t testing.TB, kv ...string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(validEvent), &m); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(m, kv[i])
		} else {
			m[kv[i]] = json.RawMessage(kv[i+1])
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type want struct {
	rule string
	sev  Severity
	path string
	msg  string // a substring of the message
}

func checkFindings(t *testing.T, got []Finding, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d findings, want %d:\n%s", len(got), len(wants), dump(got))
	}
	for i, w := range wants {
		f := got[i]
		if f.Rule != w.rule || f.Severity != w.sev || f.Path != w.path || !strings.Contains(f.Message, w.msg) {
			t.Errorf("finding %d = %v\nwant %s %s: %s: …%s…", i, f, w.sev, w.rule, w.path, w.msg)
		}
	}
}

func dump(fs []Finding) string {
	var sb strings.Builder
	for _, f := range fs {
		sb.WriteString("\t" + f.String() + "\n")
	}
	return sb.String()
}

func TestValidEvent(t *testing.T) {
	if fs := Check([]byte(validEvent), Options{}); len(fs) != 0 {
		t.Fatalf("valid OEP-41 event has findings:\n%s", dump(fs))
	}
}

const (
	E = SeverityError
	W = SeverityWarning
)

func TestRules(t *testing.T) {
	long := strconv.Quote(strings.Repeat("x", 70000))
	tests := []struct {
		name  string
		event []byte
		opts  Options
		want  []want
	}{
		// spec
		{"spec/specversion", edit(t, "specversion", `"0.3"`), Options{}, []want{{"spec", E, "specversion", `unsupported specversion "0.3"`}}},
		{"spec/missing id", edit(t, "id", ""), Options{}, []want{{"spec", E, "id", `missing required attribute "id"`}}},
		{"spec/time syntax", edit(t, "time", `"2020-02-23 09:43:18"`), Options{}, []want{{"spec", E, "time", "must be an RFC 3339 timestamp"}}},
		{"spec/data and data_base64", edit(t, "data_base64", `"AA=="`), Options{}, []want{{"spec", E, "data_base64", "both data and data_base64"}}},
		{"spec/bad name", edit(t, "Foo", `"x"`), Options{}, []want{{"spec", E, "Foo", `invalid attribute name "Foo"`}}},
		{"spec/float minorversion", edit(t, "minorversion", `1.5`), Options{}, []want{{"spec", E, "minorversion", "must be integers"}}},
		{"spec/several", edit(t, "source", `"a b"`, "time", `"yesterday"`, "type", ""), Options{}, []want{
			{"spec", E, "source", `' ' is not allowed in a URI`},
			{"spec", E, "time", `"yesterday"`},
			{"spec", E, "type", `missing required attribute "type"`},
		}},
		{"spec/null is unset", edit(t, "subject", `null`), Options{}, nil},

		// size
		{"size/too large", edit(t, "data", long), Options{}, []want{{"size", E, "", "the limit is 65536 bytes (64 KiB)"}}},
		{"size/custom limit", []byte(validEvent), Options{MaxBytes: 100}, []want{{"size", E, "", "the limit is 100 bytes"}}},
		{"size/whitespace not counted", edit(t, "data", `{"s":`+strconv.Quote(strings.Repeat("x", 60000))+`}`), Options{}, nil},

		// id-uuid1
		{"id-uuid1/v4", edit(t, "id", `"0f8fad5b-d9cb-469f-a165-70867728950e"`), Options{}, []want{{"id-uuid1", W, "id", "is a version 4 UUID"}}},
		{"id-uuid1/not a UUID", edit(t, "id", `"evt-1"`), Options{}, []want{{"id-uuid1", W, "id", `id "evt-1" is not a UUID`}}},
		{"id-uuid1/upper case", edit(t, "id", `"B3B3981E-7544-11EA-B663-ACDE48001122"`), Options{}, []want{{"id-uuid1", W, "id", `lower case with dashes: "b3b3981e-7544-11ea-b663-acde48001122"`}}},
		{"id-uuid1/no dashes", edit(t, "id", `"b3b3981e754411eab663acde48001122"`), Options{}, []want{{"id-uuid1", W, "id", "lower case with dashes"}}},

		// source-absolute-uri
		{"source-absolute-uri/path", edit(t, "source", `"/openedx/lms/web"`), Options{}, []want{{"source-absolute-uri", W, "source", `source "/openedx/lms/web" is not an absolute URI`}}},
		{"source-absolute-uri/urn", edit(t, "source", `"urn:openedx:lms"`), Options{}, nil},

		// type-shape
		{"type-shape/case", edit(t, "type", `"Org.OpenEdx.Learning.Course.Created.v1"`), Options{}, []want{{"type-shape", E, "type", `type "Org.OpenEdx.Learning.Course.Created.v1" must be lower case`}}},
		{"type-shape/hyphen", edit(t, "type", `"org.openedx.content-authoring.course.created.v1"`), Options{}, []want{{"type-shape", E, "type", "underscores"}}},
		{"type-shape/character", edit(t, "type", `"org.openedx.learning.course$.created.v1"`), Options{}, []want{{"type-shape", E, "type", `contains '$'`}}},
		{"type-shape/empty part", edit(t, "type", `"org.openedx..course.created.v1"`), Options{}, []want{{"type-shape", E, "type", "empty part"}}},
		{"type-shape/too short", edit(t, "type", `"org.course.created.v1"`), Options{}, []want{{"type-shape", E, "type", "has 4 dot-separated parts"}}},
		{"type-shape/no version", edit(t, "type", `"org.openedx.learning.course.created"`), Options{}, []want{{"type-shape", E, "type", "must end in its major version"}}},
		{"type-shape/v0", edit(t, "type", `"org.openedx.learning.course.created.v0"`), Options{}, []want{{"type-shape", E, "type", "must end in its major version"}}},
		{"type-shape/underscores", edit(t, "type", `"org.openedx.content_authoring.special_exam.proctored.allowance.created.v12"`), Options{}, nil},
		{"type-shape/five parts", edit(t, "type", `"com.example.thing.created.v1"`), Options{}, nil},

		// action-tense
		{"action-tense/present", edit(t, "type", `"org.openedx.catalog.course.create.v1"`), Options{}, []want{{"action-tense", W, "type", `action "create"`}}},
		{"action-tense/irregular", edit(t, "type", `"org.openedx.learning.certificate.sent.v1"`), Options{}, nil},
		{"action-tense/underscore", edit(t, "type", `"org.openedx.catalog.course.start_date_changed.v1"`), Options{}, nil},

		// time-present
		{"time-present/missing", edit(t, "time", ""), Options{}, []want{{"time-present", W, "time", "event has no time"}}},

		// time-utc
		{"time-utc/offset", edit(t, "time", `"2020-02-23T10:43:18.5+01:00"`), Options{}, []want{{"time-utc", E, "time", `is not in UTC; OEP-41 asks for UTC: "2020-02-23T09:43:18.5Z"`}}},
		{"time-utc/unknown offset", edit(t, "time", `"2020-02-23T09:43:18-00:00"`), Options{}, []want{{"time-utc", E, "time", `"2020-02-23T09:43:18Z"`}}},
		{"time-utc/+00:00", edit(t, "time", `"2020-02-23T09:43:18+00:00"`), Options{}, nil},

		// extension-name
		{"extension-name/21", edit(t, "abcdefghijklmnopqrstu", `"x"`), Options{}, []want{{"extension-name", W, "abcdefghijklmnopqrstu", "is 21 characters"}}},
		{"extension-name/20", edit(t, "abcdefghijklmnopqrst", `"x"`), Options{}, nil},

		// minorversion-present, minorversion-integer
		{"minorversion-present/missing", edit(t, "minorversion", ""), Options{}, []want{{"minorversion-present", W, "minorversion", "no minorversion"}}},
		{"minorversion-present/null", edit(t, "minorversion", "null"), Options{}, []want{{"minorversion-present", W, "minorversion", "no minorversion"}}},
		{"minorversion-integer/string", edit(t, "minorversion", `"2"`), Options{}, []want{{"minorversion-integer", E, "minorversion", `the string "2"; it must be a JSON integer: write 2`}}},
		{"minorversion-integer/word", edit(t, "minorversion", `"two"`), Options{}, []want{{"minorversion-integer", E, "minorversion", "must be a JSON integer"}}},
		{"minorversion-integer/negative", edit(t, "minorversion", `-1`), Options{}, []want{{"minorversion-integer", E, "minorversion", "must be 0 or more"}}},
		{"minorversion-integer/boolean", edit(t, "minorversion", `true`), Options{}, []want{{"minorversion-integer", E, "minorversion", "must be a JSON integer"}}},
		{"minorversion-integer/3", edit(t, "minorversion", `3`), Options{}, nil},

		// pii-present, pii-boolean
		{"pii-present/missing", edit(t, "pii", ""), Options{}, []want{{"pii-present", W, "pii", "no pii"}}},
		{"pii-boolean/string", edit(t, "pii", `"false"`), Options{}, []want{{"pii-boolean", E, "pii", `write false`}}},
		{"pii-boolean/number", edit(t, "pii", `0`), Options{}, []want{{"pii-boolean", E, "pii", "must be a JSON boolean"}}},
		{"pii-boolean/true", edit(t, "pii", `true`), Options{}, nil},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkFindings(t, Check(tt.event, tt.opts), tt.want)
		})
		for _, w := range tt.want {
			covered[w.rule] = true
		}
	}
	for _, r := range Rules() {
		if !covered[r.ID] {
			t.Errorf("rule %q has no failing test case", r.ID)
		}
	}
}

func TestMalformed(t *testing.T) {
	for _, in := range []string{
		``, ` `, `{`, `{"id":}`, `{"a":1}}`, `{} {}`, `{}x`, `[]`, `[{}]`, `null`, `"x"`, `42`,
		`{"id":"a",}`, `{'id':'a'}`, "\xef\xbb\xbf{}",
	} {
		fs := Check([]byte(in), Options{})
		if len(fs) != 1 || fs[0].Rule != "spec" || fs[0].Severity != SeverityError || fs[0].Path != "" || fs[0].Message == "" {
			t.Errorf("Check(%q) =\n%swant exactly one spec error", in, dump(fs))
		}
	}
}

// TestSpecOffset checks that a byte offset found in a probe is translated
// to the offset in the input.
func TestSpecOffset(t *testing.T) {
	in := []byte(`{"specversion":"1.0","id":"b3b3981e-7544-11ea-b663-acde48001122","source":"https://discovery.edx.org/events/",` +
		`"type":"org.openedx.catalog.course.created.v1","time":"2020-02-23T09:43:18Z","minorversion":0,"pii":false,` +
		`"data":{"a":1,  "a":2}}`)
	off := bytes.LastIndex(in, []byte(`"a"`))
	fs := Check(in, Options{})
	checkFindings(t, fs, []want{{"spec", E, "data", "byte offset " + strconv.Itoa(off) + ": duplicate member name"}})

	// Once the whole event fails earlier, the probe alone finds the duplicate.
	in2 := bytes.Replace(in, []byte(`"1.0"`), []byte(`"9.9"`), 1)
	checkFindings(t, Check(in2, Options{}), []want{
		{"spec", E, "specversion", "unsupported specversion"},
		{"spec", E, "data", "byte offset " + strconv.Itoa(off) + ": duplicate member name"},
	})
}

func TestIsPastTense(t *testing.T) {
	for w, past := range map[string]bool{
		"created": true, "completed": true, "sent": true, "done": true, "rewritten": true, "unset": true,
		"start_date_changed": true, "paid": true, "withdrawn": true,
		"create": false, "send": false, "update": false, "enroll": false, "ed": false, "complete": false, "pay": false,
	} {
		if got := isPastTense(w); got != past {
			t.Errorf("isPastTense(%q) = %v, want %v", w, got, past)
		}
	}
}

func TestRulesList(t *testing.T) {
	rs := Rules()
	if len(rs) == 0 || rs[0].ID != "spec" {
		t.Fatalf("Rules() must start with spec: %v", rs)
	}
	ids := map[string]bool{}
	for _, r := range rs {
		if ids[r.ID] || r.Summary == "" || (r.Severity != SeverityError && r.Severity != SeverityWarning) {
			t.Errorf("bad rule %+v", r)
		}
		ids[r.ID] = true
	}
	rs[0].ID = "changed"
	if Rules()[0].ID != "spec" {
		t.Error("Rules() returns the table itself")
	}
}

func TestHasErrors(t *testing.T) {
	w := Finding{Rule: "pii-present", Severity: SeverityWarning}
	e := Finding{Rule: "spec", Severity: SeverityError}
	if HasErrors(nil) || HasErrors([]Finding{w}) || !HasErrors([]Finding{w, e}) {
		t.Error("HasErrors is wrong")
	}
}

func TestFindingJSON(t *testing.T) {
	b, err := json.Marshal(Check(edit(t, "pii", ""), Options{}))
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]string
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %s", b)
	}
	keys := make([]string, 0, 4)
	for k := range got[0] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "message,path,rule,severity" || got[0]["rule"] != "pii-present" || got[0]["severity"] != "warning" {
		t.Errorf("got %s", b)
	}
}

func TestFindingString(t *testing.T) {
	f := Finding{Rule: "time-utc", Severity: SeverityError, Path: "time", Message: "m"}
	if got := f.String(); got != "error time-utc: time: m" {
		t.Errorf("String() = %q", got)
	}
	f.Path = ""
	if got := f.String(); got != "error time-utc: m" {
		t.Errorf("String() = %q", got)
	}
}

func TestDuplicateMember(t *testing.T) {
	in := []byte(strings.Replace(validEvent, `"pii": false`, `"pii": false, "pii": "yes"`, 1))
	checkFindings(t, Check(in, Options{}), []want{{"spec", E, "pii", `duplicate member name "pii"`}})
}
