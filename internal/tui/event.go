package tui

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/render"
)

// event is one item as the UI keeps it: its own copy of the item's bytes (a page's buffer
// is not held for the sake of one event) and the attributes the list shows, read once
// when it arrives, off the UI goroutine. It is never changed after that.
type event struct {
	cursor string
	// pos and before are the positions right after and right before the event in the log,
	// by which the window orders and bounds what it holds.
	pos, before string
	raw         []byte // the item as the node sent it: {"cursor":…,"event":…,"data":…}
	data        []byte // the item's data (the CloudEvent), within raw; nil when absent

	// Shown in the list, cleaned for the terminal; "" when absent.
	typ, source, subject, id string
	widths                   [3]int    // display widths of typ, source and subject, by wishCells
	time                     time.Time // the CloudEvent's time, else the item's (Item.Time), else the cursor's
}

// wishCells measures what the list's columns would like to be: by code point, as the
// screen is measured until the terminal says otherwise. What is drawn is cut and padded by
// the screen's own measure.
const wishCells = cells(ansi.WcWidth)

// newEvent copies an item into an event.
func newEvent(it client.Item) *event {
	ev := &event{cursor: strings.Clone(it.Cursor)}
	if len(it.Raw) > 0 {
		ev.raw = append([]byte(nil), it.Raw...)
		if d := gjson.GetBytes(ev.raw, "data"); d.Exists() && d.Index > 0 {
			ev.data = ev.raw[d.Index : d.Index+len(d.Raw)]
		} else if d.Exists() {
			ev.data = []byte(d.Raw)
		}
	} else {
		ev.data = append([]byte(nil), it.Data...)
		ev.raw = envelope(it.Cursor, it.Event, ev.data)
	}
	ce := false
	var tm string
	if d := gjson.ParseBytes(ev.data); d.IsObject() {
		d.ForEach(func(k, v gjson.Result) bool {
			s := ""
			if v.Type == gjson.String {
				s = v.Str
			}
			switch k.Str {
			case "specversion":
				ce = true
			case "type":
				ev.typ = s
			case "source":
				ev.source = s
			case "subject":
				ev.subject = s
			case "id":
				ev.id = s
			case "time":
				tm = s
			}
			return true
		})
	}
	if !ce {
		ev.typ, ev.source, ev.subject, ev.id = it.Event, "", "", ""
	}
	ev.typ, ev.source, ev.subject, ev.id = clean(ev.typ), clean(ev.source), clean(ev.subject), clean(ev.id)
	ev.widths = [3]int{wishCells.width(ev.typ), wishCells.width(ev.source), wishCells.width(ev.subject)}
	if t, err := time.Parse(time.RFC3339Nano, tm); err == nil {
		ev.time = t
	} else if !it.Time.IsZero() {
		ev.time = it.Time
	} else if c, err := cursor.Parse(it.Cursor); err == nil && !c.IsZero() {
		ev.time = c.Time()
	}
	return ev
}

// newEvents copies a page's items, placing each in the log as src says.
func newEvents(src Source, items []client.Item) []*event {
	evs := make([]*event, len(items))
	for i, it := range items {
		evs[i] = newEvent(it)
		evs[i].pos, evs[i].before = client.PosOf(it), src.PosBefore(it)
	}
	return evs
}

// envelope builds the item's JSON for an item that came without its raw bytes.
func envelope(cur, name string, data []byte) []byte {
	b := []byte(`{"cursor":`)
	b = appendQuoted(b, cur)
	b = append(b, `,"event":`...)
	b = appendQuoted(b, name)
	b = append(b, `,"data":`...)
	if len(data) == 0 {
		data = []byte("null")
	}
	b = append(b, data...)
	return append(b, '}')
}

// appendQuoted appends s as a JSON string.
func appendQuoted(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// clean makes text from a node safe to draw in one cell: runes a terminal could act on
// (newlines and tabs among them) are shown as \uXXXX, invalid UTF-8 as U+FFFD.
func clean(s string) string {
	ok := true
	for _, r := range s {
		if render.UnsafeRune(r) || r == utf8.RuneError {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	const hex = "0123456789abcdef"
	var b strings.Builder
	for _, r := range s {
		if render.UnsafeRune(r) {
			b.WriteString(`\u`)
			b.WriteByte(hex[r>>12&0xf])
			b.WriteByte(hex[r>>8&0xf])
			b.WriteByte(hex[r>>4&0xf])
			b.WriteByte(hex[r&0xf])
			continue
		}
		b.WriteRune(r) // RuneError stays U+FFFD
	}
	return b.String()
}
