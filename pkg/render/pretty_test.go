package render

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-runewidth"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/wire"
)

// The clock and the time zone of the fitted goldens: the afternoon of the day of most
// items, in a zone east of UTC.
var (
	fitZone = time.FixedZone("UTC+1", 3600)
	fitNow  = time.Date(2026, 11, 22, 15, 0, 0, 0, fitZone)
)

// renderFitted writes items with the pretty format fitted to width columns.
func renderFitted(t testing.TB, width int, color bool, items ...client.Item) string {
	t.Helper()
	var out bytes.Buffer
	r, err := New(&out, Options{Format: "pretty", Color: color, Width: func() int { return width }})
	if err != nil {
		t.Fatal(err)
	}
	r.loc, r.now = fitZone, func() time.Time { return fitNow }
	for _, it := range items {
		if err := r.Item(it); err != nil {
			t.Fatalf("Item(%s): %v", it.Cursor, err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// cols is the width of a line on a terminal, colour codes aside. It measures by grapheme
// clusters, not with the renderer's own rune widths.
func cols(line string) int {
	return runewidth.StringWidth(ansi.ReplaceAllString(line, ""))
}

var fitWidths = []int{40, 60, 80, 100, 120, 160, 200}

// TestFittedGolden pins the fitted lines of every test item at several widths.
func TestFittedGolden(t *testing.T) {
	items := loadItems(t)
	var b strings.Builder
	for _, w := range fitWidths {
		fmt.Fprintf(&b, "-- width %d --\n", w)
		b.WriteString(renderFitted(t, w, false, items...))
	}
	got := b.String()
	path := filepath.Join("testdata", "pretty_fit.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s line %d differs (run with -update to accept):\n got %q\nwant %q", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s: %d lines, want %d", path, len(gl), len(wl))
	}
}

// Every fitted line fits, one line per item, at any width, with or without colour; and
// colour changes nothing but the escapes.
func TestFittedFits(t *testing.T) {
	items := loadItems(t)
	for w := 1; w <= 240; w++ {
		plain := renderFitted(t, w, false, items...)
		colored := renderFitted(t, w, true, items...)
		if got := ansi.ReplaceAllString(colored, ""); got != plain {
			t.Fatalf("width %d: colour changes more than escapes:\n%s\n%s", w, got, plain)
		}
		lines := strings.Split(strings.TrimSuffix(plain, "\n"), "\n")
		if len(lines) != len(items) {
			t.Fatalf("width %d: %d lines for %d items", w, len(lines), len(items))
		}
		for i, l := range lines {
			if n := cols(l); n > w {
				t.Errorf("width %d, item %d: %d columns: %q", w, i, n, l)
			}
			if strings.HasSuffix(l, " ") {
				t.Errorf("width %d, item %d: trailing space: %q", w, i, l)
			}
			if strings.ContainsAny(l, "\x1b\a\u009b\u202e") {
				t.Errorf("width %d, item %d: a control character reaches the terminal: %q", w, i, l)
			}
		}
	}
}

// columnStarts are the columns at which each cell of a fitted line starts: after the
// time, each cell follows two spaces.
func columnStarts(l layout, ce bool) []int {
	starts := []int{0, timeWidth + 2}
	next := starts[1] + l.typ + 2
	if !ce {
		return append(starts, next)
	}
	for _, w := range []int{l.source, l.subject, l.id} {
		if w > 0 {
			starts = append(starts, next)
			next += w + 2
		}
	}
	return append(starts, next)
}

// At every width from 40, each cell starts at its column on every line: the columns line
// up whatever the values, wide characters and escapes included.
func TestFittedAligned(t *testing.T) {
	items := loadItems(t)
	for w := 40; w <= 240; w++ {
		l := fitLayout(w)
		lines := strings.Split(strings.TrimSuffix(renderFitted(t, w, false, items...), "\n"), "\n")
		for i, line := range lines {
			ev := scanData(string(items[i].Data))
			rs := []rune(line)
			at := 0 // the column of rs[k]
			k := 0
			for _, start := range columnStarts(l, ev.ce) {
				for k < len(rs) && at < start {
					at += runeCols(rs[k])
					k++
				}
				if k == len(rs) && at <= start {
					break // the line ended before this cell: no data
				}
				if at != start {
					t.Fatalf("width %d, item %d: no cell starts at column %d: %q", w, i, start, line)
				}
				if rs[k] == ' ' || (start > 0 && (rs[k-1] != ' ' || rs[k-2] != ' ')) {
					t.Fatalf("width %d, item %d: column %d is not the start of a cell: %q", w, i, start, line)
				}
			}
		}
	}
}

func TestFitLayout(t *testing.T) {
	tests := []struct {
		width int
		want  layout
	}{
		{0, layout{}},
		{-3, layout{}},
		{40, layout{width: 40, typ: 12}},
		{80, layout{width: 80, typ: 22}},
		{120, layout{width: 120, typ: 33, subject: 19}},
		{99, layout{width: 99, typ: 27}},
		{100, layout{width: 100, typ: 28, subject: 16}},
		{160, layout{width: 160, typ: 40, subject: 25}},
		{170, layout{width: 170, typ: 40, subject: 27, source: 17}},
		{230, layout{width: 230, typ: 40, subject: 32, source: 23, id: 23}},
	}
	for _, tc := range tests {
		if got := fitLayout(tc.width); got != tc.want {
			t.Errorf("fitLayout(%d) = %+v, want %+v", tc.width, got, tc.want)
		}
	}
	// The data keeps over a third of the line, and the type shows at least
	// "…enrollment.created.v1" from 80 columns; a wider terminal never shows fewer columns.
	prev := layout{}
	for w := 40; w <= 400; w++ {
		l := fitLayout(w)
		data := w - (timeWidth + 2 + l.typ + 2)
		for _, c := range []int{l.source, l.subject, l.id} {
			if c > 0 {
				data -= c + 2
			}
		}
		if data < 12 || (w >= 70 && data*100 < w*35) || (w >= 80 && l.typ < 22) {
			t.Errorf("width %d: %+v leaves %d columns of data", w, l, data)
		}
		if l.typ < prev.typ || l.subject < prev.subject || l.source < prev.source || l.id < prev.id {
			t.Errorf("width %d: %+v, narrower than %+v at the width before", w, l, prev)
		}
		prev = l
	}
}

func TestShortTime(t *testing.T) {
	r := &Renderer{loc: fitZone, now: func() time.Time { return fitNow }}
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 11, 22, 9, 0, 1, 500e6, time.UTC), "10:00:01.500"},
		{time.Date(2026, 11, 22, 23, 30, 0, 0, time.UTC), "Nov 23 00:30"}, // tomorrow in UTC+1
		{time.Date(2026, 1, 2, 3, 4, 5, 0, fitZone), "Jan 02 03:04"},
		{time.Date(2025, 12, 31, 23, 59, 0, 0, fitZone), "2025-12-31"},
	} {
		if got := string(r.appendShortTime(nil, tc.t)); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.t, got, tc.want)
		}
	}
}

