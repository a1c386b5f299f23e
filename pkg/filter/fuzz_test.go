package filter

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func FuzzCompile(f *testing.F) {
	for _, tc := range validQueries {
		f.Add(tc.src)
	}
	for _, tc := range badQueries {
		addSeed(f, tc.src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		q, err := Compile(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Compile(%q): error %T", src, err)
			}
			if se.Offset < 0 || se.Offset > len(src) || se.Msg == "" {
				t.Fatalf("Compile(%q): bad error %#v", src, se)
			}
			if want := "offset " + strconv.Itoa(se.Offset) + ": " + se.Msg; err.Error() != want {
				t.Fatalf("Compile(%q): Error() = %q, want %q", src, err, want)
			}
			return
		}
		if q.source() != src {
			t.Fatalf("Compile(%q).String() = %q", src, q.source())
		}
		// The source and the canonical form both compile to the same tree.
		canon := q.canonical()
		for _, again := range []string{q.source(), canon} {
			r, err := Compile(again)
			if err != nil {
				if strings.Contains(err.Error(), "nested deeper") || limitError(err) {
					continue // the canonical form adds parentheses
				}
				t.Fatalf("Compile(%q) after Compile(%q): %v", again, src, err)
			}
			if r.canonical() != canon {
				t.Fatalf("Compile(%q) = %s, want %s", again, r.canonical(), canon)
			}
		}
	})
}

// addSeed adds src to f's corpus unless it is one of the queries of several kilobytes that
// test the size limits: the fuzzer spends its time minimizing what it derives from those.
func addSeed(f *testing.F, src string) {
	if len(src) <= 1024 {
		f.Add(src)
	}
}

func FuzzMatchJSON(f *testing.F) {
	for _, tc := range matchJSONCases {
		f.Add(tc.query, []byte(tc.event))
	}
	f.Fuzz(func(t *testing.T, src string, event []byte) {
		q, err := Compile(src)
		if err != nil || q.MatchesAll() {
			return
		}
		got := q.MatchJSON(event)
		// NOT inverts any query (unless wrapping it breaks it, as it does a trailing
		// unterminated string, or nests it too deeply).
		if not, err := Compile("NOT (" + src + ")"); err == nil && not.MatchJSON(event) == got {
			t.Fatalf("%q and its negation agree (%v) on %q", src, got, event)
		}
	})
}

// FuzzPattern checks the MATCHES matcher against a plain dynamic-programming one.
func FuzzPattern(f *testing.F) {
	for _, tc := range patternCases {
		f.Add(tc.pattern, tc.text)
	}
	f.Add("#."+strings.Repeat("a.*.", 40)+"b.#", strings.Repeat("a.", 200)+"b")
	f.Fuzz(func(t *testing.T, pat, text string) {
		p, err := compilePattern(pat, 0)
		if err != nil {
			return
		}
		pw, tw := strings.Split(pat, "."), strings.Split(text, ".")
		if len(pw)*len(tw) > 1<<16 {
			return // the table would be large
		}
		if got, want := p.match(text), matchTable(pw, tw); got != want {
			t.Fatalf("%q MATCHES %q: got %v, want %v", text, pat, got, want)
		}
	})
}
