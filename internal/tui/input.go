package tui

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// onKey handles a key press.
func (m *Model) onKey(k tea.KeyPressMsg) tea.Cmd {
	if k.Keystroke() == "ctrl+c" {
		return m.quit()
	}
	if m.help {
		m.help = false
		return nil
	}
	if m.prompt != promptNone {
		return m.onPromptKey(k)
	}
	m.flash = ""
	ks := m.keys
	switch {
	case key.Matches(k, ks.Quit):
		return m.quit()
	case key.Matches(k, ks.Help):
		m.help = true
	case key.Matches(k, ks.Back):
		if m.zoom {
			m.zoom, m.focusDetail = false, false
		} else {
			m.focusDetail = false
		}
	case key.Matches(k, ks.Filter):
		m.openPrompt(promptFilter, m.query)
	case key.Matches(k, ks.Write), key.Matches(k, ks.WriteOne):
		m.writeOne = key.Matches(k, ks.WriteOne)
		if m.writeCount() == 0 {
			m.setFlash("no event to write", true)
			return nil
		}
		m.openPrompt(promptWrite, m.defaultFileName())
	case key.Matches(k, ks.Copy), key.Matches(k, ks.CopyCursor):
		return m.copySelected(key.Matches(k, ks.CopyCursor))
	case key.Matches(k, ks.Pause):
		return m.togglePause()
	case key.Matches(k, ks.Focus):
		m.focusDetail = !m.focusDetail
	case key.Matches(k, ks.Zoom):
		m.zoom = !m.zoom
		m.focusDetail = m.zoom
	case m.focusDetail || m.zoom:
		m.scrollDetail(k)
	case key.Matches(k, ks.Up):
		m.move(-1)
	case key.Matches(k, ks.Down):
		m.move(1)
	case key.Matches(k, ks.PageUp):
		m.move(-max(m.listHeight()-1, 1))
	case key.Matches(k, ks.PageDown):
		m.move(max(m.listHeight()-1, 1))
	case key.Matches(k, ks.Top):
		return m.toTop()
	case key.Matches(k, ks.Bottom):
		return m.toBottom()
	}
	return nil
}

func (m *Model) quit() tea.Cmd {
	m.cancel()
	return tea.Quit
}

// move moves the selection by d rows. Past the first row it shows the line above the
// events (where older ones load); past the last, the line below.
func (m *Model) move(d int) {
	n := len(m.win.rows)
	prev := m.sel
	switch {
	case n == 0:
		if d < 0 {
			m.off = 0
		}
	case m.sel+d < 0:
		if !m.win.olderDone {
			// Keys pressed faster than pages arrive are not lost: the rest of the move
			// happens when the older page is in.
			m.overshoot = max(m.overshoot+m.sel+d, -10*m.cfg.Keep)
		}
		m.sel, m.off = 0, 0
	case m.sel+d >= n:
		if !m.win.newerDone {
			m.overshoot = min(m.overshoot+m.sel+d-(n-1), 10*m.cfg.Keep)
		}
		m.sel = n - 1
		m.off = m.listLen()
	default:
		m.sel += d
		m.overshoot = 0
	}
	m.follow = m.cfg.Follow && m.win.newerDone && n > 0 && m.sel == n-1
	if m.sel != prev {
		m.detailOff = 0
	}
	m.fixView()
}

// toTop selects the oldest event held; pressed there, it goes to the oldest on the node.
func (m *Model) toTop() tea.Cmd {
	m.follow = false
	if m.sel <= 0 && !m.win.olderDone {
		m.epoch++
		m.loadingOlder, m.loadingNewer, m.loadingReset = false, false, false
		m.pending, m.pendingN = nil, 0
		m.win.reset(m.lower, true, false)
		m.sel, m.off = -1, 0
		return nil
	}
	m.sel, m.off, m.detailOff = 0, 0, 0
	m.fixView()
	return nil
}

// toBottom selects the newest event and, while following, follows the head again.
func (m *Model) toBottom() tea.Cmd {
	m.detailOff = 0
	if m.win.newerDone {
		m.follow = m.cfg.Follow
		m.sel = len(m.win.rows) - 1
		m.off = m.listLen()
		m.fixView()
		return nil
	}
	if m.cfg.Follow {
		m.follow = true
		return m.resetHead(resetSpec{attach: true})
	}
	return m.resetRange(resetSpec{}, true)
}

// togglePause pauses or resumes showing the head.
func (m *Model) togglePause() tea.Cmd {
	if !m.cfg.Follow {
		m.setFlash("a replay shows a fixed range: nothing to pause", false)
		return nil
	}
	if !m.paused {
		m.paused, m.waiting = true, 0
		return nil
	}
	m.paused, m.waiting = false, 0
	if m.win.newerDone {
		for _, f := range m.pending {
			m.win.appendNewer(f.evs, f.gap, f.cursor)
			m.trim()
		}
		m.pending, m.pendingN = nil, 0
		m.fixView()
		return nil
	}
	m.pending, m.pendingN = nil, 0
	if m.follow {
		return m.resetHead(resetSpec{attach: true})
	}
	return nil
}

