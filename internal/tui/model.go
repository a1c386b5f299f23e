// Package tui is evtctl's interactive terminal UI, built with Bubble Tea: a live list of
// events that follows a node's head and pages back through its history on demand, a
// detail pane, a filter editor and a status bar.
package tui

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/filter"
	"github.com/evtctl/evtctl/pkg/retry"
)

// Config says what the UI shows and how. Source is required; the rest has defaults.
type Config struct {
	Source Source
	Query  string // the filter query in force at the start; "" matches everything

	// Follow follows the node's head (tail). Without it the UI shows the fixed range
	// From..To (replay).
	Follow bool
	// Where the list opens. Following: at the head, unless From (exclusive) or FromStart
	// says otherwise. A range: From (exclusive; zero: the log's oldest event) up to To
	// (inclusive; zero: the head when the UI starts), at its oldest end unless Reverse.
	From      client.Position
	FromStart bool
	To        client.Position
	Reverse   bool

	Keep     int            // events held in memory; default 5000
	PageSize int            // events per page of history; default 200, at most Keep/2
	Backoff  client.Backoff // retries of page requests: delays, and when to give up

	// ProbeEvery is how often, while following, the node is asked for its head (for the
	// lag, and to see a connection come back); default 2s, < 0 never.
	ProbeEvery time.Duration
	// FrameInterval is the least time between two updates from the stream, which caps
	// redraws however fast events arrive; default 1/30 s.
	FrameInterval time.Duration

	NoColor   bool             // draw without colours or other attributes (NO_COLOR)
	Clipboard io.Writer        // the terminal, for OSC 52; nil: copying is unavailable
	Dir       string           // where w writes files; "" the working directory
	Now       func() time.Time // the clock; default time.Now
	Location  *time.Location   // times are shown in it; default time.Local
}

// Defaults of Config.
const (
	DefaultKeep     = 5000
	DefaultPageSize = 200
)

// loadKind is what a page request is for.
type loadKind uint8

const (
	loadOlder loadKind = iota // older events, before the window
	loadNewer                 // newer events, after the window
	loadReset                 // a page that replaces the window
)

// resetSpec says how a loadReset page becomes the window.
type resetSpec struct {
	forward     bool   // the page is the oldest events after After, not the newest before Before
	startFollow bool   // start following the head after the page's newest item (a new query)
	attach      bool   // following is running: the window is attached when it reaches what was streamed
	selectLast  bool   // select the newest event, else the oldest
	query       string // with candidate: the query the page was asked with
	candidate   int    // the filter edit whose query the page tries; 0 none
}

// Messages. Background work reports with these; each carries the generation (query) and,
// for the window, the epoch it was asked for, so that late answers are dropped.
type (
	pageMsg struct {
		gen, epoch int
		kind       loadKind
		req        PageRequest
		reset      resetSpec
		evs        []*event
		page       Page
		err        error
		attempt    int
	}
	probeMsg struct {
		startup bool
		page    Page
		err     error
		attempt int
	}
	refetchMsg struct{ msg tea.Msg }
	feedMsg    []any
	followMsg  struct {
		gen      int
		gap      *client.Gap
		evs      []*event
		cursor   string
		caughtUp bool
	}
	followRetryMsg struct {
		gen     int
		err     error
		attempt int
		delay   time.Duration
	}
	followEndMsg struct {
		gen int
		err error
	}
	tickMsg    struct{}
	writtenMsg struct {
		path string
		n    int
		err  error
	}
	copiedMsg struct {
		what string
		err  error
	}
)

// connKind is the state of the connection to the node.
type connKind uint8

const (
	connConnecting connKind = iota
	connLive
	connRetrying
	connFailed
)

type connState struct {
	kind    connKind
	err     error
	attempt int
	retryAt time.Time
}

type promptKind uint8

const (
	promptNone promptKind = iota
	promptFilter
	promptWrite
)

