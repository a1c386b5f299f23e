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
