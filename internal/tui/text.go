package tui

import (
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// trunc cuts s to w columns, ending in "…" when cut.
func trunc(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if textWidth(s) <= w {
		return s
	}
	head, _ := cutWidth(s, w-1)
	return head + "…"
}

// fit is trunc, padded with spaces to exactly w columns.
func fit(s string, w int) string {
	return padTo(trunc(s, w), w)
}

// screenWidth is the number of columns s takes on the screen, s holding text and SGR
// sequences. Most lines are ASCII, which is counted here; anything else is left to
// ansi.StringWidth, which works through grapheme clusters and is several times slower.
func screenWidth(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 0x20 && c < 0x7f:
			n++
		case c == ansi.ESC && i+1 < len(s) && s[i+1] == '[':
			j := i + 2
			for j < len(s) && s[j] >= 0x20 && s[j] < 0x40 { // parameters, intermediates
				j++
			}
			if j == len(s) || s[j] >= 0x7f {
				return ansi.StringWidth(s)
			}
			i = j // the final byte
		default:
			return ansi.StringWidth(s)
		}
	}
	return n
}

func padTo(s string, w int) string {
	if n := screenWidth(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

// plural is n and what, in the plural unless n is 1.
func plural(n int, what string) string {
	s := strconv.Itoa(n) + " " + what
	if n != 1 {
		s += "s"
	}
	return s
}
