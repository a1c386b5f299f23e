package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// reflow refills prose and the descriptions of indented definitions to the width, and
// keeps every other indented line as it is.
func TestReflow(t *testing.T) {
	t.Parallel()
	text := `A paragraph of prose that was
written narrow, and goes on
for three lines.

Heading
  term one    the description of the first term, which is long enough to wrap
              and goes on under itself
  t2          short
  example --with  two spaces? no: a term of words, two spaces, a description
  evtctl tail --type 'org.example.#' -o jsonl | jq -c .data
	source <(evtctl completion bash)
      indented further, kept`
	want := `A paragraph of prose that was written
narrow, and goes on for three lines.

Heading
  term one    the description of the first
              term, which is long enough
              to wrap and goes on under
              itself
  t2          short
  example --with  two spaces? no: a term
                  of words, two spaces, a
                  description
  evtctl tail --type 'org.example.#' -o jsonl | jq -c .data
	source <(evtctl completion bash)
      indented further, kept`
	if got := reflow(text, 42); got != want {
		t.Errorf("reflow at 42:\n%s\nwant:\n%s", got, want)
	}
	if got := reflow("one two\nthree", 80); got != "one two three" {
		t.Errorf("reflow at 80: %q", got)
	}
}

// On a real terminal, help is fitted to the terminal's width as the terminal reports it:
// wider than 80 on a wide terminal, never wider than a narrow one but for its examples.
func TestHelpOnATerminalTmux(t *testing.T) {
	t.Parallel()
	needTmux(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, width := range []int{72, 120} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			t.Parallel()
			screen := tmuxRun(t, self, width, fmt.Sprintf("env EVTCTL_TEST_AS_MAIN=1 %s emit --help", self))
			text := strings.Join(screen, "\n")
			if !strings.Contains(text, "--header-encoding") {
				t.Fatalf("not emit's help:\n%s", text)
			}
			// Examples are shown as written, kept within 80 columns.
			before, rest, _ := strings.Cut(text, "\nExamples:\n")
			_, after, _ := strings.Cut(rest, "\nFlags:\n")
			l, w := widest(before + "\n" + after)
			if w > width || width > 80 && w <= 80 {
				t.Errorf("on a terminal of %d columns the widest line is %d:\n%s", width, w, l)
			}
		})
	}
}
