package tui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
)

// Benchmarks of the UI's work on its own goroutine at 5,000 events a second: what one
// frame of streamed events costs (at 30 frames a second, 167 events each), and what a key
// press costs, each with the window full (5,000 events) and the screen drawn after.
//
//	go test -run '^$' -bench . -benchmem ./internal/tui/

const benchPerFrame = 5000 / 30

// benchModel is a following UI on a 120x40 screen holding a full window.
func benchModel(b *testing.B) (*Model, *fakeLog) {
	b.Helper()
	f := newFakeLog()
	f.add(DefaultKeep, "")
	cfg := testConfig(f, newClock())
	cfg.Keep = DefaultKeep
	m := New(cfg)
	b.Cleanup(m.Close)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	m.list.follow = true
	m.Update(pageMsg{gen: m.list.gen, epoch: m.list.epoch, kind: loadReset, reset: resetSpec{startFollow: true, selectLast: true},
		evs: newEvents(f, f.items), page: Page{Newest: f.items[len(f.items)-1].Cursor}})
	m.conn.stop() // the benchmark feeds the head itself
	if m.list.loaded() != DefaultKeep || !m.list.win.newerDone {
		b.Fatalf("%d loaded", m.list.loaded())
	}
	return m, f
}

// nextBatch makes the next n events of the log, as the stream would deliver them.
func nextBatch(m *Model, f *fakeLog, n int) feedMsg {
	f.add(n, "")
	items := f.items[len(f.items)-n:]
	f.items = f.items[len(f.items)-n:] // keep the fake's memory flat
	evs := newEvents(f, items)
	return feedMsg{followMsg{gen: m.list.gen, evs: evs, cursor: evs[n-1].cursor, caughtUp: true}}
}

func BenchmarkStreamFrame(b *testing.B) {
	m, f := benchModel(b)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		msg := nextBatch(m, f, benchPerFrame)
		b.StartTimer()
		m.Update(msg)
		_ = m.View()
	}
	if m.list.loaded() != DefaultKeep || !strings.Contains(m.View().Content, "LIVE") {
		b.Fatal("the window did not stay full and live")
	}
}

func BenchmarkKeyPress(b *testing.B) {
	m, _ := benchModel(b)
	up, down := tea.KeyPressMsg{Code: tea.KeyUp}, tea.KeyPressMsg{Code: tea.KeyDown}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := up
		if i%2 == 1 {
			k = down
		}
		i++
		m.Update(k)
		_ = m.View()
	}
}

// BenchmarkNewEvents is the copying and reading of streamed items, done off the UI's
// goroutine, per frame's worth.
func BenchmarkNewEvents(b *testing.B) {
	f := newFakeLog()
	f.add(benchPerFrame, "")
	b.ReportAllocs()
	for b.Loop() {
		newEvents(f, f.items)
	}
}