func (m *Model) scrollDetail(k tea.KeyPressMsg) {
	ks := m.keys
	h := m.detailHeight()
	switch {
	case key.Matches(k, ks.Up):
		m.detailOff--
	case key.Matches(k, ks.Down):
		m.detailOff++
	case key.Matches(k, ks.PageUp):
		m.detailOff -= max(h-1, 1)
	case key.Matches(k, ks.PageDown):
		m.detailOff += max(h-1, 1)
	case key.Matches(k, ks.Top):
		m.detailOff = 0
	case key.Matches(k, ks.Bottom):
		m.detailOff = len(m.detailLines())
	}
	m.detailOff = max(min(m.detailOff, len(m.detailLines())-h), 0)
}

// selected returns the selected row, if any.
func (m *Model) selected() (row, bool) {
	if m.sel < 0 || m.sel >= len(m.win.rows) {
		return row{}, false
	}
	return m.win.rows[m.sel], true
}

func (m *Model) openPrompt(k promptKind, value string) {
	m.prompt = k
	m.promptErr, m.promptErrAt = "", -1
	m.input.SetValue(value)
	m.input.CursorEnd()
	m.input.Focus()
}

// onPromptKey edits the prompt's text; enter submits it, esc closes it.
func (m *Model) onPromptKey(k tea.KeyPressMsg) tea.Cmd {
	switch k.Code {
	case tea.KeyEscape:
		m.prompt, m.applying = promptNone, 0
		m.promptErr, m.promptErrAt = "", -1
		m.input.Blur()
		return nil
	case tea.KeyEnter:
		if m.applying != 0 {
			return nil
		}
		if m.prompt == promptFilter {
			return m.applyFilter()
		}
		return m.writeFile()
	}
	before := m.input.Value()
	m.input.Update(k)
	if m.input.Value() != before {
		m.promptErr, m.promptErrAt = "", -1
	}
	return nil
}

// onPaste takes pasted text (the terminal's bracketed paste) into an open prompt; it is
// no key elsewhere, though it closes the help as any key does.
func (m *Model) onPaste(text string) {
	switch {
	case m.help:
		m.help = false
	case m.prompt != promptNone:
		before := m.input.Value()
		m.input.insert([]rune(text))
		if m.input.Value() != before {
			m.promptErr, m.promptErrAt = "", -1
		}
	default:
		m.flash = ""
	}
}

// writeCount is the number of events writeSet returns.
func (m *Model) writeCount() int {
	if m.writeOne {
		if r, ok := m.selected(); ok && r.ev != nil {
			return 1
		}
		return 0
	}
	return m.loaded()
}

// writeSet is what w (the loaded events) or W (the selected one) writes.
func (m *Model) writeSet() []*event {
	if m.writeOne {
		if r, ok := m.selected(); ok && r.ev != nil {
			return []*event{r.ev}
		}
		return nil
	}
	evs := make([]*event, 0, len(m.win.rows))
	for _, r := range m.win.rows {
		if r.ev != nil {
			evs = append(evs, r.ev)
		}
	}
	return evs
}

func (m *Model) defaultFileName() string {
	what := "events"
	if m.writeOne {
		what = "event"
	}
	return what + "-" + m.now().In(m.cfg.Location).Format("20060102-150405") + ".jsonl"
}

// writeFile writes the events as JSON lines to the file named in the prompt, which must
// not exist yet.
func (m *Model) writeFile() tea.Cmd {
	name := strings.TrimSpace(m.input.Value())
	if name == "" {
		m.promptErr = "give a file name"
		return nil
	}
	path := name
	if !filepath.IsAbs(path) && m.cfg.Dir != "" {
		path = filepath.Join(m.cfg.Dir, path)
	}
	evs := m.writeSet()
	m.prompt = promptNone
	m.input.Blur()
	work := m.work
	return func() tea.Msg {
		if !work.start() {
			return nil
		}
		defer work.finish()
		err := writeJSONLines(path, evs)
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("%s already exists; give another name", name)
		}
		return writtenMsg{path: name, n: len(evs), err: err}
	}
}

// writeJSONLines writes each event's item, as the node sent it, on a line of a new file.
func writeJSONLines(path string, evs []*event) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, ev := range evs {
		line := ev.raw
		if bytes.ContainsAny(line, "\r\n") {
			buf.Reset()
			if err := json.Compact(&buf, line); err == nil {
				line = buf.Bytes()
			}
		}
		if _, err := f.Write(append(line[:len(line):len(line)], '\n')); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// copySelected puts the selected event's CloudEvent, or its cursor, on the clipboard
// with OSC 52, which the terminal carries out.
func (m *Model) copySelected(cursorOnly bool) tea.Cmd {
	r, ok := m.selected()
	if !ok || r.ev == nil {
		m.setFlash("select an event to copy", true)
		return nil
	}
	if m.cfg.Clipboard == nil {
		m.setFlash("no terminal to copy to", true)
		return nil
	}
	text, what := r.ev.cursor, "the cursor"
	if !cursorOnly {
		what = "the event"
		var buf bytes.Buffer
		if err := json.Compact(&buf, r.ev.data); err == nil {
			text = buf.String()
		} else {
			text = string(r.ev.data)
		}
	}
	w, work := m.cfg.Clipboard, m.work
	return func() tea.Msg {
		if !work.start() {
			return nil
		}
		defer work.finish()
		return copiedMsg{what: what, err: osc52(w, text)}
	}
}

// osc52 writes the escape sequence that asks a terminal to set its clipboard.
func osc52(w io.Writer, text string) error {
	_, err := io.WriteString(w, "\x1b]52;c;"+base64.StdEncoding.EncodeToString([]byte(text))+"\x07")
	return err
}