// Model is the UI's state. Use New; it implements tea.Model with pointer receivers.
type Model struct {
	cfg  Config
	src  Source
	keys keyMap
	st   styles
	now  func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	work   *tracker
	feed   chan any // from background work: batches of the head, retries, the end
	pace   *pacer

	width, height int

	query      string
	gen        int // bumped when a new query takes over
	epoch      int // bumped when the window is replaced
	stopFollow context.CancelFunc
	started    bool   // the node has answered the first request
	lower      string // range: events after this cursor (exclusive); "" the log's start
	upper      string // range: events up to this cursor (inclusive)

	win                                      window
	sel, off                                 int // selected row (-1: none) and first list line shown
	follow                                   bool
	paused                                   bool
	pending                                  []followMsg // head batches held while paused
	pendingN, waiting                        int         // events in pending; received while paused
	loadingOlder, loadingNewer, loadingReset bool
	overshoot                                int // rows of a move past an end that waits for a page

	streamLast   string // newest event the stream delivered, this generation
	streamCursor string // where the stream resumes
	caughtUp     bool
	headNewest   string // the node's newest item, from the latest answer
	newest       string // the newest event seen
	rate         rateMeter
	lastProbe    time.Time
	conn         connState
	failingSince time.Time // when requests began to fail, for Backoff.GiveUp
	fatal        error

	colNeed [3]int // the widest type, source and subject seen: what the columns would like

	focusDetail, zoom, help bool
	detailOff               int
	detail                  detailCache

	prompt      promptKind
	input       lineEdit
	promptErr   string
	promptErrAt int // rune offset into the input the error points at; -1 none
	applying    int // the filter edit being tried on the node; 0 none
	edits       int
	writeOne    bool

	flash    string
	flashBad bool
}

// New returns the UI's model. Run it with a tea.Program; call Close when it has ended.
func New(cfg Config) *Model {
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultKeep
	}
	cfg.Keep = max(cfg.Keep, 20)
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	cfg.PageSize = min(cfg.PageSize, cfg.Keep/2)
	if cfg.ProbeEvery == 0 {
		cfg.ProbeEvery = 2 * time.Second
	}
	if cfg.FrameInterval <= 0 {
		cfg.FrameInterval = time.Second / 30
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Model{
		cfg: cfg, src: cfg.Source, keys: defaultKeys(), st: newStyles(!cfg.NoColor), now: cfg.Now,
		ctx: ctx, cancel: cancel, work: &tracker{}, feed: make(chan any, 256),
		pace:  &pacer{interval: cfg.FrameInterval},
		query: cfg.Query, gen: 1, epoch: 1, sel: -1, promptErrAt: -1,
		win: window{max: cfg.Keep},
	}
	return m
}

// Close stops the UI's background work and waits for it to end.
func (m *Model) Close() {
	m.cancel()
	m.work.close()
}

// Err is the failure that stopped the UI's connection for good, if any: a refused token,
// a query the node rejects.
func (m *Model) Err() error { return m.fatal }

func (m *Model) positioned() bool {
	return !m.cfg.Follow || m.cfg.FromStart || !m.cfg.From.IsZero()
}

