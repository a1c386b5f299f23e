package tui

import (
	"unicode"

	tea "github.com/charmbracelet/bubbletea"
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
		case unsafeRune(r):
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

// Update applies a key.
func (e *lineEdit) Update(k tea.KeyMsg) {
	switch k.Type {
	case tea.KeyRunes:
		if k.Alt {
			switch string(k.Runes) {
			case "b":
				e.pos = e.wordLeft()
			case "f":
				e.pos = e.wordRight()
			case "d":
				e.cut(e.pos, e.wordRight())
				e.pos = min(e.pos, len(e.val))
			}
			return
		}
		e.insert(k.Runes)
	case tea.KeySpace:
		e.insert([]rune{' '})
	case tea.KeyBackspace:
		switch {
		case k.Alt:
			e.cut(e.wordLeft(), e.pos)
		case e.pos > 0:
			e.cut(e.pos-1, e.pos)
		}
	case tea.KeyCtrlW:
		e.cut(e.wordLeft(), e.pos)
	case tea.KeyDelete, tea.KeyCtrlD:
		if e.pos < len(e.val) {
			e.val = append(e.val[:e.pos], e.val[e.pos+1:]...)
		}
	case tea.KeyLeft, tea.KeyCtrlB:
		if k.Alt {
			e.pos = e.wordLeft()
		} else if e.pos > 0 {
			e.pos--
		}
	case tea.KeyRight, tea.KeyCtrlF:
		if k.Alt {
			e.pos = e.wordRight()
		} else if e.pos < len(e.val) {
			e.pos++
		}
	case tea.KeyCtrlLeft:
		e.pos = e.wordLeft()
	case tea.KeyCtrlRight:
		e.pos = e.wordRight()
	case tea.KeyHome, tea.KeyCtrlA:
		e.pos = 0
	case tea.KeyEnd, tea.KeyCtrlE:
		e.pos = len(e.val)
	case tea.KeyCtrlU:
		e.cut(0, e.pos)
	case tea.KeyCtrlK:
		e.val = e.val[:e.pos]
	}
}
