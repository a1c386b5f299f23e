package tui

import (
	"unicode"

	tea "charm.land/bubbletea/v2"

	"github.com/evtctl/evtctl/pkg/render"
)

// lineEdit is the one-line editor of the prompts: text, a cursor, and the usual keys
// (arrows, home/end and ctrl+a/ctrl+e, backspace/delete, ctrl+w and alt+backspace for a
// word, ctrl+u/ctrl+k for the rest of the line, alt+arrows for words).
type lineEdit struct {
	val     []rune
	pos     int
	focused bool
}

func (e *lineEdit) SetValue(s string) {
	e.val = []rune(s)
	e.pos = min(e.pos, len(e.val))
}

func (e *lineEdit) Value() string   { return string(e.val) }
func (e *lineEdit) Position() int   { return e.pos }
func (e *lineEdit) SetCursor(p int) { e.pos = max(min(p, len(e.val)), 0) }
func (e *lineEdit) CursorEnd()      { e.pos = len(e.val) }
func (e *lineEdit) Focus()          { e.focused = true }
func (e *lineEdit) Blur()           { e.focused = false }
func (e *lineEdit) Focused() bool   { return e.focused }
func (e *lineEdit) insert(rs []rune) {
	clean := make([]rune, 0, len(rs))
	for _, r := range rs {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			clean = append(clean, ' ')
		case render.UnsafeRune(r):
		default:
			clean = append(clean, r)
		}
	}
	v := make([]rune, 0, len(e.val)+len(clean))
	v = append(append(append(v, e.val[:e.pos]...), clean...), e.val[e.pos:]...)
	e.val, e.pos = v, e.pos+len(clean)
}

func (e *lineEdit) cut(from, to int) {
	e.val = append(e.val[:from:from], e.val[to:]...)
	e.pos = from
}

// wordLeft and wordRight find the start of the word before the cursor and the end of the
// word after it.
func (e *lineEdit) wordLeft() int {
	i := e.pos
	for i > 0 && unicode.IsSpace(e.val[i-1]) {
		i--
	}
	for i > 0 && !unicode.IsSpace(e.val[i-1]) {
		i--
	}
	return i
}

func (e *lineEdit) wordRight() int {
	i := e.pos
	for i < len(e.val) && unicode.IsSpace(e.val[i]) {
		i++
	}
	for i < len(e.val) && !unicode.IsSpace(e.val[i]) {
		i++
	}
	return i
}

// Update applies a key. Text typed is inserted; keys with ctrl or alt are commands.
func (e *lineEdit) Update(k tea.KeyPressMsg) {
	switch k.Keystroke() {
	case "alt+b", "alt+left", "ctrl+left":
		e.pos = e.wordLeft()
	case "alt+f", "alt+right", "ctrl+right":
		e.pos = e.wordRight()
	case "alt+d":
		e.cut(e.pos, e.wordRight())
		e.pos = min(e.pos, len(e.val))
	case "backspace":
		if e.pos > 0 {
			e.cut(e.pos-1, e.pos)
		}
	case "alt+backspace", "ctrl+w":
		e.cut(e.wordLeft(), e.pos)
	case "delete", "ctrl+d":
		if e.pos < len(e.val) {
			e.val = append(e.val[:e.pos], e.val[e.pos+1:]...)
		}
	case "left", "ctrl+b":
		if e.pos > 0 {
			e.pos--
		}
	case "right", "ctrl+f":
		if e.pos < len(e.val) {
			e.pos++
		}
	case "home", "ctrl+a":
		e.pos = 0
	case "end", "ctrl+e":
		e.pos = len(e.val)
	case "ctrl+u":
		e.cut(0, e.pos)
	case "ctrl+k":
		e.val = e.val[:e.pos]
	default:
		if k.Text != "" && !k.Mod.Contains(tea.ModAlt) && !k.Mod.Contains(tea.ModCtrl) {
			e.insert([]rune(k.Text))
		}
	}
}
