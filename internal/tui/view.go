package tui

import (
	"sort"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// layout is how the screen's lines are shared out.
type layout struct {
	bottom       []string // prompt, errors and messages, above the status bar
	status       int      // lines of the status bar
	body         int      // lines between the top and those
	list, detail int      // lines of the list (without its header) and of the detail pane
}

const (
	timeWidth  = 12 // 15:04:05.000
	idWidth    = 8
	gutter     = 2
	minDetail  = 12 // a body shorter than this shows no detail pane
	maxBottom  = 4
	timeLayout = "15:04:05.000"
)

func (m *Model) layout() layout {
	var l layout
	l.bottom = m.bottomLines()
	l.status = m.statusLineCount()
	l.body = max(m.height-l.status-len(l.bottom), 1)
	switch {
	case m.help:
	case m.zoom:
		l.detail = max(l.body-1, 1)
	case l.body >= minDetail:
		l.detail = (l.body - 2) / 2
		l.list = l.body - 2 - l.detail
	default:
		l.list = max(l.body-1, 1)
	}
	return l
}

// listHeight is the number of list lines on screen (at least 1, for the arithmetic of
// scrolling while the list is hidden).
func (m *Model) listHeight() int { return max(m.layout().list, 1) }

func (m *Model) detailHeight() int { return max(m.layout().detail, 1) }

// View draws the screen, full screen (the terminal's alternate screen, without the
// cursor). It has no side effects but filling the detail pane's cache.
func (m *Model) View() tea.View {
	v := tea.NewView(m.screen())
	v.AltScreen = true
	return v
}

// screen is the text of the screen.
func (m *Model) screen() string {
	if m.width <= 0 || m.height <= 0 {
		return ""
	}
	l := m.layout()
	lines := make([]string, 0, m.height)
	switch {
	case m.help:
		lines = append(lines, m.helpLines(l.body)...)
	case m.zoom:
		lines = append(lines, m.rule())
		lines = append(lines, m.detailView(l.detail)...)
	default:
		lines = append(lines, m.header())
		list := m.listView(l.list)
		for len(list) < l.list {
			list = append(list, "")
		}
		lines = append(lines, list...)
		if l.detail > 0 {
			lines = append(lines, m.rule())
			lines = append(lines, m.detailView(l.detail)...)
		}
	}
	for len(lines) < l.body {
		lines = append(lines, "")
	}
	lines = append(lines[:l.body], l.bottom...)
	lines = append(lines, m.statusLines()...)
	for i, s := range lines {
		if screenWidth(s) > m.width {
			lines[i] = ansi.Truncate(s, m.width, "")
		}
	}
	return strings.Join(lines, "\n")
}

// columns are the widths of the list's columns: type, source and subject share what the
// time and id leave, each as wide as its widest value seen if there is room, else fairly
// (what a narrow column does not need goes to the others); narrow screens drop subject,
// then source.
type columns struct{ typ, source, subject int }

func (m *Model) columns() columns {
	rest := m.width - gutter - timeWidth - idWidth - 2
	var want []int
	switch {
	case m.width >= 72:
		rest -= 2
		want = []int{max(m.colNeed[0], 4) + 2, max(m.colNeed[1], 6) + 2, max(m.colNeed[2], 7)}
	case m.width >= 50:
		rest--
		want = []int{max(m.colNeed[0], 4) + 2, max(m.colNeed[1], 6)}
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

func (m *Model) header() string {
	c := m.columns()
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", gutter))
	b.WriteString(fit("TIME", timeWidth))
	b.WriteString(" " + fit("TYPE", c.typ))
	if c.source > 0 {
		b.WriteString(" " + fit("SOURCE", c.source))
	}
	if c.subject > 0 {
		b.WriteString(" " + fit("SUBJECT", c.subject))
	}
	b.WriteString(" " + fit("ID", idWidth))
	return m.st.header.Render(strings.TrimRight(b.String(), " "))
}

// listView draws h lines of the list from line m.off: the line above the events, the
// events and gap markers, and the line below them.
func (m *Model) listView(h int) []string {
	out := make([]string, 0, h)
	if !m.started && len(m.win.rows) == 0 {
		out = append(out, m.st.loading.Render("  connecting to "+clean(m.src.Node())+"…"))
		return out
	}
	if m.loadingReset && len(m.win.rows) == 0 {
		out = append(out, m.st.loading.Render("  loading events…"))
		return out
	}
	total := m.listLen()
	for v := m.off; v < total && len(out) < h; v++ {
		switch {
		case v == 0:
			out = append(out, m.topLine())
		case v <= len(m.win.rows):
			out = append(out, m.rowLine(v-1))
		default:
			out = append(out, m.bottomLineText())
		}
	}
	if len(m.win.rows) == 0 && len(out) < h && m.win.newerDone && m.win.olderDone {
		msg := "  no events match"
		if m.cfg.Follow {
			msg += "; waiting for new ones"
		}
		out = append(out, m.st.marker.Render(msg))
	}
	return out
}

func (m *Model) topLine() string {
	switch {
	case m.loadingOlder:
		return m.st.loading.Render("  ↑ loading older events…")
	case !m.win.olderDone:
		return m.st.marker.Render("  ↑ older events: scroll up to load them")
	case !m.cfg.Follow:
		return m.st.marker.Render("  · start of the range ·")
	}
	return m.st.marker.Render("  · no older events on the node ·")
}

func (m *Model) bottomLineText() string {
	switch {
	case m.loadingNewer || m.loadingReset:
		return m.st.loading.Render("  ↓ loading newer events…")
	case !m.win.newerDone && m.cfg.Follow:
		return m.st.marker.Render("  ↓ newer events: scroll down to load them, G for the head")
	case !m.win.newerDone:
		return m.st.marker.Render("  ↓ more events: scroll down to load them")
	}
	return m.st.marker.Render("  · end of the range ·")
}

func (m *Model) rowLine(i int) string {
	r := m.win.rows[i]
	sel := i == m.sel
	mark := "  "
	if sel {
		mark = "▶ "
	}
	if r.gap != nil {
		text := trunc(mark+"⚠ "+gapText(r.gap.After, r.gap.Oldest), m.width)
		if sel {
			return m.st.selected.Render(padTo(text, m.width))
		}
		return m.st.gap.Render(text)
	}
	ev := r.ev
	c := m.columns()
	tm := "-"
	if !ev.time.IsZero() {
		tm = ev.time.In(m.cfg.Location).Format(timeLayout)
	}
	cells := []struct {
		text  string
		width int
		style func(string) string
	}{
		{tm, timeWidth, m.st.time.Render},
		{dash(ev.typ), c.typ, m.st.typ.Render},
		{dash(ev.source), c.source, m.st.source.Render},
		{dash(ev.subject), c.subject, m.st.subject.Render},
		{shortID(dash(ev.id)), idWidth, m.st.id.Render},
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
			b.WriteString(fit(cell.text, cell.width))
		}
		return m.st.selected.Render(padTo(b.String(), m.width))
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
			b.WriteString(cell.style(shortID(cell.text)))
		} else {
			b.WriteString(cell.style(fit(cell.text, cell.width)))
		}
	}
	return b.String()
}

// shortID is the start of an id, as a short hash is of a commit's.
func shortID(id string) string {
	head, _ := cutWidth(id, idWidth)
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

// trunc cuts s to w columns, ending in "…" when cut.
func trunc(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if textWidth(s) <= w {
		return s
	}
	head, _ := cutWidth(s, w-1)
	return head + "…"
}

// fit is trunc, padded with spaces to exactly w columns.
func fit(s string, w int) string {
	return padTo(trunc(s, w), w)
}

// screenWidth is the number of columns s takes on the screen, s holding text and SGR
// sequences. Most lines are ASCII, which is counted here; anything else is left to
// ansi.StringWidth, which works through grapheme clusters and is several times slower.
func screenWidth(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 0x20 && c < 0x7f:
			n++
		case c == ansi.ESC && i+1 < len(s) && s[i+1] == '[':
			j := i + 2
			for j < len(s) && s[j] >= 0x20 && s[j] < 0x40 { // parameters, intermediates
				j++
			}
			if j == len(s) || s[j] >= 0x7f {
				return ansi.StringWidth(s)
			}
			i = j // the final byte
		default:
			return ansi.StringWidth(s)
		}
	}
	return n
}

