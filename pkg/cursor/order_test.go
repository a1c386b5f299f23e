package cursor

import (
	"testing"
)

func tmc(ts int64, seq uint64) string { return New(ts, seq, TendermintWidth).String() }
func evc(ts int64, seq uint64) string { return New(ts, seq, NodeWidth).String() }

const t0 = int64(0x18ea61a27c39abd8)

func TestLost(t *testing.T) {
	max16 := ^uint64(0)
	for _, tc := range []struct {
		name         string
		last, oldest string
		lost         bool
	}{
		{"empty last", "", tmc(t0, 5), false},
		{"empty oldest", tmc(t0, 5), "", false},
		{"both empty", "", "", false},
		{"equal w4", tmc(t0, 5), tmc(t0, 5), false},
		{"equal w16", evc(t0, 5), evc(t0, 5), false},
		{"last after oldest w4", tmc(t0+9, 1), tmc(t0, 0xffff), false},
		{"last after oldest w16", evc(t0, 9), evc(t0, 2), false},
		{"next item same ts w4", tmc(t0, 5), tmc(t0, 6), false},
		{"one between same ts w4", tmc(t0, 5), tmc(t0, 7), true},
		// Tendermint numbers consecutive items consecutively: the next sequence number is
		// the next item, whatever the time between them (an idle node pruned by age).
		{"next item later ts w4", tmc(t0, 5), tmc(t0+10_000_000_000, 6), false},
		{"one missing later ts w4", tmc(t0, 5), tmc(t0+10, 7), true},
		{"wrap next item w4", tmc(t0, 0xffff), tmc(t0+1, 0), false},
		{"wrap next item later ts w4", tmc(t0, 0xffff), tmc(t0+2, 0), false},
		{"wrap one missing w4", tmc(t0, 0xfffe), tmc(t0+1, 0), true},
		{"a restarted Tendermint node starts again at 0001", tmc(t0, 0x2a), tmc(t0+5, 1), true},
		{"next item same ts w16", evc(t0, 5), evc(t0, 6), false},
		{"next item later ts w16", evc(t0, 5), evc(t0+1000, 6), false},
		{"one missing w16", evc(t0, 5), evc(t0+1000, 7), true},
		{"far behind w16", evc(t0, 5), evc(t0+1000, 500), true},
		{"wrap next item w16", evc(t0, max16), evc(t0+1, 0), false},
		{"a time cursor before the first item w16", evc(t0-1, max16), evc(t0+5, 1), true},
		{"widths differ", tmc(t0, 5), evc(t0+1, 6), true},
		{"unparsable, same length, older", "abc", "abd", true},
		{"unparsable, same length, newer", "abd", "abc", false},
		{"unparsable, lengths differ", "zz", "abc", false},
		{"upper case is no cursor", "18EA61A27C39ABD8-0005", "18ea61a27c39abd8-0009", true},
		{"one unparsable", tmc(t0, 5), "not-a-cursor-at-all!", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Lost(tc.last, tc.oldest); got != tc.lost {
				t.Fatalf("Lost(%q, %q) = %v, want %v", tc.last, tc.oldest, got, tc.lost)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	later := t0 + 10_000_000_000
	for _, tc := range []struct {
		name                 string
		last, oldest, newest string
		none                 bool
		want                 Break
		lost                 uint64
	}{
		{"no position", "", evc(t0, 5), evc(t0, 9), true, BreakNone, 0},
		{"in the log w16", evc(t0, 5), evc(t0-9, 1), evc(t0+9, 9), false, BreakNone, 0},
		{"at the newest w16", evc(t0, 9), evc(t0-9, 1), evc(t0, 9), true, BreakNone, 0},
		{"oldest is next w16", evc(t0, 5), evc(t0+1, 6), evc(t0+9, 9), false, BreakNone, 0},
		{"three lost w16", evc(t0, 5), evc(t0+1, 9), evc(t0+9, 12), false, BreakLost, 3},
		{"three lost w4", tmc(t0, 5), tmc(t0+1, 9), tmc(t0+9, 12), false, BreakLost, 3},
		{"lost across the wrap w4 is taken for a restart", tmc(t0, 0xfffe), tmc(t0+1, 2), tmc(t0+9, 12), false, BreakRestart, 0},
		{"next across the wrap w4", tmc(t0, 0xffff), tmc(t0+1, 0), tmc(t0+9, 12), false, BreakNone, 0},
		{"emptied log w16", evc(t0, 5), "", evc(t0+9, 9), true, BreakLost, 4},
		{"emptied log, items came w16", evc(t0, 5), "", evc(t0+9, 9), false, BreakNone, 0},
		{"emptied log w4", tmc(t0, 5), "", tmc(t0+9, 9), true, BreakLost, 4},
		{"a restart w4", tmc(t0, 0x2a), tmc(later, 1), tmc(later+9, 0x30), false, BreakRestart, 0},
		{"a restart, the new log empty w4", tmc(t0, 0x2a), "", "", true, BreakRestart, 0},
		{"a restart, the new log emptied w4", tmc(t0, 0x2a), "", tmc(later, 3), true, BreakRestart, 0},
		{"a restart, the first item at the same number w4", tmc(t0, 1), tmc(later, 1), tmc(later, 5), false, BreakRestart, 0},
		// A cursor of another evtctl node, or of this one before its log went back.
		{"older, numbered above the log w16", evc(t0, 5000), evc(later, 1), evc(later+9, 300), false, BreakOutOfOrder, 0},
		{"past the newest w16", evc(later, 20), evc(t0, 1), evc(t0+9, 3), false, BreakPastNewest, 0},
		{"past the newest, same time w16", evc(t0, 20), evc(t0-9, 1), evc(t0, 3), false, BreakPastNewest, 0},
		{"past the newest w4", tmc(later, 20), tmc(t0, 1), tmc(t0+9, 3), false, BreakPastNewest, 0},
		{"an empty log that never held an item w16", evc(t0, 5), "", "", true, BreakPastNewest, 0},
		{"renumbered after the log went back w16", evc(t0, 1500), evc(t0-9, 1), evc(later, 1205), false, BreakOutOfOrder, 0},
		{"the same number, another item w16", evc(t0, 1500), evc(t0-9, 1), evc(later, 1500), false, BreakOutOfOrder, 0},
		{"inside the log's time, numbered below its oldest w16", evc(t0, 3), evc(t0-9, 100), evc(later, 200), false, BreakOutOfOrder, 0},
		{"widths differ", tmc(t0, 5), evc(t0-9, 1), evc(t0+9, 9), false, BreakOutOfOrder, 0},
		{"a time bound is no position: its numbers contradict the log w16", evc(t0-1, ^uint64(0)), evc(t0+5, 1), evc(t0+9, 2), false, BreakOutOfOrder, 0},
		{"resuming before the oldest w16", ResumeBefore(MustParse(evc(t0, 7))).String(), evc(t0, 7), evc(t0+9, 9), false, BreakNone, 0},
		{"unparsable, older", "abc", "abd", "abz", false, BreakLost, 0},
		{"unparsable, newer", "abd", "abc", "abz", false, BreakNone, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, lost := Check(tc.last, tc.oldest, tc.newest, tc.none)
			if b != tc.want || lost != tc.lost {
				t.Fatalf("Check(%q, %q, %q, %v) = %v, %d; want %v, %d", tc.last, tc.oldest, tc.newest, tc.none, b, lost, tc.want, tc.lost)
			}
		})
	}
}

func TestResumeBefore(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{tmc(t0, 7), tmc(t0-1, 6)},
		{tmc(t0, 0), tmc(t0-1, 0xffff)},
		{evc(t0, 100), evc(t0-1, 99)},
		{evc(t0, 0), evc(t0-1, ^uint64(0))},
		{tmc(0, 3), tmc(0, 2)},
		{"", ""},
	} {
		in, _ := Parse(tc.in)
		got := ResumeBefore(in)
		if got.String() != tc.want {
			t.Errorf("ResumeBefore(%s) = %s, want %s", tc.in, got, tc.want)
		}
		if tc.in == "" {
			continue
		}
		// Resuming there reads c next (a node comparing by time alone included) and
		// reports nothing lost before it.
		if !got.Before(in) || got.TS >= in.TS && in.TS > 0 {
			t.Errorf("ResumeBefore(%s) = %s is not an earlier time bound", tc.in, got)
		}
		if Lost(got.String(), tc.in) {
			t.Errorf("resuming before %s reports a loss", tc.in)
		}
	}
}

func TestTimeBoundAfter(t *testing.T) {
	for _, in := range []string{tmc(t0, 7), tmc(t0, 0xffff), evc(t0, 3), evc(t0, ^uint64(0))} {
		c, _ := Parse(in)
		b := TimeBoundAfter(c)
		if b.TS != c.TS+1 || b.Seq != 0 || b.Width != c.Width || !c.Before(b) {
			t.Errorf("TimeBoundAfter(%s) = %s", in, b)
		}
	}
}

func TestCompareTextAndLater(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", tmc(t0, 1), -1},
		{tmc(t0, 1), "", 1},
		{"", "", 0},
		{tmc(t0, 1), tmc(t0, 2), -1},
		{tmc(t0+1, 0), tmc(t0, 0xffff), 1},
		{evc(t0, 9), evc(t0, 9), 0},
		{"abc", "abd", -1},
		{"abcd", "abd", 1},
	} {
		if got := CompareText(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareText(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := CompareText(tc.b, tc.a); got != -tc.want {
			t.Errorf("CompareText(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
		want := tc.a
		if tc.want < 0 {
			want = tc.b
		}
		if got := Later(tc.a, tc.b); got != want {
			t.Errorf("Later(%q, %q) = %q, want %q", tc.a, tc.b, got, want)
		}
	}
}
