package cevent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// hdr builds a header from name/value pairs, keeping the names exactly as
// given (not canonicalized) so that case-insensitivity is exercised.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h[kv[i]] = append(h[kv[i]], kv[i+1])
	}
	return h
}

// required returns the four required ce- headers plus kv.
func required(kv ...string) http.Header {
	return hdr(append([]string{"Ce-Specversion", "1.0", "Ce-Id", "1", "Ce-Source", "/s", "Ce-Type", "t"}, kv...)...)
}

type binaryCase struct {
	name   string
	h      http.Header
	body   string
	want   string // stored JSON
	status int
	msg    string
}

var binaryValid = []binaryCase{
	{name: "minimal", h: required(), want: minimal},
	{name: "lower-case and mixed-case names", h: hdr("ce-specversion", "1.0", "CE-ID", "1", "cE-SoUrCe", "/s", "Ce-type", "t", "CE-MYEXT", "v"),
		want: with(`,"myext":"v"`)},
	{name: "all attributes", h: required("Ce-Subject", "sub", "Ce-Time", "2018-04-05T17:31:00Z", "Ce-Dataschema", "https://example.com/s.json", "Content-Type", "application/json; charset=utf-8", "Ce-Zeta", "z", "Ce-Alpha", "a", "Ce-Num", "5"),
		body: "{\n  \"appinfoA\" : \"abc\",\n  \"appinfoB\" : 123\n}\n",
		want: with(`,"subject":"sub","time":"2018-04-05T17:31:00Z","datacontenttype":"application/json; charset=utf-8","dataschema":"https://example.com/s.json","alpha":"a","num":"5","zeta":"z","data":` +
			"{\n  \"appinfoA\" : \"abc\",\n  \"appinfoB\" : 123\n}\n")},
	{name: "percent-encoded space quote percent", h: required("Ce-Subject", "a%20b%22c%25d"), want: with(`,"subject":"a b\"c%d"`)},
	{name: "percent-encoded non-ASCII", h: required("Ce-Subject", "Euro%20%E2%82%AC%20%F0%9F%98%80"), want: with(`,"subject":"Euro € 😀"`)},
	{name: "lower-case hex", h: required("Ce-Subject", "%c3%a9"), want: with(`,"subject":"é"`)},
	{name: "needlessly encoded", h: required("Ce-Subject", "%41%42"), want: with(`,"subject":"AB"`)},
	{name: "quoted string", h: required("Ce-Subject", `"hello world"`), want: with(`,"subject":"hello world"`)},
	{name: "quoted string with escapes", h: required("Ce-Subject", `"a\"b\\c"`), want: with(`,"subject":"a\"b\\c"`)},
	{name: "quoted string then percent-decoded", h: required("Ce-Subject", `"x%20y"`), want: with(`,"subject":"x y"`)},
	{name: "quotes inside a value kept", h: required("Ce-Subject", `x"%20y"z`), want: with(`,"subject":"x\" y\"z"`)},
	{name: "raw quotes and spaces kept", h: required("Ce-Subject", `say "hi" now`), want: with(`,"subject":"say \"hi\" now"`)},
	{name: "raw JSON text kept", h: required("Ce-Comexampleextension2", `{"othervalue": 5}`), want: with(`,"comexampleextension2":"{\"othervalue\": 5}"`)},
	{name: "two quoted strings kept", h: required("Ce-Myext", `"a" "b"`), want: with(`,"myext":"\"a\" \"b\""`)},
	{name: "inner quote ends the quoted string early", h: required("Ce-Myext", `"a"b"`), want: with(`,"myext":"\"a\"b\""`)},
	{name: "escaped closing quote is no end", h: required("Ce-Myext", `"a\"`), want: with(`,"myext":"\"a\\\""`)},
	{name: "unterminated quote kept", h: required("Ce-Subject", `"abc`), want: with(`,"subject":"\"abc"`)},
	{name: "empty quoted string", h: required("Ce-Myext", `""`), want: with(`,"myext":""`)},
	{name: "quoted blank subject kept as received", h: required("Ce-Subject", `" "`), want: with(`,"subject":"\" \""`)},
	{name: "percent without two hex digits kept", h: required("Ce-Subject", "100% sure"), want: with(`,"subject":"100% sure"`)},
	{name: "lone percent kept", h: required("Ce-Subject", "100%"), want: with(`,"subject":"100%"`)},
	{name: "truncated escape kept", h: required("Ce-Subject", "abc%4"), want: with(`,"subject":"abc%4"`)},
	{name: "non-hex escape kept, valid one decoded", h: required("Ce-Subject", "100%zz%20x"), want: with(`,"subject":"100%zz x"`)},
	{name: "decoded value not UTF-8: kept as received", h: required("Ce-Subject", "caf%E9"), want: with(`,"subject":"caf%E9"`)},
	{name: "overlong UTF-8: kept as received", h: required("Ce-Subject", "%C0%A0"), want: with(`,"subject":"%C0%A0"`)},
	{name: "decoded control character: kept as received", h: required("Ce-Subject", "a%0Ab"), want: with(`,"subject":"a%0Ab"`)},
	{name: "decoded C1 control: kept as received", h: required("Ce-Myext", "%C2%85"), want: with(`,"myext":"%C2%85"`)},
	{name: "source kept as received when decoding breaks it", h: hdr("Ce-Specversion", "1.0", "Ce-Id", "1", "Ce-Source", "/a%20b", "Ce-Type", "t"),
		want: `{"specversion":"1.0","id":"1","source":"/a%20b","type":"t"}`},
	{name: "dataschema kept as received when decoding breaks it", h: required("Ce-Dataschema", "https://example.com/s%20x.json"), want: with(`,"dataschema":"https://example.com/s%20x.json"`)},
	{name: "quoted empty id kept as received", h: hdr("Ce-Specversion", "1.0", "Ce-Id", `""`, "Ce-Source", "/s", "Ce-Type", "t"),
		want: `{"specversion":"1.0","id":"\"\"","source":"/s","type":"t"}`},
	{name: "raw space kept", h: required("Ce-Subject", "a b"), want: with(`,"subject":"a b"`)},
	{name: "raw UTF-8 header value", h: required("Ce-Subject", "é"), want: with(`,"subject":"é"`)},
	{name: "percent-encoded id", h: hdr("Ce-Specversion", "1.0", "Ce-Id", "a%2Fb%3F", "Ce-Source", "/s%2520x", "Ce-Type", "t%2Ex"),
		want: `{"specversion":"1.0","id":"a/b?","source":"/s%20x","type":"t.x"}`},
	{name: "text body", h: required("Content-Type", "text/plain"), body: "hello\n\"world\"\t\x01", want: with(`,"datacontenttype":"text/plain","data":"hello\n\"world\"\t\u0001"`)},
	{name: "text body utf-8 charset", h: required("Content-Type", "text/plain; charset=UTF-8"), body: "é", want: with(`,"datacontenttype":"text/plain; charset=UTF-8","data":"é"`)},
	{name: "text body other charset", h: required("Content-Type", "text/plain; charset=iso-8859-1"), body: "caf\xe9", want: with(`,"datacontenttype":"text/plain; charset=iso-8859-1","data_base64":"Y2Fm6Q=="`)},
	{name: "text body invalid UTF-8", h: required("Content-Type", "text/csv"), body: "a,\xff", want: with(`,"datacontenttype":"text/csv","data_base64":"YSz/"`)},
	{name: "xml body", h: required("Content-Type", "application/xml"), body: `<much wow="xml"/>`, want: with(`,"datacontenttype":"application/xml","data":"<much wow=\"xml\"/>"`)},
	{name: "text/xml body", h: required("Content-Type", "text/xml"), body: "<a>\n</a>\n", want: with(`,"datacontenttype":"text/xml","data":"<a>\n</a>\n"`)},
	{name: "+xml body", h: required("Content-Type", "application/atom+xml; charset=utf-8"), body: `<feed/>`, want: with(`,"datacontenttype":"application/atom+xml; charset=utf-8","data":"<feed/>"`)},
	{name: "upper-case XML type", h: required("Content-Type", "Application/XML"), body: `<a/>`, want: with(`,"datacontenttype":"Application/XML","data":"<a/>"`)},
	{name: "xml body other charset", h: required("Content-Type", "application/xml; charset=iso-8859-1"), body: "<a>\xe9</a>", want: with(`,"datacontenttype":"application/xml; charset=iso-8859-1","data_base64":"PGE+6TwvYT4="`)},
	{name: "xml body invalid UTF-8", h: required("Content-Type", "application/xml"), body: "<a>\xe9</a>", want: with(`,"datacontenttype":"application/xml","data_base64":"PGE+6TwvYT4="`)},
	{name: "not a textual type", h: required("Content-Type", "application/xmlfoo"), body: "x", want: with(`,"datacontenttype":"application/xmlfoo","data_base64":"eA=="`)},
	{name: "JSON body keeps a trailing newline", h: required("Content-Type", "application/json"), body: "{\"a\": 1}\n", want: with(`,"datacontenttype":"application/json","data":` + "{\"a\": 1}\n")},
	{name: "JSON body keeps CRLF and leading space", h: required("Content-Type", "application/json"), body: " [1,\r\n2]\r\n", want: with(`,"datacontenttype":"application/json","data":` + " [1,\r\n2]\r\n")},
	{name: "binary body", h: required("Content-Type", "application/octet-stream"), body: "\x00\x01\xff", want: with(`,"datacontenttype":"application/octet-stream","data_base64":"AAH/"`)},
	{name: "json suffix body", h: required("Content-Type", "application/vnd.api+json"), body: ` [1, {"a": null}] `, want: with(`,"datacontenttype":"application/vnd.api+json","data": [1, {"a": null}] `)},
	{name: "text/json body", h: required("Content-Type", "text/json"), body: `"str"`, want: with(`,"datacontenttype":"text/json","data":"str"`)},
	{name: "json null body", h: required("Content-Type", "application/json"), body: `null`, want: with(`,"datacontenttype":"application/json","data":null`)},
	{name: "no content type, JSON body", h: required(), body: `{"a": 1}`, want: with(`,"data":{"a": 1}`)},
	{name: "no content type, text body", h: required(), body: `hello`, want: with(`,"data_base64":"aGVsbG8="`)},
	{name: "empty body with content type", h: required("Content-Type", "application/json"), want: with(`,"datacontenttype":"application/json"`)},
	{name: "other headers ignored", h: required("Accept", "*/*", "Content-Length", "0", "X-Ce-Foo", "bar"), want: minimal},
	{name: "time with offset", h: required("Ce-Time", "2018-04-05T19:31:00.5+02:00"), want: with(`,"time":"2018-04-05T19:31:00.5+02:00"`)},
}

