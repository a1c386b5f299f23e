package tui

import (
	"context"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/evtctl/evtctl/pkg/client"
)

// common is what the UI's models share, as glow's children share its commonModel: the
// configuration, the node, the keys and styles, the clock, the screen's size and how it
// measures text, and what background work runs under. The top model sets the size and
// the measure; nothing else changes after New.
type common struct {
	cfg  Config
	src  Source
	keys keyMap
	st   styles
	now  func() time.Time

	ctx    context.Context    // ends when the UI quits or closes
	cancel context.CancelFunc // ends ctx
	work   *tracker           // background work, for Close to wait on
	feed   chan any           // from the stream that follows the head: batches, retries, the end

	width, height int   // the screen's
	cells         cells // how the screen measures text
}

func newCommon(cfg Config) *common {
	ctx, cancel := context.WithCancel(context.Background())
	return &common{
		cfg: cfg, src: cfg.Source, keys: defaultKeys(), st: newStyles(!cfg.NoColor), now: cfg.Now,
		ctx: ctx, cancel: cancel, work: &tracker{}, feed: make(chan any, 256), cells: cells(ansi.WcWidth),
	}
}

// positioned reports whether the list opens somewhere other than the head: a range, or a
// following list opened at a position.
func (c *common) positioned() bool {
	return !c.cfg.Follow || c.cfg.FromStart || !c.cfg.From.IsZero()
}

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
		// from and to are the command line's start and end as positions of the log, on
		// startup ("" when open).
		from, to string
		err      error
		attempt  int
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

// fetch asks for a page in the background.
func fetch(c *common, gen, epoch int, kind loadKind, req PageRequest, rs resetSpec, attempt int) tea.Cmd {
	src, ctx, work := c.src, c.ctx, c.work
	return func() tea.Msg {
		if !work.start() {
			return nil
		}
		defer work.finish()
		p, err := src.Page(ctx, req)
		msg := pageMsg{gen: gen, epoch: epoch, kind: kind, req: req, reset: rs, page: p, err: err, attempt: attempt}
		if err == nil {
			msg.evs = newEvents(src, p.Items)
			msg.page.Items = nil
		}
		return msg
	}
}

// probe asks for the node's head: its newest and oldest items.
func probe(c *common, startup bool, attempt int) tea.Cmd {
	src, ctx, work := c.src, c.ctx, c.work
	return func() tea.Msg {
		if !work.start() {
			return nil
		}
		defer work.finish()
		p, err := src.Page(ctx, PageRequest{Limit: 1, Backward: true})
		p.Items = nil
		msg := probeMsg{startup: startup, page: p, err: err, attempt: attempt}
		if startup && err == nil {
			msg.from, msg.err = place(ctx, src, c.cfg.From, false)
			if msg.err == nil {
				msg.to, msg.err = place(ctx, src, c.cfg.To, true)
			}
		}
		return msg
	}
}

// place turns a point of the command line into a position of the log. A time that ends a
// range includes events stamped at that time.
func place(ctx context.Context, src Source, p client.Position, end bool) (string, error) {
	switch {
	case p.Cursor != "":
		return p.Cursor, nil
	case p.Time.IsZero():
		return "", nil
	case end:
		return src.At(ctx, p.Time.Add(time.Nanosecond))
	}
	return src.At(ctx, p.Time)
}

// follow follows the head after cursor after for query q until ctx ends, sending what it
// receives to the feed, tagged with the generation gen.
func follow(ctx context.Context, c *common, gen int, q, after string) tea.Cmd {
	feed, src, work := c.feed, c.src, c.work
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
			if !send(followMsg{gen: gen, gap: b.Gap, evs: newEvents(src, b.Items), cursor: b.Cursor, caughtUp: b.CaughtUp}) {
				return ctx.Err()
			}
			return nil
		})
		send(followEndMsg{gen: gen, err: err})
		return nil
	}
}
