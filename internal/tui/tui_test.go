package tui

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/evtctl/evtctl/pkg/client"
)

func clientBackoff(d time.Duration) client.Backoff { return client.Backoff{Initial: d, Max: d} }

func newClock() *clock { return &clock{t: fakeBase.Add(time.Minute)} }

// following reports whether the UI shows n events, the newest selected, attached to the head.
func following(n int) func(*Model) bool {
	return func(m *Model) bool {
		return m.list.started && m.list.loaded() == n && m.list.win.newerDone && m.list.follow && m.list.sel == len(m.list.win.rows)-1
	}
}

func TestFollow(t *testing.T) {
	f := newFakeLog()
	f.add(30, "")
	u := startUI(t, testConfig(f, newClock()))
	u.golden("start", u.waitFor("30 events", following(30)))

	f.add(3, "org.example.shop.order.shipped.v1")
	s := u.waitFor("33 events", following(33))
	if !strings.Contains(s, "newest "+fakeCursor(33)) {
		t.Errorf("the status bar does not show the newest cursor:\n%s", s)
	}
	u.golden("followed", s)
	if got := f.follows[0].After; got != fakeCursor(30) {
		t.Errorf("following started after %q, want the head page's newest %q", got, fakeCursor(30))
	}
}

func TestPauseResume(t *testing.T) {
	f := newFakeLog()
	f.add(10, "")
	u := startUI(t, testConfig(f, newClock()))
	u.waitFor("10 events", following(10))

	u.keys("space")
	u.waitFor("paused", func(m *Model) bool { return m.list.paused })
	f.add(5, "")
	s := u.waitFor("5 events waiting", func(m *Model) bool { return m.list.waiting == 5 })
	u.golden("paused", s)
	if !strings.Contains(s, "PAUSED · 5 new events") || strings.Contains(s, "0000000b") {
		t.Errorf("paused: want the count and no new event in the list:\n%s", s)
	}

	u.keys("space")
	s = u.waitFor("15 events", following(15))
	u.golden("resumed", s)
	if strings.Contains(s, "PAUSED") {
		t.Errorf("still paused:\n%s", s)
	}
}

func TestPauseOverflowRefetches(t *testing.T) {
	f := newFakeLog()
	f.add(10, "")
	cfg := testConfig(f, newClock())
	cfg.Keep, cfg.PageSize = 40, 20
	u := startUI(t, cfg)
	u.waitFor("10 events", following(10))
	u.keys("space")
	u.waitFor("paused", func(m *Model) bool { return m.list.paused })
	f.add(60, "") // more than the window holds: dropped while paused
	u.waitFor("detached", func(m *Model) bool { return m.list.waiting == 60 && !m.list.win.newerDone && len(m.list.pending) == 0 })
	u.keys("space")
	u.waitFor("the head again", func(m *Model) bool {
		return !m.list.paused && m.list.win.newerDone && m.list.follow && m.list.win.lastEvent() == fakeCursor(70) && len(m.list.win.rows) <= 40
	})
}

func TestDetailPane(t *testing.T) {
	f := newFakeLog()
	f.add(12, "")
	u := startUI(t, testConfig(f, newClock()))
	u.waitFor("12 events", following(12))
	u.keys("up", "up")
	s := u.waitFor("the 10th selected", func(m *Model) bool { return m.list.sel == 9 && !m.list.follow })
	u.golden("selected", s)
	for _, want := range []string{`"type": "org.example.shop.order.placed.v1",`, `"n": 10,`} {
		if !strings.Contains(s, want) {
			t.Errorf("the detail pane lacks %s:\n%s", want, s)
		}
	}
	u.keys("tab", "down", "down", "down", "down", "down", "down", "down", "down", "down")
	s = u.waitFor("scrolled", func(m *Model) bool { return m.detail.focus && m.detail.off == 8 })
	u.golden("scrolled", s)
	for _, want := range []string{`"gift": false,`, `"note": null`, `        "qty": 1`} {
		if !strings.Contains(s, want) {
			t.Errorf("the scrolled detail pane lacks %s:\n%s", want, s)
		}
	}
	u.keys("enter")
	u.golden("zoomed", u.waitFor("zoomed", func(m *Model) bool { return m.detail.zoom }))
	u.keys("esc", "esc")
	u.waitFor("back to the list", func(m *Model) bool { return !m.detail.zoom && !m.detail.focus })
	// New events do not move a selection the user made.
	f.add(2, "")
	u.waitFor("14 events", func(m *Model) bool { return m.list.loaded() == 14 && m.list.sel == 9 && !m.list.follow })
	u.keys("end")
	u.waitFor("following again", following(14))
}

