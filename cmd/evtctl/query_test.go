package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/evtctl/evtctl/pkg/filter"
)

// A syntax error shows the query with a caret under the offending character; a long query
// only around it, so that no line is longer than a terminal's.
func TestExplainSyntax(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, query string
		mark        string // the text the caret must be under
	}{
		{"short", "type = 'a' AND and x", "x"},
		{"at the end", "type = ", ""},
		{"long, error at the end", strings.Repeat("data.n = 1 AND ", 250) + "data.m = ", ""},
		{"long, error in the middle", strings.Repeat("data.n = 1 AND ", 100) + "data.m == 2 AND " + strings.Repeat("data.n = 1 AND ", 100) + "x EXISTS", "= 2"},
		{"long, error at the start", "data.n == 1 AND " + strings.Repeat("data.n = 1 AND ", 250) + "x EXISTS", "= 1"},
		{"too long", strings.Repeat("a", 5000), "a"},
		{"multi-byte before the error", "subject = 'ünïcödé' AND x == 1", "= 1"},
		{"lines and tabs", "type = 'a'\n\tAND x == 1", "= 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := filter.Compile(tc.query)
			if err == nil {
				t.Fatalf("%q compiled", tc.query)
			}
			lines := strings.Split(explainSyntax(tc.query, err), "\n")
			if len(lines) != 3 {
				t.Fatalf("%d lines, want 3: %q", len(lines), lines)
			}
			text, caret := lines[1], lines[2]
			for _, l := range lines[1:] {
				if n := utf8.RuneCountInString(l); n > 80 {
					t.Errorf("a line of %d characters: %q", n, l)
				}
				if strings.ContainsAny(l, "\n\t") {
					t.Errorf("a control character in %q", l)
				}
			}
			col := utf8.RuneCountInString(caret) - 1
			if !strings.HasSuffix(caret, "^") || strings.TrimSpace(caret) != "^" {
				t.Fatalf("caret line %q", caret)
			}
			under := string([]rune(text)[min(col, utf8.RuneCountInString(text)):])
			if !strings.HasPrefix(under, tc.mark) {
				t.Errorf("the caret is under %q, want %q\n%s\n%s", under, tc.mark, text, caret)
			}
		})
	}
}
