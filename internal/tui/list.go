package tui

import (
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/evtctl/evtctl/pkg/client"
)

// listModel is the event list: the window of matching events held, the query they match,
// the pages being fetched at either end, pausing, and which row is selected and shown. It
// owns the list's part of the screen (listview.go).
type listModel struct {
	c *common

	// What is asked of the node.
	query        string // the filter query in force
	gen          int    // bumped when a new query takes over
	started      bool   // the node has answered the first request
	lower, upper string // range: events after lower (exclusive; "" the log's start) up to upper (inclusive)
	// madeLower and madeUpper are the start and end made from a time (--since, a time as
	// --from or --to): bounds, not positions in the log; a gap is never measured from one.
	madeLower, madeUpper string
	streamLast           string // the newest event the stream delivered, this generation

	// Paging.
	epoch                                    int // bumped when the window is replaced
	loadingOlder, loadingNewer, loadingReset bool
	overshoot                                int // rows of a move past an end that waits for a page

	// Pausing.
	paused  bool
	pending []followMsg // head batches held while paused
	waiting int         // events received while paused

	// What is shown.
	win      window
	sel, off int  // selected row (-1: none) and first list line shown
	height   int  // lines the layout gives the list, at least 1
	follow   bool // the newest event stays selected as new ones arrive
	colNeed  [3]int
	// pick is bumped whenever the selection is placed anew by a move or a page (not when
	// following selects a new event): the detail pane then starts at its top.
	pick int
}

func newList(c *common) listModel {
	return listModel{c: c, query: c.cfg.Query, gen: 1, epoch: 1, sel: -1, height: 1, win: window{max: c.cfg.Keep, cmp: c.src.Compare}}
}

// setHeight gives the list its lines on the screen.
func (l *listModel) setHeight(h int) { l.height = max(h, 1) }

// current reports whether a page was asked for by this query and window.
func (l *listModel) current(p pageMsg) bool { return p.gen == l.gen && p.epoch == l.epoch }

// streamStarted notes that a new stream follows the head: nothing delivered yet.
func (l *listModel) streamStarted() { l.streamLast = "" }

// onFollow takes a batch of the head, already checked to be of this generation.
func (l *listModel) onFollow(f followMsg) {
	if n := len(f.evs); n > 0 {
		l.streamLast = f.evs[n-1].pos
		if l.paused {
			l.waiting += n
		}
	}
	if !l.win.newerDone {
		return // not attached: these are fetched when scrolled to
	}
	if l.paused {
		l.pending = append(l.pending, f)
		if l.pendingEvents() > l.c.cfg.Keep {
			// Too many to hold: let them go, and fetch them again when wanted.
			l.pending = nil
			l.win.newerDone = false
		}
		return
	}
	l.applyFollow(f)
}

// pendingEvents counts the events held while paused.
func (l *listModel) pendingEvents() int {
	n := 0
	for _, f := range l.pending {
		n += len(f.evs)
	}
	return n
}

// noteWidths widens the columns' wishes for new events.
func (l *listModel) noteWidths(evs []*event) {
	for _, ev := range evs {
		for i, w := range ev.widths {
			l.colNeed[i] = max(l.colNeed[i], w)
		}
	}
}

func (l *listModel) applyFollow(f followMsg) {
	l.noteWidths(f.evs)
	l.win.appendNewer(f.evs, f.gap, f.cursor)
	l.trim()
	l.fixView()
}

// trim evicts rows beyond the window's size from the end farther from the selection.
func (l *listModel) trim() {
	over := len(l.win.rows) - l.win.max
	if over <= 0 {
		return
	}
	if l.follow || l.sel >= len(l.win.rows)/2 {
		k := l.win.evictTop(over)
		l.sel -= k
		l.off -= k
	} else {
		l.win.evictBottom(over)
	}
}

// fixView keeps the selection on a row and in sight.
func (l *listModel) fixView() {
	n := len(l.win.rows)
	switch {
	case n == 0:
		l.sel = -1
	case l.follow:
		l.sel = n - 1
	default:
		l.sel = min(max(l.sel, 0), n-1)
	}
	if l.c.height <= 0 {
		return // no screen yet: nothing to keep in sight
	}
	h := l.height
	total := l.listLen()
	if l.follow {
		l.off = total - h
	} else if l.sel >= 0 {
		if v := l.sel + 1; v < l.off {
			l.off = v
		} else if v >= l.off+h {
			l.off = v - h + 1
		}
	}
	l.off = max(min(l.off, total-h), 0)
}

// listLen counts the list's lines: a line above the events, the events, and a line below
// them unless the window reaches the head.
func (l *listModel) listLen() int {
	n := 1 + len(l.win.rows)
	if l.bottomLine() {
		n++
	}
	return n
}

