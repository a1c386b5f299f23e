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

// onKey handles a key press: the UI's own keys here, the rest routed to the child that
// has the keys (the help screen, the prompt, the detail pane, or the list).
func (m *Model) onKey(k tea.KeyPressMsg) tea.Cmd {
	if k.Keystroke() == "ctrl+c" {
		return m.quit()
	}
	if m.help.open {
		if m.help.onKey(k, m.layout().body) {
			return m.quit()
		}
		return nil
	}
	if m.prompt.active() {
		return m.onPromptKey(k)
	}
	m.conn.clearFlash()
	m.relayout() // without the message, the list may have grown
	ks := m.c.keys
	switch {
	case key.Matches(k, ks.Quit):
		return m.quit()
	case key.Matches(k, ks.Help):
		m.help.show()
	case key.Matches(k, ks.Back):
		m.detail.back()
	case key.Matches(k, ks.Filter):
		m.prompt.open(promptFilter, m.list.query)
	case key.Matches(k, ks.Write), key.Matches(k, ks.WriteOne):
		one := key.Matches(k, ks.WriteOne)
		if m.list.writeCount(one) == 0 {
			m.conn.setFlash("no event to write", true)
			return nil
		}
		m.prompt.openWrite(one, m.defaultFileName(one))
	case key.Matches(k, ks.Copy), key.Matches(k, ks.CopyCursor):
		return m.copySelected(key.Matches(k, ks.CopyCursor))
	case key.Matches(k, ks.Pause):
		return m.togglePause()
	case key.Matches(k, ks.Focus):
		m.detail.toggleFocus()
	case key.Matches(k, ks.Zoom):
		m.detail.toggleZoom()
	case m.detail.keyed():
		r, ok := m.list.selected()
		m.detail.scroll(k, r, ok, m.detailHeight())
	default:
		return m.list.onKey(k)
	}
	return nil
}

func (m *Model) quit() tea.Cmd {
	m.c.cancel()
	return tea.Quit
}

// togglePause pauses or resumes showing the head.
func (m *Model) togglePause() tea.Cmd {
	if !m.c.cfg.Follow {
		m.conn.setFlash("a replay shows a fixed range: nothing to pause", false)
		return nil
	}
	return m.list.togglePause()
}

// onPromptKey gives a key to the prompt, and does what it submits.
func (m *Model) onPromptKey(k tea.KeyPressMsg) tea.Cmd {
	if m.prompt.update(k) != promptSubmitted {
		return nil
	}
	if m.prompt.kind == promptFilter {
		return m.applyFilter()
	}
	return m.writeFile()
}

// onPaste takes pasted text (the terminal's bracketed paste) into an open prompt; it is
// no key elsewhere, though it closes the help as any key does.
func (m *Model) onPaste(text string) {
	switch {
	case m.help.open:
		m.help.close()
	case m.prompt.active():
		m.prompt.paste(text)
	default:
		m.conn.clearFlash()
	}
}

// writeCount is the number of events the write prompt writes.
func (m *Model) writeCount() int { return m.list.writeCount(m.prompt.writeOne) }

// defaultFileName is the name the write prompt offers, for the loaded events or (one)
// the selected event.
func (m *Model) defaultFileName(one bool) string {
	what := "events"
	if one {
		what = "event"
	}
	return what + "-" + m.c.now().In(m.c.cfg.Location).Format("20060102-150405") + ".jsonl"
}

// writeFile writes the events as JSON lines to the file named in the prompt, which must
// not exist yet.
func (m *Model) writeFile() tea.Cmd {
	name := strings.TrimSpace(m.prompt.input.Value())
	if name == "" {
		m.prompt.setErr("give a file name")
		return nil
	}
	path := name
	if !filepath.IsAbs(path) && m.c.cfg.Dir != "" {
		path = filepath.Join(m.c.cfg.Dir, path)
	}
	evs := m.list.writeSet(m.prompt.writeOne)
	m.prompt.done()
	work := m.c.work
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
	r, ok := m.list.selected()
	if !ok || r.ev == nil {
		m.conn.setFlash("select an event to copy", true)
		return nil
	}
	if m.c.cfg.Clipboard == nil {
		m.conn.setFlash("no terminal to copy to", true)
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
	w, work := m.c.cfg.Clipboard, m.c.work
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
