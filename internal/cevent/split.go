package cevent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// SplitBinary splits an event in the JSON format into its binary form, as the HTTP binary
// mode and a Redis stream entry carry one: each attribute as a string (a number's or a
// boolean's literal; an attribute whose value is null is absent), datacontenttype among
// them, sorted by name; and the data as bytes: data_base64 decoded, JSON data as the event
// holds it, whitespace included (see DataText), a JSON string under a datacontenttype that
// is not JSON its text. DecodeBinary and FieldEncoder read the form back.
func SplitBinary(event []byte) ([]Field, []byte, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(event, &members); err != nil {
		return nil, nil, fmt.Errorf("decoding the event: %w", err)
	}
	if members == nil {
		return nil, nil, errors.New("decoding the event: not a JSON object")
	}
	var attrs []Field
	ct, hasCT := "", false
	for name, raw := range members {
		switch name {
		case "data", "data_base64":
			continue
		}
		if !ValidAttributeName(name) {
			return nil, nil, fmt.Errorf("member %q is not a valid CloudEvents attribute name", name)
		}
		v, ok, err := attrString(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("attribute %q: %w", name, err)
		}
		if !ok {
			continue
		}
		if name == "datacontenttype" {
			ct, hasCT = v, true
		}
		attrs = append(attrs, Field{Name: name, Value: v})
	}
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].Name < attrs[j].Name })
	var body []byte
	data, hasData := members["data"]
	data64, hasData64 := members["data_base64"]
	switch {
	case hasData && hasData64 && !isNull(data) && !isNull(data64):
		return nil, nil, errors.New("the event has both \"data\" and \"data_base64\"")
	case hasData64 && !isNull(data64):
		var s string
		if err := json.Unmarshal(data64, &s); err != nil {
			return nil, nil, errors.New("member \"data_base64\": not a string")
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, nil, fmt.Errorf("member \"data_base64\": %w", err)
		}
		body = b
	case hasData && !isNull(data):
		body = DataText(event, data)
		// A JSON string under a non-JSON content type is the data's text.
		if hasCT && !IsJSONMediaType(ct) && data[0] == '"' {
			var s string
			if err := json.Unmarshal(data, &s); err != nil {
				return nil, nil, fmt.Errorf("member \"data\": %w", err)
			}
			body = []byte(s)
		}
	}
	return attrs, body, nil
}

// attrString returns the binary form of an attribute's JSON value: a string's text, or the
// literal of a number or boolean. A null means the attribute is absent (ok false).
func attrString(raw json.RawMessage) (s string, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return "", false, nil
	}
	switch raw[0] {
	case '"':
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, err
		}
		return s, true, nil
	case '{', '[':
		return "", false, errors.New("a JSON object or array is not a CloudEvents attribute value")
	default: // number, true, false
		return string(raw), true, nil
	}
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}
