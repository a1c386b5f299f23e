package cursor

import (
	"errors"
	"sort"
	"testing"
	"time"
)

func TestParseFormatRoundTrip(t *testing.T) {
	for _, s := range []string{
		"18ea61a27c39abd8-00c7",             // Tendermint
		"18ea619f6feba489-0001",             // Tendermint
		"18ea61a27c39abd8-00000000000000c7", // evtctl
		"0000000000000001-0",
		"7fffffffffffffff-ffffffffffffffff",
	} {
		c, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		if got := c.String(); got != s {
			t.Errorf("Parse(%q).String() = %q", s, got)
		}
	}
	c := MustParse("18ea61a27c39abd8-00c7")
	if c.TS != 0x18ea61a27c39abd8 || c.Seq != 0xc7 || c.Width != 4 {
		t.Errorf("fields = %+v", c)
	}
}

func TestParseEmpty(t *testing.T) {
	c, err := Parse("")
	if err != nil || !c.IsZero() || c.String() != "" {
		t.Fatalf("Parse(\"\") = %+v, %v", c, err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, s := range []string{
		"zzz", "18ea61a27c39abd8", "18ea61a27c39abd8-", "18ea61a27c39abd8_00c7",
		"18EA61A27C39ABD8-00C7", "18ea61a27c39abd-00c7", "18ea61a27c39abd8-00000000000000001",
		"8000000000000000-0001", " 18ea61a27c39abd8-00c7", "18ea61a27c39abd8-00g7",
	} {
		_, err := Parse(s)
		if !errors.Is(err, ErrFormat) {
			t.Errorf("Parse(%q) error = %v, want ErrFormat", s, err)
		}
	}
	_, err := Parse("zzz")
	if got, want := err.Error(), `invalid cursor "zzz": invalid cursor format`; got != want {
		t.Errorf("message = %q, want %q (Tendermint's wording)", got, want)
	}
}

func TestOrderMatchesStringOrder(t *testing.T) {
	var cs []Cursor
	for _, ts := range []int64{1, 2, 1 << 40, 1<<62 + 5} {
		for _, seq := range []uint64{0, 1, 0xff, 0xffff} {
			cs = append(cs, New(ts, seq, 0))
		}
	}
	strs := make([]string, len(cs))
	for i, c := range cs {
		strs[i] = c.String()
	}
	if !sort.StringsAreSorted(strs) {
		t.Fatalf("cursors built in order do not sort as strings: %v", strs)
	}
	for i := 1; i < len(cs); i++ {
		if !cs[i-1].Before(cs[i]) || !cs[i].After(cs[i-1]) || cs[i].Compare(cs[i]) != 0 {
			t.Errorf("order broken between %v and %v", cs[i-1], cs[i])
		}
	}
	if !(Cursor{}).Before(New(1, 0, 0)) {
		t.Error("empty cursor must come first")
	}
}

func TestFromTime(t *testing.T) {
	at := time.Date(2026, 11, 22, 13, 39, 11, 0, time.UTC)
	for _, width := range []int{TendermintWidth, NodeWidth} {
		c := FromTime(at, width)
		if c.Width != width {
			t.Fatalf("width = %d", c.Width)
		}
		atT := New(at.UnixNano(), 0, width)
		before := New(at.UnixNano()-1, maxSeq(width), width)
		if !c.Before(atT) {
			t.Errorf("an item stamped at t must be after FromTime(t)")
		}
		if before.After(c) {
			t.Errorf("an item stamped before t must not be after FromTime(t)")
		}
		if len(c.String()) != 17+width {
			t.Errorf("String() = %q", c.String())
		}
		// String order agrees for same-width cursors.
		if !(c.String() < atT.String()) {
			t.Errorf("%q should sort before %q", c, atT)
		}
	}
	if !FromTime(time.Unix(0, 0), 4).IsZero() {
		t.Error("the epoch should give the empty cursor")
	}
}

func TestJSONText(t *testing.T) {
	var c Cursor
	if err := c.UnmarshalText([]byte("18ea61a27c39abd8-00c7")); err != nil {
		t.Fatal(err)
	}
	b, _ := c.MarshalText()
	if string(b) != "18ea61a27c39abd8-00c7" {
		t.Errorf("MarshalText = %s", b)
	}
	if err := c.UnmarshalText([]byte("nope")); err == nil {
		t.Error("want error")
	}
	if WidthOf("18ea61a27c39abd8-00c7") != 4 || WidthOf("x") != 0 {
		t.Error("WidthOf")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "18ea61a27c39abd8-00c7", "18ea61a27c39abd8-00000000000000c7", "zzz", "0000000000000000-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		if got := c.String(); got != s {
			t.Fatalf("round trip %q -> %q", s, got)
		}
		c2, err := Parse(c.String())
		if err != nil || c2 != c {
			t.Fatalf("reparse %q: %+v %v", s, c2, err)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		_, _ = Parse("18ea61a27c39abd8-00000000000000c7")
	}
}

func BenchmarkString(b *testing.B) {
	c := MustParse("18ea61a27c39abd8-00000000000000c7")
	for b.Loop() {
		_ = c.String()
	}
}

func TestNextPrev(t *testing.T) {
	for _, tc := range []struct{ c, next string }{
		{"18ea61a27c39abd8-00c7", "18ea61a27c39abd8-00c8"},
		{"18ea61a27c39abd8-ffff", "18ea61a27c39abd9-0000"},
		{"18ea61a27c39abd8-ffffffffffffffff", "18ea61a27c39abd9-0000000000000000"},
	} {
		c := MustParse(tc.c)
		if got := c.Next().String(); got != tc.next {
			t.Errorf("%s.Next() = %s, want %s", tc.c, got, tc.next)
		}
		if p, ok := MustParse(tc.next).Prev(); !ok || p != c {
			t.Errorf("%s.Prev() = %s, want %s", tc.next, p, c)
		}
	}
	if _, ok := New(0, 0, 4).Prev(); ok {
		t.Error("the first cursor has no predecessor")
	}
}
