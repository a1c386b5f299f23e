package tui

import (
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/evtctl/evtctl/internal/wordwrap"
	"github.com/evtctl/evtctl/pkg/client"
)

// detailModel is the detail pane: the selected row shown as indented JSON (or, for a gap
// marker, what was lost), whether it has the keys (focus) or the whole screen (zoom), and
// where it is scrolled. It owns the rule over the pane and the pane's lines.
type detailModel struct {
	c           *common
	focus, zoom bool
	off         int // the first line shown, as scrolled
	pick        int // the list's pick off belongs to: a new one starts at the top
	cache       detailCache
}

// detailCache holds the detail pane's lines for one row at one width.
type detailCache struct {
	r     row
	width int
	cells cells
	lines []string
}

// sync follows the list's selection: a selection placed anew is shown from its top.
func (d *detailModel) sync(pick int) {
	if d.pick != pick {
		d.pick, d.off = pick, 0
	}
}

// keyed reports whether keys other than the UI's own scroll the pane.
func (d *detailModel) keyed() bool { return d.focus || d.zoom }

// back leaves full screen, or gives the keys back to the list.
func (d *detailModel) back() {
	if d.zoom {
		d.zoom, d.focus = false, false
	} else {
		d.focus = false
	}
}

// toggleFocus gives the keys to the pane, or back to the list.
func (d *detailModel) toggleFocus() { d.focus = !d.focus }

// toggleZoom gives the pane the whole screen and the keys, or takes them back.
func (d *detailModel) toggleZoom() {
	d.zoom = !d.zoom
	d.focus = d.zoom
}

// scroll moves the pane, h lines high, showing r, by the list's keys.
func (d *detailModel) scroll(k tea.KeyPressMsg, r row, ok bool, h int) {
	ks := d.c.keys
	h = max(h, 1)
	n := len(d.lines(r, ok))
	switch {
	case key.Matches(k, ks.Up):
		d.off--
	case key.Matches(k, ks.Down):
		d.off++
	case key.Matches(k, ks.PageUp):
		d.off -= max(h-1, 1)
	case key.Matches(k, ks.PageDown):
		d.off += max(h-1, 1)
	case key.Matches(k, ks.Top):
		d.off = 0
	case key.Matches(k, ks.Bottom):
		d.off = n
	}
	d.off = max(min(d.off, n-h), 0)
}

// lines are the detail lines of r (if ok; none else) at the screen's width.
func (d *detailModel) lines(r row, ok bool) []string {
	if !ok {
		return nil
	}
	width := d.c.width
	c := &d.cache
	if c.width == width && c.cells == d.c.cells && c.r == r && c.lines != nil {
		return c.lines
	}
	var jl []jline
	if r.gap != nil {
		text := clean(r.gap.String())
		text = strings.ToUpper(text[:1]) + text[1:] // a sentence of its own here
		for _, line := range wrapWords(d.c.cells, text, width-1) {
			jl = append(jl, jline{spans: []span{{tokText, line}}})
		}
		jl = append(jl, jline{}, jline{spans: []span{{tokText, gapCause(r.gap)}}})
	} else if len(r.ev.data) == 0 {
		jl = []jline{{spans: []span{{tokText, "(no data)"}}}}
	} else {
		jl = formatJSON(r.ev.data)
	}
	*c = detailCache{r: r, width: width, cells: d.c.cells, lines: fitLines(jl, width-1, d.c.st.json, d.c.cells)}
	return c.lines
}

// start is the first line shown in a pane h lines high: the offset, kept in range.
func (d *detailModel) start(n, h int) int {
	return max(min(d.off, n-max(h, 1)), 0)
}

// view draws h lines of the pane showing r. It has no side effects but filling the cache.
func (d *detailModel) view(r row, ok bool, h int) []string {
	lines := d.lines(r, ok)
	off := d.start(len(lines), h)
	out := make([]string, 0, h)
	for i := off; i < len(lines) && len(out) < h; i++ {
		out = append(out, " "+lines[i])
	}
	return out
}

// rule is the line over a pane h lines high showing r: what is selected, and where the
// pane is scrolled.
func (d *detailModel) rule(r row, ok bool, h int) string {
	st, width := &d.c.st, d.c.width
	title := "no event selected"
	if ok {
		if r.gap != nil {
			title = gapTitle(r.gap)
		} else {
			title = clean(r.ev.cursor)
			if !r.ev.time.IsZero() {
				title += " · " + r.ev.time.In(d.c.cfg.Location).Format(time.RFC3339Nano)
			}
		}
	}
	right := ""
	if n := len(d.lines(r, ok)); n > 0 {
		h = max(h, 1)
		off := d.start(n, h)
		right = " " + strconv.Itoa(off+1) + "-" + strconv.Itoa(min(off+h, n)) + "/" + strconv.Itoa(n) + " "
	}
	if d.focus {
		right = " [detail]" + right
	}
	left := "── " + title + " "
	fill := width - d.c.cells.screen(left) - d.c.cells.screen(right) - 2
	if fill < 1 {
		left = d.c.cells.trunc(left, max(width-d.c.cells.screen(right)-3, 4))
		fill = max(width-d.c.cells.screen(left)-d.c.cells.screen(right)-2, 1)
	}
	return st.rule.Render("── ") + st.ruleTitle.Render(strings.TrimPrefix(left, "── ")) +
		st.rule.Render(strings.Repeat("─", fill)) + st.rule.Render(right+"──")
}

// gapTitle names what a gap marker stands for, for the pane's rule.
func gapTitle(g *client.Gap) string {
	switch {
	case g.Kind == client.GapRestarted:
		return "node restarted"
	case g.NotOfLog():
		return "cursor not of this log"
	}
	return "lost events"
}

// gapCause says how such a gap comes about.
func gapCause(g *client.Gap) string {
	switch {
	case g.Kind == client.GapRestarted:
		return "The node's log lives in memory: what it held and had not been read is gone with the restart."
	case g.NotOfLog():
		return "The cursor came from another node, or the node lost its newest events and numbers new ones again."
	}
	return "They aged out, were pruned or were lost to damage before they were read."
}

// wrapWords breaks text into lines at most w cells wide, between words where it can.
func wrapWords(c cells, text string, w int) []string {
	return wordwrap.Lines(text, w, c.width)
}
