package tui

import (
	"context"
	"errors"
	"github.com/evtctl/evtctl/internal/english"
	"sort"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
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
	if p.Newest != "" && (s.headNewest == "" || s.c.src.Compare(p.Newest, s.headNewest) > 0) {
		s.headNewest = p.Newest
	}
}

func (s *connModel) noteNewest(c string) {
	if c != "" && (s.newest == "" || s.c.src.Compare(c, s.newest) > 0) {
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
		s.noteNewest(f.evs[n-1].pos)
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

// A status field is one fact of the status bar. Fields are drawn in the order given;
// those that do not fit are left out, the least useful first (the highest rank).
type statusField struct {
	text string
	rank int
	cut  bool // may be cut to fit rather than left out
}

// Fields of the status bar, by rank: what is most useful stays longest.
const (
	rankHelp = iota
	rankQuery
	rankRange
	rankLag
	rankRate
	rankNewest
	rankNode
	rankLoaded
)

// minCut is the least a field that may be cut is cut to; with less room it is left out.
const minCut = 12

// stateText is the status bar's first field, the connection, and its style.
func (s *connModel) stateText() (string, paint) {
	ps := &s.c.st
	switch s.state.kind {
	case connConnecting:
		return " ○ CONNECTING ", ps.statusWarn
	case connRetrying:
		text := " ⟳ RECONNECTING"
		if left := s.state.retryAt.Sub(s.c.now()); left > 0 {
			text += " in " + strconv.Itoa(int((left+time.Second-1)/time.Second)) + "s"
		} else {
			text += "…"
		}
		return text + " (attempt " + strconv.Itoa(s.state.attempt) + ") ", ps.statusWarn
	case connFailed:
		return " ✖ FAILED ", ps.statusBad
	}
	if !s.c.cfg.Follow {
		return " ● REPLAY ", ps.statusLive
	}
	return " ● LIVE ", ps.statusLive
}

// fields are the status bar's facts after the state, in the order they are drawn.
func (s *connModel) fields(f statusFacts) []statusField {
	node := strings.TrimPrefix(strings.TrimPrefix(clean(s.c.src.Node()), "http://"), "https://")
	query := "all events"
	if f.query != "" {
		query = "query: " + clean(f.query)
	}
	out := []statusField{{node, rankNode, false}, {query, rankQuery, true}}
	if s.c.cfg.Follow {
		newest := "-"
		if s.newest != "" {
			newest = clean(s.newest)
		}
		out = append(out,
			statusField{"newest " + newest, rankNewest, false},
			statusField{strconv.Itoa(int(s.rate.rate(s.c.now())+0.5)) + " ev/s", rankRate, false},
			statusField{"lag " + s.lag(), rankLag, false})
	} else {
		out = append(out, statusField{"range " + dash(clean(f.lower)) + " … " + dash(clean(f.upper)), rankRange, false})
	}
	return append(out, statusField{strconv.Itoa(f.loaded) + " loaded", rankLoaded, false}, statusField{"? help", rankHelp, false})
}

// bar is the status bar at the bottom, one line: the connection, a pause, and as many of
// the node, query, newest cursor, rate, lag, count and help key as fit, kept in order of
// usefulness (fields), a field that may be cut cut to the room left.
func (s *connModel) bar(f statusFacts) string {
	ps, cs, width := &s.c.st, &s.c.cells, s.c.width
	state, style := s.stateText()
	head := style.Render(state)
	used := cs.width(state)
	if f.paused {
		pause := " ❚❚ PAUSED · " + english.Plural(f.waiting, "new event") + " "
		head += ps.statusPaused.Render(pause)
		used += cs.width(pause)
	}
	fields := s.fields(f)
	byRank := make([]int, len(fields))
	for i := range byRank {
		byRank[i] = i
	}
	sort.SliceStable(byRank, func(a, b int) bool { return fields[byRank[a]].rank < fields[byRank[b]].rank })
	keep := make([]bool, len(fields))
	room := width - used - 2 // the spaces before the first field and after the last
	for n, i := range byRank {
		need := cs.width(fields[i].text)
		if n > 0 {
			need += 3 // " │ "
		}
		if need > room && fields[i].cut && room-(need-cs.width(fields[i].text)) >= minCut {
			fields[i].text = cs.trunc(fields[i].text, room-(need-cs.width(fields[i].text)))
			need = room
		}
		if need <= room {
			keep[i] = true
			room -= need
		}
	}
	var text []string
	for i, fd := range fields {
		if keep[i] {
			text = append(text, fd.text)
		}
	}
	line := " " + strings.Join(text, " │ ") + " "
	return head + ps.status.Render(cs.pad(cs.trunc(line, max(width-used, 0)), width-used))
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
