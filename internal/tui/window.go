package tui

import (
	"github.com/evtctl/evtctl/pkg/client"
)

// row is one line of the list: an event, or a marker for events that were lost.
type row struct {
	ev  *event
	gap *client.Gap
}

// window is the contiguous run of matching events the UI holds, oldest first, at most max
// rows. It knows what lies beyond each end: older events to fetch (before the first
// event), newer ones (after hi), or nothing.
type window struct {
	rows []row
	max  int
	gaps int // gap markers among rows
	// hi is the cursor up to which (inclusive) every matching event is in rows or was
	// evicted from the top. It may be past the last event: a page that found nothing newer
	// says the log held nothing more up to its newest item.
	hi string
	// lo, when set, is where the node stopped a page of older events short (its work
	// budget): every matching event from lo up to the first held has been looked for.
	lo string
	// olderDone: nothing older to fetch (the log's oldest event, or the start of a range).
	// newerDone: nothing newer to fetch (following: attached to the head; a range: its end).
	olderDone, newerDone bool
	// cmp orders positions of the log.
	cmp func(a, b string) int
}

// later reports whether position a comes after b.
func (w *window) later(a, b string) bool { return w.cmp(a, b) > 0 }

// reset empties the window, which then sits after hi.
func (w *window) reset(hi string, olderDone, newerDone bool) {
	clear(w.rows)
	w.rows, w.gaps = w.rows[:0], 0
	w.hi, w.lo, w.olderDone, w.newerDone = hi, "", olderDone, newerDone
}

// firstEvent returns the position right before the oldest event held, and lastEvent the
// one right after the newest; "" if none.
func (w *window) firstEvent() string {
	for _, r := range w.rows {
		if r.ev != nil {
			return r.ev.before
		}
	}
	return ""
}

func (w *window) lastEvent() string {
	for i := len(w.rows) - 1; i >= 0; i-- {
		if r := w.rows[i]; r.ev != nil {
			return r.ev.pos
		}
	}
	return ""
}

// olderBounds says where to page back from: older events are those before `before`, or,
// with an empty window, those up to and including `through` (its hi).
func (w *window) olderBounds() (before, through string) {
	before = w.firstEvent()
	if w.lo != "" && (before == "" || w.later(before, w.lo)) {
		before = w.lo
	}
	if before == "" {
		return "", w.hi
	}
	return before, ""
}

// appendNewer adds events after hi (earlier ones are repeats and are dropped), behind a
// gap marker when gap is set — also at the top of an empty window: one opened after a
// cursor whose next events are gone says so first — and moves hi on to the later of the
// last event and through. It returns the number of rows added.
func (w *window) appendNewer(evs []*event, gap *client.Gap, through string) int {
	n := len(w.rows)
	if gap != nil {
		w.rows = append(w.rows, row{gap: gap})
		w.gaps++
	}
	for _, ev := range evs {
		if w.hi != "" && !w.later(ev.pos, w.hi) {
			continue
		}
		w.rows = append(w.rows, row{ev: ev})
		w.hi = ev.pos
	}
	if through != "" && w.later(through, w.hi) {
		w.hi = through
	}
	return len(w.rows) - n
}

// prependOlder adds events before the first one held (others are dropped) and returns
// the number of rows added.
func (w *window) prependOlder(evs []*event) int {
	before, through := w.olderBounds()
	keep := evs[:0:0]
	for _, ev := range evs {
		if before != "" && w.later(before, ev.before) || before == "" && (through == "" || !w.later(ev.pos, through)) {
			keep = append(keep, ev)
		}
	}
	if len(keep) == 0 {
		return 0
	}
	rows := make([]row, 0, len(keep)+len(w.rows))
	for _, ev := range keep {
		rows = append(rows, row{ev: ev})
	}
	w.rows = append(rows, w.rows...)
	w.lo = ""
	if w.hi == "" {
		w.hi = keep[len(keep)-1].pos
	}
	return len(keep)
}

// evictTop drops k rows from the top, and any gap marker left at the new top: it would
// mark nothing. It returns the rows dropped.
func (w *window) evictTop(k int) int {
	k = min(k, len(w.rows))
	for k < len(w.rows) && w.rows[k].gap != nil {
		k++
	}
	if k == 0 {
		return 0
	}
	w.gaps -= countGaps(w.rows[:k])
	n := copy(w.rows, w.rows[k:])
	clear(w.rows[n:])
	w.rows = w.rows[:n]
	w.olderDone = false
	return k
}

// evictBottom drops k rows from the bottom (and a gap marker left last); hi moves back to
// the last event kept, so those dropped are fetched again when wanted.
func (w *window) evictBottom(k int) {
	k = min(k, len(w.rows))
	n := len(w.rows) - k
	for n > 0 && w.rows[n-1].gap != nil {
		n--
	}
	if n == len(w.rows) {
		return
	}
	w.gaps -= countGaps(w.rows[n:])
	clear(w.rows[n:])
	w.rows = w.rows[:n]
	if c := w.lastEvent(); c != "" {
		w.hi = c
	}
	w.newerDone = false
}

func countGaps(rows []row) int {
	n := 0
	for _, r := range rows {
		if r.gap != nil {
			n++
		}
	}
	return n
}
