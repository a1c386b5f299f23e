package filter

import (
	"fmt"
	"strings"
)

// A pattern is the operand of MATCHES, a topic-exchange pattern over dot-separated words: a
// word "*" matches exactly one word, a word "#" matches zero or more words, and any other word
// matches itself. Words may be empty: "a..b" has three words, and "" has one.
//
// Matching takes time linear in the text, whatever the pattern: the '#'s cut the pattern into
// runs of words of fixed length — a head that must match the text's first words, a tail that
// must match its last ones, and runs between two '#'s that must occur in order in between. The
// earliest occurrence of each run is as good as any later one (what follows it can only gain
// words), so each run is searched for once, from where the run before it ended, by a
// bit-parallel automaton that looks at each word of the text once. Nothing is ever retried.
type pattern struct {
	hash bool      // the pattern has a '#'; without one, head is the whole pattern
	head []patWord // the words before the first '#'
	tail []patWord // the words after the last '#'
	mids []run     // the runs between two '#'s, in order
	min  int       // the fewest words a matching text has
}

// patWord is one word of a pattern other than '#'.
type patWord struct {
	star bool   // '*': any one word
	text string // a literal word
}

func (w patWord) matches(s string) bool { return w.star || w.text == s }

// run is a sequence of words between two '#'s, searched for with a shift-and automaton: bit i
// of the state is set when the run's first i+1 words match the text's words up to the current
// one.
type run struct {
	n     int            // words in the run
	lits  []string       // its distinct literal words
	index map[string]int // lits' positions, when there are many
	masks [][]uint64     // masks[i]: where lits[i] stands in the run, a bit per word
	stars []uint64       // where '*' stands
}

// runIndexMin is how many distinct words a run has before a map finds them faster than
// comparing each.
const runIndexMin = 8

// compilePattern compiles the contents of a string literal; the contents start at offset pos
// of the query and the opening quote just before.
func compilePattern(s string, pos int) (*pattern, *SyntaxError) {
	if s == "" {
		return nil, &SyntaxError{Offset: pos - 1, Msg: "empty pattern, wanted words separated by dots"}
	}
	p := &pattern{}
	var cur []patWord
	start := 0
	for _, w := range strings.Split(s, ".") {
		switch {
		case w == "#":
			if !p.hash {
				p.head = cur
			} else if len(cur) > 0 {
				// "#.#" matches what "#" matches: only a run between them counts.
				p.mids = append(p.mids, newRun(cur))
			}
			p.hash, cur = true, nil
		case w == "*":
			cur = append(cur, patWord{star: true})
		default:
			if i := strings.IndexAny(w, "*#"); i >= 0 {
				return nil, &SyntaxError{
					Offset: pos + start + i,
					Msg:    fmt.Sprintf("wildcard %c inside a word, wanted it alone between dots", w[i]),
				}
			}
			cur = append(cur, patWord{text: w})
		}
		start += len(w) + 1
	}
	if p.hash {
		p.tail = cur
	} else {
		p.head = cur
	}
	p.min = len(p.head) + len(p.tail)
	for _, r := range p.mids {
		p.min += r.n
	}
	return p, nil
}

func newRun(words []patWord) run {
	r := run{n: len(words)}
	size := (len(words) + 63) / 64
	r.stars = make([]uint64, size)
	for i, w := range words {
		if w.star {
			r.stars[i/64] |= 1 << (i % 64)
			continue
		}
		k := r.find(w.text)
		if k < 0 {
			k = len(r.lits)
			r.lits = append(r.lits, w.text)
			r.masks = append(r.masks, make([]uint64, size))
			if len(r.lits) == runIndexMin {
				r.index = make(map[string]int, 2*runIndexMin)
				for j, l := range r.lits {
					r.index[l] = j
				}
			} else if r.index != nil {
				r.index[w.text] = k
			}
		}
		r.masks[k][i/64] |= 1 << (i % 64)
	}
	return r
}