// The width is asked once per batch, so a resized terminal is followed.
func TestFittedResize(t *testing.T) {
	items := loadItems(t)
	var out bytes.Buffer
	width, asked := 120, 0
	r, err := New(&out, Options{Format: "pretty", Width: func() int { asked++; return width }})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{120, 60, 0} {
		width = w
		out.Reset()
		for _, it := range items {
			if err := r.Item(it); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if n := cols(l); (w > 0 && n > w) || (w == 0 && n <= 120 && strings.Contains(l, "xxxxxxxx")) {
				t.Errorf("width %d: a line of %d columns: %q", w, n, l)
			}
		}
	}
	if asked != 3 {
		t.Errorf("the width was asked %d times for 3 batches", asked)
	}
}

func TestAppendDisplayEnd(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		want  string
		cols  int
	}{
		{"org.openedx.learning.course.enrollment.created.v1", 22, "…enrollment.created.v1", 22},
		{"abc", 3, "abc", 3},
		{"abcd", 3, "…cd", 3},
		{"a\x1bbc", 4, "…bc", 3},
		{"a\x1bbc", 8, "…bc", 3}, // an escape is not cut in two
		{"a\x1bbc", 9, `a\u001bbc`, 9},
		{"日本語テキスト", 6, "…スト", 5},
		{"xe\u0301\u0301f", 2, "…f", 2}, // the combining marks go with the cut
		{"abcd", 0, "abcd", 4},
	}
	for _, tc := range tests {
		b, n := appendDisplayEnd(nil, tc.in, tc.limit)
		if string(b) != tc.want || n != tc.cols {
			t.Errorf("appendDisplayEnd(%q, %d) = %q, %d; want %q, %d", tc.in, tc.limit, b, n, tc.want, tc.cols)
		}
	}
}

// An item whose cursor holds no time (a chain's height and place in its block) and that the
// source stamped with a time shows that time, fitted or not; without one, "-".
func TestPrettyItemTime(t *testing.T) {
	at := time.Date(2026, 11, 22, 13, 39, 11, 957e6, time.UTC)
	it := client.Item{Item: wire.Item{Cursor: "h000000000044.00000001", Event: "Tx", Data: []byte(`{"type":"tendermint/event/Tx","value":{"height":44}}`)}, Time: at}
	if got, want := render(t, Options{Format: "pretty"}, it), "2026-11-22T13:39:11.957Z  Tx  {\"height\":44}\n"; got != want {
		t.Errorf("pretty: %q, want %q", got, want)
	}
	if got := renderFitted(t, 80, false, it); !strings.HasPrefix(got, "14:39:11.957  Tx") {
		t.Errorf("fitted: %q, want the time of day in UTC+1 first", got)
	}
	it.Time = time.Time{}
	if got := render(t, Options{Format: "pretty"}, it); !strings.HasPrefix(got, "-  Tx") {
		t.Errorf("pretty without a time: %q", got)
	}
	if got := renderFitted(t, 80, false, it); !strings.HasPrefix(got, "-             Tx") {
		t.Errorf("fitted without a time: %q", got)
	}
}
