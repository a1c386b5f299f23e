package tui

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/evtctl/evtctl/internal/demo"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/wire"
)

// demoModel is a following UI at width x 30 showing n events of evtctl demo's story:
// OEP-41 types (org.openedx.learning.course.enrollment.created.v1), URL sources and
// course keys as subjects.
func demoModel(t *testing.T, width, n int) *Model {
	t.Helper()
	gen := demo.New(1, func() time.Time { return fakeBase })
	items := make([]client.Item, n)
	for i := range items {
		data := gen.Next()
		items[i] = client.Item{Item: wire.Item{Cursor: fakeCursor(i + 1), Data: data}}
	}
	m, _ := newTestModel(testConfig(newFakeLog(), newClock()))
	t.Cleanup(m.Close)
	m.Update(tea.WindowSizeMsg{Width: width, Height: termH})
	m.Update(pageMsg{gen: m.list.gen, epoch: m.list.epoch, kind: loadReset, reset: resetSpec{startFollow: true, selectLast: true},
		evs: newEvents(newFakeLog(), items), page: Page{Newest: items[n-1].Cursor}})
	return m
}

// listRows are the lines of the screen that are rows of events.
func listRows(screen string) []string {
	var rows []string
	for _, l := range strings.Split(screen, "\n") {
		if strings.HasPrefix(l, "  10:00:00.") || strings.HasPrefix(l, "▶ 10:00:00.") {
			rows = append(rows, l)
		}
	}
	return rows
}

// Long reverse-DNS types share their start: cut from the right every row looks the same
// ("org.openedx.learn…"). The list cuts them from the left, keeping the end that differs;
// subjects too (course keys differ at their end); sources, URLs, lose their scheme before
// they are cut.
func TestColumnsKeepTheInformativeEnd(t *testing.T) {
	typeEnd := regexp.MustCompile(`^(?:  |▶ )10:00:00\.\d{3} (?:org\.openedx\.[a-z.]+|…[a-z.]*)\.v1 `)
	for _, width := range []int{80, 100, 120} {
		m := demoModel(t, width, 40)
		s := m.screen()
		rows := listRows(s)
		if len(rows) < 10 {
			t.Fatalf("width %d: %d rows:\n%s", width, len(rows), s)
		}
		for _, r := range rows {
			if !typeEnd.MatchString(r) {
				t.Errorf("width %d: the type cell does not show the end of the type: %q", width, r)
			}
			if i := strings.Index(r, "https://"); i >= 0 && !regexp.MustCompile(`^https://[a-z]+\.example\.com/events/ `).MatchString(r[i:]) {
				t.Errorf("width %d: a cut source keeps its scheme: %q", width, r)
			}
		}
		for _, want := range []string{"enrollment.created.v1 ", "lms.example.", "_T"} {
			if !strings.Contains(s, want) {
				t.Errorf("width %d: no %q on the screen:\n%s", width, want, s)
			}
		}
		c := m.list.columns()
		if c.typ < c.source || c.typ < c.subject || c.source < 12 || c.subject < 12 {
			t.Errorf("width %d: columns %+v: want the type widest, and room for the others", width, c)
		}
	}
}

func TestTypeText(t *testing.T) {
	cs := cells(ansi.WcWidth)
	for _, tc := range []struct {
		w    int
		want string
	}{
		{60, "org.openedx.learning.course.enrollment.created.v1"},
		{49, "org.openedx.learning.course.enrollment.created.v1"},
		{48, "…openedx.learning.course.enrollment.created.v1"}, // not "…g.openedx"
		{28, "…ourse.enrollment.created.v1"},
		{24, "…enrollment.created.v1"}, // not "…e.enrollment"
		{22, "…enrollment.created.v1"}, // not "….enrollment"
		{1, "…"},
		{0, ""},
	} {
		if got := typeText(&cs, "org.openedx.learning.course.enrollment.created.v1", tc.w); got != tc.want {
			t.Errorf("width %d: %q, want %q", tc.w, got, tc.want)
		}
	}
}

func TestShare(t *testing.T) {
	for _, tc := range []struct {
		want, weight []int
		room         int
		got          []int
	}{
		{[]int{34, 11, 8}, []int{2, 1, 1}, 72, []int{34, 11, 27}},  // all fit: the rest to the last
		{[]int{51, 39, 32}, []int{2, 1, 1}, 54, []int{28, 13, 13}}, // none fits: by weight
		{[]int{51, 9, 32}, []int{2, 1, 1}, 54, []int{30, 9, 15}},   // a narrow column's room goes to the others
		{[]int{34, 9}, []int{2, 1}, 39, []int{30, 9}},
	} {
		if got := share(tc.want, tc.weight, tc.room); !slices.Equal(got, tc.got) {
			t.Errorf("share(%v, %v, %d) = %v, want %v", tc.want, tc.weight, tc.room, got, tc.got)
		}
	}
}
