package cevent

import (
	"encoding/base64"
	"fmt"
	"mime"
	"strings"
	"time"
)

// Member kinds of a top-level event object.
const (
	kExtension = iota
	kSpecversion
	kID
	kSource
	kType
	kSubject
	kTime
	kDatacontenttype
	kDataschema
	kData
	kDataBase64
	kInvalid
)

func classify(name []byte) int {
	switch string(name) {
	case "specversion":
		return kSpecversion
	case "id":
		return kID
	case "source":
		return kSource
	case "type":
		return kType
	case "subject":
		return kSubject
	case "time":
		return kTime
	case "datacontenttype":
		return kDatacontenttype
	case "dataschema":
		return kDataschema
	case "data":
		return kData
	case "data_base64":
		return kDataBase64
	}
	if !validAttrName(name) {
		return kInvalid
	}
	return kExtension
}

// ValidAttributeName reports whether name is a valid CloudEvents attribute name: one
// or more of a-z and 0-9.
func ValidAttributeName(name string) bool { return validAttrName(name) }

func validAttrName[T string | []byte](name T) bool {
	if len(name) == 0 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// strAttr locates a string attribute's raw JSON content in the output.
type strAttr struct {
	sp  span
	esc bool
	set bool
}

// eventInfo is what a scan of one event object found.
type eventInfo struct {
	attrs    [kDataschema + 1]strAttr // indexed by kind
	dataKind byte                     // first byte of the data value; 0 if there is no data member
	hasB64   bool
}

// decoder decodes structured events. One decoder serves one request; in a
// batch it remembers the last values that passed the more expensive checks.
type decoder struct {
	scanner
	lim     Limits
	scratch []byte
	b64     []byte

	lastSource, lastCT, lastSchema string
	lastCTJSON                     bool
}

func newDecoder(b []byte, lim Limits) *decoder {
	d := &decoder{lim: lim.withDefaults()}
	d.in = b
	// The compact form of the input is never longer than the input, so the
	// output never reallocates: the events share one backing array.
	d.out = make([]byte, 0, len(b))
	d.keys = make([]span, 0, 32)
	return d
}

// DecodeStructured decodes one event in the CloudEvents JSON format
// (application/cloudevents+json): a single JSON object.
func DecodeStructured(b []byte, lim Limits) (Event, error) {
	d := newDecoder(b, lim)
	d.skipWS()
	if d.pos >= len(b) {
		return Event{}, &Error{Status: 400, Index: -1, Msg: "empty body: expected a CloudEvent as a JSON object"}
	}
	if d.peek() != '{' {
		return Event{}, d.syntaxErr("expected a CloudEvent as a JSON object")
	}
	ev, err := d.event()
	if err != nil {
		return Event{}, err
	}
	if err := d.end(); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// DecodeBatch decodes a batch in the CloudEvents JSON batch format
// (application/cloudevents-batch+json): a JSON array of event objects. An
// empty array is valid and yields zero events. The batch is all or nothing:
// if any event is invalid, DecodeBatch returns no events and an *Error whose
// Index is that event's position in the array.
func DecodeBatch(b []byte, lim Limits) ([]Event, error) {
	d := newDecoder(b, lim)
	d.skipWS()
	if d.pos >= len(b) {
		return nil, &Error{Status: 400, Index: -1, Msg: "empty body: expected a batch of CloudEvents as a JSON array"}
	}
	if d.peek() != '[' {
		return nil, d.syntaxErr("expected a batch of CloudEvents as a JSON array")
	}
	d.pos++
	d.skipWS()
	guess := len(b)/384 + 1
	if guess > d.lim.MaxBatch {
		guess = d.lim.MaxBatch
	}
	events := make([]Event, 0, guess)
	if d.peek() == ']' {
		d.pos++
		if err := d.end(); err != nil {
			return nil, err
		}
		return events, nil
	}
	for i := 0; ; i++ {
		if i >= d.lim.MaxBatch {
			return nil, &Error{Status: 413, Index: -1, Msg: fmt.Sprintf("batch has more than %d events; the limit is %d events per batch", d.lim.MaxBatch, d.lim.MaxBatch)}
		}
		if d.peek() != '{' {
			return nil, atIndex(i, d.syntaxErr("expected a CloudEvent as a JSON object"))
		}
		ev, err := d.event()
		if err != nil {
			return nil, atIndex(i, err)
		}
		events = append(events, ev)
		d.skipWS()
		switch d.peek() {
		case ',':
			d.pos++
			d.skipWS()
			continue
		case ']':
			d.pos++
			if err := d.end(); err != nil {
				return nil, err
			}
			return events, nil
		default:
			return nil, d.syntaxErr("expected ',' or ']' after an event in the batch")
		}
	}
}

// atIndex attributes err to the batch event at index i.
func atIndex(i int, err *Error) *Error {
	err.Index = i
	err.Msg = fmt.Sprintf("batch index %d: %s", i, err.Msg)
	return err
}

// end checks that only whitespace follows the top-level value.
func (d *decoder) end() *Error {
	d.skipWS()
	if d.pos < len(d.in) {
		return d.syntaxErr("expected end of input after the top-level value")
	}
	return nil
}

// event scans the event object at d.pos, validates it and returns it.
func (d *decoder) event() (Event, *Error) {
	start := len(d.out)
	var info eventInfo
	if err := d.scanEvent(&info); err != nil {
		return Event{}, err
	}
	js := d.out[start:len(d.out):len(d.out)]
	if err := checkSize(len(js), d.lim); err != nil {
		return Event{}, err
	}
	ev, err := d.validate(&info, js)
	if err != nil {
		return Event{}, err
	}
	return ev, nil
}

func checkSize(n int, lim Limits) *Error {
	if n <= lim.MaxEventBytes {
		return nil
	}
	return &Error{Status: 413, Index: -1, Msg: fmt.Sprintf("event is %d bytes; the limit is %s", n, describeLimit(lim.MaxEventBytes))}
}

func describeLimit(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d bytes (%d KiB)", n, n/1024)
	}
	return fmt.Sprintf("%d bytes", n)
}

var kindName = [...]string{
	kSpecversion:     "specversion",
	kID:              "id",
	kSource:          "source",
	kType:            "type",
	kSubject:         "subject",
	kTime:            "time",
	kDatacontenttype: "datacontenttype",
	kDataschema:      "dataschema",
}

// scanEvent scans one event object, appending its stored form to d.out:
// compact, member names unescaped, null attributes dropped and data_base64
// unescaped.
func (d *decoder) scanEvent(info *eventInfo) *Error {
	d.pos++ // '{'
	d.out = append(d.out, '{')
	d.skipWS()
	if d.peek() == '}' {
		d.pos++
		d.out = append(d.out, '}')
		return nil
	}
	keys := d.openKeys()
	defer d.closeKeys(keys)
	members := 0
	for {
		_, name, err := d.key(&keys)
		if err != nil {
			return err
		}
		kind := classify(name)
		if kind == kInvalid {
			return d.errorf("invalid attribute name %q: names must consist of lower-case letters a-z and digits 0-9 (and only data and data_base64 may hold the payload)", name)
		}
		if err := d.colon(); err != nil {
			return err
		}
		if d.peek() == 'n' && kind != kData {
			// null: the attribute is unset. data_base64: null is treated the same way.
			if err := d.literal("null"); err != nil {
				return err
			}
		} else {
			if members > 0 {
				d.out = append(d.out, ',')
			}
			members++
			d.out = append(d.out, '"')
			d.out = append(d.out, name...)
			d.out = append(d.out, '"', ':')
			if err := d.member(kind, name, info); err != nil {
				return err
			}
		}
		d.skipWS()
		switch d.peek() {
		case ',':
			d.pos++
			d.skipWS()
		case '}':
			d.pos++
			d.out = append(d.out, '}')
			return nil
		default:
			return d.syntaxErr("expected ',' or '}' in the event object")
		}
	}
}

// member scans the (non-null) value of a top-level member.
func (d *decoder) member(kind int, name []byte, info *eventInfo) *Error {
	c := d.peek()
	switch kind {
	case kData:
		if info.hasB64 {
			return d.errorf("the event has both data and data_base64; use only one")
		}
		info.dataKind = c
		return d.copyValue()
	case kDataBase64:
		if info.dataKind != 0 {
			return d.errorf("the event has both data and data_base64; use only one")
		}
		if c != '"' {
			return d.errorf("data_base64 must be a JSON string holding base64 data, not %s", describeJSON(c))
		}
		sp, esc, err := d.scanString(false)
		if err != nil {
			return err
		}
		raw := d.in[sp.start:sp.end]
		if esc {
			d.scratch = appendUnescaped(d.scratch[:0], raw)
			raw = d.scratch
		}
		if msg := checkBase64(raw, &d.b64); msg != "" {
			return d.errorf("data_base64 is not valid base64: %s", msg)
		}
		info.hasB64 = true
		d.out = append(d.out, '"')
		d.out = append(d.out, raw...)
		d.out = append(d.out, '"')
		return nil
	case kExtension:
		switch {
		case c == '"':
			sp, _, err := d.scanString(true)
			if err != nil {
				return d.attrErr(err, name)
			}
			d.out = append(d.out, d.in[sp.start-1:sp.end+1]...)
		case c == 't':
			if err := d.literal("true"); err != nil {
				return err
			}
			d.out = append(d.out, "true"...)
		case c == 'f':
			if err := d.literal("false"); err != nil {
				return err
			}
			d.out = append(d.out, "false"...)
		case c == '-' || c >= '0' && c <= '9':
			sp, isInt, err := d.scanNumber()
			if err != nil {
				return err
			}
			num := d.in[sp.start:sp.end]
			if !isInt || !inInt32Range(num) {
				return d.errorf("extension attribute %q is %s; numbers must be integers from -2147483648 to 2147483647", name, num)
			}
			d.out = append(d.out, num...)
		case c == '{' || c == '[':
			return d.errorf("extension attribute %q must be a string, an integer or a boolean, not %s", name, describeJSON(c))
		default:
			return d.syntaxErr("expected a JSON value")
		}
		return nil
	default: // a string-valued context attribute
		if c != '"' {
			if c == '{' || c == '[' || c == 't' || c == 'f' || c == '-' || c >= '0' && c <= '9' {
				return d.errorf("attribute %q must be a JSON string, not %s", name, describeJSON(c))
			}
			return d.syntaxErr("expected a JSON value")
		}
		sp, esc, err := d.scanString(true)
		if err != nil {
			return d.attrErr(err, name)
		}
		n := len(d.out) + 1
		d.out = append(d.out, d.in[sp.start-1:sp.end+1]...)
		info.attrs[kind] = strAttr{sp: span{n, n + sp.end - sp.start}, esc: esc, set: true}
		return nil
	}
}

func describeJSON(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// inInt32Range reports whether the JSON integer num fits in an int32.
func inInt32Range(num []byte) bool {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	if len(num) > 10 {
		return false
	}
	var v int64
	for _, c := range num {
		v = v*10 + int64(c-'0')
	}
	if neg {
		return v <= 1<<31
	}
	return v <= 1<<31-1
}

// checkBase64 validates standard base64 with padding (RFC 4648 section 4).
// buf is scratch space for decoding.
func checkBase64(s []byte, buf *[]byte) string {
	for i, c := range s {
		if c == '\r' || c == '\n' {
			return fmt.Sprintf("line break at position %d", i)
		}
	}
	n := base64.StdEncoding.DecodedLen(len(s))
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	if _, err := base64.StdEncoding.Decode((*buf)[:n], s); err != nil {
		return err.Error()
	}
	return ""
}

// attrBytes returns the decoded value of a string attribute found by scanEvent.
// The result may alias d.scratch.
func (d *decoder) attrBytes(a strAttr) []byte {
	raw := d.out[a.sp.start:a.sp.end]
	if !a.esc {
		return raw
	}
	d.scratch = appendUnescaped(d.scratch[:0], raw)
	return d.scratch
}

func missing(name string) *Error {
	return &Error{Status: 400, Index: -1, Msg: fmt.Sprintf("missing required attribute %q", name)}
}

func invalid(format string, args ...any) *Error {
	return &Error{Status: 400, Index: -1, Msg: fmt.Sprintf(format, args...)}
}

// validate checks the attributes found by scanEvent and builds the Event.
func (d *decoder) validate(info *eventInfo, js []byte) (Event, *Error) {
	a := &info.attrs
	if !a[kSpecversion].set {
		return Event{}, missing("specversion")
	}
	if sv := d.attrBytes(a[kSpecversion]); string(sv) != "1.0" {
		return Event{}, badSpecversion(string(sv))
	}
	for _, k := range [...]int{kID, kSource, kType} {
		if !a[k].set {
			return Event{}, missing(kindName[k])
		}
	}
	// One allocation holds ID, Source, Type and the time text.
	var sb strings.Builder
	n := 0
	for _, k := range [...]int{kID, kSource, kType, kTime} {
		n += a[k].sp.end - a[k].sp.start // unescaping only shrinks
	}
	sb.Grow(n)
	d.writeAttr(&sb, a[kID])
	nID := sb.Len()
	d.writeAttr(&sb, a[kSource])
	nSource := sb.Len()
	d.writeAttr(&sb, a[kType])
	nType := sb.Len()
	if a[kTime].set {
		d.writeAttr(&sb, a[kTime])
	}
	all := sb.String()
	ev := Event{JSON: js, ID: all[:nID], Source: all[nID:nSource], Type: all[nSource:nType]}

	if err := checkNonEmpty("id", ev.ID); err != nil {
		return Event{}, err
	}
	if ev.Source != d.lastSource || ev.Source == "" {
		if err := checkSource(ev.Source); err != nil {
			return Event{}, err
		}
		d.lastSource = ev.Source
	}
	if err := checkNonEmpty("type", ev.Type); err != nil {
		return Event{}, err
	}
	if a[kSubject].set && isBlank(d.attrBytes(a[kSubject])) {
		return Event{}, invalid("attribute %q must be a non-empty string", "subject")
	}
	if a[kTime].set {
		t, err := parseTime(all[nType:])
		if err != nil {
			return Event{}, err
		}
		ev.Time = t
	}
	ctJSON := true // an absent datacontenttype means application/json
	if a[kDatacontenttype].set {
		ct := d.attrBytes(a[kDatacontenttype])
		if string(ct) != d.lastCT || d.lastCT == "" {
			s := string(ct)
			if err := checkMediaType("datacontenttype", s); err != nil {
				return Event{}, err
			}
			d.lastCT, d.lastCTJSON = s, IsJSONMediaType(s)
		}
		ctJSON = d.lastCTJSON
	}
	if !ctJSON && info.dataKind != 0 && info.dataKind != '"' && info.dataKind != 'n' {
		return Event{}, invalid("data must be a JSON string when datacontenttype %q is not a JSON media type (it is %s); send binary payloads as data_base64", d.lastCT, describeJSON(info.dataKind))
	}
	if a[kDataschema].set {
		ds := d.attrBytes(a[kDataschema])
		if string(ds) != d.lastSchema || d.lastSchema == "" {
			s := string(ds)
			if err := checkDataschema(s); err != nil {
				return Event{}, err
			}
			d.lastSchema = s
		}
	}
	return ev, nil
}

func (d *decoder) writeAttr(sb *strings.Builder, a strAttr) {
	sb.Write(d.attrBytes(a))
}

func badSpecversion(sv string) *Error {
	return invalid("unsupported specversion %q: only CloudEvents \"1.0\" is supported", sv)
}

func checkNonEmpty(name, v string) *Error {
	if isBlank(v) {
		return invalid("attribute %q must be a non-empty string", name)
	}
	return nil
}

// parseTime parses an RFC 3339 timestamp and returns it in UTC.
func parseTime(s string) (time.Time, *Error) {
	if t, ok := parseTimeQuick(s); ok {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	// time.Parse also accepts a comma before the fraction; RFC 3339 does not.
	if err != nil || strings.IndexByte(s, ',') >= 0 {
		return time.Time{}, invalid("attribute \"time\" is %q; it must be an RFC 3339 timestamp such as \"2006-01-02T15:04:05Z\" or \"2006-01-02T15:04:05.999+07:00\"", s)
	}
	return t.UTC(), nil
}

// parseTimeQuick parses the timestamps producers write, 2006-01-02T15:04:05[.999999999]
// then Z or ±07:00, as time.Parse does with RFC3339Nano, and returns them in UTC. It
// reports ok false for anything else, valid or not, which time.Parse then decides.
func parseTimeQuick(s string) (t time.Time, ok bool) {
	if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	num := func(i, n int) int { // the n digits at i, or -1
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec := num(11, 2), num(14, 2), num(17, 2)
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	if day > daysIn(month, year) {
		return time.Time{}, false
	}
	i, nsec := 19, 0
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 || j-i-1 > 9 {
			return time.Time{}, false
		}
		nsec = num(i+1, j-i-1)
		for range 9 - (j - i - 1) {
			nsec *= 10
		}
		i = j
	}
	off := 0
	switch rest := s[i:]; {
	case rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, om := num(i+1, 2), num(i+4, 2)
		if oh < 0 || oh > 23 || om < 0 || om > 59 {
			return time.Time{}, false
		}
		off = (oh*60 + om) * 60
		if rest[0] == '-' {
			off = -off
		}
	default:
		return time.Time{}, false
	}
	secs := civilDays(year, month, day)*86400 + int64(hour*3600+minute*60+sec-off)
	return time.Unix(secs, int64(nsec)).UTC(), true
}

// daysIn is the number of days of a month (1 to 12) of a year.
func daysIn(month, year int) int {
	if month == 2 {
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	}
	return 30 + (month+month/8)%2
}

// civilDays is the number of days from 1970-01-01 to a date of the proleptic Gregorian
// calendar, year 0 or later.
func civilDays(year, month, day int) int64 {
	if month <= 2 {
		year--
	}
	era := (year+400)/400 - 1 // year may be -1
	yoe := year - era*400
	doy := (153*((month+9)%12)+2)/5 + day - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

func checkMediaType(what, s string) *Error {
	_, err := parseMediaType(what, s)
	return err
}

// parseMediaType validates an RFC 2046 media type and returns its parameters.
func parseMediaType(what, s string) (map[string]string, *Error) {
	mt, params, err := mime.ParseMediaType(s)
	if err != nil {
		return nil, invalid("%s %q is not a valid media type: %v", what, s, err)
	}
	if !strings.Contains(mt, "/") {
		return nil, invalid("%s %q is not a valid media type: it must have the form type/subtype", what, s)
	}
	return params, nil
}

// IsJSONMediaType reports whether the media type ct (parameters allowed) declares
// JSON content, the rule of the JSON event format: a subtype of json or ending in +json,
// in any case.
func IsJSONMediaType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	_, sub, ok := strings.Cut(mt, "/")
	if !ok {
		return false
	}
	return equalFold(sub, "json") ||
		len(sub) >= 5 && equalFold(sub[len(sub)-5:], "+json")
}

// attrErr names the attribute in a strict-mode string error.
func (d *decoder) attrErr(err *Error, name []byte) *Error {
	if d.badString {
		err.Msg = fmt.Sprintf("attribute %q %s", name, err.Msg)
	}
	return err
}
