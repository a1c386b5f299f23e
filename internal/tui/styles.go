package tui

import "github.com/charmbracelet/x/ansi"

// styles are every style the UI draws with, in one place. Colours are the terminal's own
// sixteen, so they follow its theme and need no question about its background; without
// colour (NO_COLOR, tests) there are no attributes either, and the layout alone carries
// the meaning: a marker column for the selection, words for states.
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

func newStyles(color bool) styles {
	// s starts a style; each call gives a new one, as a Style's methods append to it.
	s := ansi.NewStyle
	p := func(st ansi.Style) paint {
		if !color || len(st) == 0 {
			return paint{}
		}
		return paint{pre: st.String(), post: ansi.ResetStyle}
	}
	return styles{
		header:   p(s().Bold().Faint()),
		selected: p(s().Reverse(true)),
		gutter:   p(s().Bold().ForegroundColor(ansi.Yellow)),

		time:    p(s().ForegroundColor(ansi.Cyan)),
		typ:     p(s().ForegroundColor(ansi.Yellow)),
		source:  p(s()),
		subject: p(s().Faint()),
		id:      p(s().ForegroundColor(ansi.Magenta)),

		marker:  p(s().Faint()),
		gap:     p(s().Bold().ForegroundColor(ansi.Red)),
		loading: p(s().ForegroundColor(ansi.Blue)),

		rule:      p(s().Faint()),
		ruleTitle: p(s().Bold()),

		status:       p(s().Reverse(true)),
		statusLive:   p(s().Bold().Reverse(true).ForegroundColor(ansi.Green)),
		statusBad:    p(s().Bold().Reverse(true).ForegroundColor(ansi.Red)),
		statusPaused: p(s().Bold().Reverse(true).ForegroundColor(ansi.Yellow)),
		statusWarn:   p(s().Reverse(true).ForegroundColor(ansi.Yellow)),

		prompt:  p(s().Bold()),
		errText: p(s().ForegroundColor(ansi.Red)),
		caret:   p(s().Bold().ForegroundColor(ansi.Red)),
		msg:     p(s().ForegroundColor(ansi.Green)),

		helpKey:   p(s().Bold().ForegroundColor(ansi.Yellow)),
		helpDesc:  p(s()),
		helpTitle: p(s().Bold().Underline(true)),

		jsonKey:     p(s().ForegroundColor(ansi.Blue)),
		jsonString:  p(s().ForegroundColor(ansi.Green)),
		jsonNumber:  p(s().ForegroundColor(ansi.Yellow)),
		jsonLiteral: p(s().ForegroundColor(ansi.Magenta)),
		jsonPunct:   p(s().Faint()),
		jsonText:    p(s()),

		cursor: p(s().Reverse(true)),
	}
}

// paint is a style made ready to apply: the escape sequences written before and after a
// line of text in it, so that drawing a screen costs string concatenation. Bubble Tea
// turns them into the terminal's colours, fewer if it has fewer.
type paint struct{ pre, post string }

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