var binaryInvalid = []binaryCase{
	{name: "no ce headers", h: hdr("Content-Type", "text/plain"), body: "x", status: 415,
		msg: `not a CloudEvent: Content-Type "text/plain" and no ce- headers; send application/cloudevents+json (structured mode), application/cloudevents-batch+json (batch mode), or binary mode with ce-specversion, ce-id, ce-source and ce-type headers`},
	{name: "nothing at all", h: hdr(), status: 415, msg: "not a CloudEvent: no Content-Type and no ce- headers"},
	{name: "missing specversion", h: hdr("Ce-Id", "1", "Ce-Source", "/s", "Ce-Type", "t"), status: 400, msg: `missing required attribute "specversion" (header ce-specversion)`},
	{name: "missing id", h: hdr("Ce-Specversion", "1.0", "Ce-Source", "/s", "Ce-Type", "t"), status: 400, msg: `missing required attribute "id" (header ce-id)`},
	{name: "missing source", h: hdr("Ce-Specversion", "1.0", "Ce-Id", "1", "Ce-Type", "t"), status: 400, msg: `missing required attribute "source" (header ce-source)`},
	{name: "missing type", h: hdr("Ce-Specversion", "1.0", "Ce-Id", "1", "Ce-Source", "/s"), status: 400, msg: `missing required attribute "type" (header ce-type)`},
	{name: "specversion 0.3", h: hdr("Ce-Specversion", "0.3", "Ce-Id", "1", "Ce-Source", "/s", "Ce-Type", "t"), status: 400, msg: `unsupported specversion "0.3": only CloudEvents "1.0" is supported`},
	{name: "empty id", h: hdr("Ce-Specversion", "1.0", "Ce-Id", "", "Ce-Source", "/s", "Ce-Type", "t"), status: 400, msg: `attribute "id" must be a non-empty string`},
	{name: "bad source", h: hdr("Ce-Specversion", "1.0", "Ce-Id", "1", "Ce-Source", "a b", "Ce-Type", "t"), status: 400, msg: `attribute "source" is "a b"; ' ' is not allowed in a URI`},
	{name: "bad source either way", h: hdr("Ce-Specversion", "1.0", "Ce-Id", "1", "Ce-Source", "a%20 b", "Ce-Type", "t"), status: 400, msg: `attribute "source" is "a  b"; ' ' is not allowed in a URI`},
	{name: "raw control character", h: required("Ce-Subject", "a\x01b"), status: 400, msg: `attribute "subject" contains the control character U+0001`},
	{name: "control character either way", h: required("Ce-Subject", "a%0A\x01"), status: 400, msg: `attribute "subject" contains the control character U+000A`},
	{name: "bad time", h: required("Ce-Time", "yesterday"), status: 400, msg: `attribute "time" is "yesterday"; it must be an RFC 3339 timestamp`},
	{name: "empty subject", h: required("Ce-Subject", ""), status: 400, msg: `attribute "subject" must be a non-empty string`},
	{name: "relative dataschema", h: required("Ce-Dataschema", "/x"), status: 400, msg: `attribute "dataschema" is "/x"; it must be an absolute URI`},
	{name: "raw invalid UTF-8", h: required("Ce-Subject", "\xff"), status: 400, msg: `attribute "subject" is not valid UTF-8`},
	{name: "invalid UTF-8 either way", h: required("Ce-Subject", "%FF\xff"), status: 400, msg: `attribute "subject" is not valid UTF-8`},
	{name: "datacontenttype header", h: required("Ce-Datacontenttype", "text/plain"), status: 400, msg: "header Ce-Datacontenttype is not allowed in binary mode: datacontenttype is carried by Content-Type"},
	{name: "data header", h: required("Ce-Data", "x"), status: 400, msg: `header Ce-Data: "data" is not a valid attribute name`},
	{name: "underscore header", h: required("Ce-My_ext", "x"), status: 400, msg: `header Ce-My_ext: "my_ext" is not a valid attribute name`},
	{name: "dash header", h: required("Ce-My-Ext", "x"), status: 400, msg: `header Ce-My-Ext: "my-ext" is not a valid attribute name`},
	{name: "repeated header", h: required("Ce-Subject", "a", "Ce-Subject", "b"), status: 400, msg: "header Ce-Subject is given 2 times"},
	{name: "same attribute in two spellings", h: required("ce-subject", "a", "CE-SUBJECT", "b"), status: 400, msg: `headers CE-SUBJECT and ce-subject both set attribute "subject"`},
	{name: "repeated content type", h: required("Content-Type", "text/plain", "Content-Type", "text/html"), status: 400, msg: "Content-Type is given 2 times"},
	{name: "bad content type", h: required("Content-Type", "not a type"), body: "x", status: 400, msg: `Content-Type "not a type" is not a valid media type`},
	{name: "invalid JSON body", h: required("Content-Type", "application/json"), body: `{"a":}`, status: 400,
		msg: `Content-Type "application/json" declares JSON, but the body is not valid JSON: invalid JSON at byte offset 5: unexpected '}', expected a JSON value`},
	{name: "JSON body with trailing data", h: required("Content-Type", "application/json"), body: `{} {}`, status: 400, msg: "expected end of input after the JSON value"},
	{name: "JSON body with duplicate", h: required("Content-Type", "application/cloudevents+json"), body: `{"a":1,"a":2}`, status: 400, msg: `duplicate member name "a"`},
}