// Init starts the first request, the stream's reader and the clock.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.listen(), tick()}
	if m.positioned() {
		cmds = append(cmds, m.probe(true, 0))
	} else {
		cmds = append(cmds, m.resetHead(resetSpec{startFollow: true, selectLast: true}))
		m.follow = true
	}
	return tea.Batch(cmds...)
}

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return tickMsg{} })
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmds []tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.fixView()
	case tea.KeyPressMsg:
		cmds = append(cmds, m.onKey(msg))
	case tea.PasteMsg:
		m.onPaste(msg.Content)
	case feedMsg:
		for _, x := range msg {
			m.onFeed(x)
		}
		cmds = append(cmds, m.listen())
	case pageMsg:
		cmds = append(cmds, m.onPage(msg))
	case probeMsg:
		cmds = append(cmds, m.onProbe(msg))
	case refetchMsg:
		cmds = append(cmds, m.refetch(msg.msg))
	case tickMsg:
		cmds = append(cmds, tick())
		now := m.now()
		// While the stream retries, ask each second once its next attempt is due: an
		// answer shows the node is back while that attempt waits on the head.
		due := now.Sub(m.lastProbe) >= m.cfg.ProbeEvery || (m.conn.kind == connRetrying && !now.Before(m.conn.retryAt))
		if m.cfg.Follow && m.started && m.cfg.ProbeEvery > 0 && due {
			m.lastProbe = now
			cmds = append(cmds, m.probe(false, 0))
		}
	case writtenMsg:
		if msg.err != nil {
			// Open the prompt again, to fix the name.
			m.openPrompt(promptWrite, msg.path)
			m.promptErr = "write failed: " + msg.err.Error()
		} else {
			m.setFlash("wrote "+plural(msg.n, "event")+" to "+msg.path, false)
		}
	case copiedMsg:
		if msg.err != nil {
			m.setFlash("copy failed: "+msg.err.Error(), true)
		} else {
			m.setFlash("copied "+msg.what+" to the clipboard (OSC 52)", false)
		}
	}
	m.fixView() // the layout may have changed: a prompt, a message, the size
	cmds = append(cmds, m.ensureLoads())
	return m, tea.Batch(cmds...)
}

func (m *Model) onFeed(x any) {
	switch f := x.(type) {
	case followMsg:
		m.onFollow(f)
	case followRetryMsg:
		if f.gen == m.gen {
			m.conn = connState{kind: connRetrying, err: f.err, attempt: f.attempt, retryAt: m.now().Add(f.delay)}
		}
	case followEndMsg:
		if f.gen == m.gen && f.err != nil && !errors.Is(f.err, context.Canceled) {
			m.conn = connState{kind: connFailed, err: f.err}
			m.fatal = f.err
		}
	}
}

// onFollow takes a batch of the head.
func (m *Model) onFollow(f followMsg) {
	if f.gen != m.gen {
		return
	}
	m.setLive()
	m.streamCursor, m.caughtUp = f.cursor, f.caughtUp
	if n := len(f.evs); n > 0 {
		last := f.evs[n-1].cursor
		m.streamLast = last
		m.noteNewest(last)
		m.rate.add(m.now(), n)
		if m.paused {
			m.waiting += n
		}
	}
	if !m.win.newerDone {
		return // not attached: these are fetched when scrolled to
	}
	if m.paused {
		m.pending = append(m.pending, f)
		m.pendingN += len(f.evs)
		if m.pendingN > m.cfg.Keep {
			// Too many to hold: let them go, and fetch them again when wanted.
			m.pending, m.pendingN = nil, 0
			m.win.newerDone = false
		}
		return
	}
	m.applyFollow(f)
}

// noteWidths widens the columns' wishes for new events.
func (m *Model) noteWidths(evs []*event) {
	for _, ev := range evs {
		for i, w := range ev.widths {
			m.colNeed[i] = max(m.colNeed[i], w)
		}
	}
}

func (m *Model) applyFollow(f followMsg) {
	m.noteWidths(f.evs)
	m.win.appendNewer(f.evs, f.gap, f.cursor)
	m.trim()
	m.fixView()
}

func (m *Model) noteNewest(c string) {
	if c != "" && (m.newest == "" || later(c, m.newest)) {
		m.newest = c
	}
}

// trim evicts rows beyond the window's size from the end farther from the selection.
func (m *Model) trim() {
	over := len(m.win.rows) - m.win.max
	if over <= 0 {
		return
	}
	if m.follow || m.sel >= len(m.win.rows)/2 {
		k := m.win.evictTop(over)
		m.sel -= k
		m.off -= k
	} else {
		m.win.evictBottom(over)
	}
}