func TestScrollBackFetchesOlderPages(t *testing.T) {
	f := newFakeLog()
	f.add(300, "")
	cfg := testConfig(f, newClock())
	cfg.Keep, cfg.PageSize = 100, 40
	u := startUI(t, cfg)
	u.waitFor("the newest page", following(40))
	release := f.holdPages()
	u.keys("pgup", "pgup", "pgup", "pgup")
	s := u.waitFor("loading older events", func(m *Model) bool { return m.list.loadingOlder && m.list.off == 0 && m.list.sel == 0 })
	u.golden("loading", s)
	release()
	s = u.waitFor("an older page", func(m *Model) bool { return m.list.loaded() == 80 && !m.list.loadingOlder })
	u.golden("older", s)
	// Pages move 13 rows (the list's 14, less one). The fourth went 13 rows past the top
	// while the page was on its way, and moved on by those once it arrived.
	if !u.is(func(m *Model) bool {
		r, ok := m.list.selected()
		return ok && r.ev != nil && r.ev.cursor == fakeCursor(248)
	}) {
		t.Errorf("want the event 13 above %s selected", fakeCursor(261))
	}
	var back *PageRequest
	for _, r := range f.requests() {
		if r.Backward && r.Before == fakeCursor(261) {
			back = &r
		}
	}
	if back == nil || back.Limit != 40 {
		t.Fatalf("no backward page before the oldest loaded event %s: %+v", fakeCursor(261), f.requests())
	}

	// Far back: memory stays bounded and the newest events are let go...
	u.pressUntil("pgup", "the oldest event", func(m *Model) bool {
		return m.list.win.olderDone && m.list.win.firstEvent() == fakeCursor(1) && !m.list.loadingOlder && m.list.sel == 0 && m.list.off == 0
	})
	u.golden("oldest", u.screen())
	if !u.is(func(m *Model) bool {
		return len(m.list.win.rows) <= 100 && !m.list.win.newerDone && m.list.win.lastEvent() < fakeCursor(150)
	}) {
		t.Error("the window holds more than 100 events, or the newest ones")
	}
	// ...and fetched again, forward, when scrolled back to.
	u.pressUntil("pgdown", "newer pages again", func(m *Model) bool { return m.list.win.lastEvent() > fakeCursor(250) })
	u.keys("end")
	// How many events are loaded at the head depends on whether a forward page was still
	// loading when end was pressed; where the view is does not.
	u.waitFor("the head", func(m *Model) bool {
		return m.list.win.newerDone && m.list.follow && m.list.sel == len(m.list.win.rows)-1 && m.list.win.lastEvent() == fakeCursor(300)
	})
	u.waitFor("bounded", func(m *Model) bool { return len(m.list.win.rows) <= 100 })
}

func TestGapMarker(t *testing.T) {
	f := newFakeLog()
	f.add(8, "")
	u := startUI(t, testConfig(f, newClock()))
	u.waitFor("8 events", following(8))
	// The connection stalls while the node takes 6 events and retention drops 10.
	f.setHold(true)
	f.add(6, "")
	f.prune(10)
	f.setHold(false)
	s := u.waitFor("a gap marker", func(m *Model) bool {
		return strings.Contains(rowsText(&m.list.win), "8 gap b ") && m.list.loaded() == 12
	})
	u.golden("gap", s)
	if !strings.Contains(s, "events lost between "+fakeCursor(8)+" and "+fakeCursor(11)) {
		t.Errorf("the marker does not name both cursors:\n%s", s)
	}
	u.keys("up", "up", "up", "up")
	u.golden("gap-selected", u.waitFor("the gap selected", func(m *Model) bool { r, ok := m.list.selected(); return ok && r.gap != nil }))
}