func TestDecodeBinary(t *testing.T) {
	for _, tc := range append(binaryValid, binaryInvalid...) {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := DecodeBinary(tc.h, []byte(tc.body), Limits{})
			if tc.status != 0 {
				if err == nil {
					t.Fatalf("accepted: %s", ev.JSON)
				}
				checkError(t, err, tc.status, tc.msg)
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if string(ev.JSON) != tc.want {
				t.Errorf("stored\n %s\nwant\n %s", ev.JSON, tc.want)
			}
			checkAgainstJSON(t, ev)
			// The stored form is itself a valid structured event that decodes to the same Event.
			again, err := DecodeStructured(ev.JSON, Limits{})
			if err != nil {
				t.Fatalf("stored JSON does not decode: %v", err)
			}
			if !sameEvent(ev, again) {
				t.Errorf("re-decoded %+v, want %+v", again, ev)
			}
		})
	}
}

// sameEvent reports whether b is a re-decoded a: the same attributes, and
// b.JSON is a.JSON compacted (a binary-mode JSON body keeps its whitespace
// in a.JSON; structured mode stores JSON compact).
func sameEvent(a, b Event) bool {
	var buf bytes.Buffer
	if err := json.Compact(&buf, a.JSON); err != nil {
		return false
	}
	return buf.String() == string(b.JSON) && a.ID == b.ID && a.Source == b.Source && a.Type == b.Type &&
		a.Time.Equal(b.Time) && a.Time.Location() == b.Time.Location()
}

