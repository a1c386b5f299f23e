package jetstream

import (
	"bytes"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/cevent"
)

// smsg is a stored message as the node serves it.
type smsg struct {
	seq   uint64
	ts    int64  // the cursor's timestamp part (see cursorTS)
	typ   string // the event's type, served as an item's "event"
	msgID string // its Nats-Msg-Id, if any
	data  []byte // the event in the CloudEvents JSON format
}

// presentLimits bound the events made of messages: NATS messages may be far larger than
// events the node takes over HTTP.
var presentLimits = cevent.Limits{MaxEventBytes: 256 << 20}

// present turns a stored message into the event the node serves. A message evtctl
// published (it has the Evtctl-Type header) is served as stored. Any other message is
// presented as a CloudEvent:
//
//   - binary mode, attributes in ce- headers (any case) and datacontenttype in
//     Content-Type (or ce-datacontenttype): decoded as the node decodes an HTTP request in
//     binary mode;
//   - a payload that is a CloudEvent in the JSON format: served as it is (compacted);
//   - anything else is wrapped: id from the Nats-Msg-Id header or else the stream sequence,
//     source "jetstream:<stream>", type and subject the message's subject, time its stored
//     time, and data the payload as JSON when it is JSON, as text when it is UTF-8 text,
//     else base64 (data_base64), with the message's Content-Type as datacontenttype when it
//     has one.
func (s *Store) present(seq uint64, subject string, h nats.Header, data []byte, stored time.Time) smsg {
	m := smsg{seq: seq, ts: stored.UnixNano()}
	if id := h[hdrMsgID]; len(id) > 0 {
		m.msgID = id[0]
	}
	if t := h[hdrType]; len(t) > 0 {
		m.typ, m.data = t[0], data
		m.ts = cursorTS(h, m.ts)
		return m
	}
	if ev, ok := binaryEvent(h, data); ok {
		m.typ, m.data = ev.Type, ev.JSON
		return m
	}
	if looksStructured(data) {
		if ev, err := cevent.DecodeStructured(data, presentLimits); err == nil {
			m.typ, m.data = ev.Type, ev.JSON
			return m
		}
	}
	m.typ, m.data = subject, s.wrap(seq, subject, h, data, stored)
	return m
}

// cursorTS is the cursor time of a message evtctl published, stored at stored: the time
// its chain gave it (see chain.go), else the stored time raised to its floor header.
func cursorTS(h nats.Header, stored int64) int64 {
	if v := h[hdrTime]; len(v) > 0 {
		if t := parseTS(v[0]); t > 0 {
			return t
		}
	}
	if f := h[hdrFloor]; len(f) > 0 {
		return max(stored, parseTS(f[0]))
	}
	return stored
}

// binaryEvent decodes a message in the binary content mode.
func binaryEvent(h nats.Header, data []byte) (cevent.Event, bool) {
	var hh http.Header
	var dct string
	for k, v := range h {
		if len(k) > 3 && strings.EqualFold(k[:3], "ce-") {
			if strings.EqualFold(k[3:], "datacontenttype") {
				if len(v) > 0 {
					dct = v[0]
				}
				continue
			}
			if hh == nil {
				hh = make(http.Header, len(h))
			}
			hh[k] = v
		} else if strings.EqualFold(k, "Content-Type") {
			if hh == nil {
				hh = make(http.Header, len(h))
			}
			hh[k] = v
		}
	}
	if hh == nil {
		return cevent.Event{}, false
	}
	if dct != "" && contentType(h) == "" {
		hh["Content-Type"] = []string{dct}
	}
	ev, err := cevent.DecodeBinary(hh, data, presentLimits)
	return ev, err == nil
}

// looksStructured reports whether data may be a CloudEvent in the JSON format.
func looksStructured(data []byte) bool {
	d := bytes.TrimLeft(data, " \t\r\n")
	return len(d) > 0 && d[0] == '{' && bytes.Contains(d, []byte(`"specversion"`))
}

// contentType is the message's Content-Type header, in any case.
func contentType(h nats.Header) string {
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, "Content-Type") {
			return v[0]
		}
	}
	return ""
}

// wrap makes a CloudEvent of a message that is none: see present.
func (s *Store) wrap(seq uint64, subject string, h nats.Header, data []byte, stored time.Time) []byte {
	id := strconv.FormatUint(seq, 10)
	if v := h[hdrMsgID]; len(v) > 0 && v[0] != "" {
		id = v[0]
	}
	hh := http.Header{
		"Ce-Specversion": {"1.0"},
		"Ce-Id":          {headerValue(id)},
		"Ce-Source":      {headerValue(s.source)},
		"Ce-Type":        {headerValue(subject)},
		"Ce-Subject":     {headerValue(subject)},
		"Ce-Time":        {stored.UTC().Format(time.RFC3339Nano)},
	}
	ct := contentType(h)
	if ct == "" && len(data) > 0 {
		ct = sniff(data)
	}
	if ct != "" {
		hh["Content-Type"] = []string{ct}
	}
	ev, err := cevent.DecodeBinary(hh, data, presentLimits)
	if err != nil && ct != "application/octet-stream" {
		// The message's own Content-Type does not fit its payload: base64 then.
		hh["Content-Type"] = []string{"application/octet-stream"}
		ev, err = cevent.DecodeBinary(hh, data, presentLimits)
	}
	if err != nil {
		// Only an id or subject no event may carry gets here: say what it was, without them.
		b, _ := cevent.DecodeBinary(http.Header{
			"Ce-Specversion": {"1.0"}, "Ce-Id": {strconv.FormatUint(seq, 10)}, "Ce-Source": {headerValue(s.source)},
			"Ce-Type": {"io.nats.jetstream.message"}, "Ce-Time": {stored.UTC().Format(time.RFC3339Nano)},
			"Content-Type": {"application/octet-stream"},
		}, data, presentLimits)
		return b.JSON
	}
	return ev.JSON
}

// sniff chooses the datacontenttype of a payload without one: JSON, UTF-8 text, or bytes.
func sniff(data []byte) string {
	switch {
	case gjson.ValidBytes(data):
		return "application/json"
	case utf8.Valid(data) && !hasControl(data):
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
			return true
		}
	}
	return false
}

// headerValue escapes a value for DecodeBinary, which percent-decodes and unquotes header
// values as the HTTP binding asks, so that it reads back exactly.
func headerValue(v string) string {
	if !strings.ContainsAny(v, "%\"") {
		return v
	}
	return strings.NewReplacer("%", "%25", `"`, "%22").Replace(v)
}

// sourceOf is the source of the events wrapped from messages of a stream.
func sourceOf(stream string) string { return "jetstream:" + url.PathEscape(stream) }
