package main

import (
	"strings"
	"testing"
)

// Counts on a terminal are worded for their number: "replayed 1 event", not "1 events".
func TestProgressPlurals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n, total int
		want     []string
	}{
		{1, 0, []string{"replayed 1 event (", "replayed 1 event in "}},
		{2, 0, []string{"replayed 2 events (", "replayed 2 events in "}},
		{1, 1, []string{"1/1 event (", "replayed 1 event in "}},
	} {
		s, _, _, errOut := testStreams()
		s.SetTTY(false, false, true)
		p := newProgress(s, "replayed", "event")
		p.total = tc.total
		p.add(tc.n)
		p.done()
		for _, w := range tc.want {
			if !strings.Contains(errOut.String(), w) {
				t.Errorf("%d of %d: %q does not say %q", tc.n, tc.total, errOut.String(), w)
			}
		}
	}
}
