package kafka

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/evtctl/evtctl/pkg/client"
)

// An item's cursor is "PARTITION/OFFSET" in decimal, e.g. "2/1234": the record's
// coordinates as the Kafka tools print them, one text per record.
//
// A position is where a reader stands in the whole topic: the next offset to examine in
// each partition, in decimal, separated by commas, partition 0 first: "1235,988,1020" for a
// topic of three partitions. A topic's partitions are numbered from 0 without holes and
// are never removed, so the place in the list is the partition. A partition beyond the
// list (the topic grew) is read from its log start. The empty position is the log start of
// every partition.

// MaxPartitions bounds the partitions a position may name.
const MaxPartitions = 1 << 16

// CursorError is an item cursor or a position that cannot be read.
type CursorError struct {
	Text string
	Msg  string
}

func (e *CursorError) Error() string {
	return fmt.Sprintf("invalid Kafka %s", e.Msg)
}

// FormatCursor is the cursor of the record at offset in partition.
func FormatCursor(partition int32, offset int64) string {
	return string(appendCursor(nil, partition, offset))
}

func appendCursor(b []byte, partition int32, offset int64) []byte {
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, '/')
	return strconv.AppendInt(b, offset, 10)
}

// ParseCursor reads an item cursor "PARTITION/OFFSET".
func ParseCursor(s string) (partition int32, offset int64, err error) {
	ps, os, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, &CursorError{Text: s, Msg: fmt.Sprintf("cursor %q: want PARTITION/OFFSET, e.g. 2/1234", clip(s))}
	}
	p, ok1 := parseNumber(ps, 1<<31-1)
	o, ok2 := parseNumber(os, 1<<63-1)
	if !ok1 || !ok2 {
		return 0, 0, &CursorError{Text: s, Msg: fmt.Sprintf("cursor %q: want PARTITION/OFFSET in decimal, e.g. 2/1234", clip(s))}
	}
	return int32(p), o, nil
}

// IsCursor reports whether s has the form of an item cursor rather than of a position.
func IsCursor(s string) bool { return strings.IndexByte(s, '/') >= 0 }

// Position is the next offset to examine in each partition, by partition number.
type Position []int64

// String is the text of p, "" for the empty position.
func (p Position) String() string { return string(p.AppendText(nil)) }

// AppendText appends the text of p to b.
func (p Position) AppendText(b []byte) []byte {
	for i, o := range p {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, o, 10)
	}
	return b
}

// ParsePosition reads a position: offsets in decimal separated by commas, at most
// MaxPartitions. The empty string is the empty position.
func ParsePosition(s string) (Position, error) {
	if s == "" {
		return nil, nil
	}
	if IsCursor(s) {
		return nil, &CursorError{Text: s, Msg: fmt.Sprintf("position %q: it is an item's cursor (PARTITION/OFFSET); a position is one next offset per partition, e.g. 1235,988,1020", clip(s))}
	}
	n := strings.Count(s, ",") + 1
	if n > MaxPartitions {
		return nil, &CursorError{Text: s, Msg: fmt.Sprintf("position: it names %d partitions; at most %d are taken", n, MaxPartitions)}
	}
	p := make(Position, 0, n)
	for f := range strings.SplitSeq(s, ",") {
		o, ok := parseNumber(f, 1<<63-1)
		if !ok {
			return nil, &CursorError{Text: s, Msg: fmt.Sprintf("position %q: want one next offset per partition in decimal, separated by commas, e.g. 1235,988,1020", clip(s))}
		}
		p = append(p, o)
	}
	return p, nil
}

// parseNumber reads a canonical decimal number (no sign, no leading zero) up to limit.
func parseNumber(s string, limit uint64) (int64, bool) {
	if s == "" || len(s) > 19 || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > limit {
		return 0, false
	}
	return int64(v), true
}

// clip shortens text quoted in a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}

// at is the offset p holds for partition i, or def beyond its length.
func (p Position) at(i int, def int64) int64 {
	if i < len(p) {
		return p[i]
	}
	return def
}

