package tui

import (
	"errors"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// Tests of the model's logic, calling Update directly without a program.

func events(f *fakeLog, from, to int) []*event {
	var evs []*event
	for _, it := range f.items {
		if c := it.Cursor; !later(fakeCursor(from), c) && !later(c, fakeCursor(to)) {
			evs = append(evs, newEvents(f, []client.Item{it})...)
		}
	}
	return evs
}

func TestWindow(t *testing.T) {
	f := newFakeLog()
	f.add(20, "")
	w := window{max: 10, cmp: f.Compare}
	w.reset(fakeCursor(5), false, false)
	if before, through := w.olderBounds(); before != "" || through != fakeCursor(5) {
		t.Errorf("an empty window pages back from before %q through %q; want through its hi", before, through)
	}
	// A window opened after a cursor whose next events are gone says so first.
	if n := w.appendNewer(events(f, 4, 8), &client.Gap{After: fakeCursor(5), Oldest: fakeCursor(6)}, ""); n != 4 || rowsText(&w) != "gap 6 7 8 " {
		t.Errorf("appendNewer added %d: %s", n, rowsText(&w))
	}
	w.appendNewer(events(f, 9, 10), &client.Gap{After: fakeCursor(8), Oldest: fakeCursor(9)}, "")
	if got := rowsText(&w); got != "gap 6 7 8 gap 9 a " || w.hi != fakeCursor(10) {
		t.Errorf("rows %s, hi %s", got, w.hi)
	}
	// Older events go above the first marker: it marks the events lost after 5.
	if n := w.prependOlder(events(f, 1, 7)); n != 5 || w.firstEvent() != fakeCursor(1) || rowsText(&w) != "1 2 3 4 5 gap 6 7 8 gap 9 a " {
		t.Errorf("prependOlder added %d, first %s: %s", n, w.firstEvent(), rowsText(&w))
	}
	w.olderDone = true
	// Evicting up to a marker drops it too: it would stand first, marking nothing.
	if k := w.evictTop(9); k != 10 || w.olderDone || rowsText(&w) != "9 a " || w.gaps != 0 {
		t.Errorf("evictTop dropped %d: %s", k, rowsText(&w))
	}
	w.newerDone = true
	w.appendNewer(events(f, 11, 14), nil, "")
	w.evictBottom(2)
	if w.newerDone || w.hi != fakeCursor(12) || rowsText(&w) != "9 a b c " {
		t.Errorf("evictBottom: hi %s newerDone %v rows %s", w.hi, w.newerDone, rowsText(&w))
	}
	// A page that found nothing newer moves hi on to the log's newest item.
	w.appendNewer(nil, nil, fakeCursor(15))
	if w.hi != fakeCursor(15) {
		t.Errorf("hi %s", w.hi)
	}
}

// newTestModel is a model sized for the screen, its Init run.
func newTestModel(cfg Config) (*Model, tea.Cmd) {
	m := New(cfg)
	cmd := m.Init()
	m.Update(tea.WindowSizeMsg{Width: termW, Height: termH})
	return m, cmd
}

func TestPageRetries(t *testing.T) {
	f := newFakeLog()
	f.add(100, "")
	clk := newClock()
	cfg := testConfig(f, clk)
	cfg.Backoff = client.Backoff{Initial: time.Second, Max: time.Second}
	m, _ := newTestModel(cfg)
	defer m.Close()
	req := PageRequest{Limit: 50, Backward: true}
	busy := &client.HTTPError{Status: 503, Message: "busy"}
	_, cmd := m.Update(pageMsg{gen: m.list.gen, epoch: m.list.epoch, kind: loadReset, req: req, reset: resetSpec{startFollow: true, selectLast: true}, err: busy})
	if d := m.conn.state.retryAt.Sub(clk.Now()); m.conn.state.kind != connRetrying || m.conn.state.attempt != 1 || d < time.Second/2 || d > time.Second || cmd == nil {
		t.Fatalf("after a 503: conn %+v, cmd %v", m.conn.state, cmd)
	}
	if s := m.screen(); !strings.Contains(s, "RECONNECTING in 1s (attempt 1)") || !strings.Contains(s, "retrying: node answered 503: busy") {
		t.Errorf("screen:\n%s", s)
	}
	// The retry fires: the same request again.
	_, cmd = m.Update(refetchMsg{pageMsg{gen: m.list.gen, epoch: m.list.epoch, kind: loadReset, req: req, reset: resetSpec{startFollow: true}, attempt: 0}})
	msg := runCmd(cmd)
	pm, ok := msg.(pageMsg)
	if !ok || pm.err != nil || len(pm.evs) != 50 || pm.attempt != 1 {
		t.Fatalf("refetch gave %T %+v", msg, msg)
	}
	m.Update(pm)
	if m.conn.state.kind != connLive || m.list.loaded() != 50 || !m.list.started {
		t.Errorf("after the retry: conn %v, %d loaded", m.conn.state.kind, m.list.loaded())
	}

	// A refusal is not retried: older pages stop, with a message.
	_, cmd = m.Update(pageMsg{gen: m.list.gen, epoch: m.list.epoch, kind: loadOlder, err: &client.RPCError{Code: -32603, Data: "invalid cursor"}})
	if cmd != nil && runCmd(cmd) != nil || !m.list.win.olderDone || !strings.Contains(m.conn.flash, "invalid cursor") {
		t.Errorf("after a refusal: olderDone %v flash %q", m.list.win.olderDone, m.conn.flash)
	}
	// Answers for an older window are dropped.
	before := m.list.loaded()
	m.Update(pageMsg{gen: m.list.gen, epoch: m.list.epoch - 1, kind: loadOlder, evs: events(f, 1, 10)})
	if m.list.loaded() != before {
		t.Error("a stale page was applied")
	}
}

// runCmd runs a command and the commands of a batch it returns, and returns the first
// message that is not a tick or the stream's reader (those wait).
// runCmd runs a command, and each of a batch at once, and returns the first message one
// of them gives, or nil once all have given none. A command that waits (a tick, a retry
// timer on the test's clock) gives nothing: after a while, long enough for any that does not
// wait to finish on a busy machine, it is left behind.
func runCmd(cmd tea.Cmd) tea.Msg {
	if cmd == nil {
		return nil
	}
	msgs := make(chan tea.Msg, 64)
	pending := 0
	start := func(c tea.Cmd) {
		if c == nil {
			return
		}
		pending++
		go func() { msgs <- c() }()
	}
	start(cmd)
	limit := time.After(10 * time.Second)
	for pending > 0 {
		select {
		case msg := <-msgs:
			pending--
			if b, ok := msg.(tea.BatchMsg); ok {
				for _, c := range b {
					start(c)
				}
				continue
			}
			if msg != nil {
				return msg
			}
		case <-limit:
			return nil
		}
	}
	return nil
}

func TestStartupFailsForGood(t *testing.T) {
	f := newFakeLog()
	f.setDown(&client.HTTPError{Status: 401, Message: "bad token"})
	cfg := testConfig(f, newClock())
	cfg.FromStart = true
	m, cmd := newTestModel(cfg)
	defer m.Close()
	probe := runCmd(cmd)
	if _, ok := probe.(probeMsg); !ok {
		t.Fatalf("Init's request gave %T", probe)
	}
	m.Update(probe)
	if m.Err() == nil || m.conn.state.kind != connFailed || !strings.Contains(m.screen(), "error: node answered 401: bad token") {
		t.Errorf("Err %v, conn %v, screen:\n%s", m.Err(), m.conn.state.kind, m.screen())
	}
}

func TestPositions(t *testing.T) {
	f := newFakeLog()
	f.add(50, "")
	// Following from a time: the window opens there, and following starts at the head.
	cfg := testConfig(f, newClock())
	cfg.From = client.Position{Time: fakeBase.Add(20*time.Millisecond + 500*time.Microsecond)}
	m, _ := newTestModel(cfg)
	defer m.Close()
	cmd := m.onProbe(runCmd(probe(m.c, true, 0)).(probeMsg)) // the log turns the time into its position
	if m.list.win.hi != cursor.FromTime(cfg.From.Time, cursor.NodeWidth).String() || m.list.win.olderDone || m.list.win.newerDone || cmd == nil {
		t.Errorf("window after the probe: %+v", m.list.win)
	}
	msg := runCmd(m.list.ensureLoads())
	pm, ok := msg.(pageMsg)
	if !ok || pm.kind != loadNewer || len(pm.evs) != 30 || pm.evs[0].cursor != fakeCursor(21) {
		t.Fatalf("the first page: %+v", msg)
	}

	// A range to a time includes events stamped at that time.
	cfg = testConfig(f, newClock())
	cfg.Follow = false
	cfg.To = client.Position{Time: fakeBase.Add(40 * time.Millisecond)}
	m2, _ := newTestModel(cfg)
	defer m2.Close()
	m2.onProbe(runCmd(probe(m2.c, true, 0)).(probeMsg))
	if m2.list.lower != "" || later(fakeCursor(40), m2.list.upper) || !later(fakeCursor(41), m2.list.upper) {
		t.Errorf("range %q .. %q", m2.list.lower, m2.list.upper)
	}
}

func TestNodeErrorOffset(t *testing.T) {
	q := "tÿpe = 5 AND"
	err := &client.RPCError{Data: "invalid filter query: offset 9: got end"}
	if got := nodeErrorOffset(q, err); got != 8 {
		t.Errorf("offset %d, want 8 (runes)", got)
	}
	if got := nodeErrorOffset(q, errors.New("offset 3: x")); got != -1 {
		t.Errorf("a transport error gave %d", got)
	}
}

func TestRateMeter(t *testing.T) {
	var r rateMeter
	t0 := time.Unix(1000, 0)
	for i := range 100 {
		r.add(t0.Add(time.Duration(i)*100*time.Millisecond), 10)
	}
	if got := r.rate(t0.Add(9950 * time.Millisecond)); got < 95 || got > 105 {
		t.Errorf("steady 100/s measured %v", got)
	}
	if got := r.rate(t0.Add(20 * time.Second)); got != 0 {
		t.Errorf("after silence: %v", got)
	}
}

func TestLineEdit(t *testing.T) {
	var e lineEdit
	e.SetValue("data.n > 1")
	e.CursorEnd()
	e.Update(tea.KeyPressMsg{Code: 'w', Mod: tea.ModCtrl})
	e.Update(tea.KeyPressMsg{Code: tea.KeyExtended, Text: "2\x1b\n"})
	if e.Value() != "data.n > 2 " || e.Position() != 11 {
		t.Errorf("value %q at %d", e.Value(), e.Position())
	}
	e.Update(tea.KeyPressMsg{Code: tea.KeyHome})
	e.Update(tea.KeyPressMsg{Code: tea.KeyDelete})
	e.Update(tea.KeyPressMsg{Code: tea.KeyRight, Mod: tea.ModAlt})
	e.Update(tea.KeyPressMsg{Code: 'k', Mod: tea.ModCtrl})
	if e.Value() != "ata.n" {
		t.Errorf("value %q", e.Value())
	}
	e.Update(tea.KeyPressMsg{Code: tea.KeyBackspace})
	e.Update(tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl})
	if e.Value() != "" || e.Position() != 0 {
		t.Errorf("value %q at %d", e.Value(), e.Position())
	}
}

