package render

import (
	"github.com/tidwall/gjson"
)

// event is what the formats read from an item's data, found in one pass over its members.
// Strings and raw values point into the data; a member that is absent is "".
type event struct {
	ce bool // the data is a CloudEvent: an object with a "specversion" member

	// CloudEvent attributes, decoded from JSON strings ("" when absent or not a string)
	id, typ, source, subject, time, contentType string

	// raw JSON members: the CloudEvent's data and data_base64; a Tendermint item's value
	data, dataBase64, value string

	doc string // the whole data, "" when the item has none
}

// scanData reads the top-level members of an item's data. The first of duplicate
// members wins, as in gjson paths.
func scanData(doc string) event {
	ev := event{doc: doc}
	root := gjson.Parse(doc)
	if !root.IsObject() {
		return ev
	}
	var seen uint16 // members already read
	root.ForEach(func(k, v gjson.Result) bool {
		var (
			dst *string
			bit uint16
			raw bool // keep the member's JSON rather than its string value
		)
		switch k.Str {
		case "specversion":
			ev.ce = true
			return true
		case "id":
			dst, bit = &ev.id, 1<<0
		case "type":
			dst, bit = &ev.typ, 1<<1
		case "source":
			dst, bit = &ev.source, 1<<2
		case "subject":
			dst, bit = &ev.subject, 1<<3
		case "time":
			dst, bit = &ev.time, 1<<4
		case "datacontenttype":
			dst, bit = &ev.contentType, 1<<5
		case "data":
			dst, bit, raw = &ev.data, 1<<6, true
		case "data_base64":
			dst, bit, raw = &ev.dataBase64, 1<<7, true
		case "value":
			dst, bit, raw = &ev.value, 1<<8, true
		default:
			return true
		}
		if seen&bit != 0 {
			return true
		}
		seen |= bit
		if raw {
			*dst = v.Raw
		} else {
			*dst = str(v)
		}
		return true
	})
	return ev
}

func str(v gjson.Result) string {
	if v.Type != gjson.String {
		return ""
	}
	return v.Str
}

// payload is the raw JSON the data format prints: a CloudEvent's data, else its
// data_base64 (a JSON string of base64 text), else null; for other data, its value member
// if present, else the data itself, else null.
func (ev *event) payload() string {
	var p string
	switch {
	case !ev.ce && ev.value != "":
		p = ev.value
	case !ev.ce:
		p = ev.doc
	case ev.data != "":
		p = ev.data
	default:
		p = ev.dataBase64
	}
	if p == "" {
		return "null"
	}
	return p
}
