package tui

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/retry"
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

// connModel is the connection to the node and the status bar that reports on it: whether
// the node answers (live, retrying with a countdown, failed for good), when to try again,
// the stream that follows the head and how far behind the head it is, the newest event
// seen and the rate, and a message for the user. It owns the status bar and the lines
// above it that report a failing connection and the message.
type connModel struct {
	c            *common
	state        connState
	failingSince time.Time // when requests began to fail, for Backoff.GiveUp
	fatal        error
	lastProbe    time.Time
	headNewest   string // the node's newest item, from the latest answer

	stop         context.CancelFunc // ends the stream following the head
	streamCursor string             // where the stream resumes
	caughtUp     bool

	newest string // the newest event seen
	rate   rateMeter

	flash    string
	flashBad bool
}

// setLive records an answer from the node.
func (s *connModel) setLive() {
	s.state, s.failingSince = connState{kind: connLive}, time.Time{}
}

// retrying records that the stream failed and tries again after delay.
func (s *connModel) retrying(err error, attempt int, delay time.Duration) {
	s.state = connState{kind: connRetrying, err: err, attempt: attempt, retryAt: s.c.now().Add(delay)}
}

// fail records a failure that retrying cannot fix.
func (s *connModel) fail(err error) {
	s.state = connState{kind: connFailed, err: err}
	s.fatal = err
}

