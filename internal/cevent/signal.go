package cevent

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Reserved keys of an Evented API signal.
const (
	signalDomain    = "_domain"
	signalName      = "_name"
	signalTimestamp = "_timestamp"
)

// signal is an Evented API event signal: the reserved keys, and the other
// attributes as a compact JSON object in first-occurrence order.
type signal struct {
	vals [3]string // _domain, _name, _timestamp
	has  [3]bool
	data []byte
}

func reservedIndex(key string) int {
	switch key {
	case signalDomain:
		return 0
	case signalName:
		return 1
	case signalTimestamp:
		return 2
	}
	return -1
}

// FromSignal maps an Evented API signal sent to /signal/<entity> to a
// CloudEvent. entity is the (already path-unescaped) entity identifier from
// the signal URL and may be empty. The signal is read from the query string
// of a GET, or from the body of a POST encoded as
// application/x-www-form-urlencoded or application/json (a POST with an
// empty body is read from its query string; a POST without Content-Type is
// read as JSON if the body starts with '{', else as a form).
//
// The mapping:
//
//	specversion      "1.0"
//	id               newID(), or a random (version 4) UUID if newID is nil;
//	                 the Evented API defines no event id
//	source           "/signal/" + url.PathEscape(entity), or "/signal" with no entity
//	type             _domain + "." + _name
//	subject          entity, if not empty
//	time             _timestamp (an HTTP-date, or RFC 3339 as the spec's proposed
//	                 xsd:dateTime change), as RFC 3339 in UTC; absent without _timestamp
//	datacontenttype  "application/json"
//	data             a JSON object of every other key in first-occurrence order
//	                 (including unknown underscore keys): form and query values are
//	                 strings, repeated keys become arrays of strings, and JSON values
//	                 are kept as sent
//
// _domain and _name are required and must match [a-zA-Z0-9_.-]+. The
// result is validated like any structured event (including the size limit).
func FromSignal(entity string, r *http.Request, body []byte, lim Limits, newID func() string) (Event, error) {
	ev, err := fromSignal(entity, r, body, lim, newID)
	if err != nil {
		return Event{}, err
	}
	return ev, nil
}

func fromSignal(entity string, r *http.Request, body []byte, lim Limits, newID func() string) (Event, *Error) {
	var (
		sig signal
		err *Error
	)
	switch r.Method {
	case http.MethodGet:
		err = sig.parseForm(r.URL.RawQuery, "query string")
	case http.MethodPost:
		if len(body) == 0 {
			err = sig.parseForm(r.URL.RawQuery, "query string")
			break
		}
		if r.URL.RawQuery != "" {
			return Event{}, invalid("the signal has both a query string and a body; send the event in one of them")
		}
		ct := headerValue(r.Header, "Content-Type")
		mt, _, _ := strings.Cut(ct, ";")
		mt = strings.TrimSpace(mt)
		switch {
		case equalFold(mt, "application/x-www-form-urlencoded"):
			err = sig.parseForm(string(body), "body")
		case IsJSONMediaType(mt):
			err = sig.parseJSON(body)
		case mt == "" && firstNonSpace(body) == '{':
			err = sig.parseJSON(body)
		case mt == "":
			err = sig.parseForm(string(body), "body")
		default:
			return Event{}, &Error{Status: 415, Index: -1, Msg: fmt.Sprintf("unsupported Content-Type %q for an event signal: use application/x-www-form-urlencoded or application/json", ct)}
		}
	default:
		return Event{}, &Error{Status: 405, Index: -1, Msg: fmt.Sprintf("method %s is not allowed for an event signal: use POST or GET", r.Method)}
	}
	if err != nil {
		return Event{}, err
	}

	for i, key := range [...]string{signalDomain, signalName} {
		v := sig.vals[i]
		if !sig.has[i] || v == "" {
			return Event{}, invalid("missing required signal key %s", key)
		}
		if !validSignalName(v) {
			return Event{}, invalid("%s is %q; it must consist of letters, digits, '_', '.' and '-'", key, v)
		}
	}
	var ts string
	if sig.has[2] && sig.vals[2] != "" {
		t, err := parseSignalTime(sig.vals[2])
		if err != nil {
			return Event{}, err
		}
		ts = t.Format(time.RFC3339Nano)
	}
	source := "/signal"
	if entity != "" {
		if err := checkString("subject", entity); err != nil || isBlank(entity) {
			return Event{}, invalid("the entity identifier %q in the signal URL is not usable as a CloudEvents subject: it must be non-blank UTF-8 without control characters", entity)
		}
		source += "/" + url.PathEscape(entity)
	}
	if newID == nil {
		newID = uuid.NewString
	}

	js := make([]byte, 0, 160+len(entity)*2+len(sig.data))
	js = append(js, `{"specversion":"1.0","id":`...)
	js = appendJSONString(js, newID())
	js = append(js, `,"source":`...)
	js = appendJSONString(js, source)
	js = append(js, `,"type":`...)
	js = appendJSONString(js, sig.vals[0]+"."+sig.vals[1])
	if entity != "" {
		js = append(js, `,"subject":`...)
		js = appendJSONString(js, entity)
	}
	if ts != "" {
		js = append(js, `,"time":`...)
		js = appendJSONString(js, ts)
	}
	js = append(js, `,"datacontenttype":"application/json","data":`...)
	js = append(js, sig.data...)
	js = append(js, '}')
	ev, derr := DecodeStructured(js, lim)
	if derr != nil {
		return Event{}, derr.(*Error)
	}
	return ev, nil
}

