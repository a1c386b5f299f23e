package tui

import (
	"sort"
	"strings"
)

const (
	timeWidth  = 12 // 15:04:05.000
	idWidth    = 8
	gutter     = 2
	timeLayout = "15:04:05.000"
)

// columns are the widths of the list's columns: type, source and subject share what the
// time and id leave, each as wide as its widest value seen if there is room, else fairly
// (what a narrow column does not need goes to the others); narrow screens drop subject,
// then source.
type columns struct{ typ, source, subject int }

func (l *listModel) columns() columns {
	width := l.c.width
	rest := width - gutter - timeWidth - idWidth - 2
	var want []int
	switch {
	case width >= 72:
		rest -= 2
		want = []int{max(l.colNeed[0], 4) + 2, max(l.colNeed[1], 6) + 2, max(l.colNeed[2], 7)}
	case width >= 50:
		rest--
		want = []int{max(l.colNeed[0], 4) + 2, max(l.colNeed[1], 6)}
	default:
		return columns{typ: max(rest, 4)}
	}
	got := fairShare(want, rest)
	c := columns{typ: got[0], source: got[1]}
	if len(got) > 2 {
		c.subject = got[2]
	}
	return c
}

// fairShare divides room among columns that want widths: the smallest wishes are met
// first, each column getting at most an equal share of what is left; any room over goes to
// the last column.
func fairShare(want []int, room int) []int {
	got := make([]int, len(want))
	order := make([]int, len(want))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return want[order[a]] < want[order[b]] })
	left := room
	for k, i := range order {
		share := left / (len(want) - k)
		got[i] = max(min(want[i], share), 1)
		left -= got[i]
	}
	if left > 0 {
		got[len(got)-1] += left
	}
	return got
}

// header is the line over the list, naming its columns.
func (l *listModel) header() string {
	c := l.columns()
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", gutter))
	b.WriteString(l.c.cells.fit("TIME", timeWidth))
	b.WriteString(" " + l.c.cells.fit("TYPE", c.typ))
	if c.source > 0 {
		b.WriteString(" " + l.c.cells.fit("SOURCE", c.source))
	}
	if c.subject > 0 {
		b.WriteString(" " + l.c.cells.fit("SUBJECT", c.subject))
	}
	b.WriteString(" " + l.c.cells.fit("ID", idWidth))
	return l.c.st.header.Render(strings.TrimRight(b.String(), " "))
}

// view draws h lines of the list from line l.off: the line above the events, the events
// and gap markers, and the line below them.
func (l *listModel) view(h int) []string {
	st := &l.c.st
	out := make([]string, 0, h)
	if !l.started && len(l.win.rows) == 0 {
		out = append(out, st.loading.Render("  connecting to "+clean(l.c.src.Node())+"…"))
		return out
	}
	if l.loadingReset && len(l.win.rows) == 0 {
		out = append(out, st.loading.Render("  loading events…"))
		return out
	}
	total := l.listLen()
	for v := l.off; v < total && len(out) < h; v++ {
		switch {
		case v == 0:
			out = append(out, l.topLine())
		case v <= len(l.win.rows):
			out = append(out, l.rowLine(v-1))
		default:
			out = append(out, l.bottomLineText())
		}
	}
	if len(l.win.rows) == 0 && len(out) < h && l.win.newerDone && l.win.olderDone {
		msg := "  no events match"
		if l.c.cfg.Follow {
			msg += "; waiting for new ones"
		}
		out = append(out, st.marker.Render(msg))
	}
	return out
}

func (l *listModel) topLine() string {
	st := &l.c.st
	switch {
	case l.loadingOlder:
		return st.loading.Render("  ↑ loading older events…")
	case !l.win.olderDone:
		return st.marker.Render("  ↑ older events: scroll up to load them")
	case !l.c.cfg.Follow:
		return st.marker.Render("  · start of the range ·")
	}
	return st.marker.Render("  · no older events on the node ·")
}

func (l *listModel) bottomLineText() string {
	st := &l.c.st
	switch {
	case l.loadingNewer || l.loadingReset:
		return st.loading.Render("  ↓ loading newer events…")
	case !l.win.newerDone && l.c.cfg.Follow:
		return st.marker.Render("  ↓ newer events: scroll down to load them, G for the head")
	case !l.win.newerDone:
		return st.marker.Render("  ↓ more events: scroll down to load them")
	}
	return st.marker.Render("  · end of the range ·")
}

func (l *listModel) rowLine(i int) string {
	st := &l.c.st
	width := l.c.width
	r := l.win.rows[i]
	sel := i == l.sel
	mark := "  "
	if sel {
		mark = "▶ "
	}
	if r.gap != nil {
		text := l.c.cells.trunc(mark+"⚠ "+gapText(r.gap.After, r.gap.Oldest), width)
		if sel {
			return st.selected.Render(l.c.cells.pad(text, width))
		}
		return st.gap.Render(text)
	}
	ev := r.ev
	c := l.columns()
	tm := "-"
	if !ev.time.IsZero() {
		tm = ev.time.In(l.c.cfg.Location).Format(timeLayout)
	}
	cells := []struct {
		text  string
		width int
		style func(string) string
	}{
		{tm, timeWidth, st.time.Render},
		{dash(ev.typ), c.typ, st.typ.Render},
		{dash(ev.source), c.source, st.source.Render},
		{dash(ev.subject), c.subject, st.subject.Render},
		{l.c.cells.shortID(dash(ev.id)), idWidth, st.id.Render},
	}
	var b strings.Builder
	if sel {
		b.WriteString(mark)
		for i, cell := range cells {
			if cell.width <= 0 {
				continue
			}
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(l.c.cells.fit(cell.text, cell.width))
		}
		return st.selected.Render(l.c.cells.pad(b.String(), width))
	}
	b.WriteString(mark)
	for i, cell := range cells {
		if cell.width <= 0 {
			continue
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if i == len(cells)-1 {
			b.WriteString(cell.style(l.c.cells.shortID(cell.text)))
		} else {
			b.WriteString(cell.style(l.c.cells.fit(cell.text, cell.width)))
		}
	}
	return b.String()
}

// shortID is the start of an id, as a short hash is of a commit's.
func (c cells) shortID(id string) string {
	head, _ := c.cut(id, idWidth)
	return head
}

func gapText(after, oldest string) string {
	if oldest == "" {
		return "events lost after " + clean(after) + " (the log is empty now)"
	}
	return "events lost between " + clean(after) + " and " + clean(oldest)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
