package tui

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"
)

// The UI's tests run the model in a Bubble Tea program with teatest, drive it with keys
// and messages, and compare what it draws at chosen moments with golden files in
// testdata (go test -update rewrites them). The screen is 100x30, the clock stands still
// and colours are off, so every drawing is the same on every run.

const (
	termW = 100
	termH = 30
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testConfig is a following UI over src with a still clock.
func testConfig(src Source, clk *clock) Config {
	return Config{
		Source: src, Follow: true, Keep: 1000, PageSize: 50,
		Backoff:    clientBackoff(time.Millisecond),
		ProbeEvery: -1, FrameInterval: time.Millisecond,
		NoColor: true, Now: clk.Now, Location: time.UTC,
	}
}

// harness wraps the model so that a test can look at it from inside the program, where
// it is safe to.
type harness struct{ m *Model }

// inspect asks the program to run fn on the model and send back what it drew.
type inspect struct {
	fn    func(*Model) bool
	reply chan inspected
}

type inspected struct {
	view string
	ok   bool
}

func (h harness) Init() tea.Cmd { return h.m.Init() }

func (h harness) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if in, ok := msg.(inspect); ok {
		ok := in.fn == nil || in.fn(h.m)
		in.reply <- inspected{view: h.m.screen(), ok: ok}
		return h, nil
	}
	_, cmd := h.m.Update(msg)
	return h, cmd
}

func (h harness) View() tea.View { return h.m.View() }

// ui is a running UI under test.
type ui struct {
	t  *testing.T
	tm *teatest.TestModel
	m  *Model
}

func startUI(t *testing.T, cfg Config) *ui {
	t.Helper()
	m := New(cfg)
	tm := teatest.NewTestModel(t, harness{m}, teatest.WithInitialTermSize(termW, termH))
	u := &ui{t: t, tm: tm, m: m}
	t.Cleanup(func() {
		_ = tm.Quit()
		tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
		m.Close()
	})
	return u
}

// waitFor waits until cond holds in the program and returns the screen then.
func (u *ui) waitFor(what string, cond func(*Model) bool) string {
	u.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last inspected
	for time.Now().Before(deadline) {
		reply := make(chan inspected, 1)
		u.tm.Send(inspect{fn: cond, reply: reply})
		select {
		case last = <-reply:
			if last.ok {
				return last.view
			}
		case <-time.After(time.Second):
		}
		time.Sleep(5 * time.Millisecond)
	}
	u.t.Fatalf("waiting for %s: gave up; the screen was:\n%s", what, last.view)
	return ""
}

// is reports whether cond holds now, once everything sent before was handled.
func (u *ui) is(cond func(*Model) bool) bool {
	u.t.Helper()
	reply := make(chan inspected, 1)
	u.tm.Send(inspect{fn: cond, reply: reply})
	select {
	case r := <-reply:
		return r.ok
	case <-time.After(10 * time.Second):
		u.t.Fatal("the program does not answer")
	}
	return false
}

// pressUntil presses a key until cond holds, a few hundred times at most.
func (u *ui) pressUntil(k, what string, cond func(*Model) bool) {
	u.t.Helper()
	for range 400 {
		if u.is(cond) {
			return
		}
		u.keys(k)
		time.Sleep(time.Millisecond)
	}
	u.waitFor(what, cond)
}

// screen is what the UI draws now, once everything sent before was handled.
func (u *ui) screen() string {
	u.t.Helper()
	return u.waitFor("the screen", nil)
}

// keys sends key presses: single characters, or names such as "up", "enter", "space".
func (u *ui) keys(ks ...string) {
	for _, k := range ks {
		u.tm.Send(keyMsg(k))
	}
}

func keyMsg(k string) tea.KeyPressMsg {
	names := map[string]rune{
		"up": tea.KeyUp, "down": tea.KeyDown, "pgup": tea.KeyPgUp, "pgdown": tea.KeyPgDown,
		"home": tea.KeyHome, "end": tea.KeyEnd, "enter": tea.KeyEnter, "esc": tea.KeyEscape,
		"tab": tea.KeyTab, "backspace": tea.KeyBackspace, "left": tea.KeyLeft,
	}
	if c, ok := names[k]; ok {
		return tea.KeyPressMsg{Code: c}
	}
	if c, ok := strings.CutPrefix(k, "ctrl+"); ok {
		return tea.KeyPressMsg{Code: rune(c[0]), Mod: tea.ModCtrl}
	}
	if k == "space" {
		k = " "
	}
	return typed(k)
}

// typed is the key that types text, as a terminal reports it.
func typed(text string) tea.KeyPressMsg {
	r := []rune(text)[0]
	k := tea.KeyPressMsg{Code: r, Text: text}
	if unicode.IsUpper(r) {
		k.Code, k.ShiftedCode, k.Mod = unicode.ToLower(r), r, tea.ModShift
	}
	return k
}

// typeText types text into the UI.
func (u *ui) typeText(s string) {
	for _, r := range s {
		u.tm.Send(typed(string(r)))
	}
}

// golden compares a screen with testdata/<test>/<name>.golden.
func (u *ui) golden(name, screen string) {
	u.t.Helper()
	golden.RequireEqual(namedTB{u.t, u.t.Name() + "/" + name}, []byte(screen+"\n"))
}

// namedTB is a testing.TB with another name, to give one test several golden files.
type namedTB struct {
	testing.TB
	name string
}

func (n namedTB) Name() string { return n.name }

// rowsText lists a window's rows by the events' sequence numbers, "gap" for markers.
func rowsText(w *window) string {
	var b strings.Builder
	for _, r := range w.rows {
		if r.gap != nil {
			b.WriteString("gap ")
		} else {
			b.WriteString(strings.TrimLeft(r.ev.id[:8], "0") + " ")
		}
	}
	return b.String()
}

// syncBuffer is a buffer safe to write from the UI's background work.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