// How positions and cursors compare (Compare), for the client's generic code: checkpoints
// and the terminal UI order positions, and forward asks whether an item's cursor is covered
// by a position it saved.
//
//   - Two positions: along one read they only grow, partition by partition, so a position
//     that is at or past another in every partition (a partition a position does not name
//     counting as offset 0) comes after it. Positions that are not so ordered (two readers
//     that went different ways) are ordered by the sum of their offsets, then by the number
//     of partitions they name, then partition by partition: a total order that agrees with
//     the first. "" comes before every other position.
//   - A cursor against a position: the cursor comes before the position when the position
//     covers its record (the record's offset is below the position's next offset in its
//     partition), and after it otherwise; never equal.
//   - Two cursors: by partition, then offset. Records of different partitions have no
//     order in the topic; this one is total and keeps each partition's.
//
// Text that is neither is ordered as text, after "".

// Compare orders two positions or cursors of a topic: -1, 0 or +1 (see above).
func Compare(a, b string) int {
	if a == b {
		return 0
	}
	switch {
	case a == "":
		return -1
	case b == "":
		return 1
	}
	ac, bc := IsCursor(a), IsCursor(b)
	switch {
	case ac && bc:
		ap, ao, err1 := ParseCursor(a)
		bp, bo, err2 := ParseCursor(b)
		if err1 != nil || err2 != nil {
			return strings.Compare(a, b)
		}
		if c := cmpInt(int64(ap), int64(bp)); c != 0 {
			return c
		}
		return cmpInt(ao, bo)
	case ac:
		return coveredBy(a, b)
	case bc:
		return -coveredBy(b, a)
	}
	pa, err1 := ParsePosition(a)
	pb, err2 := ParsePosition(b)
	if err1 != nil || err2 != nil {
		return strings.Compare(a, b)
	}
	return comparePositions(pa, pb)
}

// coveredBy is -1 when position pos covers the record of cursor cur, +1 when it does not.
func coveredBy(cur, pos string) int {
	p, o, err := ParseCursor(cur)
	q, err2 := ParsePosition(pos)
	if err != nil || err2 != nil {
		return strings.Compare(cur, pos)
	}
	if o < q.at(int(p), 0) {
		return -1
	}
	return 1
}

func comparePositions(a, b Position) int {
	var ahi, alo, bhi, blo uint64
	for _, o := range a {
		var c uint64
		alo, c = bits.Add64(alo, uint64(o), 0)
		ahi += c
	}
	for _, o := range b {
		var c uint64
		blo, c = bits.Add64(blo, uint64(o), 0)
		bhi += c
	}
	switch {
	case ahi != bhi:
		return cmpUint(ahi, bhi)
	case alo != blo:
		return cmpUint(alo, blo)
	case len(a) != len(b):
		return cmpInt(int64(len(a)), int64(len(b)))
	}
	for i := range a {
		if c := cmpInt(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpUint(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

// Compare orders two positions or cursors of the topic (see the package's Compare).
func (s *Source) Compare(a, b string) int { return Compare(a, b) }

// CheckPosition refuses text that is no position of a topic: an item's cursor among them,
// with a message that says what a position is.
func (s *Source) CheckPosition(pos string) error {
	_, err := ParsePosition(pos)
	return err
}

// PosBefore is the position just before an item: its position with its own record left out.
func (s *Source) PosBefore(it client.Item) string {
	p, o, err := ParseCursor(it.Cursor)
	if err != nil {
		return ""
	}
	pos, err := ParsePosition(client.PosOf(it))
	if err != nil || int(p) >= len(pos) {
		return ""
	}
	pos[p] = o
	return pos.String()
}

// isCursorOrPosition reports whether s is an item's cursor or a position: what a command
// line takes as one before the topic is reached.
func isCursorOrPosition(s string) bool {
	if IsCursor(s) {
		_, _, err := ParseCursor(s)
		return err == nil
	}
	p, err := ParsePosition(s)
	return err == nil && len(p) > 0
}
