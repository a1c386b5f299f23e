package tui

import (
	"fmt"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// helpModel is the help screen (?): the notes, if any, then every key and a few remarks.
// A screen too short for all of it scrolls, with a last line that says how to quit, so
// that the way out is always in view.
type helpModel struct {
	c    *common
	open bool
	top  int // the first line shown, when it scrolls
}

var helpRemarks = []string{"",
	"  The list follows the head while its newest event is selected; moving up",
	"  stops that, and end or G starts it again. A ⚠ row marks events the node",
	"  lost before they were read."}

// content is every line of the help.
func (h *helpModel) content() []string {
	st := &h.c.st
	var out []string
	for _, n := range h.c.cfg.Notes {
		out = append(out, clean(n))
	}
	if len(out) > 0 {
		out = append(out, "")
	}
	out = append(out, st.helpTitle.Render("Keys"), "")
	for _, b := range h.c.keys.all() {
		hp := b.Help()
		out = append(out, "  "+st.helpKey.Render(h.c.cells.fit(hp.Key, 13))+" "+st.helpDesc.Render(hp.Desc))
	}
	return append(out, helpRemarks...)
}

// view is the help in height lines: all of it when it fits, else the part in view and
// a last line with the keys of the help screen and where the part is.
func (h *helpModel) view(height int) []string {
	lines := h.content()
	if len(lines) <= height {
		return lines
	}
	rows := max(height-1, 0)
	top := min(max(h.top, 0), len(lines)-rows)
	st := &h.c.st
	footer := "  " + st.helpKey.Render("q") + " " + st.helpDesc.Render("quit") + " · " +
		st.helpKey.Render("↑↓ pgup pgdn") + " " + st.helpDesc.Render("scroll") + " · " +
		st.helpDesc.Render(fmt.Sprintf("other keys close · lines %d–%d of %d", top+1, top+rows, len(lines)))
	return append(append([]string(nil), lines[top:top+rows]...), footer)
}

// onKey handles a key while the help is shown, in height lines: q quits, the keys that
// move scroll a help taller than the screen, and any other key closes it.
func (h *helpModel) onKey(k tea.KeyPressMsg, height int) (quit bool) {
	ks := h.c.keys
	if key.Matches(k, ks.Quit) {
		return true
	}
	n := len(h.content())
	if n <= height {
		h.close()
		return false
	}
	rows := max(height-1, 1)
	switch {
	case key.Matches(k, ks.Up):
		h.top--
	case key.Matches(k, ks.Down):
		h.top++
	case key.Matches(k, ks.PageUp):
		h.top -= rows
	case key.Matches(k, ks.PageDown):
		h.top += rows
	case key.Matches(k, ks.Top):
		h.top = 0
	case key.Matches(k, ks.Bottom):
		h.top = n
	default:
		h.close()
		return false
	}
	h.top = min(max(h.top, 0), n-rows)
	return false
}

func (h *helpModel) show()  { h.open, h.top = true, 0 }
func (h *helpModel) close() { h.open = false }
