package tui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// styles are every style the UI draws with, in one place. Colours are the terminal's own
// sixteen, so they follow its theme; without colour (NO_COLOR, tests) the layout alone
// carries the meaning: a marker column for the selection, words for states.
type styles struct {
	header, selected, gutter       paint
	time, typ, source, subject, id paint
	marker, gap, loading           paint
	rule, ruleTitle                paint
	status, statusLive, statusBad  paint
	statusPaused, statusWarn       paint
	prompt, errText, caret, msg    paint
	helpKey, helpDesc, helpTitle   paint
	jsonKey, jsonString            paint
	jsonNumber, jsonLiteral        paint
	jsonPunct, jsonText            paint
	cursor                         paint
}

func newStyles(r *lipgloss.Renderer) styles {
	s := r.NewStyle
	return styles{
		header:   newPaint(s().Bold(true).Faint(true)),
		selected: newPaint(s().Reverse(true)),
		gutter:   newPaint(s().Bold(true).Foreground(lipgloss.Color("3"))),

		time:    newPaint(s().Foreground(lipgloss.Color("6"))),
		typ:     newPaint(s().Foreground(lipgloss.Color("3"))),
		source:  newPaint(s()),
		subject: newPaint(s().Faint(true)),
		id:      newPaint(s().Foreground(lipgloss.Color("5"))),

		marker:  newPaint(s().Faint(true)),
		gap:     newPaint(s().Bold(true).Foreground(lipgloss.Color("1"))),
		loading: newPaint(s().Foreground(lipgloss.Color("4"))),

		rule:      newPaint(s().Faint(true)),
		ruleTitle: newPaint(s().Bold(true)),

		status:       newPaint(s().Reverse(true)),
		statusLive:   newPaint(s().Reverse(true).Bold(true).Foreground(lipgloss.Color("2"))),
		statusBad:    newPaint(s().Reverse(true).Bold(true).Foreground(lipgloss.Color("1"))),
		statusPaused: newPaint(s().Reverse(true).Bold(true).Foreground(lipgloss.Color("3"))),
		statusWarn:   newPaint(s().Reverse(true).Foreground(lipgloss.Color("3"))),

		prompt:  newPaint(s().Bold(true)),
		errText: newPaint(s().Foreground(lipgloss.Color("1"))),
		caret:   newPaint(s().Bold(true).Foreground(lipgloss.Color("1"))),
		msg:     newPaint(s().Foreground(lipgloss.Color("2"))),

		helpKey:   newPaint(s().Bold(true).Foreground(lipgloss.Color("3"))),
		helpDesc:  newPaint(s()),
		helpTitle: newPaint(s().Bold(true).Underline(true)),

		jsonKey:     newPaint(s().Foreground(lipgloss.Color("4"))),
		jsonString:  newPaint(s().Foreground(lipgloss.Color("2"))),
		jsonNumber:  newPaint(s().Foreground(lipgloss.Color("3"))),
		jsonLiteral: newPaint(s().Foreground(lipgloss.Color("5"))),
		jsonPunct:   newPaint(s().Faint(true)),
		jsonText:    newPaint(s()),

		cursor: newPaint(s().Reverse(true)),
	}
}

// paint is a style made ready to apply: the escape sequences lipgloss writes before and
// after a line of text in it, so that drawing a screen costs string concatenation rather
// than a lipgloss render per piece of text.
type paint struct{ pre, post string }

// newPaint finds a style's sequences by rendering a marker with it.
func newPaint(st lipgloss.Style) paint {
	const marker = "\x00"
	out := st.Render(marker)
	i := strings.Index(out, marker)
	if i < 0 {
		return paint{}
	}
	return paint{pre: out[:i], post: out[i+len(marker):]}
}

// Render returns s in the style. s must be one line.
func (p paint) Render(s string) string {
	if p.pre == "" && p.post == "" {
		return s
	}
	return p.pre + s + p.post
}

// json styles one piece of the detail pane.
func (st *styles) json(c tokClass, text string) string {
	switch c {
	case tokKey:
		return st.jsonKey.Render(text)
	case tokString:
		return st.jsonString.Render(text)
	case tokNumber:
		return st.jsonNumber.Render(text)
	case tokLiteral:
		return st.jsonLiteral.Render(text)
	case tokPunct:
		return st.jsonPunct.Render(text)
	}
	return st.jsonText.Render(text)
}
