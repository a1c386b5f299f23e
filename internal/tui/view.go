package tui

import (
	"strings"

	tea "charm.land/bubbletea/v2"
)

// layout is how the screen's lines are shared out among the children.
type layout struct {
	bottom       []string // the prompt, a failing connection, a message: above the status bar
	body         int      // lines between the top and those
	list, detail int      // lines of the list (without its header) and of the detail pane
}

const (
	minDetail = 12 // a body shorter than this shows no detail pane
	maxBottom = 4
)

func (m *Model) layout() layout {
	var l layout
	l.bottom = m.bottomLines()
	l.body = max(m.c.height-1-len(l.bottom), 1) // the status bar takes one line
	switch {
	case m.help.open:
	case m.detail.zoom:
		l.detail = max(l.body-1, 1)
	case l.body >= minDetail:
		l.detail = (l.body - 2) / 2
		l.list = l.body - 2 - l.detail
	default:
		l.list = max(l.body-1, 1)
	}
	return l
}

// relayout gives the list its height, for scrolling and paging; it has at least one line,
// for the arithmetic of scrolling while the list is hidden.
func (m *Model) relayout() {
	m.list.setHeight(m.layout().list)
}

// detailHeight is the detail pane's height, at least 1.
func (m *Model) detailHeight() int { return max(m.layout().detail, 1) }

// statusFacts are what the status bar tells of the list.
func (m *Model) statusFacts() statusFacts {
	l := &m.list
	return statusFacts{query: l.query, paused: l.paused, waiting: l.waiting, loaded: l.loaded(), lower: l.lower, upper: l.upper}
}

// bottomLines are the lines above the status bar: the prompt and its error, a failing
// connection, a message.
func (m *Model) bottomLines() []string {
	out := m.prompt.view(m.writeCount())
	out = append(out, m.conn.lines(m.prompt.active())...)
	if len(out) > maxBottom {
		out = out[:maxBottom]
	}
	return out
}

// View draws the screen, full screen (the terminal's alternate screen, without the
// cursor). It has no side effects but filling the detail pane's cache.
func (m *Model) View() tea.View {
	v := tea.NewView(m.screen())
	v.AltScreen = true
	return v
}

// screen is the text of the screen: each child draws its part where the layout puts it.
func (m *Model) screen() string {
	width, height := m.c.width, m.c.height
	if width <= 0 || height <= 0 {
		return ""
	}
	l := m.layout()
	r, ok := m.list.selected()
	lines := make([]string, 0, height)
	switch {
	case m.help.open:
		lines = append(lines, m.help.view(l.body)...)
	case m.detail.zoom:
		lines = append(lines, m.detail.rule(r, ok, l.detail))
		lines = append(lines, m.detail.view(r, ok, l.detail)...)
	default:
		lines = append(lines, m.list.header())
		list := m.list.view(l.list)
		for len(list) < l.list {
			list = append(list, "")
		}
		lines = append(lines, list...)
		if l.detail > 0 {
			lines = append(lines, m.detail.rule(r, ok, l.detail))
			lines = append(lines, m.detail.view(r, ok, l.detail)...)
		}
	}
	for len(lines) < l.body {
		lines = append(lines, "")
	}
	lines = append(lines[:l.body], l.bottom...)
	lines = append(lines, m.conn.bar(m.statusFacts()))
	for i, s := range lines {
		lines[i] = m.c.cells.clip(s, width)
	}
	return strings.Join(lines, "\n")
}
