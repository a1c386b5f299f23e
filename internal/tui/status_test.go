package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// The status bar is one line at any width, however long what it has to say: fields are
// kept in order of usefulness while they fit (the state, a pause, the help key, the query,
// the lag and rate, the newest cursor, the node, the count), a long query is cut, and the
// rest of the screen keeps its lines.
func TestStatusBarOneLine(t *testing.T) {
	long := "type = 'org.openedx.learning.course.enrollment.created.v1' AND data.mode = 'verified' AND data.user.id > 1000"
	for _, width := range []int{40, 64, 80, 100, 120, 160} {
		for _, tc := range []struct {
			name   string
			setup  func(m *Model)
			always []string
		}{
			{"live", func(m *Model) {}, []string{"● LIVE", "? help"}},
			{"paused", func(m *Model) { m.list.paused, m.list.waiting = true, 12345 }, []string{"PAUSED · 12345 new events", "? help"}},
			{"query", func(m *Model) { m.list.query = long }, []string{"query: type = '", "? help"}},
		} {
			m := demoModel(t, width, 40)
			tc.setup(m)
			s := m.screen()
			lines := strings.Split(s, "\n")
			if len(lines) != termH {
				t.Errorf("%s at %d: %d lines, want %d", tc.name, width, len(lines), termH)
			}
			last := lines[len(lines)-1]
			if w := ansi.StringWidth(last); w != width {
				t.Errorf("%s at %d: the status bar is %d columns wide", tc.name, width, w)
			}
			if width < 64 {
				continue // what fits at all
			}
			for _, want := range tc.always {
				if !strings.Contains(last, want) {
					t.Errorf("%s at %d: the status bar lacks %q:\n%s", tc.name, width, want, last)
				}
			}
			if prev := lines[len(lines)-2]; strings.Contains(prev, " │ ") {
				t.Errorf("%s at %d: the status bar takes two lines:\n%s\n%s", tc.name, width, prev, last)
			}
		}
	}
	// Wide enough, it says everything.
	m := demoModel(t, 160, 40)
	last := m.screen()[strings.LastIndex(m.screen(), "\n")+1:]
	for _, want := range []string{"● LIVE", "127.0.0.1:7480", "all events", "newest " + fakeCursor(40), "ev/s", "lag ", "40 loaded", "? help"} {
		if !strings.Contains(last, want) {
			t.Errorf("at 160 the status bar lacks %q:\n%s", want, last)
		}
	}
}

// Every line of the help screen fits 80 columns: a key's description is at most 64.
func TestHelpFitsEightyColumns(t *testing.T) {
	for _, b := range defaultKeys().all() {
		if h := b.Help(); len([]rune(h.Desc)) > 64 {
			t.Errorf("%s: %q is %d columns", h.Key, h.Desc, len([]rune(h.Desc)))
		}
	}
}
