package cevent

import (
	"cmp"
	"encoding/base64"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/evtctl/evtctl/internal/swar"
)

// ceHeader is one ce- header of a binary-mode request.
type ceHeader struct {
	name  string // attribute name: the header name without "ce-", lower-cased
	key   string // the header name as received
	value string
	n     int // number of values
}

// lowerAttrName lower-cases a header's attribute name, without allocating
// for the context attributes.
func lowerAttrName(s string) string {
	for _, name := range kindName[kSpecversion:] {
		if equalFold(s, name) {
			return name
		}
	}
	return asciiLower(s)
}

// asciiLower lower-cases the ASCII letters of s.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// DecodeBinary decodes an event in the HTTP binary content mode: attributes
// in ce- headers (names case-insensitive), datacontenttype in Content-Type,
// and the body as the data.
//
// A header value is read as the HTTP binding asks, and as generously as can
// be done without losing a byte, because common senders (sdk-go, the
// conformance tool) put values in headers unencoded:
//
//   - a value that is exactly one RFC 7230 quoted-string is unquoted (a
//     quoted-pair \x stands for x); quotes anywhere else are kept;
//   - then each %XX with two hex digits is percent-decoded, and a '%' that
//     does not start such an escape is kept;
//   - if the result is not a valid value for its attribute (not UTF-8, a
//     control character, a source or dataschema that is no longer a URI,
//     an empty id, ...) but the value exactly as received is, the value as
//     received is stored.
//
// A value such as a%20b is ambiguous (a%20b from a sender that does not
// encode, a b from one that does); it is decoded, as the binding says.
//
// The body becomes the stored event's data as follows:
//
//   - empty body: no data member;
//   - JSON Content-Type (*/json or */*+json): the body must be valid JSON and
//     is embedded in data byte for byte, whitespace included, so the stored
//     event holds the body exactly (and is not compact);
//   - a textual Content-Type (text/*, application/xml or */*+xml) with no
//     charset or a UTF-8 one, when the body is valid UTF-8: a JSON string in
//     data;
//   - no Content-Type: the body is embedded as for JSON if it is valid
//     JSON (the JSON format reads an event without datacontenttype as
//     application/json), otherwise it goes to data_base64;
//   - anything else: data_base64.
//
// Extension header values are stored as JSON strings. The stored members
// are in the order specversion, id, source, type, subject, time,
// datacontenttype, dataschema, the extensions sorted by name, then data or
// data_base64.
func DecodeBinary(h http.Header, body []byte, lim Limits) (Event, error) {
	ev, err := decodeBinary(h, body, lim.withDefaults())
	if err != nil {
		return Event{}, err
	}
	return ev, nil
}

func decodeBinary(h http.Header, body []byte, lim Limits) (Event, *Error) {
	var (
		store   [16]ceHeader
		hs      = store[:0]
		ct      string
		ctCount int
	)
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		if isCEHeader(k) {
			hs = append(hs, ceHeader{name: lowerAttrName(k[3:]), key: k, value: vs[0], n: len(vs)})
		} else if equalFold(k, "Content-Type") {
			ct = vs[0]
			ctCount += len(vs)
		}
	}
	if len(hs) == 0 {
		return Event{}, errNotCloudEvent(ct)
	}
	if ctCount > 1 {
		return Event{}, invalid("Content-Type is given %d times; it must be given once", ctCount)
	}
	_, ev, err := buildBinary(nil, hs, ct, ctCount > 0, body, lim, httpForm, nil)
	return ev, err
}

// binaryForm is how a binding carries attributes: in HTTP, percent-encoded ce- headers
// and Content-Type; in Kafka, ce_ headers taken as they are and content-type; in a Redis
// stream entry, plain fields named as the attributes, datacontenttype among them.
type binaryForm struct {
	decode bool // read values as the HTTP binding asks (see DecodeBinary)
	// ordered: the headers come in an order of their own (Kafka's), which decides which
	// of several errors is reported; HTTP headers are a map, so they are sorted first.
	ordered bool
	// fields: the attributes are plain fields (implies ordered): datacontenttype is one of
	// them, specversion may be absent (for 1.0), and messages name fields.
	fields bool
	prefix string // of the attribute headers, for messages
	ctName string // the header that carries datacontenttype, for messages
}

var (
	httpForm  = binaryForm{decode: true, prefix: "ce-", ctName: "Content-Type"}
	fieldForm = binaryForm{ordered: true, fields: true, ctName: "field datacontenttype"}
)

// where names the header or field that carries attribute name, for messages.
func (f binaryForm) where(name string) string {
	if f.fields {
		return "field " + name
	}
	return "header " + f.prefix + name
}