// Opened after a cursor whose next events were pruned, the list says so on its first page,
// as tail does: following (tail -i --after) and a range (replay -i --from). A start time
// older than the log is no loss.
func TestGapOnFirstPage(t *testing.T) {
	f := newFakeLog()
	f.add(20, "")
	f.prune(10)
	for _, follow := range []bool{true, false} {
		cfg := testConfig(f, newClock())
		cfg.Follow = follow
		cfg.From = client.Position{Cursor: fakeCursor(3)}
		u := startUI(t, cfg)
		s := u.waitFor("a gap marker first", func(m *Model) bool {
			return rowsText(&m.list.win) == "gap b c d e f 10 11 12 13 14 " && m.list.win.newerDone
		})
		if !strings.Contains(s, "7 events lost between "+fakeCursor(3)+" and "+fakeCursor(11)) {
			t.Errorf("follow %v: the marker does not say what was lost:\n%s", follow, s)
		}
		cfg.From = client.Position{Time: fakeBase}
		u = startUI(t, cfg)
		u.waitFor("no gap marker from a time", func(m *Model) bool {
			return rowsText(&m.list.win) == "b c d e f 10 11 12 13 14 " && m.list.win.newerDone
		})
	}
}

func TestFilterEdit(t *testing.T) {
	f := newFakeLog()
	f.add(20, "")
	f.add(5, "org.example.shop.order.shipped.v1")
	u := startUI(t, testConfig(f, newClock()))
	u.waitFor("25 events", following(25))

	u.keys("/")
	u.typeText("type = 'org.example.shop.order.shipped.v1' AND data.n >")
	u.keys("enter")
	s := u.waitFor("a syntax error", func(m *Model) bool { return m.prompt.err != "" })
	u.golden("syntax-error", s)
	if !strings.Contains(s, "offset 55:") || u.m.list.query != "" {
		t.Errorf("want the parser's error and the old query in force (got %q):\n%s", u.m.list.query, s)
	}
	// The caret points at the offset: under the end of the text, after the prompt.
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "filter › ") {
			caret := lines[i+1]
			if want := 9 + 55; strings.TrimRight(caret, " ") != strings.Repeat(" ", want)+"^" { // "filter › " is 9 columns
				t.Errorf("caret line %q, want ^ at column %d", caret, want)
			}
		}
	}
	// Events keep coming under the old query meanwhile.
	f.add(1, "")
	u.waitFor("26 events", func(m *Model) bool { return m.list.loaded() == 26 })

	u.typeText(" 22")
	u.keys("enter")
	s = u.waitFor("the new query", func(m *Model) bool {
		return m.list.query == "type = 'org.example.shop.order.shipped.v1' AND data.n > 22" && m.list.loaded() == 3 && m.prompt.kind == promptNone
	})
	u.golden("applied", s)
	// The stream follows the new query.
	f.add(2, "org.example.shop.order.shipped.v1")
	f.add(2, "")
	u.waitFor("5 events", following(5))
	if n := len(f.follows); n != 2 || f.follows[1].Query != u.m.list.query || f.follows[1].After != fakeCursor(26) {
		t.Errorf("following after the edit: %+v", f.follows)
	}
}

func TestFilterRefusedByNode(t *testing.T) {
	f := newFakeLog()
	f.add(5, "")
	u := startUI(t, testConfig(f, newClock()))
	u.waitFor("5 events", following(5))
	// A query that parses here but that the node refuses, as a node of another kind might.
	f.refuse = func(q string) error {
		if q == "" {
			return nil
		}
		return &client.RPCError{Code: -32603, Message: "Internal error", Data: "invalid filter query: offset 5: got tag, wanted number"}
	}
	u.keys("/")
	u.typeText("data.n > 1")
	u.keys("enter")
	s := u.waitFor("the node's refusal", func(m *Model) bool { return strings.Contains(m.prompt.err, "refused") })
	if u.m.list.query != "" || !strings.Contains(s, "the node refused the query: invalid filter query: offset 5") || u.m.prompt.errAt != 5 {
		t.Errorf("query %q, error at %d:\n%s", u.m.list.query, u.m.prompt.errAt, s)
	}
}

