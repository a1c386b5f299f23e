package filter

import (
	"math/rand/v2"
	"strings"
	"testing"
)

var patternCases = []struct {
	pattern, text string
	want          bool
}{
	{"#", "", true},
	{"#", "a", true},
	{"#", "a.b.c", true},
	{"#", ".", true},
	{"*", "", true}, // "" is one empty word
	{"*", "a", true},
	{"*", "a.b", false},
	{"*", ".", false},
	{"a", "a", true},
	{"a", "ab", false},
	{"a", "a.b", false},
	{"a.#.b", "a.b", true},
	{"a.#.b", "a.x.b", true},
	{"a.#.b", "a.x.y.b", true},
	{"a.#.b", "a.b.b", true},
	{"a.#.b", "a.b.c", false},
	{"a.#.b", "b.a.b", false},
	{"a.#.b", "a", false},
	{"a.#", "a", true},
	{"a.#", "a.", true},
	{"a.#", "ab", false},
	{"#.a", "a", true},
	{"#.a", "x.a", true},
	{"#.a", "a.x", false},
	{"a.*", "a.", true},
	{"a.*", "a", false},
	{"a.*", "a.b.c", false},
	{"a..b", "a..b", true},
	{"a..b", "a.b", false},
	{"a.*.b", "a..b", true},
	{".", ".", true},
	{".", "", false},
	{"#.#", "", true},
	{"#.#", "a.b", true},
	{"*.#.*", "a", false},
	{"*.#.*", "a.b", true},
	{"*.#.*", "a.b.c", true},
	{"#.*.#.*", "a", false},
	{"#.*.#.*", "a.b", true},
	{"a.#.b.#.c", "a.b.c", true},
	{"a.#.b.#.c", "a.x.b.y.c", true},
	{"a.#.b.#.c", "a.b.x.c.b.c", true},
	{"a.#.b.#.c", "a.c", false},
	{"a.#.b.#.c", "a.c.b", false},
	{"#.b.#", "b", true},
	{"#.b.#", "a.b", true},
	{"#.b.#", "a.c", false},
	{"org.openedx.catalog.course.*", "org.openedx.catalog.course.created", true},
	{"org.openedx.catalog.course.*", "org.openedx.catalog.course", false},
	{"org.openedx.catalog.course.*", "org.openedx.catalog.course.created.v1", false},
	{"*.purchased.#", "seat.purchased", true},
	{"*.purchased.#", "seat.purchased.v1", true},
	{"*.purchased.#", "org.seat.purchased.v1", false},
}

func TestPattern(t *testing.T) {
	for _, tc := range patternCases {
		p, err := compilePattern(tc.pattern, 0)
		if err != nil {
			t.Fatalf("compilePattern(%q): %v", tc.pattern, err)
		}
		if got := p.match(tc.text); got != tc.want {
			t.Errorf("%q MATCHES %q: got %v, want %v", tc.text, tc.pattern, got, tc.want)
		}
	}
}

// TestPatternRandom checks match against a plain recursive matcher.
func TestPatternRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"", "a", "b", "*", "#"}
	random := func(wild bool) string {
		n := 1 + r.IntN(5)
		w := make([]string, n)
		for i := range w {
			w[i] = words[r.IntN(len(words))]
			if !wild && (w[i] == "*" || w[i] == "#") {
				w[i] = "c"
			}
		}
		return strings.Join(w, ".")
	}
	for range 20000 {
		pat, text := random(true), random(false)
		if pat == "" {
			continue // an error
		}
		p, err := compilePattern(pat, 0)
		if err != nil {
			t.Fatalf("compilePattern(%q): %v", pat, err)
		}
		want := matchWords(strings.Split(pat, "."), strings.Split(text, "."))
		if got := p.match(text); got != want {
			t.Fatalf("%q MATCHES %q: got %v, want %v", text, pat, got, want)
		}
	}
}