func TestDecodeBinaryErrorsAreDeterministic(t *testing.T) {
	// Several problems at once: the first in sorted attribute order wins.
	h := hdr("Ce-Zzz_x", "1", "Ce-Aaa-b", "1", "Ce-Specversion", "1.0")
	for range 20 {
		_, err := DecodeBinary(h, nil, Limits{})
		checkError(t, err, 400, `header Ce-Aaa-b: "aaa-b" is not a valid attribute name`)
	}
}

func TestDecodeBinarySize(t *testing.T) {
	// Binary data grows by a third in data_base64: find the body size that
	// lands exactly on the limit.
	lim := Limits{MaxEventBytes: 4096}
	h := required("Content-Type", "application/octet-stream")
	overhead := len(with(`,"datacontenttype":"application/octet-stream","data_base64":""`))
	n := (4096 - overhead - 100) / 4 * 3
	pad := 4096 - overhead - base64.StdEncoding.EncodedLen(n) - len(`,"pad":""`)
	h.Set("Ce-Pad", strings.Repeat("p", pad))
	ev, err := DecodeBinary(h, make([]byte, n), lim)
	if err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if len(ev.JSON) != 4096 {
		t.Fatalf("stored %d bytes, want 4096", len(ev.JSON))
	}
	h.Set("Ce-Pad", h.Get("Ce-Pad")+"p")
	_, err = DecodeBinary(h, make([]byte, n), lim)
	checkError(t, err, 413, "event is 4097 bytes; the limit is 4096 bytes (4 KiB)")
}

