package cometbft

import (
	"errors"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/pkg/cursor"
)

func TestCursorText(t *testing.T) {
	cases := []struct {
		p    Position
		text string
	}{
		{Position{}, ""},
		{Position{Height: 1, Index: 0}, "h000000000001.00000000"},
		{Position{Height: 12345, Index: 3}, "h000000012345.00000003"},
		{EndOf(41), "h000000000041.99999999"},
		{Position{Height: MaxHeight, Index: EndIndex}, "h999999999999.99999999"},
	}
	for _, tc := range cases {
		if got := tc.p.String(); got != tc.text {
			t.Errorf("%+v.String() = %q, want %q", tc.p, got, tc.text)
		}
		got, err := ParseCursor(tc.text)
		if err != nil || got != tc.p {
			t.Errorf("ParseCursor(%q) = %+v, %v; want %+v", tc.text, got, err, tc.p)
		}
	}
	if EndOf(0) != (Position{}) {
		t.Errorf("EndOf(0) = %+v, want the zero position", EndOf(0))
	}
}

func TestParseCursorRefuses(t *testing.T) {
	for _, s := range []string{
		"18ea61a27c39abd8-00c7",             // a Tendermint node's time cursor
		"18ea61a27c39abd8-00000000000000c7", // an evtctl node's
		"h000000012345.0000003",             // short
		"h0000000012345.00000003",           // long
		"H000000012345.00000003",
		"h000000012345-00000003",
		"h00000001234a.00000003",
		"h000000012345.0000000x",
		"h-00000012345.00000003",
		"h000000000000.00000000", // no height 0
		" h000000012345.00000003",
	} {
		_, err := ParseCursor(s)
		if !errors.Is(err, ErrCursor) {
			t.Errorf("ParseCursor(%q) = %v, want an ErrCursor", s, err)
		}
		if IsCursor(s) {
			t.Errorf("IsCursor(%q) = true", s)
		}
	}
}

// A CometBFT cursor is never taken for a time cursor, and a time cursor never for one.
func TestCursorNotTimeCursor(t *testing.T) {
	for _, p := range []Position{{Height: 1}, {Height: 1234567890123 % MaxHeight, Index: 7}, EndOf(99)} {
		if _, err := cursor.Parse(p.String()); err == nil {
			t.Errorf("cursor.Parse(%q) took it for a time cursor", p)
		}
	}
}

func TestCursorOrder(t *testing.T) {
	ordered := []Position{{}, {Height: 1}, {Height: 1, Index: 1}, {Height: 1, Index: 12}, EndOf(1), {Height: 2}, {Height: 10}, {Height: 10, Index: 3}, EndOf(MaxHeight)}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", a, b, got, want)
			}
			if got := CompareCursors(a.String(), b.String()); got != want {
				t.Errorf("CompareCursors(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "h000000012345.00000003", "h999999999999.99999999", "18ea61a27c39abd8-00c7", "h000000000000.00000000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseCursor(s)
		if err != nil {
			if !errors.Is(err, ErrCursor) {
				t.Fatalf("ParseCursor(%q): %v is not an ErrCursor", s, err)
			}
			return
		}
		if !p.Valid() {
			t.Fatalf("ParseCursor(%q) = %+v, which is not valid", s, p)
		}
		if p.String() != s {
			t.Fatalf("ParseCursor(%q).String() = %q", s, p.String())
		}
		if s != "" && !strings.HasPrefix(s, "h") {
			t.Fatalf("ParseCursor(%q) took a cursor without its h", s)
		}
		if _, err := cursor.Parse(s); err == nil && s != "" {
			t.Fatalf("%q is both a CometBFT cursor and a time cursor", s)
		}
	})
}

// FuzzCursorOrder checks that cursors compare as their positions do.
func FuzzCursorOrder(f *testing.F) {
	f.Add(int64(1), int64(0), int64(1), int64(1))
	f.Add(int64(9), int64(EndIndex), int64(10), int64(0))
	f.Fuzz(func(t *testing.T, h1, i1, h2, i2 int64) {
		a, b := Position{Height: h1, Index: i1}, Position{Height: h2, Index: i2}
		if a.IsZero() || b.IsZero() || !a.Valid() || !b.Valid() {
			return
		}
		if got, want := CompareCursors(a.String(), b.String()), a.Compare(b); got != want {
			t.Fatalf("CompareCursors(%q, %q) = %d, Compare = %d", a, b, got, want)
		}
	})
}