// TestPatternLongRuns checks match against matchTable on patterns whose runs of words between
// '#'s are longer than a machine word and on texts of hundreds of words.
func TestPatternLongRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	words := []string{"a", "b", "c", "*", "#"}
	random := func(n int, wild bool) []string {
		w := make([]string, n)
		for i := range w {
			k := r.IntN(len(words))
			if !wild {
				k = r.IntN(2) // texts mostly of a and b, so that runs nearly match often
			} else if words[k] == "#" && r.IntN(8) > 0 {
				k = r.IntN(2) // few '#'s: long runs between them
			}
			w[i] = words[k]
		}
		return w
	}
	for range 3000 {
		pat := random(1+r.IntN(200), true)
		text := random(1+r.IntN(400), false)
		if r.IntN(3) == 0 {
			// A text that the pattern matches, or nearly: the pattern with its wildcards filled in.
			text = text[:0]
			for _, w := range pat {
				switch w {
				case "*":
					text = append(text, "b")
				case "#":
					for range r.IntN(4) {
						text = append(text, "a")
					}
				default:
					text = append(text, w)
				}
			}
			if len(text) == 0 {
				text = append(text, "a")
			}
			if r.IntN(2) == 0 {
				text[r.IntN(len(text))] = "c"
			}
		}
		p, err := compilePattern(strings.Join(pat, "."), 0)
		if err != nil {
			t.Fatal(err)
		}
		want := matchTable(pat, text)
		got, reads := p.matchCounted(strings.Join(text, "."))
		if got != want {
			t.Fatalf("%q MATCHES %q: got %v, want %v", strings.Join(text, "."), strings.Join(pat, "."), got, want)
		}
		if reads > 2*len(text) {
			t.Fatalf("%q MATCHES %q read %d words of %d", strings.Join(text, "."), strings.Join(pat, "."), reads, len(text))
		}
	}
}

// A pattern's cost grows with the text, not with the text times the pattern: the matcher
// reads each word of the text at most twice, whatever the pattern, where one that retries a
// '#' at every word reads the text's words again for each word of the pattern. (Each read
// steps the automaton of one run by one word, a machine word of state per 64 words of the
// run: bounded by the pattern, which compiles once.) The counts do not depend on how fast or
// busy the machine is.
func TestPatternCostIsLinear(t *testing.T) {
	patterns := []struct {
		src        string
		matchWithB bool // whether it matches the text with ".b" added
	}{
		{"#." + strings.Repeat("a.", 1000) + "b", true},               // the '#' retried at each word
		{"#." + strings.Repeat("*.", 1000) + "b", true},               // the same with '*'
		{strings.Repeat("#.a.", 500) + "b", true},                     // every '#' retried
		{"#." + strings.Repeat("a.", 1000) + "b.#", true},             // a run in the middle
		{"a.#." + strings.Repeat("a.*.", 300) + "#.a.a.b.#.a", false}, // runs longer than 64 words
	}
	reads := map[int][]int{} // by the text's words: the reads of each pattern
	for _, words := range []int{4096, 15000, 30000} {
		text := strings.TrimSuffix(strings.Repeat("a.", words), ".")
		for _, pc := range patterns {
			p, err := compilePattern(pc.src, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				text  string
				words int
				want  bool
			}{{text, words, false}, {text + ".b", words + 1, pc.matchWithB}} {
				ok, n := p.matchCounted(c.text)
				if ok != c.want {
					t.Fatalf("%.40s… MATCHES %d words: got %v, want %v", pc.src, c.words, ok, c.want)
				}
				if n > 2*c.words {
					t.Errorf("%.40s… read %d words of a %d-word text, want at most twice each", pc.src, n, c.words)
				}
			}
			_, n := p.matchCounted(text)
			reads[words] = append(reads[words], n)
		}
	}
	// Twice the text, at most twice the reads.
	for i, pc := range patterns {
		if at, twice := reads[15000][i], reads[30000][i]; twice > 2*at {
			t.Errorf("%.40s…: %d reads of 15,000 words, %d of 30,000", pc.src, at, twice)
		}
	}
}

// matchTable is a plain dynamic-programming matcher: at[i][j] says whether pat[i:] matches
// words[j:].
func matchTable(pat, words []string) bool {
	at := make([][]bool, len(pat)+1)
	for i := range at {
		at[i] = make([]bool, len(words)+1)
	}
	at[len(pat)][len(words)] = true
	for i := len(pat) - 1; i >= 0; i-- {
		for j := len(words); j >= 0; j-- {
			switch {
			case pat[i] == "#":
				at[i][j] = at[i+1][j] || j < len(words) && at[i][j+1]
			case j == len(words):
			case pat[i] == "*" || pat[i] == words[j]:
				at[i][j] = at[i+1][j+1]
			}
		}
	}
	return at[0][0]
}

func matchWords(pat, words []string) bool {
	switch {
	case len(pat) == 0:
		return len(words) == 0
	case pat[0] == "#":
		return matchWords(pat[1:], words) || len(words) > 0 && matchWords(pat, words[1:])
	case len(words) == 0:
		return false
	case pat[0] == "*" || pat[0] == words[0]:
		return matchWords(pat[1:], words[1:])
	}
	return false
}