// fixView keeps the selection on a row and in sight.
func (m *Model) fixView() {
	n := len(m.win.rows)
	switch {
	case n == 0:
		m.sel = -1
	case m.follow:
		m.sel = n - 1
	default:
		m.sel = min(max(m.sel, 0), n-1)
	}
	if m.height <= 0 {
		return // no screen yet: nothing to keep in sight
	}
	l := m.listHeight()
	total := m.listLen()
	if m.follow {
		m.off = total - l
	} else if m.sel >= 0 {
		if v := m.sel + 1; v < m.off {
			m.off = v
		} else if v >= m.off+l {
			m.off = v - l + 1
		}
	}
	m.off = max(min(m.off, total-l), 0)
}

// listLen counts the list's lines: a line above the events, the events, and a line below
// them unless the window reaches the head.
func (m *Model) listLen() int {
	n := 1 + len(m.win.rows)
	if m.bottomLine() {
		n++
	}
	return n
}

func (m *Model) bottomLine() bool {
	return !m.cfg.Follow || !m.win.newerDone
}

// ensureLoads asks for older or newer events when the list shows, or nearly shows, an
// end of the window beyond which there are more.
func (m *Model) ensureLoads() tea.Cmd {
	if !m.started || m.loadingReset || m.fatal != nil {
		return nil
	}
	l := max(m.listHeight(), 1)
	var cmds []tea.Cmd
	// An empty window fills forward first, so that the selection opens where asked.
	if !m.win.olderDone && !m.loadingOlder && m.off < l && (len(m.win.rows) > 0 || m.win.newerDone) {
		m.loadingOlder = true
		before, through := m.win.olderBounds()
		cmds = append(cmds, m.fetch(loadOlder, PageRequest{Query: m.query, Before: before, Through: through, After: m.lower, Limit: m.cfg.PageSize, Backward: true}, resetSpec{}, 0))
	}
	// While paused, the newer end stays as it is, however the window got there.
	if !m.win.newerDone && !m.loadingNewer && !m.paused && m.off+2*l >= m.listLen() {
		m.loadingNewer = true
		cmds = append(cmds, m.fetch(loadNewer, PageRequest{Query: m.query, After: m.win.hi, Through: m.through(), Limit: m.cfg.PageSize}, resetSpec{}, 0))
	}
	return tea.Batch(cmds...)
}

// through is the inclusive end of a range's requests; "" while following.
func (m *Model) through() string {
	if m.cfg.Follow {
		return ""
	}
	return m.upper
}

// fetch asks for a page in the background.
func (m *Model) fetch(kind loadKind, req PageRequest, rs resetSpec, attempt int) tea.Cmd {
	gen, epoch, src, ctx, work := m.gen, m.epoch, m.src, m.ctx, m.work
	return func() tea.Msg {
		if !work.start() {
			return nil
		}
		defer work.finish()
		p, err := src.Page(ctx, req)
		msg := pageMsg{gen: gen, epoch: epoch, kind: kind, req: req, reset: rs, page: p, err: err, attempt: attempt}
		if err == nil {
			msg.evs = newEvents(p.Items)
			msg.page.Items = nil
		}
		return msg
	}
}

// probe asks for the node's head: its newest and oldest items.
func (m *Model) probe(startup bool, attempt int) tea.Cmd {
	src, ctx, work := m.src, m.ctx, m.work
	return func() tea.Msg {
		if !work.start() {
			return nil
		}
		defer work.finish()
		p, err := src.Page(ctx, PageRequest{Limit: 1, Backward: true})
		p.Items = nil
		return probeMsg{startup: startup, page: p, err: err, attempt: attempt}
	}
}

// resetHead replaces the window with the newest page of events.
func (m *Model) resetHead(rs resetSpec) tea.Cmd {
	m.epoch++
	m.loadingReset, m.loadingOlder, m.loadingNewer = true, false, false
	rs.selectLast = true
	return m.fetch(loadReset, PageRequest{Query: m.query, Limit: m.cfg.PageSize, Backward: true}, rs, 0)
}

