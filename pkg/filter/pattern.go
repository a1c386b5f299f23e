package filter

import (
	"fmt"
	"strings"
)

// A pattern is the operand of MATCHES, a topic-exchange pattern over dot-separated words: a
// word "*" matches exactly one word, a word "#" matches zero or more words, and any other word
// matches itself. Words may be empty: "a..b" has three words, and "" has one.
type pattern []patternWord

type patternWord struct {
	wild byte // '*', '#', or 0 for a literal word
	text string
}

// compilePattern compiles the contents of a string literal; the contents start at offset pos
// of the query and the opening quote just before.
func compilePattern(s string, pos int) (pattern, *SyntaxError) {
	if s == "" {
		return nil, &SyntaxError{Offset: pos - 1, Msg: "empty pattern, wanted words separated by dots"}
	}
	var p pattern
	start := 0
	for _, w := range strings.Split(s, ".") {
		switch {
		case w == "#":
			// "#.#" matches what "#" matches.
			if len(p) == 0 || p[len(p)-1].wild != '#' {
				p = append(p, patternWord{wild: '#'})
			}
		case w == "*":
			p = append(p, patternWord{wild: '*'})
		default:
			if i := strings.IndexAny(w, "*#"); i >= 0 {
				return nil, &SyntaxError{
					Offset: pos + start + i,
					Msg:    fmt.Sprintf("wildcard %c inside a word, wanted it alone between dots", w[i]),
				}
			}
			p = append(p, patternWord{text: w})
		}
		start += len(w) + 1
	}
	return p, nil
}

// match reports whether s matches p. It walks s word by word, and on a mismatch lets the
// latest '#' take one more word, which is enough when '#' is the only variable-length word.
func (p pattern) match(s string) bool {
	// Word positions are byte offsets of a word's start; len(s)+1 means no words are left.
	pi, pos := 0, 0
	hashPi, hashPos := -1, 0
	for pos <= len(s) {
		if pi < len(p) {
			w := p[pi]
			if w.wild == '#' {
				hashPi, hashPos = pi, pos
				pi++
				continue
			}
			word, next := wordAt(s, pos)
			if w.wild == '*' || w.text == word {
				pi, pos = pi+1, next
				continue
			}
		}
		if hashPi < 0 {
			return false
		}
		_, hashPos = wordAt(s, hashPos)
		pi, pos = hashPi+1, hashPos
	}
	for pi < len(p) && p[pi].wild == '#' {
		pi++
	}
	return pi == len(p)
}

// wordAt returns the word of s that starts at pos and the position of the word after it.
func wordAt(s string, pos int) (word string, next int) {
	if i := strings.IndexByte(s[pos:], '.'); i >= 0 {
		return s[pos : pos+i], pos + i + 1
	}
	return s[pos:], len(s) + 1
}