func TestDecodeRequest(t *testing.T) {
	ev1 := `{"specversion":"1.0","id":"1","source":"/s","type":"t"}`
	ev2 := `{"specversion":"1.0","id":"2","source":"/s","type":"t"}`
	batch := "[" + ev1 + "," + ev2 + "]"
	for _, tc := range []struct {
		name   string
		h      http.Header
		body   string
		want   []string
		status int
		msg    string
	}{
		{name: "structured", h: hdr("Content-Type", "application/cloudevents+json"), body: ev1, want: []string{ev1}},
		{name: "structured with charset", h: hdr("Content-Type", "application/cloudevents+json; charset=UTF-8"), body: ev1, want: []string{ev1}},
		{name: "structured mixed case", h: hdr("Content-Type", "Application/CloudEvents+JSON ; Charset=utf-8"), body: ev1, want: []string{ev1}},
		{name: "structured non-canonical header key", h: hdr("content-type", "application/cloudevents+json"), body: ev1, want: []string{ev1}},
		{name: "structured with ce headers too", h: hdr("Content-Type", "application/cloudevents+json", "Ce-Id", "other"), body: ev1, want: []string{ev1}},
		{name: "batch", h: hdr("Content-Type", "application/cloudevents-batch+json"), body: batch, want: []string{ev1, ev2}},
		{name: "batch with charset, upper case", h: hdr("Content-Type", "APPLICATION/CLOUDEVENTS-BATCH+JSON; charset=utf-8"), body: batch, want: []string{ev1, ev2}},
		{name: "empty batch", h: hdr("Content-Type", "application/cloudevents-batch+json"), body: "[]", want: []string{}},
		{name: "binary", h: required("Content-Type", "application/json"), body: `{"a":1}`, want: []string{with(`,"datacontenttype":"application/json","data":{"a":1}`)}},
		{name: "binary without content type", h: required(), body: `{"a":1}`, want: []string{with(`,"data":{"a":1}`)}},
		{name: "no content type, structured body", h: hdr(), body: "\n " + ev1, want: []string{ev1}},
		{name: "no content type, batch body", h: hdr(), body: batch, want: []string{ev1, ev2}},
		{name: "no content type, other body", h: hdr(), body: "hello", status: 415, msg: "not a CloudEvent: no Content-Type and no ce- headers"},
		{name: "no content type, empty body", h: hdr(), body: "", status: 415, msg: "not a CloudEvent"},
		{name: "plain JSON without ce headers", h: hdr("Content-Type", "application/json"), body: ev1, status: 415, msg: `not a CloudEvent: Content-Type "application/json" and no ce- headers; send application/cloudevents+json`},
		{name: "avro", h: hdr("Content-Type", "application/cloudevents+avro"), body: "x", status: 415, msg: `unsupported CloudEvents format "application/cloudevents+avro": only the JSON formats`},
		{name: "protobuf batch", h: hdr("Content-Type", "application/cloudevents-batch+protobuf"), body: "x", status: 415, msg: `unsupported CloudEvents format "application/cloudevents-batch+protobuf"`},
		{name: "bare cloudevents", h: hdr("Content-Type", "application/cloudevents"), body: ev1, status: 415, msg: "unsupported CloudEvents format"},
		{name: "latin1 charset", h: hdr("Content-Type", "application/cloudevents+json; charset=latin1"), body: ev1, status: 415, msg: `unsupported charset "latin1": CloudEvents JSON must be UTF-8`},
		{name: "bad parameters", h: hdr("Content-Type", "application/cloudevents+json; charset"), body: ev1, status: 400, msg: `invalid Content-Type "application/cloudevents+json; charset"`},
		{name: "structured error", h: hdr("Content-Type", "application/cloudevents+json"), body: `{"specversion":"1.0"}`, status: 400, msg: `missing required attribute "id"`},
		{name: "structured given a batch", h: hdr("Content-Type", "application/cloudevents+json"), body: batch, status: 400, msg: "expected a CloudEvent as a JSON object"},
		{name: "batch given an event", h: hdr("Content-Type", "application/cloudevents-batch+json"), body: ev1, status: 400, msg: "expected a batch of CloudEvents as a JSON array"},
		{name: "batch error", h: hdr("Content-Type", "application/cloudevents-batch+json"), body: "[" + ev1 + ",{}]", status: 400, msg: `batch index 1: missing required attribute "specversion"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := DecodeRequest(tc.h, []byte(tc.body), Limits{})
			if tc.status != 0 {
				if err == nil {
					t.Fatalf("accepted %d events", len(evs))
				}
				checkError(t, err, tc.status, tc.msg)
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if len(evs) != len(tc.want) {
				t.Fatalf("got %d events, want %d", len(evs), len(tc.want))
			}
			for i := range evs {
				if string(evs[i].JSON) != tc.want[i] {
					t.Errorf("event %d: %s, want %s", i, evs[i].JSON, tc.want[i])
				}
			}
		})
	}
}

func TestASCIIOnlyCaseFolding(t *testing.T) {
	// Unicode case folding would map "ſ" (U+017F) to "s" and "K" (U+212A) to "k".
	_, err := DecodeBinary(required("Ce-\u017fubject", "x"), nil, Limits{})
	checkError(t, err, 400, "is not a valid attribute name")
	_, err = DecodeBinary(required("Ce-\u212a", "x"), nil, Limits{})
	checkError(t, err, 400, "is not a valid attribute name")
	_, err = DecodeRequest(hdr("Content-Type", "application/cloudevent\u017f+json"), []byte(minimal), Limits{})
	checkError(t, err, 415, "not a CloudEvent")
}

func TestLimitsDefaults(t *testing.T) {
	for _, lim := range []Limits{{}, {MaxEventBytes: -1, MaxBatch: -5}} {
		got := lim.withDefaults()
		if got.MaxEventBytes != 65536 || got.MaxBatch != 10000 {
			t.Errorf("%+v.withDefaults() = %+v", lim, got)
		}
	}
	if got := (Limits{MaxEventBytes: 10, MaxBatch: 3}).withDefaults(); got != (Limits{10, 3}) {
		t.Errorf("explicit limits changed to %+v", got)
	}
}