func TestReconnect(t *testing.T) {
	f := newFakeLog()
	f.add(6, "")
	clk := newClock()
	u := startUI(t, testConfig(f, clk))
	u.waitFor("6 events", following(6))
	f.setDown(errors.New("cannot reach the node: dial tcp 127.0.0.1:7480: connect: connection refused"))
	s := u.waitFor("reconnecting", func(m *Model) bool { return m.conn.state.kind == connRetrying })
	u.golden("reconnecting", s)
	if !strings.Contains(s, "RECONNECTING in 3s (attempt 1)") {
		t.Errorf("want a countdown:\n%s", s)
	}
	clk.Add(2 * time.Second)
	if s := u.screen(); !strings.Contains(s, "RECONNECTING in 1s (attempt 1)") {
		t.Errorf("the countdown does not count down:\n%s", s)
	}
	f.setDown(nil)
	f.add(1, "")
	s = u.waitFor("live again", func(m *Model) bool { return m.conn.state.kind == connLive && m.list.loaded() == 7 })
	u.golden("reconnected", s)
}

func TestHelpAndResize(t *testing.T) {
	f := newFakeLog()
	f.add(40, "")
	u := startUI(t, testConfig(f, newClock()))
	u.waitFor("40 events", following(40))
	u.keys("?")
	s := u.waitFor("help", func(m *Model) bool { return m.help.open })
	u.golden("help", s)
	for _, b := range defaultKeys().all() {
		if !strings.Contains(s, b.Help().Desc) {
			t.Errorf("help lacks %q", b.Help().Desc)
		}
	}
	u.keys("x")
	u.waitFor("help closed", func(m *Model) bool { return !m.help.open })
	u.tm.Send(tea.WindowSizeMsg{Width: 64, Height: 16})
	s = u.waitFor("resized", func(m *Model) bool { return m.c.width == 64 })
	u.golden("narrow", s)
	for i, l := range strings.Split(s, "\n") {
		if w := len([]rune(l)); w > 64 {
			t.Errorf("line %d is %d wide: %q", i, w, l)
		}
	}
	if n := strings.Count(s, "\n") + 1; n != 16 {
		t.Errorf("%d lines, want 16", n)
	}
}

func TestReplayRange(t *testing.T) {
	f := newFakeLog()
	f.add(120, "")
	cfg := testConfig(f, newClock())
	cfg.Follow = false
	cfg.From = client.Position{Cursor: fakeCursor(10)}
	cfg.To = client.Position{Cursor: fakeCursor(100)}
	u := startUI(t, cfg)
	s := u.waitFor("the range's start", func(m *Model) bool { return m.list.loaded() == 50 && m.list.sel == 0 })
	u.golden("start", s)
	if u.m.list.win.firstEvent() != fakeCursor(11) {
		t.Errorf("first event %s, want %s (--from is exclusive)", u.m.list.win.firstEvent(), fakeCursor(11))
	}
	u.keys("end")
	s = u.waitFor("the range's end", func(m *Model) bool {
		return m.list.win.lastEvent() == fakeCursor(100) && m.list.sel == len(m.list.win.rows)-1
	})
	u.golden("end", s)
	f.add(5, "")
	u.keys("space", "pgdown")
	if s := u.screen(); strings.Contains(s, "00000065") || !strings.Contains(s, "· end of the range ·") {
		t.Errorf("a replay shows more than its range:\n%s", s)
	}
}

func TestWriteAndCopy(t *testing.T) {
	f := newFakeLog()
	f.add(7, "")
	dir := t.TempDir()
	clip := &syncBuffer{}
	cfg := testConfig(f, newClock())
	cfg.Dir, cfg.Clipboard = dir, clip
	u := startUI(t, cfg)
	u.waitFor("7 events", following(7))

	u.keys("w")
	u.golden("write-prompt", u.waitFor("the prompt", func(m *Model) bool { return m.prompt.kind == promptWrite }))
	u.keys("enter")
	u.waitFor("written", func(m *Model) bool { return strings.HasPrefix(m.conn.flash, "wrote 7 events") })
	b, err := os.ReadFile(filepath.Join(dir, "events-20261122-100100.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 7 || lines[0] != string(f.items[0].Raw) {
		t.Errorf("file holds %d lines, first %q", len(lines), lines[0])
	}
	// The same name again: refused, and the prompt stays for another.
	u.keys("w", "enter")
	s := u.waitFor("refused", func(m *Model) bool { return strings.Contains(m.prompt.err, "already exists") })
	if !strings.Contains(s, "already exists; give another name") {
		t.Errorf("no refusal:\n%s", s)
	}
	u.keys("esc", "up", "W", "ctrl+u")
	u.typeText("one.jsonl")
	u.keys("enter")
	u.waitFor("written", func(m *Model) bool { return strings.HasPrefix(m.conn.flash, "wrote 1 event to one.jsonl") })
	if b, err := os.ReadFile(filepath.Join(dir, "one.jsonl")); err != nil || string(b) != string(f.items[5].Raw)+"\n" {
		t.Errorf("one.jsonl: %q, %v", b, err)
	}

	u.keys("C")
	u.waitFor("copied", func(m *Model) bool { return strings.HasPrefix(m.conn.flash, "copied the cursor") })
	if want := "\x1b]52;c;" + base64.StdEncoding.EncodeToString([]byte(fakeCursor(6))) + "\x07"; clip.String() != want {
		t.Errorf("clipboard got %q, want %q", clip.String(), want)
	}
	u.keys("c")
	u.waitFor("copied", func(m *Model) bool { return strings.HasPrefix(m.conn.flash, "copied the event") })
	seqs := strings.Split(clip.String(), "\x07")
	payload, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(seqs[1], "\x1b]52;c;"))
	if string(payload) != string(f.items[5].Data) {
		t.Errorf("copied %q", payload)
	}
}

