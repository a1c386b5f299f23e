package tui

import (
	"strings"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// cells measures and cuts text in terminal columns, with the ansi package alone and by
// the method Bubble Tea's renderer uses to place text in cells: ansi.WcWidth (a width per
// code point) unless the terminal reports that it lays out grapheme clusters (mode 2027),
// then ansi.GraphemeWidth. What the UI pads and cuts thus takes the columns on the screen
// it was measured to take, emoji sequences and combining marks included.
type cells ansi.Method

// widthMethod is the method the renderer switches to after msg, and whether msg is such a
// report: Bubble Tea asks the terminal about mode 2027 when it starts, and uses grapheme
// clusters when the terminal knows the mode.
func widthMethod(msg tea.ModeReportMsg) (cells, bool) {
	if msg.Mode != ansi.ModeUnicodeCore {
		return 0, false
	}
	switch msg.Value {
	case ansi.ModeSet, ansi.ModeReset, ansi.ModePermanentlySet:
		return cells(ansi.GraphemeWidth), true
	}
	return 0, false
}

// width is the number of columns clean text (no escape sequences) takes. ASCII, the usual
// case, is counted without Unicode's tables, which cost far more.
func (c cells) width(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return ansi.Method(c).StringWidth(s)
		}
	}
	return len(s)
}

// screen is the number of columns s takes on the screen, s holding text and SGR
// sequences. Most lines are ASCII, which is counted here; anything else is left to ansi.
func (c cells) screen(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b >= 0x20 && b < 0x7f:
			n++
		case b == ansi.ESC && i+1 < len(s) && s[i+1] == '[':
			j := i + 2
			for j < len(s) && s[j] >= 0x20 && s[j] < 0x40 { // parameters, intermediates
				j++
			}
			if j == len(s) || s[j] >= 0x7f {
				return ansi.Method(c).StringWidth(s)
			}
			i = j // the final byte
		default:
			return ansi.Method(c).StringWidth(s)
		}
	}
	return n
}

// first returns the first character of s (a grapheme cluster) and its width.
func (c cells) first(s string) (string, int) {
	return ansi.FirstGraphemeCluster(s, ansi.Method(c))
}

// cut returns the longest start of clean text s at most w columns wide, and its width. It
// cuts between characters, never inside one.
func (c cells) cut(s string, w int) (string, int) {
	if ascii(s) {
		n := max(min(len(s), w), 0)
		return s[:n], n
	}
	col := 0
	for i := 0; i < len(s); {
		ch, cw := c.first(s[i:])
		if col+cw > w {
			return s[:i], col
		}
		col += cw
		i += len(ch)
	}
	return s, col
}

// cutLeft returns the longest end of clean text s at most w columns wide, and its width.
func (c cells) cutLeft(s string, w int) (string, int) {
	if ascii(s) {
		n := max(min(len(s), w), 0)
		return s[len(s)-n:], n
	}
	var starts, widths []int
	total := 0
	for i := 0; i < len(s); {
		ch, cw := c.first(s[i:])
		starts, widths = append(starts, i), append(widths, cw)
		total += cw
		i += len(ch)
	}
	for k := range starts {
		if total <= w {
			return s[starts[k]:], total
		}
		total -= widths[k]
	}
	return "", 0
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// trunc cuts clean text s to w columns, ending in "…" when cut.
func (c cells) trunc(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if c.width(s) <= w {
		return s
	}
	head, _ := c.cut(s, w-1)
	return head + "…"
}

// truncLeft cuts clean text s to w columns from the left, starting with "…" when cut.
func (c cells) truncLeft(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if c.width(s) <= w {
		return s
	}
	tail, _ := c.cutLeft(s, w-1)
	return "…" + tail
}

// fit is trunc, padded with spaces to exactly w columns.
func (c cells) fit(s string, w int) string {
	return c.pad(c.trunc(s, w), w)
}

// pad pads s (text and SGR sequences) with spaces to w columns.
func (c cells) pad(s string, w int) string {
	if n := c.screen(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

// clip cuts a line of the screen (text and SGR sequences) to w columns.
func (c cells) clip(s string, w int) string {
	if c.screen(s) > w {
		return ansi.Method(c).Truncate(s, w, "")
	}
	return s
}
