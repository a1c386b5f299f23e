package cometbft

import (
	"errors"
	"fmt"
	"strconv"
)

// A chain's items are named by their height and their place in the block: item 0 of a
// height is the block's events (NewBlockEvents), item i+1 the transaction at index i (Tx).
// Every node of a chain numbers them alike, so a cursor taken from one RPC endpoint resumes
// on another.
//
// A cursor's text is "h", the height in 12 decimal digits, ".", and the item in 8 decimal
// digits: "h000000012345.00000003" is the transaction at index 2 of height 12345. The width
// is fixed, so within a chain cursors sort as text in item order. The leading "h" keeps
// them apart from the time cursors of an evtctl or Tendermint node (16 hex digits, "-", 4 or
// 16 hex digits), which never begin with it.

// Limits of a cursor.
const (
	heightDigits = 12
	indexDigits  = 8
	cursorLen    = 1 + heightDigits + 1 + indexDigits

	// MaxHeight is the greatest height a cursor names: at one block a second, some
	// thirty thousand years of a chain that starts at 1.
	MaxHeight = 999_999_999_999
	// EndIndex marks "after every item of the height": a block of the largest size
	// CometBFT allows (100 MiB) holds fewer transactions than this.
	EndIndex = 99_999_999
)

// ErrCursor is wrapped by every error ParseCursor returns.
var ErrCursor = errors.New("invalid CometBFT cursor")

// Position is a place in a chain's items: item Index of the block at Height. As a bound it
// means "after item Index of Height" (or before it, paging back); Index EndIndex is after the
// whole height. The zero Position is before the chain's first item.
type Position struct {
	Height int64
	Index  int64
}

// EndOf is the position after every item of height h; for h <= 0, the zero Position.
func EndOf(h int64) Position {
	if h <= 0 {
		return Position{}
	}
	return Position{Height: h, Index: EndIndex}
}

// IsZero reports whether p is the zero Position.
func (p Position) IsZero() bool { return p == Position{} }

// Compare orders positions by height, then item: -1 if p comes first, 0 if equal, +1 after.
func (p Position) Compare(o Position) int {
	switch {
	case p.Height < o.Height:
		return -1
	case p.Height > o.Height:
		return 1
	case p.Index < o.Index:
		return -1
	case p.Index > o.Index:
		return 1
	}
	return 0
}

// String formats the position as a cursor; the zero Position is "".
func (p Position) String() string {
	if p.IsZero() {
		return ""
	}
	var b [cursorLen]byte
	return string(p.append(b[:0]))
}

// append appends the cursor text of a valid, non-zero position.
func (p Position) append(b []byte) []byte {
	b = append(b, 'h')
	b = appendPadded(b, p.Height, heightDigits)
	b = append(b, '.')
	return appendPadded(b, p.Index, indexDigits)
}

func appendPadded(b []byte, v int64, width int) []byte {
	var d [20]byte
	s := strconv.AppendInt(d[:0], v, 10)
	for range width - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// Valid reports whether p can be written as a cursor: the zero Position, or a height from 1
// to MaxHeight with an item from 0 to EndIndex.
func (p Position) Valid() bool {
	return p.IsZero() || p.Height >= 1 && p.Height <= MaxHeight && p.Index >= 0 && p.Index <= EndIndex
}

// ParseCursor reads a cursor's text; "" is the zero Position.
func ParseCursor(s string) (Position, error) {
	if s == "" {
		return Position{}, nil
	}
	if len(s) != cursorLen || s[0] != 'h' || s[1+heightDigits] != '.' {
		return Position{}, fmt.Errorf("%w %q: want h, %d digits of height, a dot and %d digits of item, e.g. h000000012345.00000003", ErrCursor, s, heightDigits, indexDigits)
	}
	h, ok1 := digits(s[1 : 1+heightDigits])
	i, ok2 := digits(s[2+heightDigits:])
	if !ok1 || !ok2 {
		return Position{}, fmt.Errorf("%w %q: a height or item that is not all decimal digits", ErrCursor, s)
	}
	if h == 0 {
		return Position{}, fmt.Errorf("%w %q: heights begin at 1", ErrCursor, s)
	}
	return Position{Height: h, Index: i}, nil
}

func digits(s string) (int64, bool) {
	var v int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// IsCursor reports whether s is the text of a CometBFT cursor (not the empty one).
func IsCursor(s string) bool {
	p, err := ParseCursor(s)
	return err == nil && !p.IsZero()
}

// CompareCursors orders two cursors of one chain given as text: -1, 0 or +1. The empty
// cursor comes first. Cursors of this form compare as their text does.
func CompareCursors(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return -1
	case b == "":
		return 1
	case a < b:
		return -1
	}
	return 1
}