// resetRange replaces the window with a range's first page: its newest events (Reverse,
// or G) or its oldest.
func (m *Model) resetRange(rs resetSpec, newest bool) tea.Cmd {
	m.epoch++
	m.loadingReset, m.loadingOlder, m.loadingNewer = true, false, false
	req := PageRequest{Query: m.query, After: m.lower, Through: m.through(), Limit: m.cfg.PageSize, Backward: newest}
	rs.forward, rs.selectLast = !newest, newest
	return m.fetch(loadReset, req, rs, 0)
}

// retryDelay decides whether to try a failed request again, and when.
func (m *Model) retryDelay(err error, attempt int) (time.Duration, bool) {
	if !client.Retryable(err) {
		return 0, false
	}
	b := m.cfg.Backoff
	initial, maxd := b.Initial, b.Max
	if initial <= 0 {
		initial = 200 * time.Millisecond
	}
	if maxd <= 0 {
		maxd = 15 * time.Second
	}
	d := retry.Delay(attempt, initial, maxd)
	var he *client.HTTPError
	if errors.As(err, &he) && he.RetryAfter > d {
		d = he.RetryAfter // the node asked for longer
	}
	return d, true
}

// setLive records an answer from the node.
func (m *Model) setLive() {
	m.conn, m.failingSince = connState{kind: connLive}, time.Time{}
}

func (m *Model) scheduleRetry(msg tea.Msg, err error, attempt int) (tea.Cmd, bool) {
	d, ok := m.retryDelay(err, attempt)
	if !ok {
		return nil, false
	}
	now := m.now()
	if m.failingSince.IsZero() {
		m.failingSince = now
	}
	if g := m.cfg.Backoff.GiveUp; g > 0 && now.Sub(m.failingSince)+d > g {
		return nil, false
	}
	m.conn = connState{kind: connRetrying, err: err, attempt: attempt + 1, retryAt: m.now().Add(d)}
	return tea.Tick(d, func(time.Time) tea.Msg { return refetchMsg{msg} }), true
}

func (m *Model) refetch(msg tea.Msg) tea.Cmd {
	switch p := msg.(type) {
	case pageMsg:
		if p.gen != m.gen || (p.epoch != m.epoch && p.reset.candidate == 0) || (p.reset.candidate != 0 && p.reset.candidate != m.applying) {
			return nil
		}
		return m.fetch(p.kind, p.req, p.reset, p.attempt+1)
	case probeMsg:
		return m.probe(p.startup, p.attempt+1)
	}
	return nil
}

func (m *Model) onProbe(p probeMsg) tea.Cmd {
	if p.err != nil {
		if !p.startup {
			return nil // the stream reports its own failures
		}
		if cmd, ok := m.scheduleRetry(p, p.err, p.attempt); ok {
			return cmd
		}
		m.conn = connState{kind: connFailed, err: p.err}
		m.fatal = p.err
		return nil
	}
	switch {
	case m.conn.kind == connFailed:
	case !p.startup && m.conn.kind == connRetrying && m.now().Before(m.conn.retryAt):
		// The node answers, but the stream waits before its next attempt: still reconnecting.
	default:
		m.setLive()
	}
	m.noteHead(p.page)
	if !p.startup {
		return nil
	}
	// The first answer: place the window.
	m.started = true
	w := max(cursor.WidthOf(p.page.Newest), cursor.WidthOf(p.page.Oldest))
	if m.cfg.Follow {
		start := m.position(m.cfg.From, w, false)
		m.win.reset(start, m.cfg.FromStart, false)
		if start == "" {
			m.win.olderDone = true // an empty log: everything is yet to come
		}
		return m.startFollow(p.page.Newest)
	}
	m.lower = m.position(m.cfg.From, w, false)
	m.upper = p.page.Newest
	if !m.cfg.To.IsZero() {
		m.upper = m.position(m.cfg.To, w, true)
	}
	if m.upper == "" || (m.lower != "" && !later(m.upper, m.lower)) {
		m.win.reset(m.lower, true, true) // an empty log or range
		return nil
	}
	if m.cfg.Reverse {
		return m.resetRange(resetSpec{}, true)
	}
	m.win.reset(m.lower, true, false)
	return nil
}

