// Package cursor defines the time-ordered cursors that name items of an event log.
package cursor

import (
	"errors"
	"fmt"
	"time"
)

// A cursor's text is 16 lowercase hex digits of a Unix-nanosecond timestamp, a dash, and a
// fixed number of lowercase hex digits of a sequence number: "18ea61a27c39abd8-00c7" as a
// Tendermint node writes it (4 sequence digits), "18ea61a27c39abd8-00000000000000c7" as an
// evtctl node writes it (16 sequence digits). Cursors of one log all have the same width, so
// plain string comparison orders them in publication order.

// Widths of the sequence part.
const (
	TendermintWidth = 4  // sequence digits in a Tendermint node's cursors
	NodeWidth       = 16 // sequence digits in an evtctl node's cursors
	tsDigits        = 16
)

// ErrFormat is wrapped by every error Parse returns.
var ErrFormat = errors.New("invalid cursor format")

// Cursor is a parsed cursor. The zero value is the empty cursor: before the start of any log.
type Cursor struct {
	TS    int64  // Unix nanoseconds
	Seq   uint64 // sequence number within the log
	Width int    // hex digits of Seq when formatted; 0 only in the empty cursor
}

// New returns a cursor of the given sequence width (NodeWidth when width is 0).
func New(ts int64, seq uint64, width int) Cursor {
	if width == 0 {
		width = NodeWidth
	}
	return Cursor{TS: ts, Seq: seq, Width: width}
}

// Parse reads a cursor. The empty string is the empty cursor.
func Parse(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	width := len(s) - tsDigits - 1
	if width < 1 || width > 16 || s[tsDigits] != '-' {
		return Cursor{}, fmt.Errorf("invalid cursor %q: %w", s, ErrFormat)
	}
	ts, ok1 := parseHex(s[:tsDigits])
	seq, ok2 := parseHex(s[tsDigits+1:])
	if !ok1 || !ok2 || ts > 1<<63-1 {
		return Cursor{}, fmt.Errorf("invalid cursor %q: %w", s, ErrFormat)
	}
	return Cursor{TS: int64(ts), Seq: seq, Width: width}, nil
}

// MustParse is Parse for tests and constants; it panics on error.
func MustParse(s string) Cursor {
	c, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return c
}

func parseHex(s string) (uint64, bool) {
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		default:
			return 0, false // upper case is refused: it would break string ordering
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}

const hexDigits = "0123456789abcdef"

// String formats the cursor; the empty cursor formats as "".
func (c Cursor) String() string {
	var b [tsDigits + 1 + 16]byte
	return string(c.Append(b[:0]))
}

// Append appends the cursor's text to b (nothing for the empty cursor).
func (c Cursor) Append(b []byte) []byte {
	if c.IsZero() {
		return b
	}
	w := c.Width
	if w <= 0 || w > 16 {
		w = NodeWidth
	}
	n := len(b)
	var room [tsDigits + 1 + 16]byte
	b = append(b, room[:tsDigits+1+w]...)
	putHex(b[n:n+tsDigits], uint64(c.TS))
	b[n+tsDigits] = '-'
	putHex(b[n+tsDigits+1:], c.Seq)
	return b
}

func putHex(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = hexDigits[v&0xf]
		v >>= 4
	}
}

// MarshalText formats the cursor for JSON.
func (c Cursor) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText parses a cursor from JSON.
func (c *Cursor) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// IsZero reports whether c is the empty cursor.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// Compare orders cursors by timestamp, then sequence: -1 if c is before o, 0 if equal, +1 after.
// The empty cursor is before every other. Cursors of one log compare as their strings do.
func (c Cursor) Compare(o Cursor) int {
	switch {
	case c.TS < o.TS:
		return -1
	case c.TS > o.TS:
		return 1
	case c.Seq < o.Seq:
		return -1
	case c.Seq > o.Seq:
		return 1
	}
	return 0
}

// Before reports whether c comes before o.
func (c Cursor) Before(o Cursor) bool { return c.Compare(o) < 0 }

// After reports whether c comes after o.
func (c Cursor) After(o Cursor) bool { return c.Compare(o) > 0 }

// Time is the timestamp part of the cursor.
func (c Cursor) Time() time.Time { return time.Unix(0, c.TS) }

// FromTime returns the cursor just before every item stamped at or after t, in the given
// sequence width (use the width of the target log's own cursors: a Tendermint node accepts
// only TendermintWidth). As an `after` cursor it selects items from t on.
func FromTime(t time.Time, width int) Cursor {
	ts := t.UnixNano()
	if ts <= 0 {
		// Before the epoch: every item is after it. The empty cursor says that to any node.
		return Cursor{}
	}
	return New(ts-1, maxSeq(width), width)
}

// Next is the least cursor of the same width after c.
func (c Cursor) Next() Cursor {
	if c.Seq < maxSeq(c.Width) {
		return New(c.TS, c.Seq+1, c.Width)
	}
	return New(c.TS+1, 0, c.Width)
}

// Prev is the greatest cursor of the same width before c; ok is false when there is none.
func (c Cursor) Prev() (prev Cursor, ok bool) {
	switch {
	case c.Seq > 0:
		return New(c.TS, c.Seq-1, c.Width), true
	case c.TS == 0:
		return Cursor{}, false
	}
	return New(c.TS-1, maxSeq(c.Width), c.Width), true
}

// maxSeq is the largest sequence number the width can hold.
func maxSeq(width int) uint64 {
	if width <= 0 || width >= 16 {
		return ^uint64(0)
	}
	return 1<<(4*uint(width)) - 1
}

// WidthOf reports the sequence width of a cursor string, or 0 when s is not a cursor.
func WidthOf(s string) int {
	c, err := Parse(s)
	if err != nil {
		return 0
	}
	return c.Width
}