// twice is a field given twice.
func twice(name string) *Error {
	return invalid("field %s is given twice; a CloudEvents attribute takes exactly one value", name)
}

// binaryMemo remembers the last values that passed the more expensive checks, for a
// decoder that reads many events of one producer. It keeps copies: the values it is given
// may be views of memory its caller reuses (a client's record buffers).
type binaryMemo struct {
	source, schema string
	ct             string
	ctParams       map[string]string // read only
	keys           []span            // the data scanner's scratch space
	// learn, when set, is given the text of a successful event's members but its id and
	// time (see attrTemplate).
	learn *attrTemplate
}

// buildBinary validates the attributes hs (in any order; hs is sorted in place) and
// builds the event, with ct as datacontenttype when hasCT and body as its data, the
// values read as form says. The event's JSON is appended to dst (a new buffer when dst is
// nil) and the result returned too. memo, when not nil, skips checks of values that passed
// them in the event before.
func buildBinary(dst []byte, hs []ceHeader, ct string, hasCT bool, body []byte, lim Limits, form binaryForm, memo *binaryMemo) ([]byte, Event, *Error) {
	if !form.ordered {
		slices.SortFunc(hs, byNameKey)
	}
	var (
		attrs [kDataschema + 1]string
		raws  [kDataschema + 1]string // the values as received
		keys  [kDataschema + 1]string // the headers they came in
		set   [kDataschema + 1]bool
		store [8]ceHeader
		exts  = store[:0]
		size  = 64 + len(ct) + len(body)*4/3
	)
	for i := range hs {
		hd := &hs[i]
		if hd.n > 1 {
			what := "header"
			if form.fields {
				what = "field"
			}
			return nil, Event{}, invalid("%s %s is given %d times; a CloudEvents attribute takes exactly one value", what, hd.key, hd.n)
		}
		if !form.ordered && i > 0 && hs[i-1].name == hd.name {
			return nil, Event{}, invalid("headers %s and %s both set attribute %q", hs[i-1].key, hd.key, hd.name)
		}
		switch {
		case hd.name == "datacontenttype" && !form.fields:
			return nil, Event{}, invalid("header %s is not allowed in binary mode: datacontenttype is carried by %s", hd.key, form.ctName)
		case hd.name == "data" || !validAttrName(hd.name):
			if form.fields {
				return nil, Event{}, invalid("field %q is not a valid attribute name; names must consist of lower-case letters a-z and digits 0-9, and must not be \"data\"", hd.key)
			}
			return nil, Event{}, invalid("header %s: %q is not a valid attribute name; names must consist of lower-case letters a-z and digits 0-9, and must not be \"data\"", hd.key, hd.name)
		}
		v := hd.value
		if form.decode {
			v = decodeHeaderValue(hd.value)
		}
		if err := checkString(hd.name, v); err != nil {
			if v == hd.value || checkString(hd.name, hd.value) != nil {
				return nil, Event{}, err
			}
			v = hd.value // decoding made it invalid: the sender did not encode
		}
		raw := hd.value
		hd.value = v
		size += len(hd.name) + 2*len(v) + 6
		kind := classify([]byte(hd.name))
		if kind == kExtension {
			exts = append(exts, *hd)
			continue
		}
		if kind == kDatacontenttype { // a field: the data's media type
			if hasCT {
				return nil, Event{}, twice(hd.key)
			}
			ct, hasCT = v, true
			continue
		}
		if set[kind] { // ordered headers only: sorted ones were checked above
			if form.fields {
				return nil, Event{}, twice(hd.key)
			}
			return nil, Event{}, invalid("headers %s and %s both set attribute %q", keys[kind], hd.key, hd.name)
		}
		attrs[kind], raws[kind], keys[kind], set[kind] = v, raw, hd.key, true
	}
	if form.ordered && len(exts) > 1 {
		slices.SortFunc(exts, byNameKey)
		for i := 1; i < len(exts); i++ {
			if exts[i-1].name == exts[i].name {
				if form.fields {
					return nil, Event{}, twice(exts[i].key)
				}
				return nil, Event{}, invalid("headers %s and %s both set attribute %q", exts[i-1].key, exts[i].key, exts[i].name)
			}
		}
	}

	// Validate in the same order as the structured decoder.
	if !set[kSpecversion] && form.fields {
		attrs[kSpecversion], set[kSpecversion] = "1.0", true
	}
	if !set[kSpecversion] {
		return nil, Event{}, invalid("missing required attribute \"specversion\" (header %sspecversion)", form.prefix)
	}
	if attrs[kSpecversion] != "1.0" {
		return nil, Event{}, badSpecversion(attrs[kSpecversion])
	}
	for _, k := range [...]int{kID, kSource, kType} {
		if !set[k] {
			return nil, Event{}, invalid("missing required attribute %q (%s)", kindName[k], form.where(kindName[k]))
		}
	}
	check := func(k int, f func(string) *Error) *Error {
		v, err := asReceived(kindName[k], attrs[k], raws[k], f)
		attrs[k] = v
		return err
	}
	if err := check(kID, nonEmpty("id")); err != nil {
		return nil, Event{}, err
	}
	if memo == nil || attrs[kSource] != memo.source || memo.source == "" {
		if err := check(kSource, checkSource); err != nil {
			return nil, Event{}, err
		}
		if memo != nil {
			memo.source = strings.Clone(attrs[kSource]) // the value may be a view of memory that is reused
		}
	}
	if err := check(kType, nonEmpty("type")); err != nil {
		return nil, Event{}, err
	}
	ev := Event{ID: attrs[kID], Source: attrs[kSource], Type: attrs[kType]}
	if set[kSubject] {
		if err := check(kSubject, nonEmpty("subject")); err != nil {
			return nil, Event{}, err
		}
	}
	if set[kTime] {
		if err := check(kTime, func(s string) (err *Error) { ev.Time, err = parseTime(s); return err }); err != nil {
			return nil, Event{}, err
		}
	}
	var ctParams map[string]string
	switch {
	case !hasCT:
	case memo != nil && ct == memo.ct && ct != "":
		ctParams = memo.ctParams
	default:
		if err := checkString("datacontenttype", ct); err != nil {
			return nil, Event{}, invalid("%s: %s", form.ctName, err.Msg)
		}
		parsed := ct
		if memo != nil {
			parsed = strings.Clone(ct) // the parameters are views of the text parsed
		}
		var err *Error
		if ctParams, err = parseMediaType(form.ctName, parsed); err != nil {
			return nil, Event{}, err
		}
		if memo != nil {
			memo.ct, memo.ctParams = parsed, ctParams
		}
	}
	if set[kDataschema] && (memo == nil || attrs[kDataschema] != memo.schema || memo.schema == "") {
		if err := check(kDataschema, checkDataschema); err != nil {
			return nil, Event{}, err
		}
		if memo != nil {
			memo.schema = strings.Clone(attrs[kDataschema])
		}
	}

	start := len(dst)
	out := slices.Grow(dst, size)
	out = appendID(out, ev.ID)
	out = appendMid(out, ev.Source, ev.Type, set[kSubject], attrs[kSubject])
	if set[kTime] {
		out = appendTime(out, attrs[kTime])
	}
	out = appendTail(out, ct, hasCT, set[kDataschema], attrs[kDataschema], exts)
	if len(body) > 0 {
		var err *Error
		var keys *[]span
		if memo != nil {
			keys = &memo.keys
		}
		if out, ev.Spaced, err = appendBinaryData(out, body, ct, hasCT, ctParams, form.ctName, keys); err != nil {
			return nil, Event{}, err
		}
	}
	out = append(out, '}')
	if err := checkSize(len(out)-start, lim); err != nil {
		return nil, Event{}, err
	}
	ev.JSON = out[start:len(out):len(out)]
	if memo != nil && memo.learn != nil {
		t := memo.learn
		t.mid = appendMid(t.mid[:0], ev.Source, ev.Type, set[kSubject], attrs[kSubject])
		t.tail = appendTail(t.tail[:0], ct, hasCT, set[kDataschema], attrs[kDataschema], exts)
		t.ctParams = ctParams
	}
	return out, ev, nil
}

