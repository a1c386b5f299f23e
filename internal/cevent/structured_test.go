package cevent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// minimal is the smallest valid event; tests splice members into it.
const minimal = `{"specversion":"1.0","id":"1","source":"/s","type":"t"}`

// with returns minimal with extra members appended (extra starts with a comma).
func with(extra string) string {
	return minimal[:len(minimal)-1] + extra + "}"
}

type structuredCase struct {
	name string
	in   string
	// On success:
	want string // stored JSON; "" means the input itself
	id   string // expected ID when not "1"
	// On failure:
	status int
	msg    string // substring of the message
}

var structuredValid = []structuredCase{
	{name: "minimal", in: minimal},
	{name: "pretty printed", in: "\n{\n  \"specversion\" : \"1.0\",\r\n\t\"id\" : \"1\" ,\n \"source\":\"/s\",  \"type\":\"t\" }\n\n", want: minimal},
	{name: "member order kept", in: `{"type":"t","id":"1","specversion":"1.0","source":"/s"}`},
	{name: "optional attributes", in: with(`,"subject":"s","time":"2018-04-05T17:31:00Z","datacontenttype":"application/json","dataschema":"https://example.com/schema.json"`)},
	{name: "null attributes dropped", in: `{"subject":null,"specversion":"1.0","id":"1","time":null,"source":"/s","ext":null,"type":"t","datacontenttype":null,"dataschema":null}`, want: minimal},
	{name: "null data_base64 dropped", in: with(`,"data_base64":null`), want: minimal},
	{name: "null data kept", in: with(`,"data":null`)},
	{name: "data object with nested nulls", in: with(`, "data" : { "a" : null , "b" : [ 1 , 2.5e-3 , -0 , true , false , "x" , { } , [ ] ] } `), want: with(`,"data":{"a":null,"b":[1,2.5e-3,-0,true,false,"x",{},[]]}`)},
	{name: "data string", in: with(`,"data":"I'm just a string"`)},
	{name: "data number", in: with(`,"data":12.5`)},
	{name: "text data", in: with(`,"datacontenttype":"text/xml","data":"<much wow=\"xml\"/>"`)},
	{name: "text data null", in: with(`,"datacontenttype":"text/plain","data":null`)},
	{name: "json suffix data", in: with(`,"datacontenttype":"application/vnd.api+json; charset=utf-8","data":[1]`)},
	{name: "text/json data", in: with(`,"datacontenttype":"text/json","data":{"a":1}`)},
	{name: "data_base64", in: with(`,"datacontenttype":"application/octet-stream","data_base64":"AAEC/w=="`)},
	{name: "data_base64 empty", in: with(`,"data_base64":""`)},
	{name: "data_base64 unescaped", in: with(`,"data_base64":"YW\/j\u0064A=="`), want: with(`,"data_base64":"YW/jdA=="`)},
	{name: "extensions", in: with(`,"comexampleextension1":"value","comexampleothervalue":5,"neg":-7,"min":-2147483648,"max":2147483647,"zero":0,"pii":false,"flag":true`)},
	{name: "extension datax", in: with(`,"datax":"y","data2":"z"`)},
	{name: "escaped member names normalized", in: `{"\u0073pecversion":"1.0","i\u0064":"1","source":"/s","type":"t","ext\u0031":"v"}`, want: `{"specversion":"1.0","id":"1","source":"/s","type":"t","ext1":"v"}`},
	{name: "escaped values kept, ID decoded", in: `{"specversion":"1.0","id":"a\"b\u00e9\/\ud83d\ude00","source":"/s","type":"t"}`, id: "a\"bé/😀"},
	{name: "unicode values", in: `{"specversion":"1.0","id":"ünïcödé-😀","source":"/s","type":"t","subject":"Ωmega","data":{"名前":"値"}}`, id: "ünïcödé-😀"},
	{name: "data may hold control characters and lone surrogates", in: with(`,"data":"a\nb\u0000\ud800"`)},
	{name: "source absolute", in: `{"specversion":"1.0","id":"1","source":"https://github.com/cloudevents","type":"t"}`},
	{name: "source mailto", in: `{"specversion":"1.0","id":"1","source":"mailto:cncf-wg-serverless@lists.cncf.io","type":"t"}`},
	{name: "source urn", in: `{"specversion":"1.0","id":"1","source":"urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66","type":"t"}`},
	{name: "source phone", in: `{"specversion":"1.0","id":"1","source":"1-555-123-4567","type":"t"}`},
	{name: "source query fragment", in: `{"specversion":"1.0","id":"1","source":"/a/b?c=d#e","type":"t"}`},
	{name: "source escaped", in: `{"specversion":"1.0","id":"1","source":"/a%20b","type":"t"}`},
	{name: "time with offset and fraction", in: with(`,"time":"2018-04-05T19:31:00.123456789+02:00"`)},
	{name: "many members (map duplicate detection)", in: with(`,"data":{` + manyMembers(40) + `}`)},
	{name: "deep data", in: with(`,"data":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1))},
}

func manyMembers(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	return b.String()
}

var structuredInvalid = []structuredCase{
	// JSON syntax
	{name: "empty body", in: "", status: 400, msg: "empty body"},
	{name: "blank body", in: " \n", status: 400, msg: "empty body"},
	{name: "array", in: "[]", status: 400, msg: `unexpected '['`},
	{name: "string", in: `"x"`, status: 400, msg: "expected a CloudEvent as a JSON object"},
	{name: "trailing garbage", in: minimal + " x", status: 400, msg: "expected end of input"},
	{name: "two objects", in: minimal + minimal, status: 400, msg: "expected end of input"},
	{name: "missing colon", in: `{"specversion" "1.0"}`, status: 400, msg: "expected ':'"},
	{name: "trailing comma", in: `{"specversion":"1.0",}`, status: 400, msg: "expected a string (member name)"},
	{name: "unterminated object", in: `{"specversion":"1.0"`, status: 400, msg: "unexpected end of input"},
	{name: "unterminated string", in: `{"specversion":"1.0`, status: 400, msg: "unterminated string"},
	{name: "bad escape", in: with(`,"data":"\x"`), status: 400, msg: `invalid escape sequence \x`},
	{name: "bad unicode escape", in: with(`,"data":"\u12"`), status: 400, msg: `invalid \u escape`},
	{name: "raw control character", in: with(",\"data\":\"a\tb\""), status: 400, msg: "control character 0x09 in string must be escaped"},
	{name: "invalid UTF-8", in: with(",\"data\":\"\xff\""), status: 400, msg: "invalid UTF-8"},
	{name: "invalid UTF-8 outside string", in: with(",\"data\":\xff"), status: 400, msg: "byte 0xff"},
	{name: "leading zero", in: with(`,"data":01`), status: 400, msg: "expected ',' or '}'"},
	{name: "bare minus", in: with(`,"data":-`), status: 400, msg: "expected a digit"},
	{name: "bad fraction", in: with(`,"data":1.`), status: 400, msg: "after the decimal point"},
	{name: "bad exponent", in: with(`,"data":1e`), status: 400, msg: "in the exponent"},
	{name: "bad literal", in: with(`,"data":tru`), status: 400, msg: "expected a JSON value"},
	{name: "single quotes", in: with(`,"data":'x'`), status: 400, msg: "expected a JSON value"},
	{name: "too deep", in: with(`,"data":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)), status: 400, msg: "nested more than 1000 levels"},
	{name: "duplicate attribute", in: `{"specversion":"1.0","id":"1","id":"2","source":"/s","type":"t"}`, status: 400, msg: `duplicate member name "id"`},
	{name: "duplicate via escape", in: `{"specversion":"1.0","id":"1","i\u0064":"2","source":"/s","type":"t"}`, status: 400, msg: `duplicate member name "id"`},
	{name: "duplicate null attribute", in: `{"specversion":"1.0","id":"1","subject":null,"subject":"x","source":"/s","type":"t"}`, status: 400, msg: `duplicate member name "subject"`},
	{name: "duplicate in data", in: with(`,"data":{"a":{"x":1,"x":2}}`), status: 400, msg: `duplicate member name "x"`},
	{name: "duplicate in large data object", in: with(`,"data":{` + manyMembers(30) + `,"k25":1}`), status: 400, msg: `duplicate member name "k25"`},
	{name: "same name in sibling objects is fine", in: with(`,"data":[{"a":1},{"a":2},{"a":{"a":3}}]`), status: 0},

	// specversion
	{name: "missing specversion", in: `{"id":"1","source":"/s","type":"t"}`, status: 400, msg: `missing required attribute "specversion"`},
	{name: "specversion 0.3", in: `{"specversion":"0.3","id":"1","source":"/s","type":"t"}`, status: 400, msg: `unsupported specversion "0.3": only CloudEvents "1.0" is supported`},
	{name: "specversion 1", in: `{"specversion":"1","id":"1","source":"/s","type":"t"}`, status: 400, msg: `unsupported specversion "1"`},
	{name: "specversion number", in: `{"specversion":1.0,"id":"1","source":"/s","type":"t"}`, status: 400, msg: `attribute "specversion" must be a JSON string, not a number`},
	{name: "specversion null", in: `{"specversion":null,"id":"1","source":"/s","type":"t"}`, status: 400, msg: `missing required attribute "specversion"`},

	// id
	{name: "missing id", in: `{"specversion":"1.0","source":"/s","type":"t"}`, status: 400, msg: `missing required attribute "id"`},
	{name: "empty id", in: `{"specversion":"1.0","id":"","source":"/s","type":"t"}`, status: 400, msg: `attribute "id" must be a non-empty string`},
	{name: "blank id", in: `{"specversion":"1.0","id":" \u3000","source":"/s","type":"t"}`, status: 400, msg: `attribute "id" must be a non-empty string`},
	{name: "numeric id", in: `{"specversion":"1.0","id":1,"source":"/s","type":"t"}`, status: 400, msg: `attribute "id" must be a JSON string, not a number`},
	{name: "object id", in: `{"specversion":"1.0","id":{},"source":"/s","type":"t"}`, status: 400, msg: `attribute "id" must be a JSON string, not an object`},
	{name: "null id", in: `{"specversion":"1.0","id":null,"source":"/s","type":"t"}`, status: 400, msg: `missing required attribute "id"`},
	{name: "id with newline", in: `{"specversion":"1.0","id":"a\nb","source":"/s","type":"t"}`, status: 400, msg: `attribute "id" contains a control character`},
	{name: "id with escaped NUL", in: `{"specversion":"1.0","id":"a\u0000","source":"/s","type":"t"}`, status: 400, msg: `attribute "id" contains the control character U+0000`},
	{name: "id with C1 control", in: "{\"specversion\":\"1.0\",\"id\":\"a\u0085\",\"source\":\"/s\",\"type\":\"t\"}", status: 400, msg: `attribute "id" contains the control character U+0085`},
	{name: "id with DEL", in: "{\"specversion\":\"1.0\",\"id\":\"a\x7f\",\"source\":\"/s\",\"type\":\"t\"}", status: 400, msg: `attribute "id" contains the control character U+007F`},
	{name: "id with noncharacter", in: "{\"specversion\":\"1.0\",\"id\":\"a\uffff\",\"source\":\"/s\",\"type\":\"t\"}", status: 400, msg: `attribute "id" contains the noncharacter U+FFFF`},
	{name: "id with lone surrogate", in: `{"specversion":"1.0","id":"\udead","source":"/s","type":"t"}`, status: 400, msg: `attribute "id" contains the unpaired surrogate U+DEAD`},
	{name: "id with surrogate pair ok", in: `{"specversion":"1.0","id":"\ud800\udead","source":"/s","type":"t"}`, id: "\U000102ad"},

	// source
	{name: "missing source", in: `{"specversion":"1.0","id":"1","type":"t"}`, status: 400, msg: `missing required attribute "source"`},
	{name: "empty source", in: `{"specversion":"1.0","id":"1","source":"","type":"t"}`, status: 400, msg: `attribute "source" must be a non-empty URI-reference`},
	{name: "source with space", in: `{"specversion":"1.0","id":"1","source":"a b","type":"t"}`, status: 400, msg: `attribute "source" is "a b"; ' ' is not allowed in a URI`},
	{name: "source with quote", in: `{"specversion":"1.0","id":"1","source":"a\"b","type":"t"}`, status: 400, msg: `'"' is not allowed in a URI`},
	{name: "source bad escape", in: `{"specversion":"1.0","id":"1","source":"/a%zz","type":"t"}`, status: 400, msg: `not a valid URI-reference: invalid URL escape "%zz"`},
	{name: "source bad host", in: `{"specversion":"1.0","id":"1","source":"http://[::1","type":"t"}`, status: 400, msg: `not a valid URI-reference`},
	{name: "source colon first", in: `{"specversion":"1.0","id":"1","source":":x","type":"t"}`, status: 400, msg: `not a valid URI-reference`},
	{name: "source only fragment mark", in: `{"specversion":"1.0","id":"1","source":"#","type":"t"}`, status: 400, msg: `an empty URI-reference`},
	{name: "source number", in: `{"specversion":"1.0","id":"1","source":5,"type":"t"}`, status: 400, msg: `attribute "source" must be a JSON string`},

	// type
	{name: "missing type", in: `{"specversion":"1.0","id":"1","source":"/s"}`, status: 400, msg: `missing required attribute "type"`},
	{name: "empty type", in: `{"specversion":"1.0","id":"1","source":"/s","type":""}`, status: 400, msg: `attribute "type" must be a non-empty string`},
	{name: "type array", in: `{"specversion":"1.0","id":"1","source":"/s","type":["t"]}`, status: 400, msg: `attribute "type" must be a JSON string, not an array`},

	// optional attributes
	{name: "empty subject", in: with(`,"subject":""`), status: 400, msg: `attribute "subject" must be a non-empty string`},
	{name: "escaped blank subject", in: with(`,"subject":"\u0020"`), status: 400, msg: `attribute "subject" must be a non-empty string`},
	{name: "boolean subject", in: with(`,"subject":true`), status: 400, msg: `attribute "subject" must be a JSON string, not a boolean`},
	{name: "bad time", in: with(`,"time":"2018-13-05T17:31:00Z"`), status: 400, msg: `attribute "time" is "2018-13-05T17:31:00Z"; it must be an RFC 3339 timestamp`},
	{name: "time with space", in: with(`,"time":"2018-04-05 17:31:00Z"`), status: 400, msg: `attribute "time"`},
	{name: "time without zone", in: with(`,"time":"2018-04-05T17:31:00"`), status: 400, msg: `attribute "time"`},
	{name: "time with comma fraction", in: with(`,"time":"2018-04-05T17:31:00,5Z"`), status: 400, msg: `attribute "time"`},
	{name: "time as number", in: with(`,"time":1522949460`), status: 400, msg: `attribute "time" must be a JSON string, not a number`},
	{name: "bad datacontenttype", in: with(`,"datacontenttype":"not a media type"`), status: 400, msg: `datacontenttype "not a media type" is not a valid media type`},
	{name: "datacontenttype without subtype", in: with(`,"datacontenttype":"text"`), status: 400, msg: `datacontenttype "text" is not a valid media type: it must have the form type/subtype`},
	{name: "empty datacontenttype", in: with(`,"datacontenttype":""`), status: 400, msg: `datacontenttype "" is not a valid media type`},
	{name: "relative dataschema", in: with(`,"dataschema":"/schema.json"`), status: 400, msg: `attribute "dataschema" is "/schema.json"; it must be an absolute URI`},
	{name: "bad dataschema", in: with(`,"dataschema":"http://a b"`), status: 400, msg: `attribute "dataschema" is "http://a b"; ' ' is not allowed`},

	// names and members
	{name: "upper-case name", in: with(`,"Ext":"x"`), status: 400, msg: `invalid attribute name "Ext": names must consist of lower-case letters a-z and digits 0-9`},
	{name: "dash in name", in: with(`,"my-ext":"x"`), status: 400, msg: `invalid attribute name "my-ext"`},
	{name: "underscore in name", in: with(`,"my_ext":"x"`), status: 400, msg: `invalid attribute name "my_ext"`},
	{name: "empty name", in: with(`,"":"x"`), status: 400, msg: `invalid attribute name ""`},
	{name: "object extension", in: with(`,"ext":{"a":1}`), status: 400, msg: `extension attribute "ext" must be a string, an integer or a boolean, not an object`},
	{name: "array extension", in: with(`,"ext":[]`), status: 400, msg: `not an array`},
	{name: "fraction extension", in: with(`,"ext":1.5`), status: 400, msg: `extension attribute "ext" is 1.5; numbers must be integers from -2147483648 to 2147483647`},
	{name: "exponent extension", in: with(`,"ext":1e3`), status: 400, msg: `extension attribute "ext" is 1e3`},
	{name: "too large extension", in: with(`,"ext":2147483648`), status: 400, msg: `extension attribute "ext" is 2147483648`},
	{name: "too small extension", in: with(`,"ext":-2147483649`), status: 400, msg: `extension attribute "ext" is -2147483649`},
	{name: "huge extension", in: with(`,"ext":99999999999999999999`), status: 400, msg: `extension attribute "ext" is 99999999999999999999`},
	{name: "extension with control character", in: with(`,"ext":"a\tb"`), status: 400, msg: `attribute "ext" contains a control character`},

	// data
	{name: "data and data_base64", in: with(`,"data":"x","data_base64":"eA=="`), status: 400, msg: "both data and data_base64"},
	{name: "data_base64 and data", in: with(`,"data_base64":"eA==","data":null`), status: 400, msg: "both data and data_base64"},
	{name: "data_base64 unpadded", in: with(`,"data_base64":"eA"`), status: 400, msg: "data_base64 is not valid base64"},
	{name: "data_base64 bad character", in: with(`,"data_base64":"e*=="`), status: 400, msg: "data_base64 is not valid base64"},
	{name: "data_base64 with line break", in: with(`,"data_base64":"eA==\n"`), status: 400, msg: "data_base64 is not valid base64: line break"},
	{name: "data_base64 number", in: with(`,"data_base64":5`), status: 400, msg: "data_base64 must be a JSON string holding base64 data, not a number"},
	{name: "object data with text type", in: with(`,"datacontenttype":"text/plain","data":{"a":1}`), status: 400, msg: `data must be a JSON string when datacontenttype "text/plain" is not a JSON media type (it is an object)`},
	{name: "number data with binary type", in: with(`,"datacontenttype":"application/octet-stream","data":5`), status: 400, msg: `data must be a JSON string`},
}

func checkError(t *testing.T, err error, status int, msg string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if e.Status != status {
		t.Errorf("status = %d, want %d (message %q)", e.Status, status, e.Msg)
	}
	if !strings.Contains(e.Msg, msg) {
		t.Errorf("message = %q, want it to contain %q", e.Msg, msg)
	}
	if e.Error() != e.Msg {
		t.Errorf("Error() = %q, Msg = %q", e.Error(), e.Msg)
	}
}

func TestDecodeStructured(t *testing.T) {
	for _, tc := range append(structuredValid, structuredInvalid...) {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := DecodeStructured([]byte(tc.in), Limits{})
			if tc.status != 0 {
				if err == nil {
					t.Fatalf("accepted; want %d %q; stored %s", tc.status, tc.msg, ev.JSON)
				}
				checkError(t, err, tc.status, tc.msg)
				if e := err.(*Error); e.Index != -1 {
					t.Errorf("Index = %d, want -1", e.Index)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			want := tc.want
			if want == "" {
				want = tc.in
			}
			if string(ev.JSON) != want {
				t.Errorf("stored\n %s\nwant\n %s", ev.JSON, want)
			}
			if !json.Valid(ev.JSON) {
				t.Errorf("stored JSON is not valid: %s", ev.JSON)
			}
			id := tc.id
			if id == "" {
				id = "1"
				var m map[string]any
				if err := json.Unmarshal(ev.JSON, &m); err == nil {
					id, _ = m["id"].(string)
				}
			}
			if ev.ID != id {
				t.Errorf("ID = %q, want %q", ev.ID, id)
			}
			checkAgainstJSON(t, ev)
		})
	}
}

// checkAgainstJSON compares the Event fields with what encoding/json reads
// from the stored JSON.
func checkAgainstJSON(t *testing.T, ev Event) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev.JSON, &m); err != nil {
		t.Fatalf("stored JSON does not unmarshal: %v", err)
	}
	for k, got := range map[string]string{"id": ev.ID, "source": ev.Source, "type": ev.Type} {
		if m[k] != got {
			t.Errorf("%s: Event has %q, JSON has %q", k, got, m[k])
		}
	}
	if ts, ok := m["time"].(string); ok {
		want, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || !ev.Time.Equal(want) || ev.Time.Location() != time.UTC {
			t.Errorf("Time = %v, JSON has %q", ev.Time, ts)
		}
	} else if !ev.Time.IsZero() {
		t.Errorf("Time = %v, JSON has no time", ev.Time)
	}
	for k, v := range m {
		if v == nil && k != "data" {
			t.Errorf("stored JSON keeps null attribute %q", k)
		}
	}
}

func TestDecodeStructuredTime(t *testing.T) {
	ev, err := DecodeStructured([]byte(with(`,"time":"2018-04-05T19:31:00.5+02:00"`)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2018, 4, 5, 17, 31, 0, 5e8, time.UTC)
	if ev.Time != want {
		t.Errorf("Time = %v, want %v", ev.Time, want)
	}
	ev, err = DecodeStructured([]byte(minimal), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Time.IsZero() {
		t.Errorf("Time = %v, want zero", ev.Time)
	}
}

// sized returns an event whose compact JSON is exactly n bytes, padded with
// whitespace that compaction removes.
func sized(n int) string {
	base := with(`,"data":""`)
	pad := n - len(base)
	return with(`,   "data"  :  "`+strings.Repeat("x", pad)+`"`) + "\n\n"
}

func TestSizeLimit(t *testing.T) {
	for _, tc := range []struct {
		lim  Limits
		n    int
		want string
	}{
		{Limits{}, 65536, ""},
		{Limits{}, 65537, "event is 65537 bytes; the limit is 65536 bytes (64 KiB)"},
		{Limits{MaxEventBytes: 2048}, 2048, ""},
		{Limits{MaxEventBytes: 2048}, 2049, "event is 2049 bytes; the limit is 2048 bytes (2 KiB)"},
		{Limits{MaxEventBytes: 100}, 101, "event is 101 bytes; the limit is 100 bytes"},
	} {
		in := sized(tc.n)
		ev, err := DecodeStructured([]byte(in), tc.lim)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%d bytes with %+v: %v", tc.n, tc.lim, err)
			} else if len(ev.JSON) != tc.n {
				t.Errorf("stored %d bytes, want %d", len(ev.JSON), tc.n)
			}
			continue
		}
		if err == nil {
			t.Errorf("%d bytes with %+v accepted", tc.n, tc.lim)
			continue
		}
		checkError(t, err, 413, tc.want)
		if err.Error() != tc.want {
			t.Errorf("message %q, want exactly %q", err, tc.want)
		}
	}
}

func batchOf(events ...string) string {
	return "[" + strings.Join(events, ",") + "]"
}

func TestDecodeBatch(t *testing.T) {
	ev := func(id string) string {
		return fmt.Sprintf(`{"specversion":"1.0","id":%q,"source":"/s","type":"t"}`, id)
	}
	t.Run("empty", func(t *testing.T) {
		for _, in := range []string{"[]", " [ \n ] \n"} {
			evs, err := DecodeBatch([]byte(in), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if evs == nil || len(evs) != 0 {
				t.Errorf("%q: got %v, want an empty non-nil slice", in, evs)
			}
		}
	})
	t.Run("three", func(t *testing.T) {
		in := "[\n  " + ev("a") + " ,\n  " + with(`,"data":{"x" : 1}`) + ",\n" + ev("c") + "\n]"
		evs, err := DecodeBatch([]byte(in), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{ev("a"), with(`,"data":{"x":1}`), ev("c")}
		if len(evs) != len(want) {
			t.Fatalf("got %d events, want %d", len(evs), len(want))
		}
		for i, e := range evs {
			if string(e.JSON) != want[i] {
				t.Errorf("event %d: %s, want %s", i, e.JSON, want[i])
			}
			if cap(e.JSON) != len(e.JSON) {
				t.Errorf("event %d: cap %d > len %d", i, cap(e.JSON), len(e.JSON))
			}
			checkAgainstJSON(t, e)
		}
		// Appending to one event's JSON must not touch the next.
		_ = append(evs[0].JSON, "garbage"...)
		if string(evs[1].JSON) != want[1] {
			t.Errorf("event 1 changed to %s", evs[1].JSON)
		}
	})
	t.Run("same source twice", func(t *testing.T) {
		evs, err := DecodeBatch([]byte(batchOf(ev("a"), ev("b"))), Limits{})
		if err != nil || len(evs) != 2 || evs[1].Source != "/s" || evs[1].ID != "b" {
			t.Fatalf("got %v, %v", evs, err)
		}
	})

	for _, tc := range []struct {
		name   string
		in     string
		lim    Limits
		status int
		index  int
		msg    string
	}{
		{name: "bad event in the middle", in: batchOf(ev("a"), `{"specversion":"1.0","id":"b","type":"t"}`, ev("c")),
			status: 400, index: 1, msg: `batch index 1: missing required attribute "source"`},
		{name: "bad source after a good one", in: batchOf(ev("a"), `{"specversion":"1.0","id":"b","source":"a b","type":"t"}`),
			status: 400, index: 1, msg: `batch index 1: attribute "source" is "a b"`},
		{name: "bad content type after a good one", in: batchOf(with(`,"datacontenttype":"text/plain"`), with(`,"datacontenttype":"text/plain; charset"`)),
			status: 400, index: 1, msg: `batch index 1: datacontenttype "text/plain; charset" is not a valid media type`},
		{name: "text after json type", in: batchOf(with(`,"datacontenttype":"application/json","data":{}`), with(`,"datacontenttype":"text/plain","data":{}`)),
			status: 400, index: 1, msg: `batch index 1: data must be a JSON string`},
		{name: "syntax error in an event", in: batchOf(ev("a"), `{"specversion":"1.0",,}`),
			status: 400, index: 1, msg: "batch index 1: invalid JSON at byte offset"},
		{name: "not an object", in: `[` + ev("a") + `,1]`, status: 400, index: 1, msg: "batch index 1: invalid JSON at byte offset 57: unexpected '1', expected a CloudEvent as a JSON object"},
		{name: "nested batch", in: `[[]]`, status: 400, index: 0, msg: "batch index 0:"},
		{name: "object instead of array", in: ev("a"), status: 400, index: -1, msg: "expected a batch of CloudEvents as a JSON array"},
		{name: "empty body", in: "", status: 400, index: -1, msg: "empty body"},
		{name: "trailing comma", in: "[" + ev("a") + ",]", status: 400, index: 1, msg: "batch index 1:"},
		{name: "missing comma", in: "[" + ev("a") + ev("b") + "]", status: 400, index: -1, msg: "expected ',' or ']'"},
		{name: "unterminated", in: "[" + ev("a"), status: 400, index: -1, msg: "unexpected end of input"},
		{name: "trailing data", in: "[] []", status: 400, index: -1, msg: "expected end of input"},
		{name: "too many events", in: batchOf(ev("a"), ev("b"), ev("c")), lim: Limits{MaxBatch: 2},
			status: 413, index: -1, msg: "batch has more than 2 events; the limit is 2 events per batch"},
		{name: "event too large", in: batchOf(ev("a"), sized(1025)), lim: Limits{MaxEventBytes: 1024},
			status: 413, index: 1, msg: "batch index 1: event is 1025 bytes; the limit is 1024 bytes (1 KiB)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := DecodeBatch([]byte(tc.in), tc.lim)
			if err == nil {
				t.Fatalf("accepted %d events", len(evs))
			}
			if evs != nil {
				t.Errorf("returned %d events with the error; want none", len(evs))
			}
			checkError(t, err, tc.status, tc.msg)
			if e := err.(*Error); e.Index != tc.index {
				t.Errorf("Index = %d, want %d", e.Index, tc.index)
			}
		})
	}

	t.Run("exactly MaxBatch", func(t *testing.T) {
		evs, err := DecodeBatch([]byte(batchOf(ev("a"), ev("b"))), Limits{MaxBatch: 2})
		if err != nil || len(evs) != 2 {
			t.Fatalf("got %d events, %v", len(evs), err)
		}
	})
	t.Run("64 KiB boundary", func(t *testing.T) {
		evs, err := DecodeBatch([]byte(batchOf(ev("a"), sized(65536), ev("c"))), Limits{})
		if err != nil || len(evs) != 3 || len(evs[1].JSON) != 65536 {
			t.Fatalf("got %d events, %v", len(evs), err)
		}
		_, err = DecodeBatch([]byte(batchOf(ev("a"), ev("b"), sized(65537))), Limits{})
		checkError(t, err, 413, "batch index 2: event is 65537 bytes; the limit is 65536 bytes (64 KiB)")
	})
	t.Run("structured cases as batch elements", func(t *testing.T) {
		for _, tc := range append(structuredValid, structuredInvalid...) {
			if strings.TrimSpace(tc.in) == "" || tc.name == "trailing garbage" || tc.name == "two objects" {
				continue
			}
			evs, err := DecodeBatch([]byte(batchOf(ev("first"), tc.in)), Limits{})
			if tc.status == 0 {
				if err != nil || len(evs) != 2 {
					t.Errorf("%s: %v", tc.name, err)
				}
				continue
			}
			if err == nil {
				t.Errorf("%s: accepted in a batch", tc.name)
				continue
			}
			if e := err.(*Error); e.Status != tc.status || (e.Index != 1 && e.Index != -1) {
				t.Errorf("%s: %d %d %q", tc.name, e.Status, e.Index, e.Msg)
			}
		}
	})
}

func TestDefaultMaxBatch(t *testing.T) {
	events := make([]string, DefaultMaxBatch+1)
	for i := range events {
		events[i] = minimal
	}
	evs, err := DecodeBatch([]byte(batchOf(events[:DefaultMaxBatch]...)), Limits{})
	if err != nil || len(evs) != DefaultMaxBatch {
		t.Fatalf("%d events: %v", len(evs), err)
	}
	_, err = DecodeBatch([]byte(batchOf(events...)), Limits{})
	checkError(t, err, 413, "batch has more than 10000 events; the limit is 10000 events per batch")
}

// parseTimeByParse is parseTime without its quick path: time.Parse alone.
func parseTimeByParse(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || strings.IndexByte(s, ',') >= 0 {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// The quick path of parseTime reads what it reads as time.Parse does, to the nanosecond
// and the location, and leaves the rest to it.
func TestParseTimeQuick(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"2026-02-23T09:43:18.123456Z", "2026-02-23T09:43:18Z", "2024-02-29T23:59:59.999999999+14:00",
		"2023-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-12-31T24:00:00Z", "2026-12-31T23:60:00Z", "2026-12-31T23:59:60Z",
		"2026-01-01T00:00:00.Z", "2026-01-01T00:00:00.1234567891Z", "2026-01-01T00:00:00-00:00", "2026-01-01T00:00:00+24:00",
		"2026-01-01T00:00:00+01:60", "2026-01-01t00:00:00z", "2026-01-01T00:00:00,5Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59-23:59",
		"2026-1-01T00:00:00Z", "2026-01-01T00:00:00+0100", "2026-01-01T00:00:00.5+01:00x", "２026-01-01T00:00:00Z", ""} {
		checkParseTimeQuick(t, s)
	}
	// Every day of years around the calendar's rules, at times and offsets that cross days.
	for _, y := range []int{0, 1, 4, 100, 400, 1900, 1969, 1970, 2000, 2023, 2024, 2100, 9999} {
		for m := 1; m <= 12; m++ {
			for d := 1; d <= 31; d++ {
				for _, tz := range []string{"00:00:00Z", "23:59:59.5+14:00", "00:00:01.000000001-23:59"} {
					checkParseTimeQuick(t, fmt.Sprintf("%04d-%02d-%02dT%s", y, m, d, tz))
				}
			}
		}
	}
	for _, s := range []string{"2026-02-23T09:43:18.123456Z", "2026-02-23T09:43:18Z", "2026-02-23T09:43:18.1-05:00"} {
		if _, ok := parseTimeQuick(s); !ok {
			t.Errorf("%q, as producers write times, is left to time.Parse", s)
		}
	}
}

func checkParseTimeQuick(t *testing.T, s string) {
	t.Helper()
	want, wantOK := parseTimeByParse(s)
	got, err := parseTime(s)
	if (err == nil) != wantOK || !got.Equal(want) || got.Location() != want.Location() {
		t.Fatalf("parseTime(%q) = %v, %v; time.Parse: %v, %v", s, got, err, want, wantOK)
	}
	if q, ok := parseTimeQuick(s); ok && (!wantOK || !q.Equal(want) || q.Location() != want.Location()) {
		t.Fatalf("parseTimeQuick(%q) = %v; time.Parse: %v, %v", s, q, want, wantOK)
	}
}

func FuzzParseTimeQuick(f *testing.F) {
	f.Add("2026-02-23T09:43:18.123456Z")
	f.Add("2024-02-29T23:59:59.999999999+14:00")
	f.Add("2026-01-01T00:00:00-00:30")
	f.Fuzz(checkParseTimeQuick)
}