func (l *listModel) bottomLine() bool {
	return !l.c.cfg.Follow || !l.win.newerDone
}

// ensureLoads asks for older or newer events when the list shows, or nearly shows, an
// end of the window beyond which there are more.
func (l *listModel) ensureLoads() tea.Cmd {
	if !l.started || l.loadingReset {
		return nil
	}
	h := l.height
	cfg := &l.c.cfg
	var cmds []tea.Cmd
	// An empty window fills forward first, so that the selection opens where asked.
	if !l.win.olderDone && !l.loadingOlder && l.off < h && (len(l.win.rows) > 0 || l.win.newerDone) {
		l.loadingOlder = true
		before, through := l.win.olderBounds()
		cmds = append(cmds, l.fetch(loadOlder, PageRequest{Query: l.query, Before: before, Through: through, After: l.lower, Limit: cfg.PageSize, Backward: true}, resetSpec{}, 0))
	}
	// While paused, the newer end stays as it is, however the window got there.
	if !l.win.newerDone && !l.loadingNewer && !l.paused && l.off+2*h >= l.listLen() {
		l.loadingNewer = true
		cmds = append(cmds, l.fetch(loadNewer, PageRequest{Query: l.query, After: l.win.hi, Through: l.through(), Limit: cfg.PageSize}, resetSpec{}, 0))
	}
	return tea.Batch(cmds...)
}

// through is the inclusive end of a range's requests; "" while following.
func (l *listModel) through() string {
	if l.c.cfg.Follow {
		return ""
	}
	return l.upper
}

// fetch asks for a page for this query and window.
func (l *listModel) fetch(kind loadKind, req PageRequest, rs resetSpec, attempt int) tea.Cmd {
	// Nothing is measured from the log's start, nor from a bound made from a time.
	req.NoGap = req.After == "" || req.After == l.madeLower || req.After == l.madeUpper
	return fetch(l.c, l.gen, l.epoch, kind, req, rs, attempt)
}

// openAtHead opens a following list at the head: its newest page, following from there.
func (l *listModel) openAtHead() tea.Cmd {
	l.follow = true
	return l.resetHead(resetSpec{startFollow: true, selectLast: true})
}

// resetHead replaces the window with the newest page of events.
func (l *listModel) resetHead(rs resetSpec) tea.Cmd {
	l.epoch++
	l.loadingReset, l.loadingOlder, l.loadingNewer = true, false, false
	rs.selectLast = true
	return l.fetch(loadReset, PageRequest{Query: l.query, Limit: l.c.cfg.PageSize, Backward: true}, rs, 0)
}

// resetRange replaces the window with a range's first page: its newest events (Reverse,
// or G) or its oldest.
func (l *listModel) resetRange(rs resetSpec, newest bool) tea.Cmd {
	l.epoch++
	l.loadingReset, l.loadingOlder, l.loadingNewer = true, false, false
	req := PageRequest{Query: l.query, After: l.lower, Through: l.through(), Limit: l.c.cfg.PageSize, Backward: newest}
	rs.forward, rs.selectLast = !newest, newest
	return l.fetch(loadReset, req, rs, 0)
}

// tryQuery asks for the first page of a new filter query, edit number candidate; the
// answer decides whether it takes over (takeQuery).
func (l *listModel) tryQuery(q string, candidate int) tea.Cmd {
	cfg := &l.c.cfg
	rs := resetSpec{query: q, candidate: candidate}
	if cfg.Follow {
		req := PageRequest{Query: q, Limit: cfg.PageSize, Backward: true}
		rs.selectLast = true
		return fetch(l.c, l.gen, l.epoch, loadReset, req, rs, 0)
	}
	newest := cfg.Reverse
	req := PageRequest{Query: q, After: l.lower, Through: l.through(), Limit: cfg.PageSize, Backward: newest}
	rs.forward, rs.selectLast = !newest, newest
	return fetch(l.c, l.gen, l.epoch, loadReset, req, rs, 0)
}

// takeQuery makes a new query's first page the window: a new generation, nothing paused.
func (l *listModel) takeQuery(p pageMsg) {
	l.query = p.reset.query
	l.gen++
	l.epoch++
	l.loadingOlder, l.loadingNewer, l.loadingReset = false, false, false
	l.paused, l.waiting = false, 0
	l.colNeed = [3]int{}
	l.noteWidths(p.evs)
	l.follow = p.reset.selectLast && l.c.cfg.Follow
	p.reset.startFollow = l.c.cfg.Follow
	l.placeReset(p)
	l.fixView()
}

// placeFollowing places a following list at its start position (from, "" for the head or
// the log's start), from the log's first answer; following the head starts next.
func (l *listModel) placeFollowing(from string) {
	l.started = true
	if l.c.cfg.From.Cursor == "" {
		l.madeLower = from
	}
	l.win.reset(from, l.c.cfg.FromStart, false)
	if from == "" {
		l.win.olderDone = true // an empty log: everything is yet to come
	}
}

