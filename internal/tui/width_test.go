package tui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// trickyText is text whose width depends on how it is measured: wide characters, emoji
// sequences, a character made wide by a variation selector, a combining mark.
var trickyText = []string{
	"org.example.v1", "日本語のイベント", "family 👨‍👩‍👧 event", "flag 🇫🇷 here", "heart ❤️ love", "e\u0301vent",
}

// A cell fitted to w columns takes w columns on the screen, whatever its text, by either
// of the renderer's methods: the list cuts and pads text measured the way the screen's
// lines are measured, and the way the renderer places them.
func TestFitMatchesScreenWidth(t *testing.T) {
	for _, c := range []cells{cells(ansi.WcWidth), cells(ansi.GraphemeWidth)} {
		for _, s := range trickyText {
			for _, w := range []int{3, 8, 12, 30} {
				got := c.fit(s, w)
				if n := c.screen(got); n != w {
					t.Errorf("method %d: fit(%q, %d) = %q, %d columns on the screen", c, s, w, got, n)
				}
				if n := ansi.Method(c).StringWidth(got); n != w {
					t.Errorf("method %d: fit(%q, %d) = %q, %d columns for the renderer", c, s, w, got, n)
				}
			}
		}
	}
}

func TestCutLeft(t *testing.T) {
	c := cells(ansi.GraphemeWidth)
	for _, tc := range []struct {
		s    string
		w    int
		want string
	}{
		{"org.openedx.learning.course.enrollment.created.v1", 22, ".enrollment.created.v1"},
		{"abc", 5, "abc"},
		{"abc", 0, ""},
		{"日本語", 5, "本語"},
		{"x👨‍👩‍👧", 2, "👨‍👩‍👧"},
	} {
		if got, n := c.cutLeft(tc.s, tc.w); got != tc.want || n != c.width(got) {
			t.Errorf("cutLeft(%q, %d) = %q, %d; want %q", tc.s, tc.w, got, n, tc.want)
		}
	}
}

// The UI measures as the renderer does: by code point until the terminal reports grapheme
// clustering (mode 2027), then by grapheme cluster. Either way the id column of a row with
// an emoji sequence in its type lines up with the others.
func TestWidthFollowsTheRenderer(t *testing.T) {
	f := newFakeLog()
	f.add(1, "")
	f.add(1, "org.example.❤️.v1")
	m, _ := newTestModel(testConfig(f, newClock()))
	defer m.Close()
	m.Update(pageMsg{gen: m.list.gen, epoch: m.list.epoch, kind: loadReset, reset: resetSpec{startFollow: true, selectLast: true},
		evs: newEvents(f, f.items), page: Page{Newest: f.items[1].Cursor}})
	for _, want := range []ansi.Method{ansi.WcWidth, ansi.GraphemeWidth} {
		if want == ansi.GraphemeWidth {
			m.Update(tea.ModeReportMsg{Mode: ansi.ModeUnicodeCore, Value: ansi.ModeReset})
		}
		if m.c.cells != cells(want) {
			t.Fatalf("measuring with method %d, want %d", m.c.cells, want)
		}
		var cols []int
		for _, l := range strings.Split(m.screen(), "\n") {
			if i := strings.Index(l, " 0000000"); i >= 0 && strings.Contains(l, " 10:00:00.00") {
				cols = append(cols, want.StringWidth(l[:i]))
			}
		}
		if len(cols) != 2 || cols[0] != cols[1] {
			t.Errorf("method %d: the ids start at columns %v", want, cols)
		}
	}
}
