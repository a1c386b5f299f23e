// Package tui is evtctl's interactive terminal UI, built with Bubble Tea: a live list of
// events that follows a node's head and pages back through its history on demand, a
// detail pane, a filter editor and a status bar.
//
// Model is composed of four children, each owning its state and its part of the screen:
// the event list (listModel: the window of events, the selection, paging and pausing),
// the detail pane (detailModel), the prompt for filters and file names (promptModel) and
// the connection with its status bar (connModel). Model routes messages and keys to them,
// starts the stream that follows the head, and lays the screen out.
package tui

import (
	"context"
	"errors"
	"io"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/evtctl/evtctl/internal/english"
	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/client"
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

	// Notes are lines shown at the top of the help screen (?), as they are: for instance
	// commands to try against the node. Message is shown above the status bar from the
	// start until a key is pressed: for instance, that there are notes.
	Notes   []string
	Message string

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

// Model is the UI: the top model, which holds the children.
// Use New; it implements tea.Model with pointer receivers.
type Model struct {
	c      *common
	list   listModel
	detail detailModel
	prompt promptModel
	conn   connModel
	help   helpModel
	pace   *pacer // spaces the stream's updates a frame apart
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
	c := newCommon(cfg)
	m := &Model{
		c:      c,
		list:   newList(c),
		detail: detailModel{c: c},
		prompt: newPrompt(c),
		conn:   connModel{c: c},
		help:   helpModel{c: c},
		pace:   &pacer{interval: cfg.FrameInterval},
	}
	m.conn.setFlash(cfg.Message, false)
	return m
}

// Close stops the UI's background work and waits for it to end.
func (m *Model) Close() {
	m.c.cancel()
	m.c.work.close()
}

// Err is the failure that stopped the UI's connection for good, if any: a refused token,
// a query the node rejects.
func (m *Model) Err() error { return m.conn.fatal }

// Init starts the first request, the stream's reader and the clock.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.listen(), tick()}
	if m.c.positioned() {
		cmds = append(cmds, probe(m.c, true, 0))
	} else {
		cmds = append(cmds, m.list.openAtHead())
	}
	return tea.Batch(cmds...)
}

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return tickMsg{} })
}

// Update handles one message: the top model's own (size, clock, the stream's feed, the
// answers of background work) and keys, which it routes to the children.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	m.relayout() // the list's height, for paging and scrolling by what comes
	var cmds []tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.c.width, m.c.height = msg.Width, msg.Height
	case tea.ModeReportMsg:
		if c, ok := widthMethod(msg); ok {
			m.c.cells = c // as the renderer does
		}
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
		if m.conn.probeDue(m.list.started) {
			cmds = append(cmds, probe(m.c, false, 0))
		}
	case writtenMsg:
		if msg.err != nil {
			// Open the prompt again, to fix the name.
			m.prompt.open(promptWrite, msg.path)
			m.prompt.setErr("write failed: " + msg.err.Error())
		} else {
			m.conn.setFlash("wrote "+english.Plural(msg.n, "event")+" to "+msg.path, false)
		}
	case copiedMsg:
		if msg.err != nil {
			m.conn.setFlash("copy failed: "+msg.err.Error(), true)
		} else {
			m.conn.setFlash("copied "+msg.what+" to the clipboard (OSC 52)", false)
		}
	}
	// The layout may have changed: a prompt, a message, the size.
	m.relayout()
	m.list.fixView()
	m.detail.sync(m.list.pick)
	if m.conn.fatal == nil {
		cmds = append(cmds, m.list.ensureLoads())
	}
	return m, tea.Batch(cmds...)
}

// onFeed takes one thing the stream that follows the head sent.
func (m *Model) onFeed(x any) {
	switch f := x.(type) {
	case followMsg:
		if f.gen != m.list.gen {
			return
		}
		m.conn.onFollow(f)
		m.list.onFollow(f)
	case followRetryMsg:
		if f.gen == m.list.gen {
			m.conn.retrying(f.err, f.attempt, f.delay)
		}
	case followEndMsg:
		if f.gen == m.list.gen && f.err != nil && !errors.Is(f.err, context.Canceled) {
			m.conn.fail(f.err)
		}
	}
}