// A binary-mode event in the JSON format is, member by member: appendID, appendMid,
// appendTime when it has a time, appendTail, then its data and a closing brace. Events of
// one producer differ mostly in id and time: an attrTemplate keeps the rest as text.

// appendID appends the start of an event: its specversion and id.
func appendID(out []byte, id string) []byte {
	out = append(out, `{"specversion":"1.0","id":`...)
	return appendJSONString(out, id)
}

// appendMid appends an event's members between id and time.
func appendMid(out []byte, source, typ string, hasSubject bool, subject string) []byte {
	out = append(out, `,"source":`...)
	out = appendJSONString(out, source)
	out = append(out, `,"type":`...)
	out = appendJSONString(out, typ)
	if hasSubject {
		out = append(out, `,"subject":`...)
		out = appendJSONString(out, subject)
	}
	return out
}

// appendTime appends an event's time member.
func appendTime(out []byte, t string) []byte {
	out = append(out, `,"time":`...)
	return appendJSONString(out, t)
}

// appendTail appends an event's members between time and data: datacontenttype,
// dataschema and the extensions, sorted.
func appendTail(out []byte, ct string, hasCT, hasSchema bool, schema string, exts []ceHeader) []byte {
	if hasCT {
		out = append(out, `,"datacontenttype":`...)
		out = appendJSONString(out, ct)
	}
	if hasSchema {
		out = append(out, `,"dataschema":`...)
		out = appendJSONString(out, schema)
	}
	for _, x := range exts {
		out = append(out, ',', '"')
		out = append(out, x.name...)
		out = append(out, '"', ':')
		out = appendJSONString(out, x.value)
	}
	return out
}

