// Package cevent decodes and validates CloudEvents 1.0 received over HTTP for ingest, and gives
// events the form the CloudEvents Go SDK v2 reads as other readers do (ForSDK).
package cevent

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/evtctl/evtctl/internal/jsonspace"
)

// Event is one validated CloudEvent, ready to store.
type Event struct {
	// JSON is the event in the CloudEvents JSON format: one object with no
	// insignificant whitespace, except inside the data of a binary-mode
	// event with a JSON body, which is kept exactly as received. The events
	// of one batch share a backing array; each JSON slice has its capacity
	// limited to its length.
	JSON []byte
	// ID, Source and Type are the decoded values of the required attributes.
	ID, Source, Type string
	// Time is the time attribute in UTC, or the zero Time if the event has none.
	Time time.Time
	// Spaced reports that JSON holds insignificant whitespace: the JSON data of a
	// binary-mode event, kept as it came. Otherwise JSON is compact.
	Spaced bool
}

// Limits bounds what the decoders accept. Zero or negative fields take the
// defaults.
type Limits struct {
	// MaxEventBytes is the largest stored JSON size of one event; default 65536 (64 KiB).
	MaxEventBytes int
	// MaxBatch is the largest number of events in one batch; default 10000.
	MaxBatch int
}

// Default limits.
const (
	DefaultMaxEventBytes = 64 << 10
	DefaultMaxBatch      = 10000
)

func (l Limits) withDefaults() Limits {
	if l.MaxEventBytes <= 0 {
		l.MaxEventBytes = DefaultMaxEventBytes
	}
	if l.MaxBatch <= 0 {
		l.MaxBatch = DefaultMaxBatch
	}
	return l
}

// Error is returned for input that must be refused. Status is the HTTP
// status to answer with: 400 (invalid event), 413 (too large), 415
// (unsupported content type) or, from FromSignal, 405 (method not allowed).
type Error struct {
	Status int
	// Msg is a complete, human-readable message. For a batch it starts
	// with "batch index N: ".
	Msg string
	// Index is the position in the batch of the offending event, or -1.
	Index int
}

// Error returns e.Msg.
func (e *Error) Error() string { return e.Msg }

// Media types of the CloudEvents JSON formats.
const (
	MediaTypeStructured = "application/cloudevents+json"
	MediaTypeBatch      = "application/cloudevents-batch+json"
)

// DecodeRequest detects the HTTP content mode of a request from its headers
// and decodes the (already size-limited) body:
//
//   - Content-Type application/cloudevents-batch+json: batch mode.
//   - Content-Type application/cloudevents+json: structured mode.
//   - Any other application/cloudevents* type, or a charset other than
//     UTF-8: 415.
//   - No Content-Type, no ce- headers, and a body whose first non-blank
//     byte is '{' (structured) or '[' (batch): decoded as if the matching
//     CloudEvents type had been sent.
//   - Otherwise binary mode (see DecodeBinary); without any ce- header this
//     is a 415.
//
// Media types are compared case-insensitively, ignoring parameters.
func DecodeRequest(h http.Header, body []byte, lim Limits) ([]Event, error) {
	ct := headerValue(h, "Content-Type")
	mt, params, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	switch RequestMode(h, body) {
	case ModeBatch:
		if ct != "" {
			if err := checkFormat(ct, mt, params, MediaTypeBatch); err != nil {
				return nil, err
			}
		}
		return DecodeBatch(body, lim)
	case ModeStructured:
		if ct != "" {
			if err := checkFormat(ct, mt, params, MediaTypeStructured); err != nil {
				return nil, err
			}
		}
		ev, err := DecodeStructured(body, lim)
		if err != nil {
			return nil, err
		}
		return []Event{ev}, nil
	}
	ev, err := DecodeBinary(h, body, lim)
	if err != nil {
		return nil, err
	}
	return []Event{ev}, nil
}

// Mode is a content mode of the CloudEvents HTTP binding.
type Mode int

// Content modes.
const (
	ModeBinary Mode = iota
	ModeStructured
	ModeBatch
)

// RequestMode tells which content mode DecodeRequest reads a request in, by the rules
// documented there.
func RequestMode(h http.Header, body []byte) Mode {
	ct := headerValue(h, "Content-Type")
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	switch {
	case hasPrefixFold(mt, "application/cloudevents-batch"):
		return ModeBatch
	case hasPrefixFold(mt, "application/cloudevents"):
		return ModeStructured
	case ct == "" && !hasCEHeader(h):
		switch firstNonSpace(body) {
		case '{':
			return ModeStructured
		case '[':
			return ModeBatch
		}
	}
	return ModeBinary
}