func TestGiveUp(t *testing.T) {
	f := newFakeLog()
	clk := newClock()
	cfg := testConfig(f, clk)
	cfg.Backoff = client.Backoff{Initial: time.Second, Max: time.Second, GiveUp: 1500 * time.Millisecond}
	m, _ := newTestModel(cfg)
	defer m.Close()
	busy := &client.HTTPError{Status: 503}
	fail := func(attempt int) tea.Cmd {
		_, cmd := m.Update(pageMsg{gen: m.list.gen, epoch: m.list.epoch, kind: loadReset, reset: resetSpec{startFollow: true}, err: busy, attempt: attempt})
		return cmd
	}
	if fail(0); m.conn.state.kind != connRetrying {
		t.Fatalf("first failure: conn %v", m.conn.state.kind)
	}
	clk.Add(time.Second)
	fail(1) // a second retry would end past the limit
	if m.conn.state.kind != connFailed || m.Err() == nil {
		t.Errorf("after failing past --retry-for: conn %v, Err %v", m.conn.state.kind, m.Err())
	}
}

func TestProbeWhileStreamRetries(t *testing.T) {
	f := newFakeLog()
	clk := newClock()
	m, _ := newTestModel(testConfig(f, clk))
	defer m.Close()
	m.list.started = true
	m.onFeed(followRetryMsg{gen: m.list.gen, err: errors.New("refused"), attempt: 2, delay: 4 * time.Second})
	m.onProbe(probeMsg{page: Page{Newest: fakeCursor(1)}})
	if m.conn.state.kind != connRetrying {
		t.Error("a probe answered while the stream still waits to retry: want RECONNECTING")
	}
	clk.Add(5 * time.Second)
	m.onProbe(probeMsg{page: Page{Newest: fakeCursor(1)}})
	if m.conn.state.kind != connLive {
		t.Error("a probe answered once the stream's attempt was due: want LIVE")
	}
}

