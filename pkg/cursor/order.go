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

// Break is how a log fails to go on from a reader's position (see Check).
type Break int

const (
	// BreakNone: the log goes on from the position; nothing was lost.
	BreakNone Break = iota
	// BreakLost: items after the position were dropped (retention, damage) before the
	// reader saw them.
	BreakLost
	// BreakRestart: the log starts again, later than the position and numbered from at or
	// below it. A log of Tendermint's 4-digit cursors lives in its node's memory and does
	// this whenever the node restarts; every item it held after the position is gone.
	BreakRestart
	// BreakPastNewest: the position is past the log's newest item (or the log holds none
	// and never did). It is not of this log, or the log went back: it lost its newest items
	// and the record of how far it had numbered them.
	BreakPastNewest
	// BreakOutOfOrder: the log's cursors contradict the position — items later than it
	// numbered at or below it, items earlier numbered above it, or cursors of another form.
	// It is not of this log, or the log went back and numbers new items again.
	BreakOutOfOrder
)

// Check says whether a log goes on from last, the newest item a reader examined, by what a
// reply says of the log: its oldest and newest items, and whether it returned nothing after
// last (none). lost is the number of items lost where the sequence numbers tell it
// (BreakLost only; modulo 65536 for Tendermint's 4-digit sequence), else 0.
//
// Within one log, later items have higher sequence numbers. An evtctl node never numbers an
// item again (its high-water mark outlives the items), so a log of 16-digit cursors whose
// numbers contradict the position is another log, or one that went back. A Tendermint node
// numbers from 0001 again when it restarts, so a log of 4-digit cursors that starts later
// than the position but numbered at or below it is taken for a restart (a loss that spans
// the counter's wrap, from ffff to 0000, looks the same). Nothing can be said when last is
// empty, and only the order of Lost when the cursors do not parse.
func Check(last, oldest, newest string, none bool) (b Break, lost uint64) {
	if last == "" {
		return BreakNone, 0
	}
	lc, err1 := Parse(last)
	oc, err2 := Parse(oldest)
	nc, err3 := Parse(newest)
	if err1 != nil || err2 != nil || err3 != nil {
		if Lost(last, oldest) || oldest == "" && none && CompareText(newest, last) > 0 {
			return BreakLost, 0
		}
		return BreakNone, 0
	}
	w := lc.Width
	if nc.IsZero() {
		// An empty log that never held an item: the reader's position is not of it.
		if w == TendermintWidth {
			return BreakRestart, 0
		}
		return BreakPastNewest, 0
	}
	switch {
	case nc.Width != w || !oc.IsZero() && oc.Width != w:
		return BreakOutOfOrder, 0
	case lc.After(nc):
		return BreakPastNewest, 0
	case lc == nc:
		return BreakNone, 0
	}
	// lc is before the newest item. Is the log's first item after lc (oldest, or the newest
	// when the log is empty now) later and numbered at or below it: a new log?
	first := oc
	if first.IsZero() {
		first = nc
	}
	if first.TS > lc.TS && first.Seq <= lc.Seq && !first.Follows(lc) {
		if w == TendermintWidth {
			return BreakRestart, 0
		}
		return BreakOutOfOrder, 0
	}
	if w != TendermintWidth && (nc.TS > lc.TS && nc.Seq <= lc.Seq || !oc.IsZero() && oc.TS < lc.TS && oc.Seq > lc.Seq) {
		// A 16-digit sequence never wraps and never goes back: items later than the
		// position numbered at or below it, or earlier ones numbered above it.
		return BreakOutOfOrder, 0
	}
	switch {
	case oc.IsZero():
		if none {
			// Retention emptied the log: everything after lc up to its newest is gone.
			return BreakLost, (nc.Seq - lc.Seq) & maxSeq(w)
		}
	case lc.Before(oc) && !oc.Follows(lc):
		return BreakLost, (oc.Seq - lc.Seq - 1) & maxSeq(w)
	}
	return BreakNone, 0
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
