// Package wordwrap breaks text into lines of at most a given width, between words.
package wordwrap

import "strings"

// Lines breaks text into lines at most width columns wide, as measure counts them,
// between words (runs of white space, newlines included, count as one space). A word
// wider than width has a line of its own.
func Lines(text string, width int, measure func(string) int) []string {
	var lines []string
	line, w := "", 0
	for _, word := range strings.Fields(text) {
		ww := measure(word)
		switch {
		case line == "":
			line, w = word, ww
		case w+1+ww <= width:
			line += " " + word
			w += 1 + ww
		default:
			lines = append(lines, line)
			line, w = word, ww
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