func TestColours(t *testing.T) {
	st := newStyles(true)
	if got := st.time.Render("10:00"); got != "\x1b[36m10:00\x1b[m" {
		t.Errorf("time: %q", got)
	}
	if got := st.selected.Render("x"); got != "\x1b[7mx\x1b[m" {
		t.Errorf("selected: %q", got)
	}
	if got := newStyles(false).time.Render("10:00"); got != "10:00" {
		t.Errorf("without colour: %q", got)
	}
}

func TestScreenWidth(t *testing.T) {
	st := newStyles(true)
	for _, c := range []cells{cells(ansi.WcWidth), cells(ansi.GraphemeWidth)} {
		for _, s := range []string{
			"", "plain text", st.time.Render("10:00") + " " + st.selected.Render("x"),
			"▶ marked", "wide 日本", st.typ.Render("é"), "\x1b[1;33", "tab\there", "\x1b]8;;u\x07link\x1b]8;;\x07",
			"heart ❤️", st.typ.Render("👨‍👩‍👧"),
		} {
			if got, want := c.screen(s), ansi.Method(c).StringWidth(s); got != want {
				t.Errorf("method %d: screen(%q) = %d, want %d", c, s, got, want)
			}
		}
	}
}

// What the stream sends while the UI is busy is applied in one update, not one each.
func TestFeedBatches(t *testing.T) {
	f := newFakeLog()
	m, _ := newTestModel(testConfig(f, newClock()))
	defer m.Close()
	for i := range 200 {
		m.c.feed <- followMsg{gen: m.list.gen, cursor: fakeCursor(i)}
	}
	msg, ok := m.listen()().(feedMsg)
	if !ok || len(msg) != 200 {
		t.Fatalf("one listen took %d messages, want all 200", len(msg))
	}
	// Updates are spaced a frame apart: the next one waits, taking what came meanwhile.
	m.pace.interval = time.Hour
	m.c.feed <- followMsg{gen: m.list.gen}
	got := make(chan tea.Msg, 1)
	go func() { got <- m.listen()() }()
	select {
	case <-got:
		t.Fatal("a second update within the frame")
	case <-time.After(20 * time.Millisecond):
	}
	m.Close() // ends the wait
	if msg := <-got; msg != nil {
		t.Errorf("after Close: %T", msg)
	}
}
