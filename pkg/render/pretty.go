package render

import (
	"time"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// Widths, in columns, beyond which pretty cuts a value with "…" when its lines are not
// fitted to a terminal.
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

// pretty writes one line: for a CloudEvent its time (else the item's), type, source,
// subject if any, id and compact data if any; for other items the item's time (see
// itemTime), the event name and the payload (data.value, else data). Text from the node is cleaned of
// anything a terminal would act on. With a width, the line is fitted to it (see fitted).
func (r *Renderer) pretty(it client.Item) error {
	ev := scanData(bytesString(it.Data))
	if r.widthFn != nil && !r.widthAsked {
		r.widthAsked = true
		if w := r.widthFn(); w != r.lay.width {
			r.lay = fitLayout(w)
		}
	}
	if r.lay.width > 0 {
		return r.fitted(it, &ev)
	}
	b := r.line[:0]

	b = r.style(b, styleTime)
	if ev.ce && ev.time != "" {
		b, _ = appendDisplay(b, ev.time, prettyAttrWidth, false)
	} else {
		b = appendItemTime(b, it)
	}
	b = r.style(b, styleReset)

	if !ev.ce {
		b = append(b, sep...)
		b = r.attr(b, styleType, it.Event)
		b = append(b, sep...)
		b, _ = appendDisplay(b, ev.payload(), prettyDataWidth, true)
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
		b, _ = appendDisplay(b, ev.payload(), prettyDataWidth, true)
	}
	return r.writeLine(b)
}

// attr appends a cleaned attribute, "-" when it is empty, in style when colour is on.
func (r *Renderer) attr(b []byte, style, s string) []byte {
	b = r.style(b, style)
	if s == "" {
		b = append(b, '-')
	} else {
		b, _ = appendDisplay(b, s, prettyAttrWidth, false)
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

// appendItemTime appends an item's time (UTC, RFC 3339 with nanoseconds as needed): the one
// its source stamped it with, else its cursor's; "-" when it has neither.
func appendItemTime(b []byte, it client.Item) []byte {
	t, ok := itemTime(it)
	if !ok {
		return append(b, '-')
	}
	return t.UTC().AppendFormat(b, time.RFC3339Nano)
}

// itemTime is the time the item's source stamped it with, else its cursor's.
func itemTime(it client.Item) (time.Time, bool) {
	if !it.Time.IsZero() {
		return it.Time, true
	}
	return cursorTime(it.Cursor)
}

func cursorTime(c string) (time.Time, bool) {
	cur, err := cursor.Parse(c)
	if err != nil || c == "" {
		return time.Time{}, false
	}
	return time.Unix(0, cur.TS), true
}

// A fitted line has these columns, each followed by two spaces: the time (timeWidth), the
// type (or a Tendermint item's event name), then, as the width allows, the source, the
// subject and the id, and last the data, cut to what is left. A column too narrow for its
// value shows the value's end (the type) or its start (the others) and "…". Columns have
// the same widths on every line of a given width, so they line up.
const timeWidth = 12

// layout is the widths of a fitted line's columns; 0 leaves a column out.
type layout struct {
	width                    int // of the whole line; 0: not fitted
	typ, source, subject, id int
}

// fitLayout shares out width columns. The type gets over a quarter; the subject joins
// from 100 columns, the source from 170, the id from 230, each wide enough for most
// values while the data keeps about two fifths of the line.
func fitLayout(width int) layout {
	l := layout{width: max(width, 0)}
	if l.width == 0 {
		return l
	}
	l.typ = clamp(width*28/100, 12, 40)
	if width >= 100 {
		l.subject = clamp(width*16/100, 10, 32)
	}
	if width >= 170 {
		l.source = clamp(width*10/100, 10, 24)
	}
	if width >= 230 {
		l.id = clamp(width*10/100, 8, 36)
	}
	return l
}

func clamp(n, lo, hi int) int { return min(max(n, lo), hi) }

// fitted writes the pretty line of an item fitted to r.lay.width columns.
func (r *Renderer) fitted(it client.Item, ev *event) error {
	l := &r.lay
	f := fitter{b: r.line[:0], room: l.width, color: r.color}

	t, ok := time.Time{}, false
	if ev.ce && ev.time != "" {
		if pt, err := time.Parse(time.RFC3339Nano, ev.time); err == nil {
			t, ok = pt, true
		}
	}
	if !ok {
		t, ok = itemTime(it)
	}
	ts := "-"
	if ok {
		ts = bytesString(r.appendShortTime(r.tbuf[:0], t))
	}
	f.cell(styleTime, ts, timeWidth, cutEnd)

	if !ev.ce {
		f.cell(styleType, it.Event, l.typ, cutStart)
		f.cell("", ev.payload(), f.room, cutJSON)
		return r.writeLine(f.b)
	}
	f.cell(styleType, ev.typ, l.typ, cutStart)
	if l.source > 0 {
		f.cell("", ev.source, l.source, cutEnd)
	}
	if l.subject > 0 {
		f.cell("", ev.subject, l.subject, cutEnd)
	}
	if l.id > 0 {
		f.cell(styleID, ev.id, l.id, cutEnd)
	}
	if ev.data != "" || ev.dataBase64 != "" {
		f.cell("", ev.payload(), f.room, cutJSON)
	}
	return r.writeLine(f.b)
}

// appendShortTime appends t in the local time zone, in timeWidth columns: the time of day
// to the millisecond for today's events, else the date and the minute, else (another
// year) the date.
func (r *Renderer) appendShortTime(b []byte, t time.Time) []byte {
	now := r.now().In(r.loc)
	t = t.In(r.loc)
	y, m, d := t.Date()
	ny, nm, nd := now.Date()
	switch {
	case y == ny && m == nm && d == nd:
		return t.AppendFormat(b, "15:04:05.000")
	case y == ny:
		return t.AppendFormat(b, "Jan 02 15:04")
	}
	return t.AppendFormat(b, "2006-01-02")
}

// How a fitter cuts a value too wide for its column.
const (
	cutEnd   = iota // keep the start: "abc…"
	cutStart        // keep the end: "…xyz"
	cutJSON         // keep the start of compact JSON, dropping whitespace between tokens
)

// fitter builds a fitted line cell by cell, never past room columns. The two spaces
// after a cell, and any padding, are written only when another cell follows, so that a
// line ends with its last value.
type fitter struct {
	b     []byte
	room  int // columns left on the line
	pad   int // spaces owed before the next cell
	color bool
}

// cell appends s (cleaned; "-" when empty) in a column of width columns, in style.
func (f *fitter) cell(style, s string, width, cut int) {
	if f.room-f.pad <= 0 {
		f.room = 0
		return
	}
	for range f.pad {
		f.b = append(f.b, ' ')
	}
	f.room -= f.pad
	width = min(width, f.room)
	if f.color && style != "" {
		f.b = append(f.b, style...)
	}
	var n int
	switch {
	case s == "":
		f.b, n = append(f.b, '-'), 1
	case cut == cutStart:
		f.b, n = appendDisplayEnd(f.b, s, width)
	default:
		f.b, n = appendDisplay(f.b, s, width, cut == cutJSON)
	}
	if f.color && style != "" {
		f.b = append(f.b, styleReset...)
	}
	f.room -= n
	f.pad = width - n + len(sep)
}
