package redisstream

import (
	"fmt"
	"strings"
	"sync"

	"github.com/evtctl/evtctl/pkg/client"
)

// What the counters of XINFO STREAM (Redis 7.0) tell a reader at position P, and what they
// cannot:
//
//   - entries-added (A) counts every entry ever added; length (N) those held now; A-N were
//     removed, by trimming (XTRIM, XADD MAXLEN/MINID: the oldest entries) or XDEL (any).
//   - max-deleted-entry-id (D) is the newest id XDEL ever removed. Trimming leaves it as it
//     was. So entries were deleted after P exactly when D > P: whether, and the newest one,
//     are exact; which others, and how many, are not.
//   - Trimming shows only in the counters: the stream's first entry F moves past P, but
//     whether it had entries between P and F is a matter of counting. The count of entries
//     added up to P, c(P), tells it: A - c(P) entries were added after P, and when the
//     reader knows how many of them are still there (all N when P is before F; those it
//     read, when it read up to the newest), the rest were lost, exactly.
//   - c(P) is known where evtctl learnt it: at the newest entry (c = A), carried along the
//     pages it reads, and kept in a checkpoint beside its position (Identity). A position
//     given on the command line has none: if F has moved past it, entries between them may
//     have been trimmed or there may have been none, and evtctl says it cannot tell (at most
//     A-N). A deletion older than one already reported does not move D: only a count can
//     show it.

// mark is what the source knows of a position.
type mark struct {
	added int64 // entries added up to and including the position; -1: unknown
	acked ID    // deletions up to this id have been reported, or were before the position
}

var unknownMark = mark{added: -1}

// marks keeps what the source learnt of the positions it handed out, a bounded number of
// them (the newest are kept).
type marks struct {
	mu    sync.Mutex
	m     map[string]mark
	order []string
}

const marksMax = 512

func (ms *marks) get(pos string) mark {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if m, ok := ms.m[pos]; ok {
		return m
	}
	return unknownMark
}

