package deliver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/evtctl/evtctl/internal/cevent"
)

// EncodeHeaderValue percent-encodes s for a ce- header as the CloudEvents
// HTTP binding requires: space, '"', '%' and every byte outside 0x21-0x7E
// (so each byte of a non-ASCII UTF-8 sequence) become %XX with upper-case
// hex digits; other bytes are kept. A value needing no encoding is
// returned unchanged.
func EncodeHeaderValue(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func needsEscape(c byte) bool {
	return c < 0x21 || c > 0x7e || c == '"' || c == '%'
}

// HeaderEncoding is how binary mode writes attribute values into ce- headers.
type HeaderEncoding int

const (
	// HeaderPercent percent-encodes values as the CloudEvents HTTP binding
	// requires (see EncodeHeaderValue). It is the zero value.
	HeaderPercent HeaderEncoding = iota
	// HeaderRaw sends values as they are, for receivers that do not
	// percent-decode ce- headers, such as those built on sdk-go v2. A value
	// that cannot go in a header as it is (a non-ASCII or control
	// character, or a space at either end, which HTTP drops) is refused.
	HeaderRaw
)

// String returns "percent" or "raw".
func (e HeaderEncoding) String() string {
	switch e {
	case HeaderPercent:
		return "percent"
	case HeaderRaw:
		return "raw"
	}
	return "HeaderEncoding(" + strconv.Itoa(int(e)) + ")"
}

// ParseHeaderEncoding parses "percent" or "raw".
func ParseHeaderEncoding(s string) (HeaderEncoding, error) {
	for _, e := range []HeaderEncoding{HeaderPercent, HeaderRaw} {
		if strings.EqualFold(s, e.String()) {
			return e, nil
		}
	}
	return 0, fmt.Errorf("unknown header encoding %q: want percent or raw", s)
}

// headerValue returns the ce- header value for s.
func (e HeaderEncoding) headerValue(s string) (string, error) {
	if e != HeaderRaw {
		return EncodeHeaderValue(s), nil
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 0x80:
			return "", fmt.Errorf("%q has a non-ASCII character, which cannot go in a header unencoded", s)
		case c < 0x20 || c == 0x7f:
			return "", fmt.Errorf("%q has a control character, which cannot go in a header unencoded", s)
		}
	}
	if s != "" && (s[0] == ' ' || s[len(s)-1] == ' ') {
		return "", fmt.Errorf("%q begins or ends with a space, which HTTP drops from a header", s)
	}
	return s, nil
}

// errFormatContentType is toBinary's answer for an event whose datacontenttype is a
// CloudEvents format, which receivers would take for the request's mode (see encode).
var errFormatContentType = errors.New("the datacontenttype is a CloudEvents format")

// binaryRequest is an event split into binary-mode headers and body.
type binaryRequest struct {
	header http.Header
	body   []byte
}

// toBinary maps one event in the JSON format to the HTTP binary content
// mode: every attribute and extension becomes a ce- header, encoded as enc
// says, datacontenttype becomes Content-Type, and the data becomes the body.
// JSON data is sent as the event holds it, whitespace included, so an event
// an evtctl node stored from a binary-mode request goes out with the body it
// came with.
func toBinary(event []byte, enc HeaderEncoding) (binaryRequest, error) {
	attrs, body, err := cevent.SplitBinary(event)
	if err != nil {
		return binaryRequest{}, err
	}
	h := make(http.Header, len(attrs))
	for _, a := range attrs {
		if a.Name != "datacontenttype" {
			continue
		}
		if strings.ContainsAny(a.Value, "\r\n\x00") {
			return binaryRequest{}, fmt.Errorf("attribute \"datacontenttype\" %q contains a control character", a.Value)
		}
		h["Content-Type"] = []string{a.Value}
		if cevent.RequestMode(h, nil) != cevent.ModeBinary {
			return binaryRequest{}, errFormatContentType
		}
	}
	for _, a := range attrs {
		if a.Name == "datacontenttype" {
			continue
		}
		hv, err := enc.headerValue(a.Value)
		if err != nil {
			return binaryRequest{}, fmt.Errorf("attribute %q: %w; send it percent-encoded or in structured mode", a.Name, err)
		}
		h[http.CanonicalHeaderKey("ce-"+a.Name)] = []string{hv}
	}
	return binaryRequest{header: h, body: body}, nil
}

// Encode returns the headers and body of the request that carries one event (a CloudEvent
// in JSON format) to any receiver in Binary or Structured mode, exactly as Send would make
// them; enc applies to Binary mode. See Options.Node for the form of Structured mode, and
// encode for the events that Binary mode cannot carry.
func Encode(mode Mode, enc HeaderEncoding, event []byte) (http.Header, []byte, error) {
	return encode(mode, enc, event, false)
}

// encode is Encode to an evtctl node (node) or to any receiver.
//
// An event whose datacontenttype is a CloudEvents format (application/cloudevents+json, say)
// goes in Structured mode whatever mode is asked: in Binary mode its Content-Type would make
// every receiver read the body, the event's data, as a CloudEvent or a batch of them. This is
// the one place that decides, for emit and forward alike.
func encode(mode Mode, enc HeaderEncoding, event []byte, node bool) (http.Header, []byte, error) {
	switch mode {
	case Structured:
		return structured(event, node)
	case Binary:
		br, err := toBinary(event, enc)
		if errors.Is(err, errFormatContentType) {
			return structured(event, node)
		}
		if err != nil {
			return nil, nil, err
		}
		return br.header, br.body, nil
	}
	return nil, nil, fmt.Errorf("mode %s does not carry one event per request", mode)
}

// structured returns the Structured-mode request of event: as it is to an evtctl node, else
// in the form cevent.ForSDK gives.
func structured(event []byte, node bool) (http.Header, []byte, error) {
	if !node {
		event, _ = cevent.ForSDK(event)
	}
	return http.Header{"Content-Type": {ContentTypeStructured}}, event, nil
}