func byNameKey(a, b ceHeader) int {
	return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.key, b.key))
}

// asReceived returns v, the decoded value of attribute name, if check
// accepts it; otherwise raw, the value as received, if that is a different
// valid string that check accepts; otherwise check's error about v.
func asReceived(name, v, raw string, check func(string) *Error) (string, *Error) {
	err := check(v)
	if err == nil || v == raw {
		return v, err
	}
	if checkString(name, raw) == nil && check(raw) == nil {
		return raw, nil
	}
	return v, err
}

func nonEmpty(name string) func(string) *Error {
	return func(v string) *Error { return checkNonEmpty(name, v) }
}

// appendBinaryData appends the data or data_base64 member for a binary-mode body, and
// reports whether it holds insignificant whitespace (JSON data kept as it came). keys, when
// not nil, is scratch space for the scanner that it keeps.
func appendBinaryData(out, body []byte, ct string, hasCT bool, params map[string]string, ctName string, keys *[]span) ([]byte, bool, *Error) {
	mark := len(out)
	switch {
	case !hasCT || IsJSONMediaType(ct):
		out = append(out, `,"data":`...)
		start := len(out)
		// The scanner validates (writing a compact copy, which is dropped:
		// the body is stored as it is).
		s := scanner{in: body, out: out, quiet: !hasCT} // without a content type, a failure only means "not JSON"
		if keys != nil {
			s.keys = (*keys)[:0]
			defer func() { *keys = s.keys[:0] }() // for the next event
		}
		s.skipWS()
		err := s.copyValue()
		if err == nil {
			s.skipWS()
			if s.pos < len(s.in) {
				err = s.syntaxErr("expected end of input after the JSON value")
			}
		}
		if err == nil {
			if len(s.out)-start == len(body) {
				return s.out, false, nil // compact already: the copy is the body
			}
			return append(s.out[:start], body...), true, nil
		}
		if hasCT {
			return nil, false, invalid("%s %q declares JSON, but the body is not valid JSON: %s", ctName, ct, err.Msg)
		}
		out = s.out[:mark] // no Content-Type and not JSON: store the bytes as they are
	case textData(ct, params, body):
		out = append(out, `,"data":`...)
		return appendJSONString(out, string(body)), false, nil
	}
	out = append(out, `,"data_base64":"`...)
	out = base64.StdEncoding.AppendEncode(out, body)
	return append(out, '"'), false, nil
}

// IsTextData reports whether data that is not JSON, of media type ct, goes in an event's
// data member as a JSON string: ct declares text (text/*, application/xml or */*+xml) with
// no charset or a UTF-8 one, and data is valid UTF-8. Any other such data goes in
// data_base64, byte for byte. DecodeBinary stores a binary-mode body by the same rule.
func IsTextData(ct string, data []byte) bool {
	_, params, _ := mime.ParseMediaType(ct)
	return textData(ct, params, data)
}

func textData(ct string, params map[string]string, data []byte) bool {
	return isTextMediaType(ct) && isUTF8Charset(cmp.Or(params["charset"], "utf-8")) && utf8.Valid(data)
}

// isTextMediaType reports whether the media type ct (parameters allowed)
// declares text: text/*, application/xml or */*+xml. These are the types the
// CloudEvents JSON format's examples and sdk-go's codecs carry as strings.
func isTextMediaType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	typ, sub, ok := strings.Cut(strings.TrimSpace(mt), "/")
	if !ok {
		return false
	}
	return equalFold(typ, "text") ||
		equalFold(typ, "application") && equalFold(sub, "xml") ||
		len(sub) >= 4 && equalFold(sub[len(sub)-4:], "+xml")
}