// position turns a point of the command line into a cursor of the node's width. A time
// that ends a range includes events stamped at that time.
func (m *Model) position(p client.Position, width int, end bool) string {
	switch {
	case p.Cursor != "":
		return p.Cursor
	case p.Time.IsZero() || width == 0:
		return ""
	case end:
		return cursor.FromTime(p.Time.Add(time.Nanosecond), width).String()
	}
	return cursor.FromTime(p.Time, width).String()
}

func (m *Model) noteHead(p Page) {
	if p.Newest != "" && (m.headNewest == "" || later(p.Newest, m.headNewest)) {
		m.headNewest = p.Newest
	}
}

// startFollow (re)starts following the head after cursor after, for the current query.
func (m *Model) startFollow(after string) tea.Cmd {
	if m.stopFollow != nil {
		m.stopFollow()
	}
	ctx, cancel := context.WithCancel(m.ctx)
	m.stopFollow = cancel
	m.streamLast, m.streamCursor, m.caughtUp = "", after, false
	gen, q, feed, src, work := m.gen, m.query, m.feed, m.src, m.work
	return func() tea.Msg {
		if !work.start() {
			return nil
		}
		defer work.finish()
		send := func(msg any) bool {
			select {
			case feed <- msg:
				return true
			case <-ctx.Done():
				return false
			}
		}
		err := src.Follow(ctx, FollowRequest{Query: q, After: after, FromStart: after == "", OnRetry: func(err error, attempt int, delay time.Duration) {
			send(followRetryMsg{gen: gen, err: err, attempt: attempt, delay: delay})
		}}, func(b client.Batch) error {
			if !send(followMsg{gen: gen, gap: b.Gap, evs: newEvents(b.Items), cursor: b.Cursor, caughtUp: b.CaughtUp}) {
				return ctx.Err()
			}
			return nil
		})
		send(followEndMsg{gen: gen, err: err})
		return nil
	}
}

// pacer spaces the stream's updates at least interval apart. Only the one listen command
// outstanding at a time uses it.
type pacer struct {
	interval time.Duration
	last     time.Time
}

// maxDrain bounds the messages applied in one update.
const maxDrain = 512

// listen waits for what background work sends, then (no sooner than a frame after the
// previous time) takes everything else waiting, as one message: however fast events
// arrive, the UI updates and redraws at most once a frame for them.
func (m *Model) listen() tea.Cmd {
	feed, ctx, p := m.feed, m.ctx, m.pace
	return func() tea.Msg {
		var first any
		select {
		case first = <-feed:
		case <-ctx.Done():
			return nil
		}
		if d := time.Until(p.last.Add(p.interval)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
		}
		msgs := feedMsg{first}
	drain:
		for len(msgs) < maxDrain {
			select {
			case x := <-feed:
				msgs = append(msgs, x)
			default:
				break drain
			}
		}
		p.last = time.Now()
		return msgs
	}
}

