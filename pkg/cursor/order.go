package cursor

import "strings"

// The rules here are the one place where evtctl orders cursors and decides whether a reader
// lost events: the client, the terminal UI and forward all use them.
//
// Both kinds of node number the items of a log consecutively: an evtctl node with a 64-bit
// sequence that never wraps, a Tendermint node with a counter of which it keeps the low 16
// bits (consecutive items have consecutive sequence numbers modulo 65536). So an item whose
// sequence is one more than the last item a reader examined is the very next item, whatever
// their timestamps, and anything else after it means items came and went unseen.
//
// A Tendermint node compares cursors by their timestamp only. A `before` bound meant to
// include an item must therefore be a later timestamp (TimeBoundAfter), and a cursor a
// client makes up to resume at an item must have an earlier one (ResumeBefore).

// CompareText orders two cursors of one log given as text: -1 if a comes first, 0 if they
// are equal, +1 if a comes later. The empty cursor comes before every other. Text that does
// not parse falls back to the order ADR-075 promises for opaque cursors: by length, then
// byte by byte.
//
// Cursors of one width are fixed-width lower-case hex (Parse refuses anything else), so
// their text sorts as they do: text of the same length is compared byte by byte, without
// parsing — the per-item check of a replay stream relies on that being cheap.
func CompareText(a, b string) int {
	if len(a) == len(b) {
		return strings.Compare(a, b)
	}
	ca, err1 := Parse(a)
	cb, err2 := Parse(b)
	if err1 == nil && err2 == nil {
		return ca.Compare(cb)
	}
	switch {
	case len(a) != len(b) && len(a) < len(b):
		return -1
	case len(a) != len(b):
		return 1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Later returns the later of two cursors of one log; a when they are equal.
func Later(a, b string) string {
	if CompareText(b, a) > 0 {
		return b
	}
	return a
}

// Follows reports whether c is the item right after prev in the same log: the same width,
// a later position, and a sequence number one greater (modulo the width's range, so that
// Tendermint's 16-bit counter may wrap).
func (c Cursor) Follows(prev Cursor) bool {
	if c.Width != prev.Width || c.Width == 0 || !prev.Before(c) {
		return false
	}
	return c.Seq == (prev.Seq+1)&maxSeq(c.Width)
}

// Lost reports whether a reader lost events: last is the newest item it has examined, and
// oldest is the oldest item the log holds now. Events were lost when oldest comes after
// last without being the item right after it — the items between were dropped before the
// reader saw them. Nothing is lost when either is empty (no position yet; an empty log),
// or when last is still in the log.
func Lost(last, oldest string) bool {
	if last == "" || oldest == "" {
		return false
	}
	lc, err1 := Parse(last)
	oc, err2 := Parse(oldest)
	if err1 != nil || err2 != nil {
		// Not cursors evtctl can read: by the order ADR-075 promises, when they are alike.
		return len(last) == len(oldest) && last < oldest
	}
	return lc.Before(oc) && !oc.Follows(lc)
}

// ResumeBefore is the cursor to resume after so that the next item read is c and nothing
// is reported lost between: an earlier timestamp, so that a node comparing by time alone
// returns c, and the sequence number just before c's, so that c follows it.
func ResumeBefore(c Cursor) Cursor {
	if c.IsZero() {
		return c
	}
	ts := c.TS
	if ts > 0 {
		ts--
	}
	return New(ts, (c.Seq-1)&maxSeq(c.Width), c.Width)
}

// TimeBoundAfter is the least cursor of c's width with a later timestamp than c. As a
// `before` bound it includes c on every node — on a Tendermint node, which compares
// timestamps only, and on an evtctl node — so a range that must include c asks with it and
// drops any item after c itself.
func TimeBoundAfter(c Cursor) Cursor {
	return New(c.TS+1, 0, c.Width)
}