func padTo(s string, w int) string {
	if n := screenWidth(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

// rule is the line over the detail pane: what is selected, and where the pane is scrolled.
func (m *Model) rule() string {
	title := "no event selected"
	if r, ok := m.selected(); ok {
		if r.gap != nil {
			title = "lost events"
		} else {
			title = clean(r.ev.cursor)
			if !r.ev.time.IsZero() {
				title += " · " + r.ev.time.In(m.cfg.Location).Format(time.RFC3339Nano)
			}
		}
	}
	right := ""
	if n := len(m.detailLines()); n > 0 {
		h, off := m.detailHeight(), m.detailStart()
		right = " " + strconv.Itoa(off+1) + "-" + strconv.Itoa(min(off+h, n)) + "/" + strconv.Itoa(n) + " "
	}
	if m.focusDetail {
		right = " [detail]" + right
	}
	left := "── " + title + " "
	fill := m.width - screenWidth(left) - screenWidth(right) - 2
	if fill < 1 {
		left = trunc(left, max(m.width-screenWidth(right)-3, 4))
		fill = max(m.width-screenWidth(left)-screenWidth(right)-2, 1)
	}
	return m.st.rule.Render("── ") + m.st.ruleTitle.Render(strings.TrimPrefix(left, "── ")) +
		m.st.rule.Render(strings.Repeat("─", fill)) + m.st.rule.Render(right+"──")
}

// detailCache holds the detail pane's lines for one row at one width.
type detailCache struct {
	r     row
	width int
	lines []string
}

// detailLines are the selected row's detail lines at the screen's width.
func (m *Model) detailLines() []string {
	r, ok := m.selected()
	if !ok {
		return nil
	}
	c := &m.detail
	if c.width == m.width && c.r == r && c.lines != nil {
		return c.lines
	}
	var jl []jline
	if r.gap != nil {
		jl = []jline{
			{spans: []span{{tokText, "Events were lost here: the node no longer holds the events after cursor"}}},
			{indent: 1, spans: []span{{tokString, clean(r.gap.After)}}},
		}
		if r.gap.Oldest != "" {
			jl = append(jl, jline{spans: []span{{tokText, "Its log now starts at"}}},
				jline{indent: 1, spans: []span{{tokString, clean(r.gap.Oldest)}}})
		} else {
			jl = append(jl, jline{spans: []span{{tokText, "and its log is empty now."}}})
		}
		jl = append(jl, jline{spans: []span{{tokText, "They aged out or were pruned before they were read."}}})
	} else if len(r.ev.data) == 0 {
		jl = []jline{{spans: []span{{tokText, "(no data)"}}}}
	} else {
		jl = formatJSON(r.ev.data)
	}
	*c = detailCache{r: r, width: m.width, lines: fitLines(jl, m.width-1, m.st.json)}
	return c.lines
}

// detailStart is the first detail line shown: the pane's offset, kept in range.
func (m *Model) detailStart() int {
	return max(min(m.detailOff, len(m.detailLines())-m.detailHeight()), 0)
}

func (m *Model) detailView(h int) []string {
	lines := m.detailLines()
	off := m.detailStart()
	out := make([]string, 0, h)
	for i := off; i < len(lines) && len(out) < h; i++ {
		out = append(out, " "+lines[i])
	}
	return out
}

// bottomLines are the lines above the status bar: the prompt and its error, a failing
// connection, a message.
func (m *Model) bottomLines() []string {
	var out []string
	switch m.prompt {
	case promptFilter, promptWrite:
		label := "filter › "
		if m.prompt == promptWrite {
			label = "write " + plural(m.writeCount(), "event") + " to › "
		}
		in, caretCol := m.inputView(m.width - screenWidth(label))
		line := m.st.prompt.Render(label) + in
		if m.applying != 0 {
			line += m.st.loading.Render("  applying on the node…")
		}
		out = append(out, line)
		if m.promptErr != "" {
			if m.promptErrAt >= 0 && caretCol >= 0 {
				out = append(out, strings.Repeat(" ", screenWidth(label)+caretCol)+m.st.caret.Render("^"))
			}
			msg := clean(m.promptErr)
			first, _ := cutWidth(msg, m.width)
			out = append(out, m.st.errText.Render(first))
			if rest := msg[len(first):]; rest != "" {
				out = append(out, m.st.errText.Render(trunc(rest, m.width)))
			}
		}
	}
	switch m.conn.kind {
	case connRetrying:
		out = append(out, m.st.errText.Render("retrying: "+clean(m.conn.err.Error())))
	case connFailed:
		out = append(out, m.st.errText.Render("error: "+clean(m.conn.err.Error())))
	}
	if m.flash != "" && m.prompt == promptNone {
		st := m.st.msg
		if m.flashBad {
			st = m.st.errText
		}
		out = append(out, st.Render(clean(m.flash)))
	}
	if len(out) > maxBottom {
		out = out[:maxBottom]
	}
	return out
}

// inputView draws the prompt's text in w columns with the cursor, scrolled to keep the
// cursor in sight, and returns the column the error offset falls on (-1 if off screen).
func (m *Model) inputView(w int) (string, int) {
	val := []rune(m.input.Value())
	pos := min(m.input.Position(), len(val))
	w = max(w-1, 4)
	start := 0
	if textWidth(string(val[:pos])) >= w {
		start = pos - w/2
	}
	var b strings.Builder
	col, caret := 0, -1
	for i := start; i <= len(val); i++ {
		if i == m.promptErrAt {
			caret = col
		}
		ch := " "
		if i < len(val) {
			ch = clean(string(val[i]))
		}
		cw := textWidth(ch)
		if col+cw > w {
			break
		}
		if i == pos && m.input.Focused() && m.applying == 0 {
			b.WriteString(m.st.cursor.Render(ch))
		} else {
			b.WriteString(ch)
		}
		col += cw
	}
	return b.String(), caret
}

// statusText is the status bar's text before it is styled and fitted.
type statusText struct {
	state string
	style paint // of state
	pause string
	line  string // node, query and facts on one line
	parts [2]string
}

func (m *Model) statusText() statusText {
	now := m.now()
	st := statusText{style: m.st.statusLive}
	switch m.conn.kind {
	case connConnecting:
		st.state, st.style = " ○ CONNECTING ", m.st.statusWarn
	case connRetrying:
		left := m.conn.retryAt.Sub(now)
		st.state = " ⟳ RECONNECTING"
		if left > 0 {
			st.state += " in " + strconv.Itoa(int((left+time.Second-1)/time.Second)) + "s"
		} else {
			st.state += "…"
		}
		st.state += " (attempt " + strconv.Itoa(m.conn.attempt) + ") "
		st.style = m.st.statusWarn
	case connFailed:
		st.state, st.style = " ✖ FAILED ", m.st.statusBad
	default:
		st.state = " ● LIVE "
		if !m.cfg.Follow {
			st.state = " ● REPLAY "
		}
	}
	if m.paused {
		st.pause = " ❚❚ PAUSED · " + plural(m.waiting, "new event") + " "
	}
	node := strings.TrimPrefix(strings.TrimPrefix(clean(m.src.Node()), "http://"), "https://")
	query := "all events"
	if m.query != "" {
		query = "query: " + clean(m.query)
	}
	var facts []string
	if m.cfg.Follow {
		newest := "-"
		if m.newest != "" {
			newest = clean(m.newest)
		}
		facts = append(facts, "newest "+newest, strconv.Itoa(int(m.rate.rate(now)+0.5))+" ev/s", "lag "+m.lag())
	} else {
		facts = append(facts, "range "+dash(clean(m.lower))+" … "+dash(clean(m.upper)))
	}
	facts = append(facts, strconv.Itoa(m.loaded())+" loaded", "? help")
	all := strings.Join(facts, " │ ")
	st.line = " " + node + " │ " + query + " │ " + all + " "
	st.parts = [2]string{" " + node + " │ " + query + " ", " " + all + " "}
	return st
}

// oneLine reports whether the status bar fits on one line.
func (st *statusText) oneLine(width int) bool {
	return textWidth(st.state)+textWidth(st.pause)+textWidth(st.line) <= width
}

func (m *Model) statusLineCount() int {
	if st := m.statusText(); st.oneLine(m.width) {
		return 1
	}
	return 2
}

// statusLines are the bar at the bottom: the connection, pause, node, query, newest
// cursor, rate and lag. It takes one line when that is wide enough, else two.
func (m *Model) statusLines() []string {
	st := m.statusText()
	head := st.style.Render(st.state)
	if st.pause != "" {
		head += m.st.statusPaused.Render(st.pause)
	}
	bar := func(left string, leftWidth int, text string) string {
		room := m.width - leftWidth
		return left + m.st.status.Render(padTo(trunc(text, room), room))
	}
	hw := textWidth(st.state) + textWidth(st.pause)
	if st.oneLine(m.width) {
		return []string{bar(head, hw, st.line)}
	}
	return []string{bar(head, hw, st.parts[0]), bar("", 0, st.parts[1])}
}

// loaded is the number of events held.
func (m *Model) loaded() int { return len(m.win.rows) - m.win.gaps }

// lag is how far the stream is behind the node's head, as time between their cursors.
func (m *Model) lag() string {
	if m.conn.kind != connLive {
		return "-"
	}
	if m.caughtUp || m.streamCursor == "" || m.headNewest == "" {
		if m.caughtUp {
			return "0s"
		}
		return "-"
	}
	s, err1 := cursor.Parse(m.streamCursor)
	h, err2 := cursor.Parse(m.headNewest)
	if err1 != nil || err2 != nil || !h.After(s) {
		return "0s"
	}
	return time.Duration(h.TS - s.TS).Round(100 * time.Millisecond).String()
}

// helpLines list every key.
func (m *Model) helpLines(h int) []string {
	out := []string{m.st.helpTitle.Render("Keys"), ""}
	for _, b := range m.keys.all() {
		hp := b.Help()
		out = append(out, "  "+m.st.helpKey.Render(fit(hp.Key, 13))+" "+m.st.helpDesc.Render(hp.Desc))
	}
	out = append(out, "",
		"  The list follows the head while its newest event is selected; moving up stops that,",
		"  and end or G starts it again. A ⚠ row marks events the node lost before they were read.")
	if len(out) > h {
		out = out[:h]
	}
	return out
}