func (m *Model) onPage(p pageMsg) tea.Cmd {
	if p.reset.candidate != 0 {
		return m.onCandidate(p)
	}
	if p.gen != m.gen || p.epoch != m.epoch {
		return nil
	}
	m.noteWidths(p.evs)
	if p.err != nil {
		if cmd, ok := m.scheduleRetry(p, p.err, p.attempt); ok {
			return cmd
		}
		m.setFlash("the node refused a request: "+p.err.Error(), true)
		switch p.kind {
		case loadOlder:
			m.loadingOlder, m.win.olderDone = false, true
		case loadNewer:
			m.loadingNewer, m.win.newerDone = false, true
		case loadReset:
			m.loadingReset = false
			m.conn = connState{kind: connFailed, err: p.err}
			m.fatal = p.err
		}
		return nil
	}
	m.setLive()
	m.noteHead(p.page)
	switch p.kind {
	case loadOlder:
		m.loadingOlder = false
		added := m.win.prependOlder(p.evs)
		if m.sel >= 0 {
			m.sel += added
		}
		m.off += added
		if !p.page.More {
			m.win.olderDone = true
		} else if p.page.Resume != "" {
			if first := m.win.firstEvent(); first == "" || later(first, p.page.Resume) {
				m.win.lo = p.page.Resume // stopped short: the next page starts there
			}
		}
		if len(p.evs) > 0 {
			m.noteNewest(p.evs[len(p.evs)-1].cursor)
		}
		if m.overshoot < 0 && m.sel >= 0 {
			// What the page does not cover carries over to the next one.
			m.sel += m.overshoot
			m.overshoot = min(m.sel, 0)
			if m.overshoot < 0 {
				m.sel, m.off = 0, 0 // still past the top: show what is there
			}
			if m.win.olderDone {
				m.overshoot = 0
			}
			m.detailOff = 0
		}
		m.trim()
	case loadNewer:
		m.loadingNewer = false
		var gap *client.Gap
		if last := m.win.lastEvent(); last != "" && cursor.Lost(m.win.hi, p.page.Oldest) {
			gap = &client.Gap{After: m.win.hi, Oldest: p.page.Oldest}
		}
		through := ""
		if !p.page.More {
			through = p.page.Newest
			if !m.cfg.Follow && m.upper != "" && (through == "" || later(through, m.upper)) {
				through = m.upper
			}
		} else {
			through = p.page.Resume // stopped short: examined up to there
		}
		m.win.appendNewer(p.evs, gap, through)
		if len(p.evs) > 0 {
			m.noteNewest(p.evs[len(p.evs)-1].cursor)
		}
		if !p.page.More && (!m.cfg.Follow || m.streamLast == "" || !later(m.streamLast, m.win.hi)) {
			m.win.newerDone = true
		}
		if m.overshoot > 0 && m.sel >= 0 {
			last := len(m.win.rows) - 1
			m.sel += m.overshoot
			m.overshoot = max(m.sel-last, 0)
			if m.overshoot > 0 {
				m.sel, m.off = last, m.listLen() // still past the bottom: show what is there
			}
			if m.win.newerDone {
				m.overshoot = 0
			}
			m.detailOff = 0
		}
		m.trim()
	case loadReset:
		m.loadingReset = false
		m.placeReset(p)
		if p.reset.startFollow {
			m.started = true
			m.fixView()
			return m.startFollow(p.page.Newest)
		}
	}
	m.fixView()
	return nil
}

// placeReset makes a loadReset page the window.
func (m *Model) placeReset(p pageMsg) {
	rs := p.reset
	if rs.forward {
		m.win.reset(p.req.After, true, false)
		through := ""
		if !p.page.More {
			through = m.upper
		}
		m.win.appendNewer(p.evs, nil, through)
		m.win.newerDone = !p.page.More
	} else {
		m.win.reset("", !p.page.More, false)
		m.win.prependOlder(p.evs)
		hi := p.page.Newest
		if !m.cfg.Follow {
			hi = m.upper
		}
		if hi != "" && (m.win.hi == "" || later(hi, m.win.hi)) {
			m.win.hi = hi
		}
		switch {
		case !m.cfg.Follow, rs.startFollow:
			m.win.newerDone = true
		case rs.attach:
			m.win.newerDone = m.streamLast == "" || !later(m.streamLast, m.win.hi)
		}
		if !m.cfg.Follow && m.lower != "" && !p.page.More {
			m.win.olderDone = true
		}
	}
	if len(p.evs) > 0 {
		m.noteNewest(p.evs[len(p.evs)-1].cursor)
	}
	m.pending, m.pendingN = nil, 0
	m.sel, m.off, m.overshoot = -1, 0, 0
	if len(m.win.rows) > 0 {
		if rs.selectLast {
			m.sel = len(m.win.rows) - 1
			m.off = m.listLen()
		} else {
			m.sel = 0
		}
	}
	m.detailOff = 0
}

