package tui

import (
	"slices"
	"strings"
)

const (
	timeWidth  = 12 // 15:04:05.000
	idWidth    = 8
	gutter     = 2
	timeLayout = "15:04:05.000"
)

// columns are the widths of the list's columns: type, source and subject share what the
// time and id leave. Each is as wide as its widest value seen if there is room; else the
// room is shared by weight, the type counting twice, the smallest wishes met first (what
// a narrow column does not need goes to the others). Narrow screens drop subject, then
// source.
type columns struct{ typ, source, subject int }

func (l *listModel) columns() columns {
	width := l.c.width
	rest := width - gutter - timeWidth - idWidth - 2
	var want, weight []int
	switch {
	case width >= 72:
		rest -= 2
		want = []int{max(l.colNeed[0], 4) + 2, max(l.colNeed[1], 6) + 2, max(l.colNeed[2], 7)}
		weight = []int{2, 1, 1}
	case width >= 50:
		rest--
		want = []int{max(l.colNeed[0], 4) + 2, max(l.colNeed[1], 6)}
		weight = []int{2, 1}
	default:
		return columns{typ: max(rest, 4)}
	}
	got := share(want, weight, rest)
	c := columns{typ: got[0], source: got[1]}
	if len(got) > 2 {
		c.subject = got[2]
	}
	return c
}

// share divides room among columns that want widths, in proportion to their weights: a
// column whose wish is within its share gets it, and the others share what is left,
// until no wish is within its share; then each gets its share (at least 1), the first
// column what division leaves over. When every wish is met, the room over goes to the
// last column.
func share(want, weight []int, room int) []int {
	got := make([]int, len(want))
	open := make([]int, len(want))
	for i := range open {
		open[i] = i
	}
	left := room
	for len(open) > 0 {
		total := 0
		for _, i := range open {
			total += weight[i]
		}
		var still []int
		for _, i := range open {
			if want[i]*total <= left*weight[i] {
				got[i] = want[i]
			} else {
				still = append(still, i)
			}
		}
		if len(still) == len(open) {
			rest := left
			for _, i := range open {
				got[i] = max(left*weight[i]/total, 1)
				rest -= got[i]
			}
			got[open[0]] += max(rest, 0)
			return got
		}
		for _, i := range open {
			if len(still) == 0 || !slices.Contains(still, i) {
				left -= got[i]
			}
		}
		open = still
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
		text := l.c.cells.trunc(mark+"⚠ "+clean(r.gap.Short()), width)
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
	cs := &l.c.cells
	cells := []struct {
		text  string
		width int
		style func(string) string
	}{
		{cs.fit(tm, timeWidth), timeWidth, st.time.Render},
		{cs.pad(typeText(cs, dash(ev.typ), c.typ), c.typ), c.typ, st.typ.Render},
		{cs.fit(sourceText(cs, dash(ev.source), c.source), c.source), c.source, st.source.Render},
		{cs.pad(cs.truncLeft(dash(ev.subject), c.subject), c.subject), c.subject, st.subject.Render},
		{cs.shortID(dash(ev.id)), idWidth, st.id.Render},
	}
	var b strings.Builder
	b.WriteString(mark)
	for i, cell := range cells {
		if cell.width <= 0 {
			continue
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if sel {
			b.WriteString(cell.text)
		} else {
			b.WriteString(cell.style(cell.text))
		}
	}
	if sel {
		return st.selected.Render(cs.pad(b.String(), width))
	}
	return b.String()
}

// typeText is a type as its cell, w columns wide, shows it: its end, where reverse-DNS
// names differ. A cut that leaves a dot or a scrap of a name (up to three characters)
// first drops those too.
func typeText(cs *cells, s string, w int) string {
	if w <= 1 || cs.width(s) <= w {
		return cs.truncLeft(s, w)
	}
	tail, _ := cs.cutLeft(s, w-1)
	if i := strings.IndexByte(tail, '.'); i >= 0 && i <= 3 && i+1 < len(tail) {
		tail = tail[i+1:]
	}
	return "…" + tail
}

// sourceText is a source as its cell, w columns wide, shows it: a URL too wide for the
// cell without its scheme, which says least.
func sourceText(cs *cells, s string, w int) string {
	if cs.width(s) > w {
		for _, scheme := range []string{"https://", "http://"} {
			if rest, ok := strings.CutPrefix(s, scheme); ok && rest != "" {
				return rest
			}
		}
	}
	return s
}

// shortID is the start of an id, as a short hash is of a commit's.
func (c cells) shortID(id string) string {
	head, _ := c.cut(id, idWidth)
	return head
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
