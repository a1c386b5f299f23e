package render

import (
	"time"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// Widths, in characters, beyond which pretty cuts a value with "…".
const (
	prettyAttrWidth = 100
	prettyDataWidth = 120
)

// ANSI styles of the pretty format.
const (
	styleTime  = "\x1b[36m"   // cyan
	styleType  = "\x1b[1;33m" // bold yellow
	styleID    = "\x1b[35m"   // magenta
	styleReset = "\x1b[0m"
)

const sep = "  "

// pretty writes one line: for a CloudEvent its time (else the cursor's), type, source,
// subject if any, id and compact data if any; for other items the cursor's time, the
// event name and the payload (data.value, else data). Text from the node is cleaned of
// anything a terminal would act on.
func (r *Renderer) pretty(it client.Item) error {
	ev := scanData(bytesString(it.Data))
	b := r.line[:0]

	b = r.style(b, styleTime)
	if ev.ce && ev.time != "" {
		b = appendDisplay(b, ev.time, prettyAttrWidth, false)
	} else {
		b = appendCursorTime(b, it.Cursor)
	}
	b = r.style(b, styleReset)

	if !ev.ce {
		b = append(b, sep...)
		b = r.attr(b, styleType, it.Event)
		b = append(b, sep...)
		b = appendDisplay(b, ev.payload(), prettyDataWidth, true)
		return r.writeLine(b)
	}
	b = append(b, sep...)
	b = r.attr(b, styleType, ev.typ)
	b = append(b, sep...)
	b = r.attr(b, "", ev.source)
	if ev.subject != "" {
		b = append(b, sep...)
		b = r.attr(b, "", ev.subject)
	}
	b = append(b, sep...)
	b = r.attr(b, styleID, ev.id)
	if ev.data != "" || ev.dataBase64 != "" {
		b = append(b, sep...)
		b = appendDisplay(b, ev.payload(), prettyDataWidth, true)
	}
	return r.writeLine(b)
}

// attr appends a cleaned attribute, "-" when it is empty, in style when colour is on.
func (r *Renderer) attr(b []byte, style, s string) []byte {
	b = r.style(b, style)
	if s == "" {
		b = append(b, '-')
	} else {
		b = appendDisplay(b, s, prettyAttrWidth, false)
	}
	if style != "" {
		b = r.style(b, styleReset)
	}
	return b
}

func (r *Renderer) style(b []byte, style string) []byte {
	if r.color {
		b = append(b, style...)
	}
	return b
}

// appendCursorTime appends the time in a cursor (UTC, RFC 3339 with nanoseconds as
// needed), or "-" for a cursor that holds none.
func appendCursorTime(b []byte, c string) []byte {
	cur, err := cursor.Parse(c)
	if err != nil || c == "" {
		return append(b, '-')
	}
	return time.Unix(0, cur.TS).UTC().AppendFormat(b, time.RFC3339Nano)
}