// onCandidate handles the answer to a new filter query: on success it takes over, with a
// new window and a new stream; on failure the query in force stays.
func (m *Model) onCandidate(p pageMsg) tea.Cmd {
	if p.reset.candidate != m.applying {
		return nil
	}
	if p.err != nil {
		if cmd, ok := m.scheduleRetry(p, p.err, p.attempt); ok {
			return cmd
		}
		m.applying = 0
		m.prompt = promptFilter
		m.promptErr = "the node refused the query: " + p.err.Error()
		m.promptErrAt = nodeErrorOffset(p.reset.query, p.err)
		if m.promptErrAt >= 0 {
			m.input.SetCursor(m.promptErrAt)
		}
		return nil
	}
	m.setLive()
	m.noteHead(p.page)
	m.applying = 0
	m.prompt = promptNone
	m.query = p.reset.query
	m.gen++
	m.epoch++
	m.loadingOlder, m.loadingNewer, m.loadingReset = false, false, false
	m.paused, m.waiting = false, 0
	m.rate, m.newest, m.colNeed = rateMeter{}, "", [3]int{}
	m.noteWidths(p.evs)
	m.follow = p.reset.selectLast && m.cfg.Follow
	p.reset.startFollow = m.cfg.Follow
	m.placeReset(p)
	m.fixView()
	m.setFlash("filter applied", false)
	if m.cfg.Follow {
		return m.startFollow(p.page.Newest)
	}
	return nil
}

// nodeErrorOffset finds the offset in a node's message about a bad query ("offset 11: …"),
// as a rune offset into q; -1 when there is none.
func nodeErrorOffset(q string, err error) int {
	var re *client.RPCError
	if !errors.As(err, &re) {
		return -1
	}
	s := re.Error()
	const key = "offset "
	for i := 0; i+len(key) < len(s); i++ {
		if s[i:i+len(key)] != key {
			continue
		}
		n, j := 0, i+len(key)
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			n = n*10 + int(s[j]-'0')
			j++
		}
		if j > i+len(key) && j < len(s) && s[j] == ':' && n <= len(q) {
			return utf8.RuneCountInString(q[:n])
		}
	}
	return -1
}

func (m *Model) setFlash(s string, bad bool) { m.flash, m.flashBad = s, bad }

// applyFilter checks an edited query and, when it parses, tries it on the node.
func (m *Model) applyFilter() tea.Cmd {
	q := m.input.Value()
	if _, err := filter.Compile(q); err != nil {
		var se *filter.SyntaxError
		m.promptErr, m.promptErrAt = err.Error(), -1
		if errors.As(err, &se) {
			m.promptErrAt = utf8.RuneCountInString(q[:min(se.Offset, len(q))])
			m.input.SetCursor(m.promptErrAt)
		}
		return nil
	}
	m.edits++
	m.applying = m.edits
	m.promptErr, m.promptErrAt = "", -1
	rs := resetSpec{query: q, candidate: m.applying}
	if m.cfg.Follow {
		req := PageRequest{Query: q, Limit: m.cfg.PageSize, Backward: true}
		rs.selectLast = true
		return m.fetch(loadReset, req, rs, 0)
	}
	newest := m.cfg.Reverse
	req := PageRequest{Query: q, After: m.lower, Through: m.through(), Limit: m.cfg.PageSize, Backward: newest}
	rs.forward, rs.selectLast = !newest, newest
	return m.fetch(loadReset, req, rs, 0)
}

func plural(n int, what string) string {
	s := strconv.Itoa(n) + " " + what
	if n != 1 {
		s += "s"
	}
	return s
}
