package redisstream

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/evtctl/evtctl/internal/cevent"
)

// How an entry reads as a CloudEvent:
//
//   - An entry whose fields are CloudEvents attributes, among them type, id and source,
//     and event_data, as the Open edX event bus writes them (type, id, source, time,
//     minorversion, sourcehost, sourcelib, event_data), is that CloudEvent: every field an
//     attribute (specversion 1.0 unless one is given; a datacontenttype field the data's
//     media type), event_data its data, as JSON when it is JSON (and no datacontenttype
//     says otherwise), else as data_base64, byte for byte (the bus writes Avro).
//   - An entry of one field that holds a CloudEvent in the JSON format is that CloudEvent.
//   - Any other entry, and one of the above that is not a valid CloudEvent (a time that is
//     not RFC 3339, a field name that is no attribute's), is a CloudEvent made of it:
//     id the entry's id, source "redis:<key>", type the stream's key, time the id's time,
//     data its fields as a JSON object (a value that is not UTF-8 as {"base64": "…"}; when
//     a name is given twice or is not UTF-8, the fields as a list of [name, value] pairs),
//     and the extension redisfields saying why it is not the entry's own CloudEvent.
//     Nothing is dropped.

// DataField is the field the Open edX event bus keeps an event's data in.
const DataField = "event_data"

// MadeExtension is the extension of a CloudEvent made of an entry that is none.
const MadeExtension = "redisfields"

// readLimits bound what an entry may make: far above what a stream entry usually holds,
// and what the events of a node may be.
var readLimits = cevent.Limits{MaxEventBytes: 64 << 20}

// converter turns a stream's entries into CloudEvents. It is not safe for concurrent use.
type converter struct {
	key    string // the stream's key: the type of events made of entries
	source string // the source of events made of entries
	enc    cevent.FieldEncoder
	attrs  []cevent.Field // scratch
}

func newConverter(key string) *converter {
	return &converter{key: key, source: "redis:" + url.PathEscape(key), enc: cevent.FieldEncoder{Limits: readLimits}}
}

// appendItem appends to dst the item of an entry as a line of JSON, as an evtctl node
// serves its items: {"cursor": ID, "event": TYPE, "data": EVENT} and a newline, where EVENT
// is the CloudEvent the entry is (see above) and TYPE its type. It returns dst, the event's
// type (which shares the entry's memory, or c's) and where the event lies in dst.
func (c *converter) appendItem(dst []byte, e rawEntry) (out []byte, typ string, ds, de int) {
	start := len(dst)
	why := "the entry has no type, id and source fields: it is no event of the Open edX event bus, nor a CloudEvent in one field"
	switch {
	case len(e.fields) == 1 && looksLikeObject(e.fields[0].value):
		ev, err := cevent.DecodeStructured([]byte(e.fields[0].value), readLimits)
		if err == nil {
			dst = appendPrefix(dst, e.id, ev.Type)
			ds = len(dst)
			dst = append(dst, ev.JSON...)
			de = len(dst)
			return append(dst, "}\n"...), ev.Type, ds, de
		}
		if bytes.Contains([]byte(e.fields[0].value), []byte(`"specversion"`)) {
			why = "field " + e.fields[0].name + " holds no valid CloudEvent: " + err.Error()
		}
	case hasCore(e.fields):
		attrs := c.attrs[:0]
		var data string
		seenData := false
		for _, f := range e.fields {
			if f.name == DataField && !seenData {
				data, seenData = f.value, true
				continue
			}
			if f.name == "type" {
				typ = f.value
			}
			attrs = append(attrs, cevent.Field{Name: f.name, Value: f.value})
		}
		c.attrs = attrs
		dst = appendPrefix(dst, e.id, typ)
		ds = len(dst)
		out, _, err := c.enc.Append(dst, attrs, unsafeBytes(data))
		if err == nil {
			de = len(out)
			return append(out, "}\n"...), typ, ds, de
		}
		dst = dst[:start]
		why = "its fields are no valid CloudEvent: " + err.Error()
	}
	dst = appendPrefix(dst, e.id, c.key)
	ds = len(dst)
	dst = c.appendMade(dst, e, why)
	de = len(dst)
	return append(dst, "}\n"...), c.key, ds, de
}

// appendPrefix appends an item's line up to its data.
func appendPrefix(dst []byte, id, typ string) []byte {
	dst = append(dst, `{"cursor":`...)
	dst = appendText(dst, id)
	dst = append(dst, `,"event":`...)
	dst = appendText(dst, typ)
	return append(dst, `,"data":`...)
}

// hasCore reports whether the fields name type, id and source.
func hasCore(fs []field) bool {
	var have uint8
	for _, f := range fs {
		switch f.name {
		case "type":
			have |= 1
		case "id":
			have |= 2
		case "source":
			have |= 4
		}
	}
	return have == 7
}

func looksLikeObject(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}

// appendMade appends the CloudEvent made of an entry that is none (see above).
func (c *converter) appendMade(dst []byte, e rawEntry, why string) []byte {
	dst = append(dst, `{"specversion":"1.0","id":`...)
	dst = cevent.AppendJSONString(dst, e.id)
	dst = append(dst, `,"source":`...)
	dst = cevent.AppendJSONString(dst, c.source)
	dst = append(dst, `,"type":`...)
	dst = appendText(dst, c.key)
	if id, err := ParseID(e.id); err == nil {
		dst = append(dst, `,"time":"`...)
		dst = id.Time().UTC().AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"datacontenttype":"application/json","`...)
	dst = append(dst, MadeExtension...)
	dst = append(dst, `":`...)
	dst = cevent.AppendJSONString(dst, why)
	dst = append(dst, `,"data":`...)
	if pairs := needsPairs(e.fields); pairs {
		dst = append(dst, '[')
		for i, f := range e.fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '[')
			dst = appendValue(dst, f.name)
			dst = append(dst, ',')
			dst = appendValue(dst, f.value)
			dst = append(dst, ']')
		}
		return append(dst, "]}"...)
	}
	dst = append(dst, '{')
	for i, f := range e.fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = cevent.AppendJSONString(dst, f.name)
		dst = append(dst, ':')
		dst = appendValue(dst, f.value)
	}
	return append(dst, "}}"...)
}

// needsPairs reports whether fields cannot be a JSON object's members: a name is given
// twice, or is not UTF-8.
func needsPairs(fs []field) bool {
	for i, f := range fs {
		if !utf8.ValidString(f.name) {
			return true
		}
		for _, g := range fs[:i] {
			if g.name == f.name {
				return true
			}
		}
	}
	return false
}

// appendValue appends a field's value: a JSON string, or {"base64": "…"} when it is not UTF-8.
func appendValue(dst []byte, v string) []byte {
	if utf8.ValidString(v) {
		return cevent.AppendJSONString(dst, v)
	}
	dst = append(dst, `{"base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, unsafeBytes(v))
	return append(dst, `"}`...)
}

// appendText appends a key as a JSON string, each byte that is not UTF-8 as U+FFFD (a key
// is bytes; an attribute is text).
func appendText(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = string(bytes.ToValidUTF8([]byte(s), []byte("\uFFFD")))
	}
	return cevent.AppendJSONString(dst, s)
}