// find returns the position of s among the run's literal words, or -1.
func (r *run) find(s string) int {
	if r.index != nil {
		if k, ok := r.index[s]; ok {
			return k
		}
		return -1
	}
	for k, l := range r.lits {
		if l == s {
			return k
		}
	}
	return -1
}

// match reports whether s matches p.
func (p *pattern) match(s string) bool {
	ok, _ := p.matchCounted(s)
	return ok
}

// matchCounted is match, and also counts the words of s it reads. Each word is read at most
// twice (the head's once more to skip them, the tail's once more to find them), so reads is at
// most twice the words of s, whatever the pattern: the tests hold matching to that.
func (p *pattern) matchCounted(s string) (ok bool, reads int) {
	n := strings.Count(s, ".") + 1 // words in s
	if !p.hash {
		ok = n == len(p.head) && startsWith(p.head, s, 0, &reads)
		return ok, reads
	}
	if n < p.min {
		return false, reads
	}
	if !startsWith(p.head, s, 0, &reads) {
		return false, reads
	}
	if len(p.tail) > 0 && !startsWith(p.tail, s, lastWords(s, len(p.tail), &reads), &reads) {
		return false, reads
	}
	if len(p.mids) == 0 {
		return true, reads
	}
	// The words between the head and the tail.
	pos := 0
	for range p.head {
		_, pos = wordAt(s, pos)
		reads++
	}
	left := n - len(p.head) - len(p.tail)
	var state [4]uint64
	for i := range p.mids {
		r := &p.mids[i]
		var found bool
		if pos, left, found = r.search(s, pos, left, state[:], &reads); !found {
			return false, reads
		}
	}
	return true, reads
}

// startsWith reports whether the words of s from offset pos on start with ws, one for one,
// adding the words it reads to reads. The caller knows that s has enough words.
func startsWith(ws []patWord, s string, pos int, reads *int) bool {
	for _, w := range ws {
		var text string
		text, pos = wordAt(s, pos)
		*reads++
		if !w.matches(text) {
			return false
		}
	}
	return true
}

// lastWords returns the offset of the first of the last k words of s, adding the k words it
// reads to reads; s has at least k.
func lastWords(s string, k int, reads *int) int {
	*reads += k
	end := len(s)
	for range k {
		i := strings.LastIndexByte(s[:end], '.')
		if i < 0 {
			return 0
		}
		end = i
	}
	return end + 1
}

// search looks for the run in the next left words of s, which start at offset pos. It returns
// where the words after the run's earliest occurrence start and how many of the left words
// follow it. buf is scratch space for the automaton's state, used when it is large enough. The
// words it reads are added to reads: each once.
func (r *run) search(s string, pos, left int, buf []uint64, reads *int) (int, int, bool) {
	size := len(r.stars)
	var state []uint64
	if size <= len(buf) {
		state = buf[:size]
		clear(state)
	} else {
		state = make([]uint64, size)
	}
	lastBit := uint64(1) << ((r.n - 1) % 64)
	for ; left > 0; left-- {
		var text string
		text, pos = wordAt(s, pos)
		*reads++
		k := r.find(text)
		// Shift the state by one word, start a new attempt at this word, and keep the
		// attempts the word continues.
		carry := uint64(1)
		for i := range state {
			next := state[i] >> 63
			m := r.stars[i]
			if k >= 0 {
				m |= r.masks[k][i]
			}
			state[i] = (state[i]<<1 | carry) & m
			carry = next
		}
		if state[size-1]&lastBit != 0 {
			return pos, left - 1, true
		}
	}
	return 0, 0, false
}

// wordAt returns the word of s that starts at pos and the position of the word after it.
func wordAt(s string, pos int) (word string, next int) {
	if i := strings.IndexByte(s[pos:], '.'); i >= 0 {
		return s[pos : pos+i], pos + i + 1
	}
	return s[pos:], len(s) + 1
}