// startFollow (re)starts following the head after cursor after, for the query in force.
func (m *Model) startFollow(after string) tea.Cmd {
	ctx := m.conn.startStream(after)
	m.list.streamStarted()
	return follow(ctx, m.c, m.list.gen, m.list.query, after)
}

// onPage takes a page of the list's events, or of a filter being tried.
func (m *Model) onPage(p pageMsg) tea.Cmd {
	if p.reset.candidate != 0 {
		return m.onCandidate(p)
	}
	if !m.list.current(p) {
		return nil
	}
	m.list.noteWidths(p.evs)
	if p.err != nil {
		if cmd, ok := m.conn.scheduleRetry(p, p.err, p.attempt); ok {
			return cmd
		}
		m.conn.setFlash("the node refused a request: "+p.err.Error(), true)
		if m.list.pageFailed(p.kind) {
			m.conn.fail(p.err)
		}
		return nil
	}
	m.conn.setLive()
	m.conn.noteHead(p.page)
	if n := len(p.evs); n > 0 {
		m.conn.noteNewest(p.evs[n-1].pos)
	}
	m.list.onPage(p)
	if p.kind == loadReset && p.reset.startFollow {
		return m.startFollow(p.page.Newest)
	}
	return nil
}

// onCandidate handles the answer to a new filter query: on success it takes over, with a
// new window and a new stream; on failure the query in force stays.
func (m *Model) onCandidate(p pageMsg) tea.Cmd {
	if p.reset.candidate != m.prompt.applying {
		return nil
	}
	if p.err != nil {
		if cmd, ok := m.conn.scheduleRetry(p, p.err, p.attempt); ok {
			return cmd
		}
		m.prompt.refused(p.reset.query, p.err)
		return nil
	}
	m.conn.setLive()
	m.conn.noteHead(p.page)
	m.prompt.applied()
	m.conn.restart()
	if n := len(p.evs); n > 0 {
		m.conn.noteNewest(p.evs[n-1].pos)
	}
	m.list.takeQuery(p)
	m.conn.setFlash("filter applied", false)
	if m.c.cfg.Follow {
		return m.startFollow(p.page.Newest)
	}
	return nil
}

// onProbe takes the node's answer about its head; the first one places the list.
func (m *Model) onProbe(p probeMsg) tea.Cmd {
	if p.err != nil {
		if !p.startup {
			return nil // the stream reports its own failures
		}
		if cmd, ok := m.conn.scheduleRetry(p, p.err, p.attempt); ok {
			return cmd
		}
		m.conn.fail(p.err)
		return nil
	}
	m.conn.probed(p.startup)
	m.conn.noteHead(p.page)
	if !p.startup {
		return nil
	}
	if m.c.cfg.Follow {
		m.list.placeFollowing(p.from)
		return m.startFollow(p.page.Newest)
	}
	return m.list.placeRange(p.page, p.from, p.to)
}

// refetch asks again for what failed, unless it is no longer wanted.
func (m *Model) refetch(msg tea.Msg) tea.Cmd {
	switch p := msg.(type) {
	case pageMsg:
		if p.gen != m.list.gen || (p.epoch != m.list.epoch && p.reset.candidate == 0) || (p.reset.candidate != 0 && p.reset.candidate != m.prompt.applying) {
			return nil
		}
		return m.list.fetch(p.kind, p.req, p.reset, p.attempt+1)
	case probeMsg:
		return probe(m.c, p.startup, p.attempt+1)
	}
	return nil
}

// applyFilter tries the prompt's query on the node when it parses.
func (m *Model) applyFilter() tea.Cmd {
	q, candidate, ok := m.prompt.submitFilter()
	if !ok {
		return nil
	}
	return m.list.tryQuery(q, candidate)
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
	feed, ctx, p := m.c.feed, m.c.ctx, m.pace
	return func() tea.Msg {
		var first any
		select {
		case first = <-feed:
		case <-ctx.Done():
			return nil
		}
		if d := time.Until(p.last.Add(p.interval)); d > 0 && retry.Sleep(ctx, d) != nil {
			return nil
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