func (ms *marks) put(pos string, m mark) {
	if pos == "" || (m.added < 0 && m.acked.IsZero()) {
		return
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.m == nil {
		ms.m = map[string]mark{}
	}
	if old, ok := ms.m[pos]; ok {
		if m.added < 0 {
			m.added = old.added
		}
		if m.acked.Less(old.acked) {
			m.acked = old.acked
		}
		ms.m[pos] = m
		return
	}
	ms.m[pos] = m
	ms.order = append(ms.order, pos)
	if len(ms.order) > marksMax {
		drop := ms.order[:len(ms.order)-marksMax]
		for _, p := range drop {
			delete(ms.m, p)
		}
		ms.order = append(ms.order[:0], ms.order[len(drop):]...)
	}
}

// verdict is what a read after a position says of what was lost after it.
type verdict struct {
	gap *client.Gap
	// lost is the exact number of entries lost after the position, when known (-1 not).
	lost int64
	// certain: nothing after the position was lost, or lost counts all that was: a count
	// carried past the entries read holds.
	certain bool
}

// judgeIn is a read after position p, and what is known of p.
type judgeIn struct {
	pos    string // p's text; "" for the stream's start
	p      ID
	madeUp bool // p is no position a reader held (a time): nothing is lost before the stream's first entry
	mk     mark
	snap   snapshot
	n      int  // entries read after p
	toEnd  bool // the read reached the stream's newest entry
	key    string
}

// judge says whether the stream goes on from p, by the rules above. The words of a gap
// name the newest deletion; the page names the entries around it.
func judge(in judgeIn) verdict {
	v := judgeText(in)
	if v.gap != nil && v.gap.After == "" {
		v.gap.After = ID{}.String() // the stream's start: before every entry
	}
	return v
}

func judgeText(in judgeIn) verdict {
	s, p := in.snap, in.p
	madeUp := in.madeUp || in.pos == ""
	switch {
	case !s.exists:
		if madeUp {
			return verdict{lost: 0, certain: true}
		}
		return verdict{lost: -1, gap: &client.Gap{Kind: client.GapPastNewest, After: in.pos,
			Detail: fmt.Sprintf("the stream %q does not exist (it was deleted, or the cursor is of another stream)", in.key)}}
	case s.lastGen.Less(p):
		if madeUp {
			return verdict{lost: 0, certain: true}
		}
		return verdict{lost: -1, gap: &client.Gap{Kind: client.GapPastNewest, After: in.pos, Newest: s.head(),
			Detail: fmt.Sprintf("the newest id the stream ever gave is %s, before the cursor", s.lastGen)}}
	case in.mk.added > s.added:
		return verdict{lost: -1, gap: restarted(in, fmt.Sprintf("it has had %s added, fewer than the %d counted up to the cursor", formatCount(s.added), in.mk.added))}
	}
	// The stream starts after p: what it held between them is gone.
	trimmed := !madeUp && p.Less(s.lastGen) && (s.length == 0 || p.Less(s.first))
	// Deletions after p that were not reported yet (for a made-up p, only those within the
	// entries the stream holds).
	acked := p
	if acked.Less(in.mk.acked) {
		acked = in.mk.acked
	}
	deleted := acked.Less(s.maxDel) && (!madeUp || s.length > 0 && !s.maxDel.Less(s.first))

	lost := int64(-1)
	if c := in.mk.added; c >= 0 && !madeUp {
		present := int64(-1)
		switch {
		case s.length == 0 || p.Less(s.first):
			present = s.length
		case in.toEnd:
			present = int64(in.n)
		}
		if present >= 0 {
			lost = s.added - c - present
		}
		if lost < -1 || lost == -1 && present >= 0 {
			return verdict{lost: -1, gap: restarted(in, "it holds more entries after the cursor than were added to it since")}
		}
	}
	switch {
	case lost == 0 && !deleted:
		return verdict{lost: 0, certain: true}
	case lost < 0 && !deleted && !trimmed:
		// Nothing after p was deleted, unless older than a deletion reported already.
		return verdict{lost: -1, certain: !p.Less(s.maxDel)}
	case lost < 0 && !deleted && s.removed() == 0:
		return verdict{lost: 0, certain: true} // nothing was ever removed from the stream
	}

	g := &client.Gap{Kind: client.GapLost, After: in.pos}
	if lost > 0 {
		g.Lost = uint64(lost)
	}
	var parts []string
	switch {
	case trimmed && s.length == 0:
		g.Newest = s.head()
		parts = append(parts, fmt.Sprintf("the stream holds no entries now: those it had after the cursor, up to %s, were trimmed or deleted", s.lastGen))
	case trimmed:
		g.Oldest = s.oldest()
		what := fmt.Sprintf("the stream now starts at %s: its older entries were trimmed (XTRIM, MAXLEN) or deleted", s.first)
		if lost < 0 && !deleted {
			what += fmt.Sprintf("; whether it held entries between the cursor and %s, and how many, evtctl cannot tell (%s were removed from it in all; a position kept with --checkpoint carries the count that tells)", s.first, formatCount(s.removed()))
		}
		parts = append(parts, what)
	}
	switch {
	case deleted:
		parts = append(parts, fmt.Sprintf("entries were deleted (XDEL) after the cursor, the newest of them %s", s.maxDel))
	case !trimmed:
		parts = append(parts, fmt.Sprintf("entries were deleted (XDEL) after the cursor, all older than the newest deletion, %s", s.maxDel))
	}
	g.Detail = strings.Join(parts, "; ")
	return verdict{gap: g, lost: lost, certain: lost > 0}
}

// restarted is the gap of a stream that was deleted and created again since p was read.
func restarted(in judgeIn, why string) *client.Gap {
	return &client.Gap{Kind: client.GapRestarted, After: in.pos, Oldest: in.snap.oldest(), Newest: in.snap.head(),
		Detail: fmt.Sprintf("the stream was deleted and created again since cursor %s was read (%s): what it held after the cursor is gone, and how much cannot be told", in.pos, why)}
}
