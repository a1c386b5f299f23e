package filter

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
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
		if got := p.match(strings.Join(text, ".")); got != want {
			t.Fatalf("%q MATCHES %q: got %v, want %v", strings.Join(text, "."), strings.Join(pat, "."), got, want)
		}
	}
}

// A pattern's cost grows with the text, not with the text times the pattern: patterns that
// make a matcher that retries a '#' at every word compare each of their words against each
// of the text's are answered in CPU time proportional to the text.
func TestPatternTakesLinearTime(t *testing.T) {
	text := strings.TrimSuffix(strings.Repeat("a.", 30000), ".") // 30,000 words, 60 KB
	patterns := []string{
		"#." + strings.Repeat("a.", 1000) + "b",              // the '#' retried at each word
		"#." + strings.Repeat("*.", 1000) + "b",              // the same with '*'
		strings.Repeat("#.a.", 500) + "b",                    // every '#' retried
		"#." + strings.Repeat("a.", 1000) + "b.#",            // a run in the middle
		"a.#." + strings.Repeat("a.*.", 300) + "#.a.a.b.#.a", // runs longer than 64 words
	}
	const rounds = 10
	start := cpuTime(t)
	for _, src := range patterns {
		p, err := compilePattern(src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for range rounds {
			if p.match(text) {
				t.Fatalf("%.40s… matches a text without a b", src)
			}
		}
	}
	// Linear matching takes about a millisecond a round; a retrying matcher takes a
	// tenth of a second or more. The bound leaves room for the race detector and a
	// busy machine.
	if used := cpuTime(t) - start; used > 2*time.Second {
		t.Errorf("%d rounds of %d patterns against a 30,000-word text took %v of CPU", rounds, len(patterns), used)
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