func validSignalName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// parseSignalTime parses a _timestamp: an HTTP-date (any of the three
// formats of RFC 7231 section 7.1.1.1) or an RFC 3339 timestamp.
func parseSignalTime(s string) (time.Time, *Error) {
	if t, err := http.ParseTime(s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil && strings.IndexByte(s, ',') < 0 {
		return t.UTC(), nil
	}
	return time.Time{}, invalid("_timestamp is %q; it must be an HTTP-date such as \"Sun, 06 Nov 1994 08:49:37 GMT\" or an RFC 3339 timestamp such as \"1994-11-06T08:49:37Z\"", s)
}

type formField struct {
	key    string
	values []string
}

// parseForm reads key-value pairs separated by '&' or ';', URL-encoded with
// '+' for space; "=" may be left out for an empty value.
func (sig *signal) parseForm(q, where string) *Error {
	var (
		fields []formField
		idx    map[string]int
	)
	for q != "" {
		var pair string
		if i := strings.IndexAny(q, "&;"); i >= 0 {
			pair, q = q[:i], q[i+1:]
		} else {
			pair, q = q, ""
		}
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return invalid("invalid URL encoding in the signal's %s at %q: %v", where, pair, err)
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return invalid("invalid URL encoding in the signal's %s at %q: %v", where, pair, err)
		}
		if key == "" {
			return invalid("empty key in the signal's %s at %q", where, pair)
		}
		if !utf8.ValidString(key) || !utf8.ValidString(val) {
			return invalid("the signal's %s is not valid UTF-8 at %q", where, pair)
		}
		if i := reservedIndex(key); i >= 0 {
			if sig.has[i] {
				return invalid("signal key %s is given more than once", key)
			}
			sig.vals[i], sig.has[i] = val, true
			continue
		}
		if j, ok := idx[key]; ok {
			fields[j].values = append(fields[j].values, val)
			continue
		}
		if idx == nil {
			idx = make(map[string]int)
		}
		idx[key] = len(fields)
		fields = append(fields, formField{key: key, values: []string{val}})
	}
	data := []byte{'{'}
	for i, f := range fields {
		if i > 0 {
			data = append(data, ',')
		}
		data = appendJSONString(data, f.key)
		data = append(data, ':')
		if len(f.values) == 1 {
			data = appendJSONString(data, f.values[0])
			continue
		}
		data = append(data, '[')
		for j, v := range f.values {
			if j > 0 {
				data = append(data, ',')
			}
			data = appendJSONString(data, v)
		}
		data = append(data, ']')
	}
	sig.data = append(data, '}')
	return nil
}

// parseJSON reads a signal sent as a JSON object.
func (sig *signal) parseJSON(body []byte) *Error {
	s := scanner{in: body, out: make([]byte, 0, len(body))}
	s.skipWS()
	if s.peek() != '{' {
		if s.pos >= len(body) {
			return invalid("empty body: expected the signal as a JSON object")
		}
		return s.syntaxErr("expected the signal as a JSON object")
	}
	s.pos++
	s.out = append(s.out, '{')
	s.skipWS()
	members := 0
	if s.peek() == '}' {
		s.pos++
	} else {
		keys := s.openKeys()
		for {
			raw, name, err := s.key(&keys)
			if err != nil {
				return err
			}
			i := reservedIndex(string(name))
			if err := s.colon(); err != nil {
				return err
			}
			if i >= 0 {
				switch c := s.peek(); c {
				case '"':
					sp, esc, err := s.scanString(false)
					if err != nil {
						return err
					}
					v := s.in[sp.start:sp.end]
					if esc {
						v = appendUnescaped(nil, v)
					}
					sig.vals[i], sig.has[i] = string(v), true
				case 'n':
					if err := s.literal("null"); err != nil {
						return err
					}
				default:
					return invalid("signal key %s must be a JSON string, not %s", reservedName(i), describeJSON(c))
				}
			} else {
				if members > 0 {
					s.out = append(s.out, ',')
				}
				members++
				s.out = append(s.out, s.in[raw.start-1:raw.end+1]...)
				s.out = append(s.out, ':')
				if err := s.copyValue(); err != nil {
					return err
				}
			}
			s.skipWS()
			if s.peek() == ',' {
				s.pos++
				s.skipWS()
				continue
			}
			if s.peek() != '}' {
				return s.syntaxErr("expected ',' or '}' in object")
			}
			s.pos++
			break
		}
	}
	s.out = append(s.out, '}')
	s.skipWS()
	if s.pos < len(body) {
		return s.syntaxErr("expected end of input after the JSON object")
	}
	sig.data = s.out
	return nil
}

func reservedName(i int) string {
	return [...]string{signalDomain, signalName, signalTimestamp}[i]
}
