package cevent

// Attr is one attribute of a binary-mode event whose binding carries each attribute as a
// value of its own, unencoded, as the Kafka protocol binding does in ce_ headers.
type Attr struct {
	Name  string // the attribute's name, lower case: "type", "sourcehost"
	Key   string // where it came from, named in messages: the header "ce_type"
	Value string // the value exactly as sent
}

// AttrDecoder decodes binary-mode events whose attributes come as Attrs. It remembers the
// last source, datacontenttype and dataschema that passed their checks, so that the events
// of one producer are checked quickly. The zero value is ready; it is not safe for
// concurrent use.
type AttrDecoder struct {
	Limits Limits
	// Prefix and ContentType name the binding's headers in messages: "ce_" and
	// "content-type" for Kafka (the defaults).
	Prefix, ContentType string

	memo binaryMemo
	buf  [16]ceHeader
}

// Decode decodes one event from its attributes, its datacontenttype ct (when hasCT) and
// its data, by the rules of DecodeBinary except that values are taken as they are (no
// quoted-string or percent-decoding): every attribute must be valid, an attribute given
// twice is refused, and datacontenttype must not be among attrs. Errors are *Error.
func (d *AttrDecoder) Decode(attrs []Attr, ct string, hasCT bool, body []byte) (Event, error) {
	_, ev, err := d.DecodeAppend(nil, attrs, ct, hasCT, body)
	return ev, err
}

// DecodeAppend is Decode appending the event's JSON to dst: it returns dst extended and
// the event, whose JSON is the part appended.
func (d *AttrDecoder) DecodeAppend(dst []byte, attrs []Attr, ct string, hasCT bool, body []byte) ([]byte, Event, error) {
	hs := d.buf[:0]
	for _, a := range attrs {
		hs = append(hs, ceHeader{name: a.Name, key: a.Key, value: a.Value, n: 1})
	}
	form := binaryForm{ordered: true, prefix: d.Prefix, ctName: d.ContentType}
	if form.prefix == "" {
		form.prefix = "ce_"
	}
	if form.ctName == "" {
		form.ctName = "content-type"
	}
	if len(hs) == 0 {
		return dst, Event{}, invalid("not a CloudEvent: no %s headers", form.prefix)
	}
	out, ev, err := buildBinary(dst, hs, ct, hasCT, body, d.Limits.withDefaults(), form, &d.memo)
	clear(d.buf[:min(len(hs), len(d.buf))]) // keep no strings of this event alive
	if err != nil {
		return dst, Event{}, err
	}
	return out, ev, nil
}

// AppendJSONString appends s, which must be valid UTF-8, as a JSON string, escaping only
// what JSON requires.
func AppendJSONString(dst []byte, s string) []byte { return appendJSONString(dst, s) }

// ValidString reports whether s is a valid CloudEvents String: UTF-8 without control
// characters (U+0000-U+001F, U+007F-U+009F), surrogates or noncharacters.
func ValidString(s string) bool { return checkString("", s) == nil }

// EqualFold compares ASCII case-insensitively, as header names and media types are
// compared: unlike strings.EqualFold, no Unicode folding lets "ſ" match "s".
func EqualFold(a, b string) bool { return equalFold(a, b) }

// ValidRune reports whether r may appear in a CloudEvents String.
func ValidRune(r rune) bool { return badStringRune(r) == "" }
