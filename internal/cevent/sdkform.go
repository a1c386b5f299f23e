package cevent

import (
	"bytes"
	"encoding/base64"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/jsonspace"
)

// sdkReadsJSONData reports whether the CloudEvents Go SDK v2 (v2.16) reads the "data" member
// of an event in JSON format whose datacontenttype is ct as a JSON value. It does for no
// datacontenttype and for application/json, text/json, application/cloudevents+json and
// application/cloudevents-batch+json, compared exactly (with parameters cut off, when there
// are some); the data of any other type it reads only as a JSON string, taking the string's
// text for the data and failing on any other JSON value.
func sdkReadsJSONData(ct string) bool {
	mt := ct
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		mt = strings.TrimSpace(ct[:i])
	}
	switch mt {
	case "", "application/json", "text/json", MediaTypeStructured, MediaTypeBatch:
		return true
	}
	return false
}

// ForSDK returns event, one CloudEvent in JSON format, in a form from which the CloudEvents
// Go SDK v2 reads the same data as every reader that follows the JSON format, and reports
// whether that form differs from event.
//
// The JSON format puts JSON data under any JSON type (*/json, */*+json) in "data" as a JSON
// value; sdk-go reads it so only under the types sdkReadsJSONData names, and fails on an
// event with, say, application/vnd.api+json data that is an object (or takes a string's text
// for the data, where the format means the string itself). For such an event, ForSDK puts the
// data's JSON text, as DataText gives it, in "data_base64" in place of "data": the format
// says that data_base64 holds the data's bytes, whatever the datacontenttype, and sdk-go reads
// it so. Every other member keeps its place and its bytes (a "data_base64" member that is null
// is dropped). Any other event — another datacontenttype, data that is null, absent or already
// in data_base64, input that is no JSON object — is returned as it is.
func ForSDK(event []byte) ([]byte, bool) {
	if !mayNeedSDKForm(event) {
		return event, false
	}
	return forSDK(event)
}

// ForSDKBatch returns body, a JSON array of events in JSON format, with each event in the
// form ForSDK gives: body itself when none changes.
func ForSDKBatch(body []byte) []byte {
	if !mayNeedSDKForm(body) {
		return body
	}
	var out []byte
	last := 0 // body[:last] is in out, or unchanged so far
	// Read only, never kept: the results point into body.
	gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body))).ForEach(func(_, v gjson.Result) bool {
		ev, changed := forSDK(body[v.Index : v.Index+len(v.Raw)])
		if changed {
			out = append(out, body[last:v.Index]...)
			out = append(out, ev...)
			last = v.Index + len(v.Raw)
		}
		return true
	})
	if out == nil {
		return body
	}
	return append(out, body[last:]...)
}

// forSDK is ForSDK without its quick test.
func forSDK(event []byte) ([]byte, bool) {
	// Read only, never kept: the results point into event.
	root := gjson.Parse(unsafe.String(unsafe.SliceData(event), len(event)))
	if !root.IsObject() {
		return event, false
	}
	var ct, data, data64 gjson.Result
	var haveCT, haveData, haveData64 bool
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "datacontenttype":
			if !haveCT {
				ct, haveCT = v, true
			}
		case "data":
			if !haveData {
				data, haveData = v, true
			}
		case "data_base64":
			if !haveData64 {
				data64, haveData64 = v, true
			}
		}
		return true
	})
	switch {
	case !haveCT || ct.Type != gjson.String || sdkReadsJSONData(ct.Str) || !IsJSONMediaType(ct.Str):
		return event, false
	case !haveData || data.Type == gjson.Null:
		return event, false
	case haveData64 && data64.Type != gjson.Null:
		return event, false // both: not an event; the receiver says so
	}
	text := DataText(event, []byte(data.Raw))
	out := make([]byte, 0, len(event)+base64.StdEncoding.EncodedLen(len(text)))
	out = append(out, '{')
	first := true
	root.ForEach(func(k, v gjson.Result) bool {
		member := event[k.Index : v.Index+len(v.Raw)]
		switch {
		case k.Str == "data" && v.Index == data.Index:
			member = append([]byte(`"data_base64":"`), base64.StdEncoding.AppendEncode(nil, text)...)
			member = append(member, '"')
		case k.Str == "data_base64" && v.Type == gjson.Null:
			return true
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, member...)
		return true
	})
	return append(out, '}'), true
}

// mayNeedSDKForm is ForSDK's quick test: false when no JSON string in event, at any depth,
// is a media type ForSDK acts on, so that the datacontenttype cannot be one. Such a type
// holds "json" in some case; the test finds the j's, bytes that JSON events hold few of, with
// IndexByte, many bytes at a time, and looks at the string around each. It leaves to forSDK
// what it cannot tell at a glance: a string with an escape, and any event with a \u escape,
// which could spell a name or a type (a node stores them unescaped, but a line of emit
// --file goes as it is).
func mayNeedSDKForm(b []byte) bool {
	if bytes.Contains(b, []byte(`\u`)) {
		return true
	}
	return mayHoldJSONType(b, 'j') || mayHoldJSONType(b, 'J')
}

// mayHoldJSONType looks at the strings around each j (or J) of b, as mayNeedSDKForm says.
func mayHoldJSONType(b []byte, j byte) bool {
	for i := 0; ; {
		k := bytes.IndexByte(b[i:], j)
		if k < 0 {
			return false
		}
		at := i + k
		i = at + 1
		if at+4 > len(b) || !equalFold(string(b[at:at+4]), "json") {
			continue
		}
		open := bytes.LastIndexByte(b[:at], '"')
		end := bytes.IndexByte(b[at:], '"')
		if open < 0 || end < 0 {
			return true // not JSON: forSDK decides
		}
		s := b[open+1 : at+end]
		if open > 0 && b[open-1] == '\\' || bytes.IndexByte(s, '\\') >= 0 {
			return true
		}
		if !sdkReadsJSONData(string(s)) && IsJSONMediaType(string(s)) {
			return true
		}
	}
}

// DataText returns the text of the top-level "data" member of event, one CloudEvent in JSON
// format, whose value is data: the bytes between the colon and the next ',' or '}',
// whitespace included, so that JSON data an evtctl node stored from a binary-mode request is
// the body it came with. If they cannot be found, it returns data.
func DataText(event, data []byte) []byte {
	if !bytes.ContainsAny(event, " \t\r\n") {
		return data // compact: no whitespace to keep
	}
	r := gjson.GetBytes(event, "data")
	start, end := r.Index, r.Index+len(r.Raw)
	if r.Index <= 0 || end > len(event) || !bytes.Equal(event[start:end], bytes.TrimSpace(data)) {
		return data
	}
	for start > 0 && jsonspace.Is(event[start-1]) {
		start--
	}
	for end < len(event) && jsonspace.Is(event[end]) {
		end++
	}
	if start == 0 || event[start-1] != ':' || end == len(event) || event[end] != ',' && event[end] != '}' {
		return data
	}
	return event[start:end]
}