// checkFormat accepts the CloudEvents media type want, with at most a UTF-8
// charset parameter.
func checkFormat(ct, mt, params, want string) error {
	if !equalFold(mt, want) {
		return &Error{Status: 415, Index: -1, Msg: fmt.Sprintf("unsupported CloudEvents format %q: only the JSON formats %s and %s are supported", mt, MediaTypeStructured, MediaTypeBatch)}
	}
	if strings.TrimSpace(params) == "" {
		return nil
	}
	_, p, err := mime.ParseMediaType(ct)
	if err != nil {
		return &Error{Status: 400, Index: -1, Msg: fmt.Sprintf("invalid Content-Type %q: %v", ct, err)}
	}
	if cs, ok := p["charset"]; ok && !isUTF8Charset(cs) {
		return &Error{Status: 415, Index: -1, Msg: fmt.Sprintf("unsupported charset %q: CloudEvents JSON must be UTF-8", cs)}
	}
	return nil
}

func isUTF8Charset(cs string) bool {
	return equalFold(cs, "utf-8") || equalFold(cs, "utf8") || equalFold(cs, "us-ascii")
}

// errNotCloudEvent is the 415 for a request that is in no CloudEvents mode.
func errNotCloudEvent(ct string) *Error {
	what := "no Content-Type"
	if ct != "" {
		what = fmt.Sprintf("Content-Type %q", ct)
	}
	return &Error{Status: 415, Index: -1, Msg: fmt.Sprintf(
		"not a CloudEvent: %s and no ce- headers; send %s (structured mode), %s (batch mode), or binary mode with ce-specversion, ce-id, ce-source and ce-type headers",
		what, MediaTypeStructured, MediaTypeBatch)}
}

// headerValue returns the first value of the named header. It also finds
// keys that are not in canonical form.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	for k, v := range h {
		if len(v) > 0 && equalFold(k, name) {
			return v[0]
		}
	}
	return ""
}

func hasCEHeader(h http.Header) bool {
	for k := range h {
		if isCEHeader(k) {
			return true
		}
	}
	return false
}

func isCEHeader(k string) bool {
	return len(k) > 3 && equalFold(k[:3], "ce-")
}

// equalFold is strings.EqualFold for ASCII only: HTTP header names and
// media types are ASCII, and Unicode folding would let "ſ" match "s".
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x >= 'A' && x <= 'Z' {
			x += 'a' - 'A'
		}
		if y >= 'A' && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && equalFold(s[:len(prefix)], prefix)
}

func firstNonSpace(b []byte) byte {
	if i := jsonspace.Skip(b, 0); i < len(b) {
		return b[i]
	}
	return 0
}

// isBlank reports whether s is empty or only white space.
func isBlank[T string | []byte](s T) bool {
	for _, r := range string(s) {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// uriExcluded lists the ASCII characters that can never appear in a URI.
const uriExcluded = " \"<>\\^`{|}"

// checkURIChars rejects controls, white space and the characters that
// RFC 3986 never allows.
func checkURIChars(name, s string) *Error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || strings.IndexByte(uriExcluded, c) >= 0 {
			return invalid("attribute %q is %q; %q is not allowed in a URI (percent-encode it)", name, s, c)
		}
	}
	return nil
}

// checkSource validates a URI-reference.
func checkSource(s string) *Error {
	if s == "" {
		return invalid("attribute \"source\" must be a non-empty URI-reference")
	}
	if err := checkURIChars("source", s); err != nil {
		return err
	}
	u, err := url.Parse(s)
	if err != nil {
		return invalid("attribute \"source\" is %q, which is not a valid URI-reference: %v", s, unwrapURLError(err))
	}
	if u.Scheme == "" && u.Opaque == "" && u.User == nil && u.Host == "" && u.Path == "" &&
		u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" {
		return invalid("attribute \"source\" is %q, which is an empty URI-reference", s)
	}
	return nil
}

// checkDataschema validates an absolute URI.
func checkDataschema(s string) *Error {
	if err := checkURIChars("dataschema", s); err != nil {
		return err
	}
	u, err := url.Parse(s)
	if err != nil {
		return invalid("attribute \"dataschema\" is %q, which is not a valid URI: %v", s, unwrapURLError(err))
	}
	if u.Scheme == "" {
		return invalid("attribute \"dataschema\" is %q; it must be an absolute URI (with a scheme, such as https:)", s)
	}
	return nil
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}
