package cevent

import (
	"slices"
	"unsafe"
)

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

	// tpls are the attribute sets of recent events, as templates (see attrTemplate);
	// next is the one to replace. debt bounds how often a template is made: a producer
	// whose attributes all vary from event to event costs a template now and then only.
	tpls [maxTemplates]*attrTemplate
	next int
	debt int
}

// An attrTemplate is an event's attributes but its id and time, as checked names and values
// and as the JSON text they make (appendMid, appendTail). An event whose attributes have
// the same names in the same order and the same values but for id and time, and the same
// datacontenttype, is then built by checking its id, time and data alone: what the full
// check of its attributes would find of the others is known. Any doubt (an id or time that
// is not plain printable ASCII, a time that does not parse, data that does not decode, a
// size over the limit) sends the event to the full decode, which says what is wrong as it
// always does: a template changes how fast an event is built, never what is built or said.
type attrTemplate struct {
	names, values []string // the attributes in order; values[idAt] and values[timeAt] are ""
	idAt, timeAt  int      // -1: no time
	sourceAt      int
	typeAt        int
	ct            string
	hasCT         bool
	ctParams      map[string]string // read only
	mid, tail     []byte
}

// Template bounds: how many an AttrDecoder keeps, the most bytes of names and values one
// holds, and how many events' decoding a new one costs: the debt it adds, which each event
// decoded pays down by one; none is made while the debt would pass maxTemplateDebt.
const (
	maxTemplates    = 4
	maxTemplateLen  = 4 << 10
	templateCost    = 16
	maxTemplateDebt = maxTemplates * templateCost
)

// match reports whether attrs, ct and hasCT fit t.
func (t *attrTemplate) match(attrs []Attr, ct string, hasCT bool) bool {
	if len(attrs) != len(t.names) || hasCT != t.hasCT || ct != t.ct {
		return false
	}
	for i := range attrs {
		if attrs[i].Name != t.names[i] || i != t.idAt && i != t.timeAt && attrs[i].Value != t.values[i] {
			return false
		}
	}
	return true
}

// build appends the event of attrs (which match t) to dst, or reports ok false when
// the full decode must decide.
func (t *attrTemplate) build(dst []byte, attrs []Attr, body []byte, lim Limits, keys *[]span) (out []byte, ev Event, ok bool) {
	id := attrs[t.idAt].Value
	if !printableASCII(id) || isBlank(id) {
		return nil, Event{}, false
	}
	tm := ""
	if t.timeAt >= 0 {
		tm = attrs[t.timeAt].Value
		if !printableASCII(tm) {
			return nil, Event{}, false
		}
		var err *Error
		if ev.Time, err = parseTime(tm); err != nil {
			return nil, Event{}, false
		}
	}
	start := len(dst)
	out = slices.Grow(dst, 64+len(t.mid)+len(t.tail)+2*(len(id)+len(tm))+len(body)*4/3)
	out = appendID(out, id)
	out = append(out, t.mid...)
	if t.timeAt >= 0 {
		out = appendTime(out, tm)
	}
	out = append(out, t.tail...)
	if len(body) > 0 {
		var err *Error // said by the full decode
		if out, ev.Spaced, err = appendBinaryData(out, body, t.ct, t.hasCT, t.ctParams, "", keys); err != nil {
			return nil, Event{}, false
		}
	}
	out = append(out, '}')
	if checkSize(len(out)-start, lim) != nil {
		return nil, Event{}, false
	}
	ev.JSON = out[start:len(out):len(out)]
	ev.ID, ev.Source, ev.Type = id, attrs[t.sourceAt].Value, attrs[t.typeAt].Value
	return out, ev, true
}

// newTemplate starts the template of attrs, ct and hasCT, a successful event's; buildBinary
// gives it its text. It is nil when the attributes are too large to keep.
func newTemplate(attrs []Attr, ct string, hasCT bool) *attrTemplate {
	n := len(ct)
	for _, a := range attrs {
		n += len(a.Name) + len(a.Value)
	}
	if n > maxTemplateLen {
		return nil
	}
	t := &attrTemplate{idAt: -1, timeAt: -1, sourceAt: -1, typeAt: -1, hasCT: hasCT,
		names: make([]string, len(attrs)), values: make([]string, len(attrs))}
	buf := make([]byte, 0, n) // one copy for every string: the attributes may be views of memory reused
	keep := func(s string) string {
		buf = append(buf, s...)
		return unsafe.String(unsafe.SliceData(buf[len(buf)-len(s):]), len(s))
	}
	t.ct = keep(ct)
	for i, a := range attrs {
		t.names[i] = keep(a.Name)
		switch a.Name {
		case "id":
			t.idAt = i
			continue
		case "time":
			t.timeAt = i
			continue
		case "source":
			t.sourceAt = i
		case "type":
			t.typeAt = i
		}
		t.values[i] = keep(a.Value)
	}
	return t
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
	lim := d.Limits.withDefaults()
	d.debt = max(d.debt-1, 0)
	matched := false
	for _, t := range d.tpls {
		if t == nil || !t.match(attrs, ct, hasCT) {
			continue
		}
		if out, ev, ok := t.build(dst, attrs, body, lim, &d.memo.keys); ok {
			return out, ev, nil
		}
		matched = true // the full decode says what is wrong
		break
	}
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
	var learn *attrTemplate
	if !matched && d.debt+templateCost <= maxTemplateDebt {
		learn = newTemplate(attrs, ct, hasCT)
	}
	d.memo.learn = learn
	out, ev, err := buildBinary(dst, hs, ct, hasCT, body, lim, form, &d.memo)
	d.memo.learn = nil
	clear(d.buf[:min(len(hs), len(d.buf))]) // keep no strings of this event alive
	if err != nil {
		return dst, Event{}, err
	}
	if learn != nil && learn.idAt >= 0 && learn.sourceAt >= 0 && learn.typeAt >= 0 {
		d.debt += templateCost
		d.tpls[d.next] = learn
		d.next = (d.next + 1) % maxTemplates
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