// checkString checks that v is a valid CloudEvents String: valid UTF-8 with
// no control characters, noncharacters or surrogates.
func checkString(name, v string) *Error {
	if printableASCII(v) {
		return nil
	}
	for i, r := range v {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(v[i:]); size == 1 {
				return invalid("attribute %q is not valid UTF-8", name)
			}
		}
		if r < 0x20 || r >= 0x7f {
			if msg := badStringRune(r); msg != "" {
				return invalid("attribute %q contains %s; CloudEvents strings must not", name, msg)
			}
		}
	}
	return nil
}

// printableASCII reports whether s holds only the bytes 0x20 to 0x7e, eight at a time.
func printableASCII(s string) bool {
	b := unsafe.Slice(unsafe.StringData(s), len(s)) // read only
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := swar.Load(b, i)
		if swar.Ctl(x)|x&swar.MSB|swar.Eq(x, 0x7f) != 0 {
			return false
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// decodeHeaderValue reads a ce- header value as the HTTP binding asks,
// leniently: a value that is exactly one RFC 7230 quoted-string is unquoted;
// then each %XX (two hex digits) becomes the byte XX, and a '%' that starts
// no such escape is kept. The result may not be valid UTF-8.
func decodeHeaderValue(v string) string {
	if strings.IndexByte(v, '%') < 0 {
		if isQuotedString(v) {
			return unquote(v)
		}
		return v
	}
	s := v
	if isQuotedString(s) {
		s = unquote(s)
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				c = hi<<4 | lo
				i += 2
			}
		}
		b = append(b, c)
	}
	return string(b)
}

// isQuotedString reports whether v is exactly one RFC 7230 quoted-string:
// DQUOTE *( qdtext / quoted-pair ) DQUOTE.
func isQuotedString(v string) bool {
	n := len(v)
	if n < 2 || v[0] != '"' || v[n-1] != '"' {
		return false
	}
	for i := 1; i < n-1; i++ {
		switch c := v[i]; {
		case c == '\\':
			i++
			if i >= n-1 || !isQuotedPairChar(v[i]) {
				return false
			}
		case c == '"' || !isQuotedPairChar(c):
			return false
		}
	}
	return true
}

// isQuotedPairChar reports whether c may follow a backslash in a
// quoted-string: HTAB, SP, VCHAR or obs-text. Apart from '"' and '\' these
// are also the bytes allowed unescaped (qdtext).
func isQuotedPairChar(c byte) bool {
	return c == '\t' || c >= ' ' && c != 0x7f
}

// unquote returns the content of the quoted-string v, quoted-pairs undone.
func unquote(v string) string {
	v = v[1 : len(v)-1]
	if strings.IndexByte(v, '\\') < 0 {
		return v
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' {
			i++
		}
		b = append(b, v[i])
	}
	return string(b)
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Field is an attribute given as a plain string: one field of a Redis stream entry.
type Field struct{ Name, Value string }

// A FieldEncoder encodes events whose attributes come as plain strings (see Append). It
// remembers the last values that passed the more expensive checks, as a batch's decoder
// does: the events of one stream mostly share them. The zero value is ready to use, with
// the default Limits; it is not safe for concurrent use.
type FieldEncoder struct {
	Limits Limits
	memo   binaryMemo
}

// Append appends to dst the CloudEvent in the JSON format whose attributes are fields and
// whose data is data, and returns the grown dst and the event, whose JSON lies in the
// appended bytes. It reads them as DecodeBinary reads ce- headers and a body, stores the
// event in the same form (members in the same order; data JSON when there is no
// datacontenttype and it is JSON, else data_base64), and differs in three ways: values are
// taken as they are (nothing is percent-decoded or unquoted); specversion may be absent, for
// 1.0; and a datacontenttype field is the data's media type, as Content-Type is in binary
// mode. Names are case-sensitive. On error dst is returned as it was.
func (e *FieldEncoder) Append(dst []byte, fields []Field, data []byte) ([]byte, Event, error) {
	var store [16]ceHeader
	hs := store[:0]
	for _, f := range fields {
		hs = append(hs, ceHeader{name: f.Name, key: f.Name, value: f.Value, n: 1})
	}
	if len(hs) == 0 {
		return dst, Event{}, invalid("no attributes: a CloudEvent needs id, source and type")
	}
	out, ev, err := buildBinary(dst, hs, "", false, data, e.Limits.withDefaults(), fieldForm, &e.memo)
	if err != nil {
		return dst, Event{}, err
	}
	return out, ev, nil
}

// AppendFields is Append of a new FieldEncoder with limits lim.
func AppendFields(dst []byte, fields []Field, data []byte, lim Limits) ([]byte, Event, error) {
	e := FieldEncoder{Limits: lim}
	return e.Append(dst, fields, data)
}
