package redisstream

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// ID is a stream entry's id: the Unix time in milliseconds at which it was added (or
// the time part its producer gave), and a sequence number among the entries of that
// millisecond. Redis orders entries by it, ms first. Its text is "ms-seq", both in
// decimal: "1732269600000-0". The zero ID, 0-0, is before every entry.
type ID struct {
	Ms, Seq uint64
}

// ErrID is wrapped by every error ParseID returns.
var ErrID = errors.New("invalid Redis stream entry id")

// ParseID reads an entry id in the form Redis writes it: "ms-seq", decimal digits without
// a sign or leading zeros. The short forms Redis takes in commands ("ms" alone, "-", "+",
// "$") are not ids.
func ParseID(s string) (ID, error) {
	i := 0
	for i < len(s) && s[i] != '-' {
		i++
	}
	ms, ok1 := parseDecimal(s[:i])
	if i == len(s) {
		return ID{}, fmt.Errorf("%q: %w (want MS-SEQ, such as 1732269600000-0)", s, ErrID)
	}
	seq, ok2 := parseDecimal(s[i+1:])
	if !ok1 || !ok2 {
		return ID{}, fmt.Errorf("%q: %w (want MS-SEQ, such as 1732269600000-0)", s, ErrID)
	}
	return ID{Ms: ms, Seq: seq}, nil
}

// parseDecimal reads a uint64 in decimal with no sign and no leading zero.
func parseDecimal(s string) (uint64, bool) {
	if s == "" || len(s) > 20 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// IsID reports whether s is an entry id.
func IsID(s string) bool {
	_, err := ParseID(s)
	return err == nil
}

// String formats the id as Redis does.
func (id ID) String() string {
	var b [41]byte
	return string(id.Append(b[:0]))
}

// Append appends the id's text to b.
func (id ID) Append(b []byte) []byte {
	b = strconv.AppendUint(b, id.Ms, 10)
	b = append(b, '-')
	return strconv.AppendUint(b, id.Seq, 10)
}

// IsZero reports whether id is 0-0.
func (id ID) IsZero() bool { return id == ID{} }

// Compare orders ids as Redis does: -1 if id comes first, 0 if equal, +1 after.
func (id ID) Compare(o ID) int {
	switch {
	case id.Ms < o.Ms:
		return -1
	case id.Ms > o.Ms:
		return 1
	case id.Seq < o.Seq:
		return -1
	case id.Seq > o.Seq:
		return 1
	}
	return 0
}

// Less reports whether id comes before o.
func (id ID) Less(o ID) bool { return id.Compare(o) < 0 }

// Prev is the id just before id; false for 0-0.
func (id ID) Prev() (ID, bool) {
	switch {
	case id.Seq > 0:
		return ID{Ms: id.Ms, Seq: id.Seq - 1}, true
	case id.Ms > 0:
		return ID{Ms: id.Ms - 1, Seq: math.MaxUint64}, true
	}
	return ID{}, false
}

// Time is the id's time part.
func (id ID) Time() time.Time {
	if id.Ms > math.MaxInt64 {
		return time.UnixMilli(math.MaxInt64)
	}
	return time.UnixMilli(int64(id.Ms))
}

// BeforeTime is the id just before every entry added at or after t, taking an entry's time
// to be its id's millisecond: an entry of the millisecond in which t falls, if t is not on
// its start, was added before t. ok is false when t is at or before the epoch (every entry
// is at or after it).
func BeforeTime(t time.Time) (ID, bool) {
	ms := t.UnixMilli()
	if t.Nanosecond()%1_000_000 != 0 {
		ms++ // the first whole millisecond at or after t
	}
	if ms <= 0 {
		return ID{}, false
	}
	return ID{Ms: uint64(ms) - 1, Seq: math.MaxUint64}, true
}

// compareText orders two positions of a stream: "" before every id; text that is no id
// after every id, in text order among themselves (Compare is only ever given positions of
// the stream, so that case is for robustness, not meaning).
func compareText(a, b string) int {
	if a == b {
		return 0
	}
	if a == "" {
		return -1
	}
	if b == "" {
		return 1
	}
	ia, errA := ParseID(a)
	ib, errB := ParseID(b)
	switch {
	case errA == nil && errB == nil:
		return ia.Compare(ib)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	case a < b:
		return -1
	}
	return 1
}
