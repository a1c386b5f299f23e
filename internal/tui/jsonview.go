package tui

import (
	"strings"

	"github.com/tidwall/gjson"
)

// tokClass is what a piece of the detail pane is, for its colour.
type tokClass uint8

const (
	tokPunct tokClass = iota
	tokKey
	tokString
	tokNumber
	tokLiteral // true, false, null
	tokText    // not JSON
)

type span struct {
	class tokClass
	text  string // cleaned for the terminal
}

// jline is one line of indented JSON before it is fitted to a width.
type jline struct {
	indent int
	spans  []span
}

// formatJSON lays out a JSON document indented by two spaces per level, each member and
// element on its own line, keeping the document's member order and its text for strings
// and numbers. Text that is not JSON is shown line by line as it is.
func formatJSON(doc []byte) []jline {
	if !gjson.ValidBytes(doc) {
		var out []jline
		for _, l := range strings.Split(string(doc), "\n") {
			out = append(out, jline{spans: []span{{tokText, clean(l)}}})
		}
		return out
	}
	var f jsonFormatter
	f.value(gjson.ParseBytes(doc), 0, nil, "")
	return f.lines
}

type jsonFormatter struct{ lines []jline }

func (f *jsonFormatter) line(indent int, spans ...span) {
	f.lines = append(f.lines, jline{indent: indent, spans: spans})
}

func (f *jsonFormatter) value(v gjson.Result, indent int, lead []span, trail string) {
	withTrail := func(s ...span) []span {
		out := append(append([]span(nil), lead...), s...)
		if trail != "" {
			out = append(out, span{tokPunct, trail})
		}
		return out
	}
	switch {
	case v.IsObject(), v.IsArray():
		open, closing := "{", "}"
		if v.IsArray() {
			open, closing = "[", "]"
		}
		type member struct{ k, v gjson.Result }
		var ms []member
		v.ForEach(func(k, val gjson.Result) bool {
			ms = append(ms, member{k, val})
			return true
		})
		if len(ms) == 0 {
			f.line(indent, withTrail(span{tokPunct, open + closing})...)
			return
		}
		f.line(indent, append(append([]span(nil), lead...), span{tokPunct, open})...)
		for i, m := range ms {
			t := ","
			if i == len(ms)-1 {
				t = ""
			}
			var l []span
			if v.IsObject() {
				l = []span{{tokKey, clean(m.k.Raw)}, {tokPunct, ": "}}
			}
			f.value(m.v, indent+1, l, t)
		}
		end := []span{{tokPunct, closing}}
		if trail != "" {
			end = append(end, span{tokPunct, trail})
		}
		f.line(indent, end...)
	case v.Type == gjson.String:
		f.line(indent, withTrail(span{tokString, clean(v.Raw)})...)
	case v.Type == gjson.Number:
		f.line(indent, withTrail(span{tokNumber, v.Raw})...)
	default:
		f.line(indent, withTrail(span{tokLiteral, v.Raw})...)
	}
}

// fitLines renders jlines at a width measured by cs, wrapping long lines (continuations
// are indented one level further), each piece styled by its class.
func fitLines(lines []jline, width int, style func(tokClass, string) string, cs cells) []string {
	if width < 8 {
		width = 8
	}
	var out []string
	var b strings.Builder
	for _, l := range lines {
		ind := min(2*l.indent, width/2)
		b.Reset()
		b.WriteString(strings.Repeat(" ", ind))
		col := ind
		for _, sp := range l.spans {
			text := sp.text
			for text != "" {
				room := width - col
				if room <= 0 {
					out = append(out, b.String())
					b.Reset()
					ind2 := min(ind+2, width/2)
					b.WriteString(strings.Repeat(" ", ind2))
					col, room = ind2, width-ind2
				}
				head, w := cs.cut(text, room)
				if head == "" { // a wide character that does not fit: force it on
					head, w = cs.first(text)
				}
				b.WriteString(style(sp.class, head))
				col += w
				text = text[len(head):]
			}
		}
		out = append(out, b.String())
	}
	return out
}