// placeRange places a range from the log's first answer: its head, and the range's ends as
// positions (from and to, "" when open).
func (l *listModel) placeRange(head Page, from, to string) tea.Cmd {
	l.started = true
	cfg := &l.c.cfg
	l.lower = from
	if cfg.From.Cursor == "" {
		l.madeLower = l.lower
	}
	l.upper = head.Newest
	if !cfg.To.IsZero() {
		l.upper = to
		if cfg.To.Cursor == "" {
			l.madeUpper = l.upper
		}
	}
	if l.upper == "" || (l.lower != "" && !l.win.later(l.upper, l.lower)) {
		l.win.reset(l.lower, true, true) // an empty log or range
		return nil
	}
	if cfg.Reverse {
		return l.resetRange(resetSpec{}, true)
	}
	l.win.reset(l.lower, true, false)
	return nil
}

// pageFailed gives up on a page the node refused; it reports whether that leaves the list
// with nothing to show (a page that was to replace the window).
func (l *listModel) pageFailed(kind loadKind) bool {
	switch kind {
	case loadOlder:
		l.loadingOlder, l.win.olderDone = false, true
	case loadNewer:
		l.loadingNewer, l.win.newerDone = false, true
	case loadReset:
		l.loadingReset = false
		return true
	}
	return false
}

// onPage takes a page of this query and window.
func (l *listModel) onPage(p pageMsg) {
	switch p.kind {
	case loadOlder:
		l.loadingOlder = false
		added := l.win.prependOlder(p.evs)
		if l.sel >= 0 {
			l.sel += added
		}
		l.off += added
		if !p.page.More {
			l.win.olderDone = true
		} else if p.page.Next != "" {
			if first := l.win.firstEvent(); first == "" || l.win.later(first, p.page.Next) {
				l.win.lo = p.page.Next // stopped short: the next page starts there
			}
		}
		if l.overshoot < 0 && l.sel >= 0 {
			// What the page does not cover carries over to the next one.
			l.sel += l.overshoot
			l.overshoot = min(l.sel, 0)
			if l.overshoot < 0 {
				l.sel, l.off = 0, 0 // still past the top: show what is there
			}
			if l.win.olderDone {
				l.overshoot = 0
			}
			l.pick++
		}
		l.trim()
	case loadNewer:
		l.loadingNewer = false
		gap := p.page.Gap
		if gap != nil && gap.Kind == client.GapPastNewest {
			l.win.hi = p.page.Newest // not a position in this log: go on from its newest
		}
		through := ""
		if !p.page.More {
			through = p.page.Newest
			if !l.c.cfg.Follow && l.upper != "" && (through == "" || l.win.later(through, l.upper)) {
				through = l.upper
			}
		} else {
			through = p.page.Next // stopped short: examined up to there
		}
		l.win.appendNewer(p.evs, gap, through)
		if !p.page.More && (!l.c.cfg.Follow || l.streamLast == "" || !l.win.later(l.streamLast, l.win.hi)) {
			l.win.newerDone = true
		}
		if l.overshoot > 0 && l.sel >= 0 {
			last := len(l.win.rows) - 1
			l.sel += l.overshoot
			l.overshoot = max(l.sel-last, 0)
			if l.overshoot > 0 {
				l.sel, l.off = last, l.listLen() // still past the bottom: show what is there
			}
			if l.win.newerDone {
				l.overshoot = 0
			}
			l.pick++
		}
		l.trim()
	case loadReset:
		l.loadingReset = false
		l.placeReset(p)
		if p.reset.startFollow {
			l.started = true
		}
	}
	l.fixView()
}

// placeReset makes a loadReset page the window.
func (l *listModel) placeReset(p pageMsg) {
	rs := p.reset
	follow := l.c.cfg.Follow
	if rs.forward {
		l.win.reset(p.req.After, true, false)
		gap := p.page.Gap
		if gap != nil && gap.Kind == client.GapPastNewest {
			l.win.hi = p.page.Newest
		}
		through := ""
		if !p.page.More {
			through = l.upper
		}
		l.win.appendNewer(p.evs, gap, through)
		l.win.newerDone = !p.page.More
	} else {
		l.win.reset("", !p.page.More, false)
		l.win.prependOlder(p.evs)
		hi := p.page.Newest
		if !follow {
			hi = l.upper
		}
		if hi != "" && (l.win.hi == "" || l.win.later(hi, l.win.hi)) {
			l.win.hi = hi
		}
		switch {
		case !follow, rs.startFollow:
			l.win.newerDone = true
		case rs.attach:
			l.win.newerDone = l.streamLast == "" || !l.win.later(l.streamLast, l.win.hi)
		}
		if !follow && l.lower != "" && !p.page.More {
			l.win.olderDone = true
		}
	}
	l.pending = nil
	l.sel, l.off, l.overshoot = -1, 0, 0
	if len(l.win.rows) > 0 {
		if rs.selectLast {
			l.sel = len(l.win.rows) - 1
			l.off = l.listLen()
		} else {
			l.sel = 0
		}
	}
	l.pick++
}