// retryDelay decides whether to try a failed request again, and when.
func (s *connModel) retryDelay(err error, attempt int) (time.Duration, bool) {
	if !client.Retryable(err) {
		return 0, false
	}
	b := s.c.cfg.Backoff
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

// scheduleRetry sends msg again (as a refetchMsg) after the delay a failure with err
// calls for; false when it is not to be retried, or retrying has gone on too long.
func (s *connModel) scheduleRetry(msg tea.Msg, err error, attempt int) (tea.Cmd, bool) {
	d, ok := s.retryDelay(err, attempt)
	if !ok {
		return nil, false
	}
	now := s.c.now()
	if s.failingSince.IsZero() {
		s.failingSince = now
	}
	if g := s.c.cfg.Backoff.GiveUp; g > 0 && now.Sub(s.failingSince)+d > g {
		return nil, false
	}
	s.state = connState{kind: connRetrying, err: err, attempt: attempt + 1, retryAt: s.c.now().Add(d)}
	return tea.Tick(d, func(time.Time) tea.Msg { return refetchMsg{msg} }), true
}

// probeDue reports whether it is time to ask the node for its head, and notes the time
// when it is.
func (s *connModel) probeDue(started bool) bool {
	cfg := &s.c.cfg
	now := s.c.now()
	// While the stream retries, ask each second once its next attempt is due: an answer
	// shows the node is back while that attempt waits on the head.
	due := now.Sub(s.lastProbe) >= cfg.ProbeEvery || (s.state.kind == connRetrying && !now.Before(s.state.retryAt))
	if cfg.Follow && started && cfg.ProbeEvery > 0 && due {
		s.lastProbe = now
		return true
	}
	return false
}

// probed records the node's answer to a probe.
func (s *connModel) probed(startup bool) {
	switch {
	case s.state.kind == connFailed:
	case !startup && s.state.kind == connRetrying && s.c.now().Before(s.state.retryAt):
		// The node answers, but the stream waits before its next attempt: still reconnecting.
	default:
		s.setLive()
	}
}

func (s *connModel) noteHead(p Page) {
	if p.Newest != "" && (s.headNewest == "" || later(p.Newest, s.headNewest)) {
		s.headNewest = p.Newest
	}
}

func (s *connModel) noteNewest(c string) {
	if c != "" && (s.newest == "" || later(c, s.newest)) {
		s.newest = c
	}
}

// startStream ends the stream following the head, if any, and returns the context of a
// new one that resumes after cursor after.
func (s *connModel) startStream(after string) context.Context {
	if s.stop != nil {
		s.stop()
	}
	ctx, cancel := context.WithCancel(s.c.ctx)
	s.stop = cancel
	s.streamCursor, s.caughtUp = after, false
	return ctx
}

// onFollow takes a batch of the head, already checked to be of this generation.
func (s *connModel) onFollow(f followMsg) {
	s.setLive()
	s.streamCursor, s.caughtUp = f.cursor, f.caughtUp
	if n := len(f.evs); n > 0 {
		s.noteNewest(f.evs[n-1].cursor)
		s.rate.add(s.c.now(), n)
	}
}

// restart forgets what was seen under the previous query.
func (s *connModel) restart() {
	s.rate, s.newest = rateMeter{}, ""
}

func (s *connModel) setFlash(text string, bad bool) { s.flash, s.flashBad = text, bad }

func (s *connModel) clearFlash() { s.flash = "" }

// lines are the lines above the status bar: a failing connection, and the message unless
// a prompt is open.
func (s *connModel) lines(prompting bool) []string {
	st := &s.c.st
	var out []string
	switch s.state.kind {
	case connRetrying:
		out = append(out, st.errText.Render("retrying: "+clean(s.state.err.Error())))
	case connFailed:
		out = append(out, st.errText.Render("error: "+clean(s.state.err.Error())))
	}
	if s.flash != "" && !prompting {
		style := st.msg
		if s.flashBad {
			style = st.errText
		}
		out = append(out, style.Render(clean(s.flash)))
	}
	return out
}

// statusFacts are what the status bar tells of the other models.
type statusFacts struct {
	query        string
	paused       bool
	waiting      int // events received while paused
	loaded       int
	lower, upper string // a range's ends
}

// statusText is the status bar's text before it is styled and fitted.
type statusText struct {
	state string
	style paint // of state
	pause string
	line  string // node, query and facts on one line
	parts [2]string
}

func (s *connModel) statusText(f statusFacts) statusText {
	now := s.c.now()
	cfg := &s.c.cfg
	ps := &s.c.st
	st := statusText{style: ps.statusLive}
	switch s.state.kind {
	case connConnecting:
		st.state, st.style = " ○ CONNECTING ", ps.statusWarn
	case connRetrying:
		left := s.state.retryAt.Sub(now)
		st.state = " ⟳ RECONNECTING"
		if left > 0 {
			st.state += " in " + strconv.Itoa(int((left+time.Second-1)/time.Second)) + "s"
		} else {
			st.state += "…"
		}
		st.state += " (attempt " + strconv.Itoa(s.state.attempt) + ") "
		st.style = ps.statusWarn
	case connFailed:
		st.state, st.style = " ✖ FAILED ", ps.statusBad
	default:
		st.state = " ● LIVE "
		if !cfg.Follow {
			st.state = " ● REPLAY "
		}
	}
	if f.paused {
		st.pause = " ❚❚ PAUSED · " + plural(f.waiting, "new event") + " "
	}
	node := strings.TrimPrefix(strings.TrimPrefix(clean(s.c.src.Node()), "http://"), "https://")
	query := "all events"
	if f.query != "" {
		query = "query: " + clean(f.query)
	}
	var facts []string
	if cfg.Follow {
		newest := "-"
		if s.newest != "" {
			newest = clean(s.newest)
		}
		facts = append(facts, "newest "+newest, strconv.Itoa(int(s.rate.rate(now)+0.5))+" ev/s", "lag "+s.lag())
	} else {
		facts = append(facts, "range "+dash(clean(f.lower))+" … "+dash(clean(f.upper)))
	}
	facts = append(facts, strconv.Itoa(f.loaded)+" loaded", "? help")
	all := strings.Join(facts, " │ ")
	st.line = " " + node + " │ " + query + " │ " + all + " "
	st.parts = [2]string{" " + node + " │ " + query + " ", " " + all + " "}
	return st
}

// oneLine reports whether the status bar fits on one line.
func (st *statusText) oneLine(c cells, width int) bool {
	return c.width(st.state)+c.width(st.pause)+c.width(st.line) <= width
}

// barLineCount is the number of lines the status bar takes.
func (s *connModel) barLineCount(f statusFacts) int {
	if st := s.statusText(f); st.oneLine(s.c.cells, s.c.width) {
		return 1
	}
	return 2
}

// bar is the status bar at the bottom: the connection, pause, node, query, newest
// cursor, rate and lag. It takes one line when that is wide enough, else two.
func (s *connModel) bar(f statusFacts) []string {
	ps, width := &s.c.st, s.c.width
	st := s.statusText(f)
	head := st.style.Render(st.state)
	if st.pause != "" {
		head += ps.statusPaused.Render(st.pause)
	}
	bar := func(left string, leftWidth int, text string) string {
		room := width - leftWidth
		return left + ps.status.Render(s.c.cells.pad(s.c.cells.trunc(text, room), room))
	}
	hw := s.c.cells.width(st.state) + s.c.cells.width(st.pause)
	if st.oneLine(s.c.cells, width) {
		return []string{bar(head, hw, st.line)}
	}
	return []string{bar(head, hw, st.parts[0]), bar("", 0, st.parts[1])}
}

// lag is how far the stream is behind the node's head, as time between their cursors.
func (s *connModel) lag() string {
	if s.state.kind != connLive {
		return "-"
	}
	if s.caughtUp || s.streamCursor == "" || s.headNewest == "" {
		if s.caughtUp {
			return "0s"
		}
		return "-"
	}
	sc, err1 := cursor.Parse(s.streamCursor)
	h, err2 := cursor.Parse(s.headNewest)
	if err1 != nil || err2 != nil || !h.After(sc) {
		return "0s"
	}
	return time.Duration(h.TS - sc.TS).Round(100 * time.Millisecond).String()
}