func TestQuitEndsTheProgram(t *testing.T) {
	f := newFakeLog()
	f.add(3, "")
	m := New(testConfig(f, newClock()))
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(termW, termH))
	tm.Send(keyMsg("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
	m.Close() // returns: the stream ended
	if m.Err() != nil {
		t.Errorf("Err = %v", m.Err())
	}
}

func TestFollowFromPosition(t *testing.T) {
	f := newFakeLog()
	f.add(300, "")
	cfg := testConfig(f, newClock())
	cfg.Keep, cfg.PageSize = 200, 50
	cfg.From = client.Position{Cursor: fakeCursor(100)}
	u := startUI(t, cfg)
	// It opens after the cursor, that event selected, with older ones above it.
	u.waitFor("the position", func(m *Model) bool {
		r, ok := m.list.selected()
		return ok && r.ev.cursor == fakeCursor(101) && m.list.win.firstEvent() == fakeCursor(51) && !m.list.follow
	})
	// New events wait below until the list is scrolled down to them.
	f.add(2, "")
	u.pressUntil("pgdown", "the head", func(m *Model) bool { return m.list.win.newerDone && m.list.win.lastEvent() == fakeCursor(302) })
	u.keys("end")
	u.waitFor("following", func(m *Model) bool { return m.list.follow && m.list.win.lastEvent() == fakeCursor(302) })
	f.add(1, "")
	u.waitFor("followed", func(m *Model) bool {
		return m.list.follow && m.list.win.lastEvent() == fakeCursor(303) && len(m.list.win.rows) <= 200
	})
}

func TestEmptyLogWaits(t *testing.T) {
	f := newFakeLog()
	u := startUI(t, testConfig(f, newClock()))
	s := u.waitFor("an empty list", func(m *Model) bool { return m.list.started && m.list.win.newerDone })
	if !strings.Contains(s, "no events match; waiting for new ones") {
		t.Errorf("screen:\n%s", s)
	}
	f.add(2, "")
	u.waitFor("the first events", following(2))
	if len(f.follows) != 1 || !f.follows[0].FromStart {
		t.Errorf("following an empty log should start at its start: %+v", f.follows)
	}
}

func TestReplayReverse(t *testing.T) {
	f := newFakeLog()
	f.add(120, "")
	cfg := testConfig(f, newClock())
	cfg.Follow, cfg.Reverse = false, true
	u := startUI(t, cfg)
	u.waitFor("the newest end", func(m *Model) bool {
		return m.list.win.lastEvent() == fakeCursor(120) && m.list.sel == len(m.list.win.rows)-1 && m.list.loaded() == 50
	})
	u.pressUntil("pgup", "the start", func(m *Model) bool {
		return m.list.win.olderDone && m.list.sel == 0 && m.list.win.firstEvent() == fakeCursor(1)
	})
	if s := u.screen(); !strings.Contains(s, "· start of the range ·") {
		t.Errorf("screen:\n%s", s)
	}
}

// Notes are on the help screen, before the keys, and the message says so from the start
// until a key is pressed.
func TestNotesAndMessage(t *testing.T) {
	f := newFakeLog()
	f.add(5, "")
	cfg := testConfig(f, newClock())
	cfg.Notes = []string{"The node runs at http://127.0.0.1:7480.", "Try from another terminal:", "  evtctl tail --node http://127.0.0.1:7480"}
	cfg.Message = "press ? for commands to try from another terminal"
	u := startUI(t, cfg)
	s := u.waitFor("5 events", following(5))
	lines := strings.Split(s, "\n")
	if got := lines[len(lines)-2]; got != cfg.Message {
		t.Errorf("the line above the status bar is %q, want the message", got)
	}
	u.keys("?")
	s = u.waitFor("help", func(m *Model) bool { return m.help.open })
	if !strings.HasPrefix(s, strings.Join(cfg.Notes, "\n")+"\n\nKeys\n") {
		t.Errorf("the help screen does not open with the notes:\n%s", s)
	}
	// Short of room, the help scrolls: the keys come first, down to quit; the remarks are below.
	u.tm.Send(tea.WindowSizeMsg{Width: termW, Height: 25})
	s = u.waitFor("a short help", func(m *Model) bool { return m.c.height == 25 })
	if !strings.Contains(s, "quit, restoring the terminal") || strings.Contains(s, "A ⚠ row marks") {
		t.Errorf("a short help screen:\n%s", s)
	}
	u.keys("x")
	s = u.waitFor("help closed", func(m *Model) bool { return !m.help.open })
	if strings.Contains(s, cfg.Message) {
		t.Errorf("the message outlived a key:\n%s", s)
	}
}

// demoNotes are notes as long as evtctl demo's: ten lines of commands to try.
var demoNotes = []string{
	"This demo's node runs in memory at http://127.0.0.1:41234 until the demo stops.",
	"Try from another terminal:",
	"",
	"  evtctl tail --node http://127.0.0.1:41234 \\",
	"    --type 'org.openedx.ecommerce.#' -o pretty",
	"  evtctl replay --node http://127.0.0.1:41234 | jq -r .event | sort | uniq -c",
	"  evtctl emit --node http://127.0.0.1:41234 \\",
	"    --source https://lms.example.com/events/ \\",
	"    --type org.openedx.learning.course.enrollment.created.v1 \\",
	`    --data '{"user":{"id":1}}'`,
}

// At 80x24 a help screen taller than the screen scrolls, and shows how to quit whatever
// part of it is in view; q quits from it.
func TestHelpScrollsAtEightyByTwentyFour(t *testing.T) {
	f := newFakeLog()
	f.add(5, "")
	cfg := testConfig(f, newClock())
	cfg.Notes = demoNotes
	u := startUI(t, cfg)
	u.waitFor("5 events", following(5))
	u.tm.Send(tea.WindowSizeMsg{Width: 80, Height: 24})
	u.waitFor("80x24", func(m *Model) bool { return m.c.width == 80 && m.c.height == 24 })
	u.keys("?")
	check := func(what, s string) {
		t.Helper()
		lines := strings.Split(s, "\n")
		if len(lines) != 24 {
			t.Errorf("%s: %d lines", what, len(lines))
		}
		for i, l := range lines {
			if w := ansi.StringWidth(l); w > 80 {
				t.Errorf("%s: line %d is %d columns: %q", what, i+1, w, l)
			}
		}
		if !regexp.MustCompile(`(?m)^  q\b.*quit`).MatchString(s) {
			t.Errorf("%s: no q to quit on the screen:\n%s", what, s)
		}
	}
	s := u.waitFor("help", func(m *Model) bool { return m.help.open })
	check("the top", s)
	if !strings.HasPrefix(s, demoNotes[0]) {
		t.Errorf("the help does not start with the notes:\n%s", s)
	}
	u.keys("end")
	s = u.waitFor("the end", func(m *Model) bool { return m.help.top > 0 })
	check("the end", s)
	for _, want := range []string{"quit, restoring the terminal", "lost before they were read."} {
		if !strings.Contains(s, want) {
			t.Errorf("scrolled to the end, the screen lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, demoNotes[0]) {
		t.Errorf("scrolled to the end, the screen still shows the first note:\n%s", s)
	}
	u.keys("up", "pgup", "home")
	s = u.waitFor("the top again", func(m *Model) bool { return m.help.top == 0 })
	check("the top again", s)
	u.keys("down")
	u.waitFor("one line down", func(m *Model) bool { return m.help.top == 1 && m.help.open })
	u.keys("q")
	u.tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
}
