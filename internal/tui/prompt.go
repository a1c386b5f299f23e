package tui

import (
	"errors"
	"github.com/evtctl/evtctl/internal/english"
	"strings"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/filter"
)

type promptKind uint8

const (
	promptNone promptKind = iota
	promptFilter
	promptWrite
)

// promptModel is the one-line prompt above the status bar: the filter query being edited
// (and tried on the node), or the name of a file to write; and what is wrong with it. It
// owns the prompt's lines of the screen.
type promptModel struct {
	c        *common
	kind     promptKind
	input    lineEdit
	err      string
	errAt    int  // rune offset into the input the error points at; -1 none
	applying int  // the filter edit being tried on the node; 0 none
	edits    int  // filter edits tried so far
	writeOne bool // the write prompt writes the selected event, not every loaded one
}

func newPrompt(c *common) promptModel { return promptModel{c: c, errAt: -1} }

// active reports whether the prompt is open and takes the keys.
func (p *promptModel) active() bool { return p.kind != promptNone }

// open opens the prompt holding value, the cursor at its end.
func (p *promptModel) open(k promptKind, value string) {
	p.kind = k
	p.err, p.errAt = "", -1
	p.input.SetValue(value)
	p.input.CursorEnd()
	p.input.Focus()
}

// openWrite opens the prompt for the name of a file to write the loaded events, or (one)
// the selected event, to.
func (p *promptModel) openWrite(one bool, name string) {
	p.writeOne = one
	p.open(promptWrite, name)
}

// setErr shows what is wrong with the prompt's text.
func (p *promptModel) setErr(text string) { p.err = text }

// done closes the prompt once what it asked for is under way.
func (p *promptModel) done() {
	p.kind = promptNone
	p.input.Blur()
}

// promptAction is what a key did to the prompt.
type promptAction uint8

const (
	promptEdited promptAction = iota
	promptClosed
	promptSubmitted
)

// update edits the prompt's text by a key; enter submits it, esc closes it.
func (p *promptModel) update(k tea.KeyPressMsg) promptAction {
	switch k.Code {
	case tea.KeyEscape:
		p.kind, p.applying = promptNone, 0
		p.err, p.errAt = "", -1
		p.input.Blur()
		return promptClosed
	case tea.KeyEnter:
		if p.applying != 0 {
			return promptEdited
		}
		return promptSubmitted
	}
	before := p.input.Value()
	p.input.Update(k)
	if p.input.Value() != before {
		p.err, p.errAt = "", -1
	}
	return promptEdited
}

// paste inserts pasted text (the terminal's bracketed paste).
func (p *promptModel) paste(text string) {
	before := p.input.Value()
	p.input.insert([]rune(text))
	if p.input.Value() != before {
		p.err, p.errAt = "", -1
	}
}

// submitFilter checks the edited query; when it parses, it becomes a candidate to try on
// the node, numbered.
func (p *promptModel) submitFilter() (q string, candidate int, ok bool) {
	q = p.input.Value()
	if _, err := filter.Compile(q); err != nil {
		var se *filter.SyntaxError
		p.err, p.errAt = err.Error(), -1
		if errors.As(err, &se) {
			p.errAt = utf8.RuneCountInString(q[:min(se.Offset, len(q))])
			p.input.SetCursor(p.errAt)
		}
		return "", 0, false
	}
	p.edits++
	p.applying = p.edits
	p.err, p.errAt = "", -1
	return q, p.applying, true
}

// applied closes the prompt: the node took the query.
func (p *promptModel) applied() {
	p.applying = 0
	p.kind = promptNone
}

// refused shows the node's refusal of query q, pointing at the offset it names.
func (p *promptModel) refused(q string, err error) {
	p.applying = 0
	p.kind = promptFilter
	p.err = "the node refused the query: " + err.Error()
	p.errAt = nodeErrorOffset(q, err)
	if p.errAt >= 0 {
		p.input.SetCursor(p.errAt)
	}
}

// nodeErrorOffset finds the offset in a node's message about a bad query ("offset 11: …"),
// as a rune offset into q; -1 when there is none.
func nodeErrorOffset(q string, err error) int {
	var re *client.RPCError
	if !errors.As(err, &re) {
		return -1
	}
	s := re.Error()
	const key = "offset "
	for i := 0; i+len(key) < len(s); i++ {
		if s[i:i+len(key)] != key {
			continue
		}
		n, j := 0, i+len(key)
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			n = n*10 + int(s[j]-'0')
			j++
		}
		if j > i+len(key) && j < len(s) && s[j] == ':' && n <= len(q) {
			return utf8.RuneCountInString(q[:n])
		}
	}
	return -1
}

// view draws the prompt and its error; writing labels the prompt with the number of
// events a write would write. No lines when the prompt is closed.
func (p *promptModel) view(writing int) []string {
	if p.kind == promptNone {
		return nil
	}
	st, width := &p.c.st, p.c.width
	var out []string
	label := "filter › "
	if p.kind == promptWrite {
		label = "write " + english.Plural(writing, "event") + " to › "
	}
	in, caretCol := p.inputView(width - p.c.cells.screen(label))
	line := st.prompt.Render(label) + in
	if p.applying != 0 {
		line += st.loading.Render("  applying on the node…")
	}
	out = append(out, line)
	if p.err != "" {
		if p.errAt >= 0 && caretCol >= 0 {
			out = append(out, strings.Repeat(" ", p.c.cells.screen(label)+caretCol)+st.caret.Render("^"))
		}
		msg := clean(p.err)
		first, _ := p.c.cells.cut(msg, width)
		out = append(out, st.errText.Render(first))
		if rest := msg[len(first):]; rest != "" {
			out = append(out, st.errText.Render(p.c.cells.trunc(rest, width)))
		}
	}
	return out
}

// inputView draws the prompt's text in w columns with the cursor, scrolled to keep the
// cursor in sight, and returns the column the error offset falls on (-1 if off screen).
func (p *promptModel) inputView(w int) (string, int) {
	st := &p.c.st
	val := []rune(p.input.Value())
	pos := min(p.input.Position(), len(val))
	w = max(w-1, 4)
	start := 0
	if p.c.cells.width(string(val[:pos])) >= w {
		start = pos - w/2
	}
	var b strings.Builder
	col, caret := 0, -1
	for i := start; i <= len(val); i++ {
		if i == p.errAt {
			caret = col
		}
		ch := " "
		if i < len(val) {
			ch = clean(string(val[i]))
		}
		cw := p.c.cells.width(ch)
		if col+cw > w {
			break
		}
		if i == pos && p.input.Focused() && p.applying == 0 {
			b.WriteString(st.cursor.Render(ch))
		} else {
			b.WriteString(ch)
		}
		col += cw
	}
	return b.String(), caret
}
