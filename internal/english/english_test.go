package english

import "testing"

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n          int
		noun, want string
	}{
		{0, "event", "0 events"},
		{1, "event", "1 event"},
		{2, "event", "2 events"},
		{1, "attempt", "1 attempt"},
		{3, "attempt", "3 attempts"},
		{2, "spool entry", "2 spool entries"},
		{2, "batch", "2 batches"},
		{2, "day", "2 days"},
		{1, "damaged range", "1 damaged range"},
		{2, "damaged range", "2 damaged ranges"},
	} {
		if got := Plural(tc.n, tc.noun); got != tc.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
	for _, tc := range []struct {
		n          int
		noun, want string
	}{
		{1, "event", "1 event was"},
		{2, "event", "2 events were"},
		{1, "", "1 was"},
		{0, "", "0 were"},
		{1, "spool entry", "1 spool entry was"},
		{3, "spool entry", "3 spool entries were"},
	} {
		if got := WasWere(tc.n, tc.noun); got != tc.want {
			t.Errorf("WasWere(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}