// onKey moves the selection by the list's keys.
func (l *listModel) onKey(k tea.KeyPressMsg) tea.Cmd {
	ks := l.c.keys
	switch {
	case key.Matches(k, ks.Up):
		l.move(-1)
	case key.Matches(k, ks.Down):
		l.move(1)
	case key.Matches(k, ks.PageUp):
		l.move(-max(l.height-1, 1))
	case key.Matches(k, ks.PageDown):
		l.move(max(l.height-1, 1))
	case key.Matches(k, ks.Top):
		l.toTop()
	case key.Matches(k, ks.Bottom):
		return l.toBottom()
	}
	return nil
}

// move moves the selection by d rows. Past the first row it shows the line above the
// events (where older ones load); past the last, the line below.
func (l *listModel) move(d int) {
	n := len(l.win.rows)
	prev := l.sel
	switch {
	case n == 0:
		if d < 0 {
			l.off = 0
		}
	case l.sel+d < 0:
		if !l.win.olderDone {
			// Keys pressed faster than pages arrive are not lost: the rest of the move
			// happens when the older page is in.
			l.overshoot = max(l.overshoot+l.sel+d, -10*l.c.cfg.Keep)
		}
		l.sel, l.off = 0, 0
	case l.sel+d >= n:
		if !l.win.newerDone {
			l.overshoot = min(l.overshoot+l.sel+d-(n-1), 10*l.c.cfg.Keep)
		}
		l.sel = n - 1
		l.off = l.listLen()
	default:
		l.sel += d
		l.overshoot = 0
	}
	l.follow = l.c.cfg.Follow && l.win.newerDone && n > 0 && l.sel == n-1
	if l.sel != prev {
		l.pick++
	}
	l.fixView()
}

// toTop selects the oldest event held; pressed there, it goes to the oldest on the node.
func (l *listModel) toTop() {
	l.follow = false
	if l.sel <= 0 && !l.win.olderDone {
		l.epoch++
		l.loadingOlder, l.loadingNewer, l.loadingReset = false, false, false
		l.pending = nil
		l.win.reset(l.lower, true, false)
		l.sel, l.off = -1, 0
		return
	}
	l.sel, l.off = 0, 0
	l.pick++
	l.fixView()
}

// toBottom selects the newest event and, while following, follows the head again.
func (l *listModel) toBottom() tea.Cmd {
	l.pick++
	if l.win.newerDone {
		l.follow = l.c.cfg.Follow
		l.sel = len(l.win.rows) - 1
		l.off = l.listLen()
		l.fixView()
		return nil
	}
	if l.c.cfg.Follow {
		l.follow = true
		return l.resetHead(resetSpec{attach: true})
	}
	return l.resetRange(resetSpec{}, true)
}

// togglePause pauses or resumes showing the head of a following list.
func (l *listModel) togglePause() tea.Cmd {
	if !l.paused {
		l.paused, l.waiting = true, 0
		return nil
	}
	l.paused, l.waiting = false, 0
	if l.win.newerDone {
		for _, f := range l.pending {
			l.win.appendNewer(f.evs, f.gap, f.cursor)
			l.trim()
		}
		l.pending = nil
		l.fixView()
		return nil
	}
	l.pending = nil
	if l.follow {
		return l.resetHead(resetSpec{attach: true})
	}
	return nil
}

// selected returns the selected row, if any.
func (l *listModel) selected() (row, bool) {
	if l.sel < 0 || l.sel >= len(l.win.rows) {
		return row{}, false
	}
	return l.win.rows[l.sel], true
}

// loaded is the number of events held.
func (l *listModel) loaded() int { return len(l.win.rows) - l.win.gaps }

// writeCount is the number of events writeSet returns.
func (l *listModel) writeCount(one bool) int {
	if one {
		if r, ok := l.selected(); ok && r.ev != nil {
			return 1
		}
		return 0
	}
	return l.loaded()
}

// writeSet is what w (the loaded events) or W (one: the selected event) writes.
func (l *listModel) writeSet(one bool) []*event {
	if one {
		if r, ok := l.selected(); ok && r.ev != nil {
			return []*event{r.ev}
		}
		return nil
	}
	evs := make([]*event, 0, len(l.win.rows))
	for _, r := range l.win.rows {
		if r.ev != nil {
			evs = append(evs, r.ev)
		}
	}
	return evs
}
